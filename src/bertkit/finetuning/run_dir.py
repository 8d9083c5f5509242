"""The output model directory of a command: never an input, never torn, locked while written,
marked while unfinished, resumable.

Contract (``RunDir(out, option="--out", resumable=True)``; ``finetune`` and ``distill`` write
their runs through it, and ``quantize``, ``prune`` and ``convert`` their models, with
``resumable=False``):

* :meth:`RunDir.prepare` starts writing ``out``, before any work, in this order:

  - the one rule for outputs (:func:`bertkit.fileio.check_not_input`): ``out`` never names or
    lies inside an input (``inputs``: ``{"--model": path}``), and with ``overwrite`` never
    holds one;
  - the lock: ``out/.lock`` (``fcntl.flock``, holding the pid) is held until :meth:`release`
    (or the end of the process; :class:`RunDir` is a context manager that releases it);
    another process holding it is a BertkitError naming ``out`` and its pid; a lock file
    left by a dead process is taken over (the kernel dropped its lock). The lock is
    re-entrant within a process (``distill`` and ``prune`` hold it around the ``finetune``
    they run into the same ``out``);
  - under the lock, an ``out`` that holds a model (results, log, config or weights) is
    refused unless ``overwrite`` (then the old model's files are removed as a whole, so no
    new record is appended to an old ``log.jsonl`` and no old ``results.json`` sits beside
    new weights); an unfinished run is refused unless ``resume`` or ``overwrite``. Leftover
    temporary files of a killed run are removed, and an interrupted :meth:`publish` is
    completed.
* While a run lasts, ``out/.unfinished.json`` says so (task, epochs done); loaders warn
  about such a directory (:func:`unfinished_note`). :meth:`finish` removes it, last.
* :meth:`publish` replaces the model files of ``out`` as a whole: the new files are written to
  a staging directory first (``out/.staging``), a journal (``out/.publish.json``) names them,
  then they are renamed into ``out``; a kill in between is rolled forward by the next
  :meth:`prepare`, so ``out`` never mixes the files of two epochs (or two models). A staged
  directory (sentence-transformers' ``1_Pooling/``) is published as a whole, as a file is.
* :meth:`save_state` / :meth:`load_state`: ``out/.resume.pt`` holds everything needed to go on
  after the last finished epoch (``torch.load(weights_only=True)`` safe).

Every command that takes a model directory asks :func:`bertkit.modeldir.marker.check_model`
first (the one "is this model finished, and trained for this task" check).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import Any

from bertkit.errors import BertkitError
from bertkit.fileio import (
    atomic_path,
    atomic_write,
    check_not_input,
    check_writable,
    default_file_mode,
    remove_temp_files,
)
from bertkit.modeldir.marker import UNFINISHED

JOURNAL = ".publish.json"
STAGING = ".staging"
STATE = ".resume.pt"
LOCK = ".lock"
LOG = "log.jsonl"
RESULTS = "results.json"
# what a finished run leaves besides the task's own output files (listed in the journal)
MODEL_FILES = ("config.json", "model.safetensors", "pytorch_model.bin", "vocab.txt",
               "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
WEIGHTS = ("model.safetensors", "pytorch_model.bin", "model.int8.safetensors")
# what bertkit's other writers add to a model directory (quantize, prune, st-layout): removed
# with the model it belongs to
OTHER_FILES = ("model.int8.safetensors", "prune.json", "pruning_curve.json", "pruning_curve.png",
               "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")
OTHER_DIRS = ("1_Pooling", "2_Normalize")

_HELD: dict[str, list[int]] = {}  # lock file -> [its descriptor, holders in this process]


def _acquire(path: Path, option: str, out: Path) -> int:
    """Lock ``path`` (created if missing) and write our pid into it; returns its descriptor.
    Held elsewhere: a BertkitError naming ``option``, ``out`` and the holder's pid."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, default_file_mode())
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            who = f"pid {holder}" if holder.isdigit() else "another process"
            raise BertkitError(f"{option} {out} is in use by another run ({who}, lock file "
                               f"{path}): wait for it to end, or choose another {option}") from None
        try:  # the holder removes the file as it releases it: then lock the new one
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            return fd
        os.close(fd)


