"""Fine-tuning task families.

:mod:`bertkit.tasks.formats` reads the official data layouts (GLUE, CoNLL-2003, SQuAD,
SWAG, generic CSV/TSV/JSONL) into plain dataclasses; the task runners live beside it
(``glue``, ``ner``, ``squad``, ``swag``, ``generic``) and are imported on demand.

Registry: :data:`TASKS` maps every task name to the module implementing it; that module
defines ``create_task(name, **options) -> Task`` (see :mod:`bertkit.tasks.base`), and
:func:`get_task` imports it lazily, so listing the names costs no torch import. Adding a
task is one line here plus its module; ``bertkit finetune/evaluate/predict`` pick it up.
"""

from __future__ import annotations

import importlib
from typing import Any

_GLUE_NAMES = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "mnli-mm", "qnli", "rte", "wnli")

TASKS: dict[str, str] = {
    **{name: "bertkit.tasks.glue" for name in _GLUE_NAMES},
    "swag": "bertkit.tasks.swag",
    "text-classification": "bertkit.tasks.generic",
    "text-pair-classification": "bertkit.tasks.generic",
    "regression": "bertkit.tasks.generic",
    "text-pair-regression": "bertkit.tasks.generic",
    "token-classification": "bertkit.tasks.ner",
    "ner": "bertkit.tasks.ner",
    "conll2003": "bertkit.tasks.ner",
    "squad": "bertkit.tasks.squad",
    "squad2": "bertkit.tasks.squad",
    "embedding": "bertkit.tasks.embedding",
}

_ALIASES = {"sst-2": "sst2", "sts-b": "stsb", "mnli-m": "mnli", "mnli_mm": "mnli-mm",
            "squad-v2": "squad2", "squad_v2": "squad2"}


def canonical_name(name: str) -> str:
    """The registry spelling of ``name`` (case-insensitive; ``SST-2``, ``STS-B`` accepted)."""
    key = name.lower()
    key = _ALIASES.get(key, key)
    if key not in TASKS:
        from bertkit.errors import BertkitError

        raise BertkitError(f"unknown task {name!r}; known: {', '.join(TASKS)}")
    return key


def get_task(name: str, **options: Any):
    """A :class:`~bertkit.tasks.base.Task` for ``name`` built with ``options``."""
    key = canonical_name(name)
    module = importlib.import_module(TASKS[key])
    return module.create_task(key, **options)


# the family that decodes a head (a model class's ``pipeline``) when the model was never
# fine-tuned by bertkit; each module defines task_for_head(labels, regression, max_positions)
HEAD_FAMILIES: dict[str, str] = {
    "text-classification": "bertkit.tasks.generic",
    "token-classification": "bertkit.tasks.ner",
    "question-answering": "bertkit.tasks.squad",
    "multiple-choice": "bertkit.tasks.swag",
}


def task_for_head(pipeline: str, labels: list[str], regression: bool, max_positions: int,
                  **options: Any):
    """The family decoding a ``pipeline`` head of a model bertkit did not fine-tune (its
    labels, regression or not, its positions), or None for a model without a task head."""
    module = HEAD_FAMILIES.get(pipeline)
    if module is None:
        return None
    return importlib.import_module(module).task_for_head(labels, regression, max_positions, **options)


__all__ = ["HEAD_FAMILIES", "TASKS", "canonical_name", "get_task", "task_for_head"]
