"""``bertkit prune``: curve, smaller saved model, clear errors (toy task, tiny model)."""

from __future__ import annotations

import json

import pytest

from bertkit.checkpoint import load_pretrained
from bertkit.cli.main import main
from bertkit.finetuning.config import FinetuneConfig
from bertkit.finetuning.loop import finetune
from bertkit.model.pruning import count_heads
from bertkit.tasks import get_task
from tests.finetune_helpers import FAST, make_model, one_thread, write_sst2  # noqa: F401


@pytest.fixture(scope="module")
def trained(model_dir, toy_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    finetune(get_task("sst2"), model_dir, toy_dir, out, FinetuneConfig(**FAST))
    return out


def test_prune_cli_saves_a_smaller_model_and_the_curve(trained, toy_dir, tmp_path, capsys):
    out = tmp_path / "pruned"
    code = main(["prune", str(trained), "--task", "sst2", "--data", str(toy_dir), "--heads", "0.5",
                 "--out", str(out), "--curve", "0,0.25,0.5,0.75", "--importance-examples", "64",
                 "--no-progress"])
    assert code == 0
    record = json.loads((out / "prune.json").read_text())
    assert record["heads_removed"] == 2 and record["heads_total"] == 4
    assert record["parameters_after"] < record["parameters_before"]
    assert [p["heads_removed"] for p in record["curve"]] == [0, 1, 2]  # 0.75 clips to 2: one point
    assert record["curve"][0]["accuracy"] == record["metrics_before"]["accuracy"]
    assert (out / "pruning_curve.png").read_bytes()[:4] == b"\x89PNG"
    model = load_pretrained(out)
    assert count_heads(model) == 2
    config = json.loads((out / "config.json").read_text())
    assert sum(map(len, config["pruned_heads"].values())) == 2
    # the pruned directory is still a fine-tuned sst2 model: evaluate reads it
    assert main(["evaluate", "sst2", "--model", str(out), "--data", str(toy_dir), "--no-progress"]) == 0
    assert "accuracy=" in capsys.readouterr().out


def test_prune_then_finetune_again(trained, toy_dir, tmp_path):
    out = tmp_path / "pruned_ft"
    assert main(["prune", str(trained), "--task", "sst2", "--data", str(toy_dir), "--heads", "1",
                 "--out", str(out), "--curve", "0", "--finetune-epochs", "1", "--lr", "1e-3",
                 "--no-progress"]) == 0
    record = json.loads((out / "prune.json").read_text())
    assert "accuracy" in record["metrics_after_finetune"]
    assert count_heads(load_pretrained(out)) == 3
    assert (out / "log.jsonl").is_file()


@pytest.mark.parametrize("heads", ["1.5", "0", "-0.5", "1.0", "4"])
def test_bad_heads_is_a_clear_error(trained, toy_dir, tmp_path, heads, capsys):
    code = main(["prune", str(trained), "--task", "sst2", "--data", str(toy_dir), "--heads", heads,
                 "--out", str(tmp_path / "x"), "--no-progress"])
    assert code == 1
    assert "--heads" in capsys.readouterr().err


def test_a_model_without_a_trained_head_is_refused(model_dir, toy_dir, tmp_path, capsys):
    code = main(["prune", str(model_dir), "--task", "sst2", "--data", str(toy_dir), "--heads", "1",
                 "--out", str(tmp_path / "x"), "--no-progress"])
    assert code == 1
    assert "no trained sst2 head" in capsys.readouterr().err


def test_prune_replaces_another_model_only_with_overwrite_and_as_a_whole(trained, toy_dir, tmp_path, capsys):
    """Case 410: the pruned model was written over another one, whose results.json stayed."""
    import shutil

    other = shutil.copytree(trained, tmp_path / "other")
    before = {p.name: p.read_bytes() for p in other.iterdir() if p.is_file()}
    argv = ["prune", str(trained), "--task", "sst2", "--data", str(toy_dir), "--heads", "1",
            "--curve", "0", "--importance-examples", "16", "--no-progress"]
    assert main([*argv, "--out", str(other)]) == 1
    assert capsys.readouterr().err == (f"bertkit: error: {other} already holds a model: pass "
                                       "--overwrite to replace it, or choose another --out\n")
    assert {p.name: p.read_bytes() for p in other.iterdir() if p.is_file()} == before
    assert main([*argv, "--out", str(other), "--overwrite"]) == 0
    assert main([*argv, "--out", str(tmp_path / "fresh")]) == 0
    visible = lambda d: {p.name for p in d.iterdir() if not p.name.startswith(".")}  # noqa: E731
    assert visible(other) == visible(tmp_path / "fresh") and not (other / "results.json").exists()
    assert main([*argv, "--out", str(trained), "--overwrite"]) == 1  # never its own model
    assert capsys.readouterr().err.startswith(f"bertkit: error: --out {trained} would overwrite "
                                              f"the MODEL_DIR {trained}")
