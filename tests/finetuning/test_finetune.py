"""The fine-tuning loop: batching, grid, learning a toy task, model selection and saving."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest

from bertkit.errors import BertkitError, CheckpointError
from bertkit.finetuning.config import FinetuneConfig
from bertkit.finetuning.loop import PAPER_GRID, finetune, format_table, grid_points, parse_grid
from bertkit.inference.features import run_model
from bertkit.modeldir.entry import saved_task_options
from bertkit.runlog import read_log
from bertkit.tasks import get_task
from bertkit.tasks.base import FeatureSet
from bertkit.training.sampler import length_batches
from tests.finetune_helpers import FAST, make_model, one_thread, write_sst2  # noqa: F401


@pytest.fixture(scope="module")
def trained(model_dir, toy_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    runs, best = finetune(get_task("sst2"), model_dir, toy_dir, out, FinetuneConfig(**FAST))
    return out, runs, best


def test_length_batches_cover_every_index_once_and_bucket_by_length():
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 100, size=1000)
    evaluation = length_batches(lengths, 32)
    assert all(np.all(np.diff(lengths[np.concatenate(evaluation)]) >= 0) for _ in [0])
    training = length_batches(lengths, 32, np.random.default_rng(1), bucket=10)
    for batches in (evaluation, training):
        assert sorted(np.concatenate(batches).tolist()) == list(range(1000))
    padded = sum(len(b) * lengths[b].max() for b in training)
    shuffled = np.random.default_rng(1).permutation(1000)
    unsorted = sum(32 * lengths[shuffled[i:i + 32]].max() for i in range(0, 1000, 32))
    assert padded < 0.7 * unsorted
    again = length_batches(lengths, 32, np.random.default_rng(1), bucket=10)
    assert all(np.array_equal(a, b) for a, b in zip(training, again))


def test_parse_grid_defaults_to_the_paper_and_reads_specs():
    assert parse_grid([]) == {k: list(v) for k, v in PAPER_GRID.items()}
    assert len(grid_points(FinetuneConfig(grid=parse_grid([])))) == 18
    grid = parse_grid(["lr=5e-5,3e-5", "batch_size=32", "epochs=3", "seed=1,2"])
    assert grid == {"lr": [5e-5, 3e-5], "batch": [32], "epochs": [3], "seed": [1, 2]}
    points = grid_points(FinetuneConfig(grid={"lr": [1e-4, 2e-4]}, batch=8, epochs=2, seed=7))
    assert [(p.lr, p.batch, p.epochs, p.seed) for p in points] == [(1e-4, 8, 2, 7), (2e-4, 8, 2, 7)]
    for bad in (["lr"], ["momentum=0.9"], ["lr=fast"]):
        with pytest.raises(BertkitError, match="grid"):
            parse_grid(bad)


def test_feature_set_pads_token_axes_and_stacks_the_rest():
    feats = FeatureSet(
        [{"input_ids": np.array([[5, 6, 7], [5, 6, 0]]), "labels": np.array(1)},
         {"input_ids": np.array([[5, 6, 7, 8, 9], [5, 0, 0, 0, 0]]), "labels": np.array(0)}],
        meta=[0, 1], pad_values={"input_ids": 0})
    batch = feats.collate([0, 1])
    assert batch["input_ids"].shape == (2, 2, 5) and batch["labels"].tolist() == [1, 0]
    assert batch["input_ids"][0, 0].tolist() == [5, 6, 7, 0, 0]
    assert feats.lengths.tolist() == [3, 5]


def test_toy_task_is_learned_and_the_best_model_saved(trained, toy_dir):
    out, runs, best = trained
    assert best.metrics["accuracy"] >= 0.9  # chance is 0.5
    config = json.loads((out / "config.json").read_text())
    assert config["id2label"] == {"0": "negative", "1": "positive"}  # GLUE's label names
    assert config["label2id"] == {"negative": 0, "positive": 1}
    assert config["finetuning_task"] == "sst2"
    assert config["bertkit_finetune"]["task"] == "sst2"
    assert config["bertkit_finetune"]["hyper"]["lr"] == FAST["lr"]
    assert saved_task_options(out) == ("sst2", {})
    assert (out / "vocab.txt").is_file() and (out / "results.json").is_file()
    predictions = [json.loads(x) for x in (out / "predictions_dev.jsonl").read_text().splitlines()]
    assert len(predictions) == 48 and set(predictions[0]["probabilities"]) == {"negative", "positive"}
    from bertkit.inference.calibration import saved_calibration

    rows = saved_calibration(out)  # static INT8's inputs: training's own
    trained_on = {tuple(f["input_ids"].tolist()) for f in featurize_toy_train(toy_dir, out)}
    assert len(rows) == min(300, len(trained_on)) and {tuple(r["input_ids"]) for r in rows} <= trained_on
    events = [r["event"] for r in read_log(out / "log.jsonl")]
    assert events.count("eval") == FAST["epochs"] and events[-1] == "best"


def featurize_toy_train(toy_dir, model_dir) -> list[dict]:
    """The toy training set's features as fine-tuning made them."""
    from bertkit.checkpoint import load_tokenizer
    from bertkit.tasks.base import featurize

    task = get_task("sst2")
    return featurize(task, task.read(toy_dir, "train"), load_tokenizer(model_dir), FAST["max_seq_length"],
                     True, "train").features


