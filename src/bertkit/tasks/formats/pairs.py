"""Readers of the sentence-embedding task's pair files (:mod:`bertkit.tasks.embedding`).

Two layouts, told apart by the columns of the file's header (CSV, TSV or JSON Lines):

* **scored pairs**: two texts and a similarity score, ``text_a, text_b, score`` (GLUE STS-B's
  ``sentence1, sentence2, score`` is read as it is, its other columns ignored);
* **positive pairs**: ``anchor, positive`` and optionally ``negative`` (a hard negative).

Every example is a :class:`PairExample`; a missing column, a score that is not a finite
number or an empty text is a :class:`~bertkit.errors.DataFormatError` naming file and line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from bertkit.errors import DataFormatError
from bertkit.tasks.formats.base import iter_records

__all__ = ["SCORED_COLUMNS", "POSITIVE_COLUMNS", "PairExample", "pair_columns", "read_pairs"]

# column -> the names it may have, first found wins
SCORED_COLUMNS = {"text_a": ("text_a", "sentence1"), "text_b": ("text_b", "sentence2"),
                  "score": ("score", "label")}
POSITIVE_COLUMNS = {"anchor": ("anchor",), "positive": ("positive",), "negative": ("negative",)}


@dataclass
class PairExample:
    """One training or evaluation example of the embedding task.

    ``texts``: the texts embedded by the shared encoder, in order (scored pairs: ``[a, b]``;
    positive pairs: ``[anchor, positive]`` or ``[anchor, positive, negative]``); ``score`` the
    gold similarity of a scored pair (``None`` for positive pairs); ``line`` the file line."""

    guid: str
    texts: list[str]
    score: float | None = None
    line: int | None = None


def _first_record(path: str | Path, file_format: str | None) -> dict:
    for _, record in iter_records(path, file_format):
        return record
    raise DataFormatError(path, "no examples (the file is empty or holds only a header)")


def pair_columns(path: str | Path, file_format: str | None = None,
                 given: dict[str, str | None] | None = None) -> tuple[str, dict[str, str]]:
    """``(layout, columns)`` of a pair file: ``"positive"`` when its header has ``anchor`` and
    ``positive`` columns (``negative`` when present), else ``"scored"`` with the columns of
    :data:`SCORED_COLUMNS` (``score`` only when present: an input to predict may have none).
    ``given`` names columns explicitly (role -> column)."""
    names = set(_first_record(path, file_format))
    given = {k: v for k, v in (given or {}).items() if v}
    layout = "positive" if {"anchor", "positive"} <= names or "anchor" in given else "scored"
    table = POSITIVE_COLUMNS if layout == "positive" else SCORED_COLUMNS
    columns = {}
    for role, candidates in table.items():
        found = given.get(role) or next((c for c in candidates if c in names), None)
        if found is None and role not in ("negative", "score"):
            raise DataFormatError(path, f"no {role} column ({' or '.join(candidates)}); the header "
                                        f"has {', '.join(sorted(names))}", 1)
        if found is not None:
            columns[role] = found
    return layout, columns


def read_pairs(path: str | Path, layout: str, columns: dict[str, str],
               file_format: str | None = None) -> list[PairExample]:
    """Every example of a pair file in ``layout`` (``scored``/``positive``) with ``columns``
    (role -> column name, as :func:`pair_columns` gives), in file order."""
    roles = ["text_a", "text_b"] if layout == "scored" else [r for r in ("anchor", "positive", "negative")
                                                             if r in columns]
    examples = []
    for line, record in iter_records(path, file_format):
        texts = [_text(path, line, record, columns[role]) for role in roles]
        score = _score(path, line, record, columns["score"]) if "score" in columns else None
        examples.append(PairExample(str(line), texts, score, line))
    if not examples:
        raise DataFormatError(path, "no examples (the file is empty or holds only a header)")
    return examples


def _text(path, line: int, record: dict, column: str) -> str:
    value = record.get(column)
    if value is None:
        raise DataFormatError(path, f"missing column {column!r}", line)
    if not isinstance(value, str) or not value.strip():
        raise DataFormatError(path, f"column {column!r} must be a non-empty text", line)
    return value


def _score(path, line: int, record: dict, column: str) -> float:
    value = record.get(column)
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise DataFormatError(path, f"score {value!r} in column {column!r} is not a number", line) from None
    if not math.isfinite(score):
        raise DataFormatError(path, f"score {value!r} in column {column!r} is not finite", line)
    return score
