"""Is this model directory finished, and trained for this task? The one check every command
runs on the model it is given (:func:`check_model`).

A fine-tuning run marks its output directory unfinished while it lasts
(``.unfinished.json``: task, epochs done; written and removed by
:class:`bertkit.finetuning.run_dir.RunDir`); loaders warn about such a directory
(:func:`unfinished_note`). Given a task, :func:`check_model` warns about (or, ``require_head``,
refuses) a model with no trained head for it (:func:`trained_head`: the ``trained_head`` flag
fine-tuning saves in ``config.json``'s ``bertkit_finetune`` entry; directories saved before
the flag fall back to the checkpoint's head tensors) and about a model fine-tuned on another
task whose labels fit.
"""

from __future__ import annotations

import json
from pathlib import Path

from bertkit.errors import CheckpointError
from bertkit.fileio import atomic_write

UNFINISHED = ".unfinished.json"


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
    from bertkit.modeldir.entry import FINETUNE_KEY, read_model_config

    entry = read_model_config(model_dir).get(FINETUNE_KEY) or {}
    if "trained_head" in entry:
        return bool(entry["trained_head"])
    name = getattr(task, "head_tensor", None)
    names = _tensor_names(Path(model_dir))
    return None if name is None or names is None else name in names


def _tensor_names(directory: Path) -> set[str] | None:
    """The tensor names of ``model.safetensors`` (header only) or ``pytorch_model.bin``."""
    if (directory / "model.safetensors").is_file():
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(str(directory / "model.safetensors"), framework="pt") as f:
                return set(f.keys())
        except SafetensorError as e:  # a cut or foreign file: named, as the weights' loader does
            raise CheckpointError(f"{directory / 'model.safetensors'}: unreadable ({e})") from None
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

    from bertkit.modeldir.entry import saved_task_options

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
