"""SWAG in its official CSV layout: a header naming at least ``sent1, sent2, ending0..3``
(usually ``,video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,...,ending3,label``);
``label`` is absent from the test file. Fields use real CSV quoting.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bertkit.errors import DataFormatError
from bertkit.tasks.formats.base import iter_records

__all__ = ["SwagExample", "read_swag"]

_ENDINGS = tuple(f"ending{i}" for i in range(4))


@dataclass
class SwagExample:
    """A context (``sent1``), the start of the next sentence (``sent2``), four candidate
    endings, and the index of the right one (``None`` in the test file)."""

    id: str
    context: str
    start: str
    endings: list[str]
    label: int | None = None
    line: int | None = None


def _label(path, line: int, value: str) -> int:
    if value.strip() not in ("0", "1", "2", "3"):
        raise DataFormatError(path, f"unknown label {value!r}; expected 0, 1, 2 or 3", line)
    return int(value)


def read_swag(path: str | Path) -> list[SwagExample]:
    """Every example of a SWAG CSV file; the id is ``fold-ind`` (else the line number)."""
    examples = []
    for line, row in iter_records(path, "csv"):
        missing = [c for c in ("sent1", "sent2", *_ENDINGS) if c not in row]
        if missing:
            raise DataFormatError(path, f"header lacks column(s) {', '.join(missing)}", 1)
        label = row.get("label")
        examples.append(SwagExample(
            id=row.get("fold-ind", str(line)),
            context=row["sent1"],
            start=row["sent2"],
            endings=[row[c] for c in _ENDINGS],
            label=None if label is None else _label(path, line, label),
            line=line,
        ))
    return examples
