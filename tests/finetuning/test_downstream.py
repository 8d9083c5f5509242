"""``bertkit downstream``: a tiny model on two tiny GLUE-layout tasks (SST-2, RTE) made here."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from bertkit.cli.main import main
from bertkit.errors import BertkitError, CheckpointError
from bertkit.finetuning.downstream import DownstreamConfig, downstream, format_results
from tests.finetune_helpers import make_model, one_thread, sentence, write_sst2  # noqa: F401

FAST = dict(lrs=(5e-3, 1e-3), seeds=(1, 2), epochs=4, batch_size=16, max_seq_length=32,
            progress=False)


def write_rte(directory: Path, train: int = 48, dev: int = 24) -> Path:
    """RTE's layout (index, sentence1, sentence2, label); entailment when the hypothesis
    holds ``good``."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, n, seed in (("train.tsv", train, 3), ("dev.tsv", dev, 4)):
        rng = random.Random(seed)
        lines = ["index\tsentence1\tsentence2\tlabel"]
        for i in range(n):
            good = i % 2 == 0
            lines.append(f"{i}\t{sentence(rng, 'day')}\t{sentence(rng, 'good' if good else 'bad')}\t"
                         f"{'entailment' if good else 'not_entailment'}")
        (directory / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("downstream")
    glue = root / "glue"
    write_sst2(glue / "SST-2", train=128, dev=32)
    write_rte(glue / "RTE")
    return {"model": make_model(root / "model"), "glue": glue, "root": root}


@pytest.fixture(scope="module")
def finished(setup):
    out = setup["root"] / "out"
    lines = []
    results = downstream(setup["model"], DownstreamConfig(out=str(out), tasks=("sst2", "rte"),
                                                          data=str(setup["glue"]), **FAST),
                         echo=lines.append)
    return out, results, lines


def test_grid_table_and_files(finished):
    out, results, lines = finished
    assert len(lines) == 2 * 2 * 2 and all("skipped" not in line for line in lines)
    assert set(results["tasks"]) == {"sst2", "rte"}
    sst2 = results["tasks"]["sst2"]
    assert sst2["metric"] == "accuracy" and len(sst2["scores"]) == 2
    # the chosen learning rate is the one with the best mean dev score over the seeds
    means = {lr: sum(s.values()) / len(s) for lr, s in sst2["grid"].items()}
    assert means[f"{sst2['lr']:g}"] == max(means.values()) == pytest.approx(sst2["mean"])
    assert sst2["mean"] > 0.7  # the toy task is separable by one word: fine-tuning ran
    for task in ("sst2", "rte"):
        for lr in ("0.005", "0.001"):
            for seed in (1, 2):
                run = out / task / f"lr-{lr}_seed-{seed}"
                assert json.loads((run / "results.json").read_text())["task"] == task
                assert not (run / "model.safetensors").exists()  # weights deleted once scored
    saved = json.loads((out / "results.json").read_text())
    assert saved["tasks"]["rte"]["scores"] == results["tasks"]["rte"]["scores"]
    assert saved["average"] == pytest.approx((sst2["mean"] + results["tasks"]["rte"]["mean"]) / 2)
    assert (out / "downstream.png").read_bytes()[:4] == b"\x89PNG"
    table = format_results(results)
    assert table.splitlines()[0].split() == ["task", "metric", "mean", "std", "seeds", "lr", "time_s"]
    assert "average" in table.splitlines()[-1]


def test_restart_skips_finished_runs_and_redoes_unfinished(finished, setup):
    out, results, _ = finished
    unfinished = out / "rte" / "lr-0.001_seed-2"
    (unfinished / "results.json").unlink()
    (unfinished / "stale.txt").write_text("from a killed run")
    lines = []
    again = downstream(setup["model"], DownstreamConfig(out=str(out), tasks=("sst2", "rte"),
                                                        data=str(setup["glue"]), **FAST),
                       echo=lines.append)
    assert sum("skipped" in line for line in lines) == 7
    assert not (unfinished / "stale.txt").exists() and (unfinished / "results.json").is_file()
    assert again["tasks"]["sst2"] == results["tasks"]["sst2"]


def test_random_init_uses_the_config_not_the_weights(setup, tmp_path):
    import torch

    from bertkit.checkpoint import read_weights

    out = tmp_path / "random"
    results = downstream(setup["model"], DownstreamConfig(
        out=str(out), tasks=("sst2",), data=str(setup["glue"]), random_init=True,
        **{**FAST, "lrs": (5e-3,)}), echo=lambda _: None)
    assert results["random_init"] and len(results["tasks"]["sst2"]["scores"]) == 2
    source = read_weights(setup["model"])
    name = "bert.embeddings.word_embeddings.weight"
    one, two = (read_weights(out / "random-init" / f"seed-{s}") for s in (1, 2))
    key = next(k for k in one if k.endswith("embeddings.word_embeddings.weight"))
    assert one[key].shape == source[name].shape
    assert not torch.equal(one[key], source[name]) and not torch.equal(one[key], two[key])
    assert (out / "random-init" / "seed-1" / "vocab.txt").is_file()


def test_cli_prints_the_table(setup, tmp_path, capsys):
    out = tmp_path / "cli"
    code = main(["downstream", str(setup["model"]), "--tasks", "SST-2", "--data", str(setup["glue"]),
                 "--out", str(out), "--lrs", "5e-3", "--seeds", "1", "--epochs", "1",
                 "--batch-size", "16", "--max-seq-length", "32", "--max-train-examples", "40",
                 "--precision", "fp32", "--no-progress"])
    assert code == 0
    text = capsys.readouterr().out
    assert "sst2" in text and "average" in text and "results.json" in text
    assert json.loads((out / "results.json").read_text())["settings"]["max_train_examples"] == 40


@pytest.mark.parametrize("tasks, message", [(("cola", "nope"), "unknown task .nope."),
                                            (("squad",), "unknown task 'squad'"),
                                            (("cola",), "CoLA: no cola train file")])
def test_bad_tasks_fail_before_training(setup, tmp_path, tasks, message):
    with pytest.raises(BertkitError, match=message):
        downstream(setup["model"], DownstreamConfig(out=str(tmp_path / "x"), tasks=tasks,
                                                    data=str(setup["glue"]), **FAST))
    assert not (tmp_path / "x").exists()


def test_model_without_vocabulary(setup, tmp_path):
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(setup["model"], bare)
    for name in ("vocab.txt", "tokenizer_config.json", "tokenizer.json"):
        (bare / name).unlink(missing_ok=True)
    with pytest.raises(CheckpointError, match="no vocabulary"):
        downstream(bare, DownstreamConfig(out=str(tmp_path / "x"), tasks=("sst2",),
                                          data=str(setup["glue"]), **FAST))


def test_bad_grid_values(tmp_path):
    with pytest.raises(SystemExit):
        main(["downstream", "m", "--lrs", "fast"])
    with pytest.raises(BertkitError, match="lrs must be > 0"):
        DownstreamConfig(lrs=(0.0,)).validate()


@pytest.mark.parametrize("flags, message", [
    (["--lrs", "1e-4,0"], "argument --lrs: must be > 0 (got 0)"),
    (["--seeds", ","], "argument --seeds: give at least one value"),
    (["--lrs", "1e-4,fast"], "argument --lrs: invalid float value: 'fast'"),
    (["--epochs", "0"], "argument --epochs: must be >= 1 (got 0)"),
])
def test_comma_lists_are_checked_per_value_while_parsing(flags, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["downstream", "m", *flags])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_help_shows_list_defaults_as_typed(capsys):
    with pytest.raises(SystemExit):
        main(["downstream", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: 0.0003,0.0001,5e-05)" in text and "(default: sst2,mrpc,stsb,rte,cola)" in text


def test_mrpc_raw_layout_is_accepted(shared, tmp_path):
    """The shared MRPC folder holds the raw msr_paraphrase files: train and dev are found."""
    from bertkit.finetuning.downstream import check_tasks

    glue = shared("glue")
    assert check_tasks(["mrpc", "STS-B"], glue) == ["mrpc", "stsb"]


def test_compare_downstream_table_chart_and_errors(finished, tmp_path, capsys):
    out, results, _ = finished
    other = tmp_path / "other"
    other.mkdir()
    worse = json.loads(json.dumps(results))
    for s in worse["tasks"].values():
        s["mean"] -= 0.1
    (other / "results.json").write_text(json.dumps(worse), encoding="utf-8")
    chart = tmp_path / "cmp.png"
    assert main(["compare-downstream", str(out), str(other), "--names", "bert,none",
                 "--baseline", "none", "--chart", str(chart)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["model", "sst2", "(accuracy)"] and "vs none" in lines[0]
    assert lines[1].split()[0] == "bert" and lines[1].split()[-1] == "+10.0"
    assert lines[2].split()[0] == "none" and lines[2].split()[-1] == "+0.0"
    assert chart.read_bytes()[:4] == b"\x89PNG"
    # errors: a folder without results, names that do not match the folders, a bad baseline
    assert main(["compare-downstream", str(out), str(tmp_path / "missing")]) != 0
    assert "cannot read downstream results" in capsys.readouterr().err
    assert main(["compare-downstream", str(out), str(other), "--names", "a"]) != 0
    assert "--names" in capsys.readouterr().err
    assert main(["compare-downstream", str(out), str(other), "--baseline", "x"]) != 0
    assert "--baseline" in capsys.readouterr().err


def test_a_nan_score_is_reported_not_a_crash():
    """A regression model that predicts one constant value has no correlation (NaN): the
    summary keeps it as NaN, picks another learning rate if one scored, never raises."""
    from bertkit.finetuning.downstream import _summary

    def run(score):
        return {"best": {"metrics": {"spearman": score}, "seconds": 1.0}}

    nan = float("nan")
    all_nan = _summary("stsb", {1e-3: {1: run(nan), 2: run(nan)}})
    assert all_nan["lr"] == 1e-3 and all_nan["mean"] != all_nan["mean"]
    assert all_nan["std"] != all_nan["std"]
    mixed = _summary("stsb", {1e-3: {1: run(nan), 2: run(0.2)}, 3e-4: {1: run(0.1), 2: run(0.3)}})
    assert mixed["lr"] == 3e-4 and abs(mixed["mean"] - 0.2) < 1e-12


def test_compare_downstream_names_the_tasks_it_leaves_out():
    """Issue 25 #146: a task missing from one folder is named, and the averages are stated to
    be over the common tasks (dsref's own results.json average differs)."""
    from bertkit.finetuning.downstream import format_comparison

    def results(**means):
        return {"tasks": {t: {"metric": "accuracy", "mean": m, "std": 0.0} for t, m in means.items()}}

    rows = {"dsref": results(sst2=0.569, rte=0.523), "dsx3": results(sst2=0.55)}
    text = format_comparison(rows)
    assert "rte" not in text.splitlines()[0]
    assert text.splitlines()[-1] == ("note: left out: rte (missing from dsx3); every average is over "
                                     "the 1 task(s) all rows have (sst2), so it can differ from a "
                                     "folder's own results.json")
    with pytest.raises(BertkitError, match=r"no task in common \(sst2 \(missing from b\); rte"):
        format_comparison({"a": results(sst2=0.5), "b": results(rte=0.5)})


def test_compare_downstream_the_same_folder_twice_says_so(finished, tmp_path, capsys):
    out, _, _ = finished
    assert main(["compare-downstream", str(out), str(out)]) == 1
    err = capsys.readouterr().err
    assert "given more than once" in err and "--names" not in err
    twin = tmp_path / "a" / out.name  # another folder of the same name: told apart by path
    twin.mkdir(parents=True)
    (twin / "results.json").write_text((out / "results.json").read_text())
    assert main(["compare-downstream", str(out), str(twin)]) == 0
    assert str(twin) in capsys.readouterr().out
