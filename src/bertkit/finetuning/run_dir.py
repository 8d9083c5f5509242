"""The output directory of a fine-tuning run: never torn, marked while unfinished, resumable.

Contract (``RunDir(out)``):

* :meth:`RunDir.prepare` starts a run: an ``out`` that holds a finished model is refused unless
  ``overwrite`` (then the old run's files are removed, so no new record is appended to an
  old ``log.jsonl``); an unfinished run is refused unless ``resume`` or ``overwrite``. Leftover
  temporary files of a killed run are removed, and an interrupted :meth:`publish` is completed.
* While the run lasts, ``out/.unfinished.json`` says so (task, epochs done); loaders warn
  about such a directory (:func:`unfinished_note`). :meth:`finish` removes it, last.
* :meth:`publish` replaces the model files of ``out`` as a whole: the new files are written to
  a staging directory first (``out/.staging``), a journal (``out/.publish.json``) names them,
  then they are renamed into ``out``; a kill in between is rolled forward by the next
  :meth:`prepare`, so ``out`` never mixes the files of two epochs once a run goes on.
* :meth:`save_state` / :meth:`load_state`: ``out/.resume.pt`` holds everything needed to go on
  after the last finished epoch (``torch.load(weights_only=True)`` safe).

Every command that takes a model directory asks :func:`bertkit.modeldir.marker.check_model`
first (the one "is this model finished, and trained for this task" check).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from bertkit.errors import BertkitError
from bertkit.fileio import atomic_path, atomic_write, check_writable, remove_temp_files
from bertkit.modeldir.marker import UNFINISHED

JOURNAL = ".publish.json"
STAGING = ".staging"
STATE = ".resume.pt"
LOG = "log.jsonl"
RESULTS = "results.json"
# what a finished run leaves besides the task's own output files (listed in the journal)
MODEL_FILES = ("config.json", "model.safetensors", "pytorch_model.bin", "vocab.txt",
               "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")












class RunDir:
    """See the module docstring."""

    def __init__(self, out: str | Path):
        self.out = Path(out)

    # ------------------------------------------------------------------ start and end
    def prepare(self, resume: bool = False, overwrite: bool = False) -> None:
        out = self.out
        if out.exists() and not out.is_dir():
            raise BertkitError(f"{out}: --out is a file, not a directory")
        unfinished = (out / UNFINISHED).exists()
        finished = not unfinished and any((out / name).exists() for name in
                                          (RESULTS, "config.json", LOG))
        if resume:
            if not (out / STATE).is_file():
                state = "holds a finished run" if finished else "holds no run to resume"
                raise BertkitError(f"{out}: nothing to resume: it {state} (a run can be resumed "
                                   "once its first epoch has finished)")
        elif unfinished and not overwrite:
            raise BertkitError(f"{out} holds an unfinished fine-tuning run: pass --resume to "
                               "continue it, or --overwrite to start over")
        elif finished and not overwrite:
            raise BertkitError(f"{out} already holds a fine-tuned model: pass --overwrite to "
                               "replace it, or choose another --out")
        check_writable(out, "--out", directory=True)
        out.mkdir(parents=True, exist_ok=True)
        self._roll_forward()
        self.remove_temp_files()
        if overwrite and not resume:
            self._remove_run_files()

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
                os.replace(staging / name, self.out / name)
        for name in set(entry.get("previous", [])) - set(entry["files"]):
            (self.out / name).unlink(missing_ok=True)  # an old epoch's file the new one lacks
        with atomic_write(self.out / ".published.json") as f:
            json.dump(entry["files"], f)
        shutil.rmtree(staging, ignore_errors=True)
        journal.unlink()

    # ------------------------------------------------------------------ resume state
    def save_state(self, state: dict[str, Any]) -> None:
        import torch

        with atomic_path(self.out / STATE) as tmp:
            torch.save(state, tmp)

    def load_state(self) -> dict[str, Any]:
        from bertkit.fileio import safe_torch_load

        return safe_torch_load(self.out / STATE, "resume state")

    # ------------------------------------------------------------------ cleaning
    def remove_temp_files(self) -> None:
        """Temporary files a killed writer left (``.NAME.XXXX.tmp``)."""
        remove_temp_files(self.out)
        remove_temp_files(self.out / STAGING)

    def _remove_run_files(self) -> None:
        names = set(MODEL_FILES) | set(self._published()) | {RESULTS, LOG, STATE, UNFINISHED,
                                                             ".published.json"}
        for name in names:
            (self.out / name).unlink(missing_ok=True)
        for path in self.out.glob("predictions_*.jsonl"):
            path.unlink()

