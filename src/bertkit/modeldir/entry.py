"""The fine-tuning entry of a model directory: ``config.json``'s ``bertkit_finetune`` record
(task, options, ``max_seq_length``, hyper-parameters, dev metrics, ``trained_head``) that
fine-tuning writes and every later door reads, and the one rule for an input's token limit."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bertkit.errors import CheckpointError

FINETUNE_KEY = "bertkit_finetune"
DEFAULT_MAX_SEQ_LENGTH = 128  # a task family's token limit unless it has its own (SQuAD: 384)


def read_model_config(model_dir: str | Path) -> dict:
    """``config.json`` of a model directory; a missing, unreadable or non-object file is a
    :class:`CheckpointError` naming it."""
    path = Path(model_dir) / "config.json"
    if path.is_symlink() and not path.exists():
        raise CheckpointError(f"{path}: a symbolic link that leads nowhere (a loop, or a missing target)")
    if not path.is_file():
        raise CheckpointError(f"{model_dir}: not a model directory (no config.json)")
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError
        raise CheckpointError(f"{path}: not a readable JSON config ({e})") from None
    if not isinstance(config, dict):
        raise CheckpointError(f"{path}: not a readable JSON config (a JSON {type(config).__name__}, not an object)")
    return config


def finetune_entry(source: Any) -> dict:
    """The ``bertkit_finetune`` entry (task, options, max_seq_length, ...) of a model: ``source``
    is a model directory, a ``config.json`` mapping, or a loaded model's config (its ``extra``
    fields); ``{}`` for a model never fine-tuned by bertkit."""
    if isinstance(source, Mapping):
        config = source
    elif hasattr(source, "extra"):
        config = source.extra
    else:
        config = read_model_config(source)
    return dict(config.get(FINETUNE_KEY) or {})


def saved_task_options(source: Any) -> tuple[str | None, dict]:
    """The task name and options a fine-tuned model was trained with (``(None, {})`` for a
    model that was never fine-tuned by bertkit); ``source`` as :func:`finetune_entry`."""
    entry = finetune_entry(source)
    return entry.get("task"), dict(entry.get("options") or {})


def resolve_max_seq_length(given: int | None, entry: Mapping, task_default: int | None,
                           max_positions: int | None) -> int:
    """The one rule for an input's token limit: ``given`` (a flag; checked against the
    positions where it is read), else the model's saved ``max_seq_length`` (``entry``: its
    :func:`finetune_entry`), else the task family's default (``task_default``: its
    ``default_max_seq_length``, 128, SQuAD 384), else (no task) the model's limit; a saved
    or default value never exceeds ``max_positions``."""
    if given:
        return int(given)
    if entry.get("max_seq_length"):
        length = int(entry["max_seq_length"])
    elif task_default is not None:
        length = int(task_default)
    elif max_positions:
        return int(max_positions)
    else:
        length = DEFAULT_MAX_SEQ_LENGTH
    return min(length, int(max_positions)) if max_positions else length