def _remove(path: Path) -> None:
    """Remove the file or directory ``path``; nothing when it is missing."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _replace(source: Path, target: Path) -> None:
    """Move ``source`` onto ``target``: a file onto a file by one rename; where either is a
    directory, the old ``target`` is removed first (``os.replace`` cannot replace a non-empty
    directory). ``source`` stays until the rename, so a kill in between is completed by
    running it again."""
    if source.is_dir() or target.is_dir():
        _remove(target)
    os.replace(source, target)


class RunDir:
    """See the module docstring."""

    def __init__(self, out: str | Path, option: str = "--out", resumable: bool = True):
        self.out = Path(out)
        self.option = option  # how the user named ``out`` (in every error)
        self.resumable = resumable  # a fine-tuning run (--resume), else a model written at once
        self._lock: str | None = None

    def __enter__(self) -> RunDir:
        return self

    def __exit__(self, *exc) -> bool:
        self.release()
        return False

    # ------------------------------------------------------------------ start and end
    def prepare(self, resume: bool = False, overwrite: bool = False,
                inputs: dict[str, Any] | None = None) -> None:
        """Start writing ``out`` (see the module docstring); ``inputs``: ``{option: path}``
        of the models (and files) the command reads, None values skipped."""
        out = self.out
        if out.exists() and not out.is_dir():
            raise BertkitError(f"{out}: {self.option} is a file, not a directory")
        for option, path in (inputs or {}).items():
            if path is not None:
                check_not_input(out, path, self.option, option, overwrite=overwrite and not resume)
        if resume and not out.is_dir():
            raise BertkitError(f"{out}: nothing to resume: it holds no run to resume (a run can "
                               "be resumed once its first epoch has finished)")
        check_writable(out, self.option, directory=True)
        out.mkdir(parents=True, exist_ok=True)
        self.lock()
        try:
            self._check_taken(resume, overwrite)
            self._roll_forward()
            self.remove_temp_files()
            if overwrite and not resume:
                self._remove_run_files()
        except BaseException:
            self.release()
            raise

    def _check_taken(self, resume: bool, overwrite: bool) -> None:
        """Refuse an ``out`` that holds a model or an unfinished run (module docstring)."""
        out = self.out
        unfinished = (out / UNFINISHED).exists()
        finished = not unfinished and any((out / name).exists() for name in
                                          (RESULTS, "config.json", LOG, *WEIGHTS))
        stateless = unfinished and self.resumable and not (out / STATE).is_file()
        no_state = (f"its unfinished run has no resume state ({STATE}, written once an epoch has finished: "
                    "the run stopped during its first epoch, or could not write it, e.g. on a full disk)")
        if resume:
            if stateless:
                raise BertkitError(f"{out}: nothing to resume: {no_state}; pass --overwrite to start over")
            if not (out / STATE).is_file():
                state = "holds a finished run" if finished else "holds no run to resume"
                raise BertkitError(f"{out}: nothing to resume: it {state} (a run can be resumed "
                                   "once its first epoch has finished)")
        elif unfinished and not overwrite:
            how = ("pass --resume to continue it, or --overwrite to start over" if self.resumable
                   else f"pass --overwrite to replace it, or choose another {self.option}")
            if stateless:
                how = f"it cannot be resumed: {no_state}; pass --overwrite to start over, or choose another {self.option}"
            raise BertkitError(f"{out} holds an unfinished fine-tuning run: {how}")
        elif finished and not overwrite:
            what = "a fine-tuned model" if self.resumable else "a model"
            raise BertkitError(f"{out} already holds {what}: pass --overwrite to replace it, "
                               f"or choose another {self.option}")

    def lock(self) -> None:
        """Hold ``out/.lock`` (module docstring); ``out`` must exist. Idempotent."""
        if self._lock is not None:
            return
        path = self.out / LOCK
        key = str(path.resolve())
        if key in _HELD:
            _HELD[key][1] += 1
        else:
            _HELD[key] = [_acquire(path, self.option, self.out), 1]
        self._lock = key

    def release(self) -> None:
        """Give the lock back (the file is removed while still held); nothing when not held."""
        key, self._lock = self._lock, None
        if key is None:
            return
        _HELD[key][1] -= 1
        if _HELD[key][1] == 0:
            fd = _HELD.pop(key)[0]
            Path(key).unlink(missing_ok=True)
            os.close(fd)

    def mark_unfinished(self, **info: Any) -> None:
        with atomic_write(self.out / UNFINISHED) as f:
            json.dump(info, f)

    def finish(self) -> None:
        """The run is complete: drop the resume state, then the unfinished marker (last)."""
        (self.out / STATE).unlink(missing_ok=True)
        (self.out / UNFINISHED).unlink(missing_ok=True)

    # ------------------------------------------------------------------ model files
    def staging(self) -> Path:
        """An empty staging directory to write the next model into, then :meth:`publish`."""
        staging = self.out / STAGING
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir()
        return staging

    def publish(self) -> None:
        """Move the staged files into ``out`` (journaled; see the module docstring)."""
        staging = self.out / STAGING
        names = sorted(p.name for p in staging.iterdir())
        previous = self._published()
        with atomic_write(self.out / JOURNAL) as f:
            json.dump({"files": names, "previous": previous}, f)
        self._roll_forward()

    def _published(self) -> list[str]:
        path = self.out / ".published.json"
        if path.is_file():
            try:
                return list(json.loads(path.read_text(encoding="utf-8")))
            except ValueError:
                return []
        return []

    def _roll_forward(self) -> None:
        """Complete an interrupted :meth:`publish` (idempotent)."""
        journal = self.out / JOURNAL
        if not journal.is_file():
            shutil.rmtree(self.out / STAGING, ignore_errors=True)
            return
        entry = json.loads(journal.read_text(encoding="utf-8"))
        staging = self.out / STAGING
        for name in entry["files"]:
            if (staging / name).exists():
                _replace(staging / name, self.out / name)
        for name in set(entry.get("previous", [])) - set(entry["files"]):
            _remove(self.out / name)  # an old epoch's file (or directory) the new one lacks
        with atomic_write(self.out / ".published.json") as f:
            json.dump(entry["files"], f)
        shutil.rmtree(staging, ignore_errors=True)
        journal.unlink()

    # ------------------------------------------------------------------ resume state
    def save_state(self, state: dict[str, Any]) -> None:
        import torch

        from bertkit.fileio import is_disk_full

        try:
            with atomic_path(self.out / STATE) as tmp:
                torch.save(state, tmp)
        except Exception as e:  # torch's zip writer says "unexpected pos", naming no file
            if not is_disk_full(e):
                raise
            raise BertkitError(f"{self.out / STATE}: no space left on device (the disk is full) while writing "
                               "the resume state; the epoch's model is saved, but the run cannot be resumed: free "
                               "some space and run again with --overwrite") from None

    def load_state(self) -> dict[str, Any]:
        from bertkit.fileio import safe_torch_load

        return safe_torch_load(self.out / STATE, "resume state")

    # ------------------------------------------------------------------ cleaning
    def remove_temp_files(self) -> None:
        """Temporary files a killed writer left (``.NAME.XXXX.tmp``)."""
        remove_temp_files(self.out)
        remove_temp_files(self.out / STAGING)

    def _remove_run_files(self) -> None:
        """The old model of ``out`` as a whole (``--overwrite``); other files and directories
        (the lock, anything bertkit did not write) stay."""
        names = set(MODEL_FILES) | set(OTHER_FILES) | set(self._published()) | {
            RESULTS, LOG, STATE, UNFINISHED, ".published.json"}
        for name in names:
            _remove(self.out / name)
        for path in self.out.glob("predictions_*.jsonl"):
            path.unlink()
        for name in OTHER_DIRS:
            shutil.rmtree(self.out / name, ignore_errors=True)