@pytest.mark.parametrize("hidden", [32, 256])
def test_the_log_says_which_precision_ran(tmp_path, toy_dir, cpu_class, hidden):
    """``auto`` as run on each CPU class: bf16 only with native bf16 and a model wide enough
    (hidden 256 and up); the log and results keep what ran, never "auto"."""
    from bertkit.precision import BF16_MIN_HIDDEN

    model = make_model(tmp_path / "model", hidden=hidden, layers=1)
    finetune(get_task("sst2"), model, toy_dir, tmp_path / "out", FinetuneConfig(**{**FAST, "epochs": 1}))
    start = next(r for r in read_log(tmp_path / "out" / "log.jsonl") if r["event"] == "start")
    native_and_wide = cpu_class == "amx" and hidden >= BF16_MIN_HIDDEN["training"]
    assert start["precision"] == ("bf16" if native_and_wide else "fp32")
    assert start["precision_reason"].startswith("auto: ") and cpu_class in start["precision_reason"]


def test_reloaded_model_scores_as_it_did_in_training(trained, toy_dir):
    from bertkit.tokenizer import BertTokenizer

    out, _, best = trained
    task = get_task("sst2")
    model = task.build_model(out)
    assert not [n for n in task.load_notes if "freshly initialised" in n]
    tok = BertTokenizer.from_pretrained(out)
    examples = task.read(toy_dir, "dev")
    feats = task.featurize(examples, tok, 32)
    outputs = run_model(task, model, feats, batch_size=7)
    assert task.evaluate(examples, feats, outputs)["accuracy"] == pytest.approx(best.metrics["accuracy"])


def test_grid_picks_the_best_point_and_prints_a_table(model_dir, toy_dir, tmp_path):
    cfg = FinetuneConfig(**FAST, grid={"lr": [1e-6, 5e-3]})
    runs, best = finetune(get_task("sst2"), model_dir, toy_dir, tmp_path, cfg)
    assert len(runs) == 2 and best.hyper.lr == 5e-3
    assert runs[1].metrics["accuracy"] > runs[0].metrics["accuracy"]
    table = format_table(runs, "accuracy").splitlines()
    assert len(table) == 3 and "accuracy" in table[0] and table[2].lstrip().startswith("*")
    saved = json.loads((tmp_path / "config.json").read_text())["bertkit_finetune"]
    assert saved["hyper"]["lr"] == 5e-3


def test_same_seed_same_run(model_dir, toy_dir, tmp_path):
    cfg = FinetuneConfig(**{**FAST, "epochs": 1})
    first = finetune(get_task("sst2"), model_dir, toy_dir, tmp_path / "a", cfg)[1]
    second = finetune(get_task("sst2"), model_dir, toy_dir, tmp_path / "b", cfg)[1]
    assert first.metrics == second.metrics
    a = (tmp_path / "a" / "model.safetensors").read_bytes()
    assert a == (tmp_path / "b" / "model.safetensors").read_bytes()


def test_truncation_is_counted_and_warned(model_dir, toy_dir, tmp_path):
    cfg = FinetuneConfig(**{**FAST, "epochs": 1, "max_seq_length": 5})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        finetune(get_task("sst2"), model_dir, toy_dir, tmp_path, cfg)
    messages = [str(w.message) for w in caught]
    assert any(re.match(r"train: \d+ of 128 examples .* truncated to max_seq_length=5", m) for m in messages)
    assert any(m.startswith("dev: ") for m in messages)
    records = [r for r in read_log(tmp_path / "log.jsonl") if r["event"] == "truncation"]
    assert {r["split"] for r in records} == {"train", "dev"}


