"""The CLI boundary: clean one-line errors, --debug tracebacks, short warnings, 0644 outputs."""

from __future__ import annotations

import errno
import os
import stat
import warnings

import pytest

from bertkit.cli import boundary
from bertkit.cli.main import main
from bertkit.errors import BertkitError
from bertkit.fileio import atomic_path, atomic_write, check_writable


def _raise(exc):
    def func(args):
        raise exc
    return func


@pytest.mark.parametrize("exc, expected", [
    (BertkitError("x.tsv:3: bad"), "bertkit: error: x.tsv:3: bad"),
    (FileExistsError(errno.EEXIST, "File exists", "/etc/passwd"), "/etc/passwd: cannot create it"),
    (OSError(errno.ENOSPC, "No space left on device", "out/model.safetensors"),
     "out/model.safetensors: no space left on device (the disk is full)"),
    (RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 3130304 vs 3130192"),
     "no space left on device"),
    (ValueError("vocab_size must exceed the 5 special tokens"), "vocab_size must exceed"),
    (KeyError("boom"), "internal error: KeyError"),
])
def test_errors_become_one_clean_line(capsys, monkeypatch, exc, expected):
    monkeypatch.delenv("BERTKIT_DEBUG", raising=False)
    assert boundary.run_guarded(_raise(exc), None) == 1
    err = capsys.readouterr().err
    assert expected in err
    assert "Traceback" not in err
    assert err.count("\n") == 1


def test_debug_flag_and_env_show_the_traceback(capsys, monkeypatch):
    monkeypatch.delenv("BERTKIT_DEBUG", raising=False)
    assert boundary.run_guarded(_raise(ValueError("v")), None, debug=True) == 1
    assert "Traceback" in capsys.readouterr().err
    monkeypatch.setenv("BERTKIT_DEBUG", "1")
    assert boundary.run_guarded(_raise(ValueError("v")), None) == 1
    assert "Traceback" in capsys.readouterr().err


def test_interrupt_exits_130(capsys):
    assert boundary.run_guarded(_raise(KeyboardInterrupt()), None) == 130


def test_long_messages_are_cut(capsys, monkeypatch):
    monkeypatch.delenv("BERTKIT_DEBUG", raising=False)
    boundary.run_guarded(_raise(BertkitError("x" * 5_000_000)), None)
    err = capsys.readouterr().err
    assert len(err) < 2 * boundary.MAX_MESSAGE_CHARS
    assert "more characters cut" in err


def test_warnings_print_without_source_lines(capsys, monkeypatch):
    monkeypatch.delenv("BERTKIT_DEBUG", raising=False)
    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)
    boundary.install_warning_format()
    text = warnings.formatwarning("3 inputs were truncated", UserWarning, "/x/inference.py", 268,
                                  "model = load_pretrained(model_dir)")
    assert text == "bertkit: warning: 3 inputs were truncated\n"


def test_unwritable_output_is_a_clean_error_from_main(tmp_path, capsys):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world\n")
    code = main(["tokenizer", "train", "--corpus", str(corpus), "--vocab-size", "50",
                 "--output", str(blocker / "vocab.txt")])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert str(blocker / "vocab.txt") in err and "is a file, not a directory" in err


def test_check_writable(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(BertkitError, match="is a file, not a directory"):
        check_writable(tmp_path / "f" / "out.txt")
    with pytest.raises(BertkitError, match="is a directory"):
        check_writable(tmp_path)
    assert check_writable(tmp_path / "new" / "out.txt") == tmp_path / "new" / "out.txt"
    assert not (tmp_path / "new").exists()  # nothing is created by the check


def test_negative_numbers_parse_as_values(capsys):
    # argparse alone reads "-1e-4" as an option ("expected one argument")
    with pytest.raises(SystemExit):  # the range check of the option refuses it, naming it
        main(["pretrain", "--data", "nowhere", "--vocab", "v", "--out", "o", "--lr", "-1e-4"])
    err = capsys.readouterr().err
    assert "expected one argument" not in err and "--lr" in err


def test_outputs_get_normal_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        with atomic_write(tmp_path / "a.json") as f:
            f.write("{}")
        with atomic_path(tmp_path / "b.bin") as tmp:
            tmp.write_bytes(b"x")
    finally:
        os.umask(old)
    for name in ("a.json", "b.bin"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644


def test_torn_last_log_line_is_dropped_and_a_bad_middle_line_named(tmp_path):
    from bertkit.errors import DataFormatError
    from bertkit.runlog import read_log

    log = tmp_path / "log.jsonl"
    log.write_text('{"step": 1}\n{"step": 2}\n{"step": 3, "lo')
    assert read_log(log) == [{"step": 1}, {"step": 2}]
    log.write_text('{"step": 1}\n{"st\n{"step": 3}\n')
    with pytest.raises(DataFormatError, match=r"log.jsonl:2"):
        read_log(log)


def test_a_pickle_with_code_is_refused_with_a_safety_message(tmp_path):
    import pickle

    from bertkit.errors import CheckpointError
    from bertkit.fileio import safe_torch_load

    class Evil:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "PWNED"),))

    path = tmp_path / "pytorch_model.bin"
    path.write_bytes(pickle.dumps({"w": Evil()}))
    with pytest.raises(CheckpointError) as info:
        safe_torch_load(path, "weights file")
    message = str(info.value)
    assert "not loaded, for safety" in message and "safetensors" in message
    assert "weights_only set to False" not in message and "Re-running" not in message
    assert not (tmp_path / "PWNED").exists()


def test_a_full_disk_during_a_checkpoint_names_the_file_and_the_intact_one(tmp_path, monkeypatch):
    import torch

    from bertkit.errors import CheckpointError
    from bertkit.training import CheckpointManager

    manager = CheckpointManager(tmp_path)
    manager.save({"x": torch.zeros(2)}, 2)

    def full(obj, f):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 3130304 vs 3130192")

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(CheckpointError, match=r"step-00000004.pt: no space left on device.*"
                                              r"step-00000002.pt, is intact"):
        manager.save({"x": torch.zeros(2)}, 4)
    assert [p.name for p in tmp_path.iterdir()] == ["step-00000002.pt"]


def test_pytorch_quantized_tensor_deprecation_never_reaches_the_user(tmp_path):
    """Issue 25 #169: predicting with an INT8 directory printed PyTorch's own deprecation
    (a once-per-process notice: the predict runs in a process of its own)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from bertkit.cli.main import main
    from tests.task_models import make_task_model

    model = make_task_model(tmp_path, "sst2")
    (tmp_path / "p.jsonl").write_text('{"sentence": "the man went"}\n')
    assert main(["quantize", str(model), "--out", str(tmp_path / "q8")]) == 0
    src = Path(__file__).resolve().parents[2] / "src"
    done = subprocess.run([sys.executable, "-m", "bertkit.cli.main", "predict", "sst2", "--model",
                           str(tmp_path / "q8"), "--input", str(tmp_path / "p.jsonl"), "--output",
                           str(tmp_path / "o.jsonl"), "--no-progress"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(src)}, timeout=600)
    assert done.returncode == 0 and "deprecated" not in done.stderr, done.stderr
