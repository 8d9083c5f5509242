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

Every command that takes a model directory asks :func:`check_model` first - the one "is this
model finished, and trained for this task" check: it warns about an unfinished run
(:func:`unfinished_note`), and, given a task, about (or, ``require_head``, refuses) a model with
no trained head for it (:func:`trained_head`: the ``trained_head`` flag fine-tuning saves in
``config.json``'s ``bertkit_finetune`` entry; directories saved before the flag fall back to the
checkpoint's head tensors) and about a model fine-tuned on another task whose labels fit.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from bertkit.errors import BertkitError, CheckpointError
from bertkit.fileio import atomic_path, atomic_write, check_writable, remove_temp_files

UNFINISHED = ".unfinished.json"
JOURNAL = ".publish.json"
STAGING = ".staging"
STATE = ".resume.pt"
LOG = "log.jsonl"
RESULTS = "results.json"
# what a finished run leaves besides the task's own output files (listed in the journal)
MODEL_FILES = ("config.json", "model.safetensors", "pytorch_model.bin", "vocab.txt",
               "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def unfinished_note(directory: str | Path) -> str | None:
    """A warning for a model directory that belongs to an unfinished fine-tuning run, else None."""
    directory = Path(directory)
    marker = directory / UNFINISHED
    if not marker.is_file():
        return None
    try:
        info = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        info = {}
    done = info.get("epochs_done")
    where = f" ({done} of {info['epochs']} epoch(s) of run {info.get('run', 1)} of " \
            f"{info.get('runs', 1)} done)" if done is not None and info.get("epochs") else ""
    return (f"{directory} is from an unfinished fine-tuning run{where}: the model is the best "
            "epoch so far, not the final one, and has no results.json; finish it with the same "
            "finetune command plus --resume")


def trained_head(model_dir: str | Path, task) -> bool | None:
    """Whether ``model_dir`` has a trained head of ``task``'s shape: the ``trained_head`` flag
    fine-tuning saved with it, else (a directory saved before the flag, or by another tool)
    whether the checkpoint holds ``task.head_tensor``; None when it cannot be told (no head
    tensor name, or weights in a format whose names are not read here)."""
    from bertkit.tasks.base import FINETUNE_KEY, read_model_config

    entry = read_model_config(model_dir).get(FINETUNE_KEY) or {}
    if "trained_head" in entry:
        return bool(entry["trained_head"])
    name = getattr(task, "head_tensor", None)
    names = _tensor_names(Path(model_dir))
    return None if name is None or names is None else name in names


def _tensor_names(directory: Path) -> set[str] | None:
    """The tensor names of ``model.safetensors`` (header only) or ``pytorch_model.bin``."""
    if (directory / "model.safetensors").is_file():
        from safetensors import safe_open

        with safe_open(str(directory / "model.safetensors"), framework="pt") as f:
            return set(f.keys())
    if (directory / "pytorch_model.bin").is_file():
        from bertkit.checkpoint import normalize_hf_names, read_weights

        return set(normalize_hf_names(read_weights(directory)))
    return None


def check_model(model_dir: str | Path, task=None, option: str | None = None,
                require_head: bool = False) -> None:
    """The check every command runs on the model it is given (see the module docstring):
    warnings (``bertkit: warning: ...`` on the command line) for an unfinished run and for a
    model fine-tuned on another task; for a model with no trained head of ``task`` a warning,
    or a CheckpointError naming ``option`` when ``require_head``."""
    import warnings

    from bertkit.tasks.base import saved_task_options

    who = f"{option} {model_dir}" if option else str(model_dir)
    note = unfinished_note(model_dir)
    if note:
        warnings.warn(f"{option} {note}" if option else note, stacklevel=2)
    if task is None:
        return
    if trained_head(model_dir, task) is False:
        message = (f"{who}: has no trained {task.name} head (it was never fine-tuned for a task: "
                   f"the head would be freshly initialised); fine-tune it first (bertkit finetune "
                   f"{task.name} ...)")
        if require_head:
            raise CheckpointError(message)
        warnings.warn(message, stacklevel=2)
        return
    trained_on, _ = saved_task_options(model_dir)
    if trained_on and trained_on != task.name:
        warnings.warn(f"{who} was fine-tuned on {trained_on}, not {task.name}; its labels fit, so "
                      "it is used anyway, but it is a model of another task", stacklevel=2)


def carry_unfinished_marker(source: str | Path, target: str | Path) -> None:
    """Copy ``source``'s unfinished marker to ``target`` (a copy of its model, e.g. INT8), so
    that loaders of the copy still warn; nothing when ``source`` is finished."""
    marker = Path(source) / UNFINISHED
    if marker.is_file() and Path(source).resolve() != Path(target).resolve():
        with atomic_write(Path(target) / UNFINISHED) as f:
            f.write(marker.read_text(encoding="utf-8"))


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