def test_head_of_another_size_or_other_labels_is_refused(trained):
    out, _, _ = trained
    with pytest.raises(CheckpointError, match=r"2 output\(s\) \(negative, positive\) but task mnli needs 3"):
        get_task("mnli").build_model(out)
    with pytest.raises(CheckpointError, match="labels"):
        get_task("rte").build_model(out)
    with pytest.raises(CheckpointError, match="labels"):  # CoLA's 0/1 mean other things than SST-2's
        get_task("cola").build_model(out)
    get_task("sst2").build_model(out)


def test_a_vocabulary_of_another_size_is_refused_before_training(model_dir, toy_dir, tmp_path):
    from bertkit.tokenizer import BertTokenizer

    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\ngood\n", encoding="utf-8")
    tok = BertTokenizer.from_file(tmp_path / "vocab.txt")
    with pytest.raises(CheckpointError, match="vocabulary has 6 tokens but the model's vocab_size is 26"):
        finetune(get_task("sst2"), model_dir, toy_dir, tmp_path / "out", FinetuneConfig(**FAST), tokenizer=tok)


def _looks_finished(out) -> bool:
    """A directory a loader would take for a finished fine-tuned model."""
    return (out / "config.json").is_file() and not (out / ".unfinished.json").exists()


def test_a_huge_learning_rate_stops_with_an_error_naming_the_step(model_dir, toy_dir, tmp_path):
    out = tmp_path / "huge"
    cfg = FinetuneConfig(**{**FAST, "lr": 1e6, "epochs": 2})
    with pytest.raises(BertkitError, match=r"diverged at step \d+.*--lr 1e\+06") as caught:
        finetune(get_task("sst2"), model_dir, toy_dir, out, cfg)
    assert "neither evaluated nor saved" in str(caught.value)
    assert not _looks_finished(out) and not (out / "results.json").exists()
    records = read_log(out / "log.jsonl")
    assert [r["event"] for r in records][-1] == "diverged"
    assert not any(r["event"] == "eval" for r in records)  # the NaN model was never scored


def test_finetune_cli_with_a_huge_learning_rate_exits_non_zero(model_dir, toy_dir, tmp_path, capsys):
    from bertkit.cli.main import main

    out = tmp_path / "cli"
    code = main(["finetune", "sst2", "--model", str(model_dir), "--data", str(toy_dir), "--out",
                 str(out), "--lr", "1e6", "--epochs", "1", "--batch-size", "16", "--max-seq-length", "32",
                 "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and re.search(r"bertkit: error: training diverged at step \d+", err)
    assert "Traceback" not in err and not _looks_finished(out)


def test_nan_outputs_are_refused_not_scored(trained, toy_dir):
    import torch

    from bertkit.checkpoint import load_tokenizer
    from bertkit.tasks.base import featurize

    out, _, _ = trained
    task = get_task("sst2")
    model = task.build_model(out)
    with torch.no_grad():
        model.classifier.weight.fill_(float("nan"))
    feats = featurize(task, task.read(toy_dir, "dev"), load_tokenizer(out), 32, False, "dev")
    with pytest.raises(BertkitError, match=r"NaN or infinite outputs for 48 of 48"):
        run_model(task, model, feats, 16)


def test_a_vocabulary_that_does_not_know_the_data_is_warned_about(tmp_path, model_dir):
    """Words the toy vocabulary lacks become [UNK]: fine-tuning says so (and logs it)."""
    data = tmp_path / "sst2"
    data.mkdir()
    rows = ["sentence\tlabel"] + [f"{'good' if i % 2 else 'bad'} xylophone quartz zebra\t{i % 2}" for i in range(32)]
    for split in ("train", "dev"):
        (data / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    with pytest.warns(UserWarning, match=r"\[UNK\]"):
        finetune(get_task("sst2"), model_dir, data, tmp_path / "out", FinetuneConfig(**{**FAST, "epochs": 1}))
    record = next(r for r in read_log(tmp_path / "out" / "log.jsonl") if r["event"] == "unknown")
    assert record["rate"] > 0.5 and record["unknown"] > 0


def test_task_texts_are_the_examples_strings_not_their_ids():
    from bertkit.tasks.formats.base import TextExample

    ex = TextExample("7", "a first text", "a second", "1")
    assert get_task("mrpc").texts(ex) == ["a first text", "a second"]
