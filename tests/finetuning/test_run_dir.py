"""Fine-tuning output directories: refused when taken, marked while unfinished, never torn,
and ``resume`` ends with the weights of an uninterrupted run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from bertkit.cli.main import main
from bertkit.errors import BertkitError
from bertkit.finetuning.config import FinetuneConfig
from bertkit.finetuning.loop import finetune
from bertkit.finetuning.run_dir import RunDir
from bertkit.modeldir.marker import unfinished_note
from bertkit.runlog import read_log
from bertkit.tasks import get_task
from tests.finetune_helpers import FAST, make_model, one_thread, write_sst2  # noqa: F401

CFG = {**FAST, "epochs": 3, "grid": {"lr": [FAST.get("lr", 1e-3), 5e-4]}}


class Killed(Exception):
    """Stands in for a kill -9 right after a resume state was written."""


@pytest.fixture(scope="module")
def reference(model_dir, toy_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "out"
    finetune(get_task("sst2"), model_dir, toy_dir, out, FinetuneConfig(**CFG))
    return out


def _kill_after(monkeypatch, run: int, epoch: int):
    original = RunDir.save_state

    def save_then_die(self, state):
        original(self, state)
        if (state["extra"]["run"], state["extra"]["epoch"]) == (run, epoch):
            raise Killed

    monkeypatch.setattr(RunDir, "save_state", save_then_die)


@pytest.mark.parametrize("run, epoch", [(1, 1), (2, 3)])
def test_resume_ends_bit_identical(model_dir, toy_dir, reference, tmp_path, monkeypatch, run, epoch):
    out = tmp_path / "out"
    with monkeypatch.context() as m:
        _kill_after(m, run, epoch)
        with pytest.raises(Killed):
            finetune(get_task("sst2"), model_dir, toy_dir, out, FinetuneConfig(**CFG))
    assert unfinished_note(out) and not (out / "results.json").exists()
    with pytest.raises(BertkitError, match="unfinished fine-tuning run: pass --resume"):
        finetune(get_task("sst2"), model_dir, toy_dir, out, FinetuneConfig(**CFG))
    finetune(get_task("sst2"), model_dir, toy_dir, out, FinetuneConfig(**CFG, resume=True))
    a, b = load_file(out / "model.safetensors"), load_file(reference / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert (out / "predictions_dev.jsonl").read_bytes() == (reference / "predictions_dev.jsonl").read_bytes()
    ours, theirs = json.loads((out / "results.json").read_text()), json.loads((reference / "results.json").read_text())
    assert ours["best"]["metrics"] == theirs["best"]["metrics"]
    assert unfinished_note(out) is None
    assert [p.name for p in out.glob(".*")] == [".published.json"]  # no temp, state or marker
    events = [r.get("event") for r in read_log(out / "log.jsonl")]
    assert events.count("start") == 1 and events.count("resume") == 1


def test_a_finished_out_is_refused_unless_overwrite(model_dir, toy_dir, reference, tmp_path):
    with pytest.raises(BertkitError, match="already holds a fine-tuned model: pass --overwrite"):
        finetune(get_task("sst2"), model_dir, toy_dir, reference, FinetuneConfig(**CFG))
    with pytest.raises(BertkitError, match="nothing to resume"):
        finetune(get_task("sst2"), model_dir, toy_dir, reference, FinetuneConfig(**CFG, resume=True))
    out = tmp_path / "out"
    one = {**FAST, "epochs": 1}
    finetune(get_task("sst2"), model_dir, toy_dir, out, FinetuneConfig(**one))
    finetune(get_task("sst2"), model_dir, toy_dir, out, FinetuneConfig(**one, overwrite=True))
    events = [r.get("event") for r in read_log(out / "log.jsonl")]
    assert events.count("start") == 1  # the old run's records are gone, not appended to
    assert not (reference / ".lock").exists() and not (out / ".lock").exists()  # released


# ------------------------------------------------------------------ outputs vs inputs, lock
def _files(directory) -> dict:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def _finetune_cli(model, data, out, *extra) -> int:
    return main(["finetune", "sst2", "--model", str(model), "--data", str(data), "--out", str(out),
                 "--epochs", "1", "--max-seq-length", "32", "--threads", "1", "--no-progress", *extra])


def test_finetune_never_replaces_or_writes_into_its_model(toy_dir, tmp_path, capsys):
    """Case 399: ``--out`` = ``--model`` with ``--overwrite`` deleted the model, then failed."""
    model = make_model(tmp_path / "m")
    before = _files(model)
    for out in (model, model / "ft"):
        for extra in ([], ["--overwrite"]):
            assert _finetune_cli(model, toy_dir, out, *extra) == 1
            word = "would overwrite" if out == model else "lies inside"
            assert capsys.readouterr().err == (f"bertkit: error: --out {out} {word} the --model "
                                               f"{model}: choose another --out\n")
    assert _files(model) == before and sorted(p.name for p in model.iterdir()) == sorted(before)


HOLD = ("import sys, time\n"
        "from bertkit.finetuning.run_dir import RunDir\n"
        "RunDir(sys.argv[1]).prepare()\n"
        "print('held', flush=True)\n"
        "time.sleep(120)\n")


def test_a_run_directory_in_use_is_refused_and_a_dead_holder_is_taken_over(model_dir, toy_dir,
                                                                           tmp_path, capsys):
    """Case 326: two runs into one ``--out`` at once both exited 0 and one result was lost."""
    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE,
                              text=True, cwd=os.getcwd())
    try:
        assert holder.stdout.readline() == "held\n"
        assert _finetune_cli(model_dir, toy_dir, out) == 1
        assert capsys.readouterr().err == (f"bertkit: error: --out {out} is in use by another run "
                                           f"(pid {holder.pid}, lock file {out / '.lock'}): wait "
                                           "for it to end, or choose another --out\n")
        assert os.listdir(out) == [".lock"]  # the refused run wrote nothing
    finally:
        holder.kill()
        holder.wait()
    # killed, the holder left its lock file behind: a stale lock, taken over
    assert (out / ".lock").read_text().strip() == str(holder.pid)
    assert _finetune_cli(model_dir, toy_dir, out) == 0
    assert (out / "results.json").is_file() and not (out / ".lock").exists()


def test_an_interrupted_publish_is_rolled_forward(tmp_path):
    out = tmp_path / "out"
    run_dir = RunDir(out)
    run_dir.prepare()
    for epoch in (1, 2):
        staging = run_dir.staging()
        (staging / "config.json").write_text(json.dumps({"epoch": epoch}))
        (staging / "model.safetensors").write_text(f"weights {epoch}")
        if epoch == 1:
            run_dir.publish()
    # killed after the journal was written and one file was renamed in
    with open(out / ".publish.json", "w") as f:
        json.dump({"files": ["config.json", "model.safetensors"], "previous": []}, f)
    (staging / "model.safetensors").replace(out / "model.safetensors")
    (out / ".config.json.abc.tmp").write_text("half")
    assert json.loads((out / "config.json").read_text())["epoch"] == 1  # torn, for now
    (out / ".unfinished.json").write_text("{}")
    (out / ".resume.pt").write_bytes(b"")
    with pytest.raises(BertkitError, match="unfinished"):
        RunDir(out).prepare()
    RunDir(out).prepare(resume=True)  # completes the publish and removes temp files
    assert json.loads((out / "config.json").read_text())["epoch"] == 2
    assert (out / "model.safetensors").read_text() == "weights 2"
    assert not (out / ".publish.json").exists() and not (out / ".staging").exists()
    assert not (out / ".config.json.abc.tmp").exists()
    RunDir(out).prepare(overwrite=True)  # starting over clears the old run's files
    assert not (out / "config.json").exists() and not (out / "model.safetensors").exists()


def test_a_staged_directory_is_published_and_replaced_as_a_whole(tmp_path):
    out = tmp_path / "out"
    run_dir = RunDir(out)
    run_dir.prepare()
    for epoch, extra in ((1, "2_Normalize"), (2, None)):
        staging = run_dir.staging()
        (staging / "config.json").write_text(json.dumps({"epoch": epoch}))
        (staging / "1_Pooling").mkdir()
        (staging / "1_Pooling" / "config.json").write_text(json.dumps({"epoch": epoch}))
        if extra:
            (staging / extra).mkdir()
        run_dir.publish()
    assert json.loads((out / "1_Pooling" / "config.json").read_text())["epoch"] == 2
    assert not (out / "2_Normalize").exists()  # the first epoch's directory the second lacks
    run_dir.release()
    RunDir(out).prepare(overwrite=True)
    assert not (out / "1_Pooling").exists() and not (out / "config.json").exists()


@pytest.mark.parametrize("change", [{"batch": 0}, {"epochs": 0}, {"lr": -2e-5},
                                    {"eval_batch": 0}, {"warmup": 2}])
def test_hyper_parameters_are_checked_before_any_work(model_dir, tmp_path, change):
    name = next(iter(change))
    with pytest.raises(BertkitError, match=name):
        finetune(get_task("sst2"), model_dir, tmp_path / "no-data", tmp_path / "out",
                 FinetuneConfig(**{**FAST, **change}))
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ one check of a given model
@pytest.fixture(scope="module")
def unfinished(model_dir, toy_dir, tmp_path_factory):
    """A run killed after its first epoch of three (the model of epoch 1, marked unfinished)."""
    out = tmp_path_factory.mktemp("unf") / "out"
    original = RunDir.save_state

    def save_then_die(self, state):
        original(self, state)
        raise Killed

    RunDir.save_state = save_then_die
    try:
        with pytest.raises(Killed):
            finetune(get_task("sst2"), model_dir, toy_dir, out, FinetuneConfig(**{**FAST, "epochs": 3}))
    finally:
        RunDir.save_state = original
    assert unfinished_note(out)
    return out


def _run(args, capsys):
    """Exit status and what the command said on stderr or as a warning (pytest records these)."""
    import warnings

    from bertkit.cli.main import main

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main([str(a) for a in args])
    return code, capsys.readouterr().err + "\n".join(str(w.message) for w in caught)


def test_every_command_that_takes_a_model_warns_about_an_unfinished_run(unfinished, toy_dir,
                                                                        tmp_path, capsys, monkeypatch):
    (tmp_path / "p.jsonl").write_text('{"sentence": "a good day"}\n')
    common = ["--max-seq-length", 32, "--no-progress"]
    commands = {
        "predict": ["predict", "sst2", "--model", unfinished, "--input", tmp_path / "p.jsonl",
                    "--output", tmp_path / "o.jsonl", *common],
        "evaluate": ["evaluate", "sst2", "--model", unfinished, "--data", toy_dir, *common],
        "prune": ["prune", unfinished, "--task", "sst2", "--data", toy_dir, "--heads", "1",
                  "--curve", "0", "--importance-examples", 16, "--out", tmp_path / "pr", *common],
        "distill": ["distill", "sst2", "--teacher", unfinished, "--student-layers", 1, "--data",
                    toy_dir, "--out", tmp_path / "ds", "--epochs", 1, *common],
        "quantize": ["quantize", unfinished, "--out", tmp_path / "q8"],
        "attention": ["attention", unfinished, "a good day", "--out", tmp_path / "a.png"],
        "embed": ["embed", unfinished, "--input", tmp_path / "p.jsonl", "--output", tmp_path / "e.npy"],
    }
    import importlib.util

    if importlib.util.find_spec("onnx"):  # export-onnx needs onnx
        commands["export-onnx"] = ["export-onnx", unfinished, "--out", tmp_path / "m.onnx"]
    import bertkit.serve.app

    monkeypatch.setattr(bertkit.serve.app, "run", lambda config: None)  # start-up only, no server
    commands["serve"] = ["serve", unfinished]
    for name, args in commands.items():
        code, err = _run(args, capsys)
        assert code == 0, (name, err)
        assert "is from an unfinished fine-tuning run (" in err, (name, err)
    code, err = _run(["predict", "sst2", "--model", tmp_path / "q8", "--input", tmp_path / "p.jsonl",
                      "--output", tmp_path / "o8.jsonl", "--no-progress"], capsys)
    assert code == 0 and "unfinished fine-tuning run" in err  # the INT8 copy keeps the marker


def test_trained_head_is_a_saved_flag_with_a_fallback_for_older_directories(unfinished, model_dir,
                                                                            tmp_path):
    import shutil

    from bertkit.modeldir.marker import trained_head

    task = get_task("sst2")
    entry = json.loads((unfinished / "config.json").read_text())["bertkit_finetune"]
    assert entry["trained_head"] is True and trained_head(unfinished, task) is True
    assert trained_head(model_dir, task) is False  # a pre-trained (MLM) directory
    old = tmp_path / "old"  # saved before the flag: the checkpoint's head tensors decide
    shutil.copytree(unfinished, old)
    config = json.loads((old / "config.json").read_text())
    del config["bertkit_finetune"]["trained_head"]
    (old / "config.json").write_text(json.dumps(config))
    assert trained_head(old, task) is True
    flagged_off = tmp_path / "off"  # the flag wins over the tensors
    shutil.copytree(old, flagged_off)
    config["bertkit_finetune"]["trained_head"] = False
    (flagged_off / "config.json").write_text(json.dumps(config))
    assert trained_head(flagged_off, task) is False


def test_a_teacher_of_another_task_is_warned_about_or_refused(unfinished, toy_dir, tmp_path, capsys):
    from bertkit.modeldir.marker import check_model

    config = json.loads((unfinished / "config.json").read_text())
    with pytest.warns(UserWarning, match="fine-tuned on sst2, not cola"):
        check_model(unfinished, get_task("cola"), option="--teacher")
    assert config["bertkit_finetune"]["task"] == "sst2"
    code, err = _run(["distill", "cola", "--teacher", unfinished, "--student-layers", 1, "--data",
                      toy_dir, "--out", tmp_path / "dc", "--epochs", 1, "--max-seq-length", 32,
                      "--no-progress"], capsys)
    # SST-2's head says negative/positive, CoLA's labels mean unacceptable/acceptable: refused
    assert code != 0 and "predicts labels ['negative', 'positive']" in err, err
    assert "['unacceptable', 'acceptable']" in err, err


def test_a_run_whose_resume_state_could_not_be_written_says_how_to_go_on(tmp_path, monkeypatch):
    """2026-11-25 faults #292, #302, #303: on a full disk torch's 'unexpected pos' named no
    file; then --resume said the run held nothing to resume 'once its first epoch has
    finished' (it had), and the plain command advised the --resume that could not work."""
    out = tmp_path / "out"
    run_dir = RunDir(out)
    run_dir.prepare()
    (out / "config.json").write_text("{}")
    (out / ".unfinished.json").write_text("{}")

    def full_disk(*args, **kwargs):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 19776 vs 19670")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(BertkitError, match=r"out/.resume.pt: no space left on device .* with --overwrite"):
        run_dir.save_state({"epoch": 1})
    run_dir.release()
    with pytest.raises(BertkitError, match=r"nothing to resume: its unfinished run has no resume state .* --overwrite"):
        RunDir(out).prepare(resume=True)
    with pytest.raises(BertkitError, match=r"unfinished fine-tuning run: it cannot be resumed: .* --overwrite"):
        RunDir(out).prepare()
    RunDir(out).prepare(overwrite=True)
    assert not (out / ".unfinished.json").exists()
