"""Readers of the sentence-embedding task's pair files (:mod:`bertkit.tasks.embedding`).

Two layouts, told apart by the columns of the file's header (CSV, TSV or JSON Lines):

* **scored pairs**: two texts and a similarity score, ``text_a, text_b, score`` (GLUE STS-B's
  ``sentence1, sentence2, score`` is read as it is, its other columns ignored);
* **positive pairs**: ``anchor, positive`` and optionally ``negative`` (a hard negative);
  the Microsoft Research Paraphrase Corpus (``Quality, #1 ID, #2 ID, #1 String, #2 String``:
  GLUE MRPC's TSVs or the raw ``msr_paraphrase_*.txt``) is read as positive pairs, its
  paraphrases (``Quality`` 1) only.

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
MSRP_COLUMNS = {"anchor": "#1 String", "positive": "#2 String", "quality": "Quality"}


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


def pair_columns(path: str | Path, file_format: str | None = None, given: dict[str, str | None] | None = None,
                 layout: str | None = None) -> tuple[str, dict[str, str]]:
    """``(layout, columns)`` of a pair file (columns: role -> column name). ``layout``
    ``"positive"`` or ``"scored"``, or None: by the header, ``"positive"`` when it has
    ``anchor`` and ``positive`` columns (or is MRPC's), else ``"scored"``. Columns: ``given``
    (``text``, ``pair``, ``score``: the first text's, the second text's and the score's
    column), else the names of :data:`SCORED_COLUMNS` / :data:`POSITIVE_COLUMNS` the header
    has; ``score`` and ``negative`` only when present (an input to predict may have no score)."""
    names = set(_first_record(path, file_format))
    given = {k: v for k, v in (given or {}).items() if v}
    if set(MSRP_COLUMNS.values()) <= names and not given and layout != "scored":
        return "positive", dict(MSRP_COLUMNS)
    if layout is None:
        layout = "positive" if {"anchor", "positive"} <= names else "scored"
    table = POSITIVE_COLUMNS if layout == "positive" else SCORED_COLUMNS
    roles = dict(zip(table, ("text", "pair", "score" if layout == "scored" else "")))
    columns = {}
    for role, candidates in table.items():
        found = given.get(roles.get(role, "")) or next((c for c in candidates if c in names), None)
        if found is not None and found not in names:
            raise DataFormatError(path, f"no column {found!r}; the header has {', '.join(sorted(names))}", 1)
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
        if "quality" in columns and record.get(columns["quality"], "").strip() != "1":
            continue  # MRPC: not a paraphrase
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
