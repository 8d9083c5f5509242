"""Readers for the official task data layouts; each returns plain dataclass examples.

Malformed input raises :class:`bertkit.errors.DataFormatError` naming the file and line
(or, for SQuAD JSON, the question id). Modules: :mod:`.glue` (GLUE TSVs and the task
registry), :mod:`.conll` (CoNLL tagging files), :mod:`.squad`, :mod:`.swag`,
:mod:`.generic` (user CSV/TSV/JSONL), :mod:`.base` (shared record iterators).
"""

from bertkit.tasks.formats.base import TextExample
from bertkit.tasks.formats.conll import TaggedSentence, iob1_to_iob2, read_conll
from bertkit.tasks.formats.generic import read_text_classification, read_token_classification
from bertkit.tasks.formats.glue import (
    GLUE_TASKS,
    GlueTask,
    find_glue_file,
    get_glue_task,
    read_glue,
)
from bertkit.tasks.formats.squad import SquadAnswer, SquadExample, read_squad
from bertkit.tasks.formats.swag import SwagExample, read_swag

__all__ = [
    "GLUE_TASKS",
    "GlueTask",
    "SquadAnswer",
    "SquadExample",
    "SwagExample",
    "TaggedSentence",
    "TextExample",
    "find_glue_file",
    "get_glue_task",
    "iob1_to_iob2",
    "read_conll",
    "read_glue",
    "read_squad",
    "read_swag",
    "read_text_classification",
    "read_token_classification",
]
