"""Objectives (mlm+nsp, mlm, ltr), phase 2 from a phase-1 run, the CLI and ``bertkit plot``."""

import pytest
import torch

from bertkit.checkpoint import load_config, load_pretrained
from bertkit.cli.main import main
from bertkit.pretraining.objectives import ltr_labels, prepare_batch
from bertkit.pretraining.train import pretrain
from bertkit.runlog import read_log

from .train_helpers import losses, settings, weights


def test_ltr_labels_are_next_tokens_of_the_original():
    ids = torch.tensor([[2, 4, 7, 3, 0, 0]])  # [CLS] [MASK] x [SEP] pad pad; [MASK] was 6
    mask = torch.tensor([[1, 1, 1, 1, 0, 0]])
    mlm = torch.tensor([[-100, 6, -100, -100, -100, -100]])
    original, labels = ltr_labels(ids, mask, mlm)
    assert original.tolist() == [[2, 6, 7, 3, 0, 0]]
    assert labels.tolist() == [[6, 7, 3, -100, -100, -100]]


def test_masked_positions_only_and_targets_in_label_order(files):
    from bertkit.pretraining.data import PretrainingDataset

    data = PretrainingDataset(files["data"])
    items = [data[0], data[1]]
    batch = prepare_batch(items, "mlm+nsp", torch.device("cpu"))
    labels = batch["inputs"]["mlm_labels"]
    assert torch.equal(batch["targets"], labels[labels != -100])
    assert batch["tokens"] == sum(int(i["attention_mask"].sum()) for i in items)
    assert "next_sentence_label" not in prepare_batch(items, "mlm", torch.device("cpu"))["inputs"]


@pytest.mark.parametrize("objective", ["mlm", "ltr"])
def test_other_objectives(files, tmp_path, objective):
    result = pretrain(settings(files, tmp_path, objective=objective, steps=4))
    record = losses(tmp_path)[-1]
    assert "nsp_loss" not in record and record["mlm_loss"] > 0
    config = load_config(result.model_dir)
    assert config.attention == ("causal" if objective == "ltr" else "bidirectional")
    assert type(load_pretrained(result.model_dir)).__name__ == "BertForMaskedLM"


def test_ltr_predicts_every_next_token_of_unmasked_input(files):
    from bertkit.pretraining.data import PretrainingDataset

    data = PretrainingDataset(files["data"], unmasked=True)
    items = [data[0], data[1]]
    batch = prepare_batch(items, "ltr", torch.device("cpu"))
    assert batch["targets"].numel() == batch["tokens"] - 2  # all but each sequence's last
    assert 4 not in batch["inputs"]["input_ids"].tolist()  # no [MASK] in the input


def test_phase_two_starts_from_phase_one_weights(files, tmp_path):
    pretrain(settings(files, tmp_path / "phase1", steps=2))
    # lr 0: the weights must come through unchanged (weights only: a fresh optimizer)
    result = pretrain(settings(files, tmp_path / "phase2", steps=1, lr=0.0, model_config=None,
                               init_from=str(tmp_path / "phase1"), vocab=None))
    a, b = weights(tmp_path / "phase1"), weights(result.run_dir)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not (tmp_path / "phase2" / "checkpoints" / "step-00000002.pt").exists()


def test_cli_run_and_plot(files, tmp_path, capsys):
    run = tmp_path / "run"
    config = tmp_path / "run.yaml"
    config.write_text(f"data: {files['data']}\nvocab: {files['vocab']}\nsteps: 4\nbatch_size: 4\n"
                      f"log_every: 2\ntensorboard: true\nprogress: false\n")
    code = main(["pretrain", "--config", str(config), "--model-config", str(files["model_config"]),
                 "--out", str(run), "--eval-data", str(files["data"]), "--eval-batches", "1"])
    assert code == 0
    records = read_log(run / "log.jsonl")
    assert any("eval_mlm_acc" in r for r in records)
    assert (run / "tensorboard").is_dir() or any("tensorboard" in str(r.get("note")) for r in records)
    assert (run / "config.yaml").is_file() and (run / "model" / "config.json").is_file()
    assert main(["plot", str(run)]) == 0
    png = (run / "curves.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 5000
    # comparing runs: one panel per metric, one line per run
    other = tmp_path / "other"
    other.mkdir()
    (other / "log.jsonl").write_text((run / "log.jsonl").read_text())
    assert main(["plot", str(run), str(other)]) == 1
    assert "--out" in capsys.readouterr().err
    assert main(["plot", str(run), str(other), "--out", str(tmp_path / "both.png"),
                 "--metrics", "loss,eval_mlm_acc"]) == 0
    assert (tmp_path / "both.png").read_bytes().startswith(b"\x89PNG")
    assert main(["plot", str(run), str(other), "--out", str(tmp_path / "x.png"),
                 "--metrics", "nothing"]) == 1
    assert "none of the runs logged nothing" in capsys.readouterr().err


def test_cli_errors_are_clear(files, tmp_path, capsys):
    config = tmp_path / "bad.toml"
    config.write_text('data = "x"\nbatchsize = 3\n')
    assert main(["pretrain", "--config", str(config)]) == 1
    assert "unknown field 'batchsize'" in capsys.readouterr().err
    assert main(["plot", str(tmp_path / "nowhere")]) == 1
