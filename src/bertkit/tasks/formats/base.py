"""Shared pieces of the task-data readers: the sentence(-pair) example and line-numbered
record iterators over TSV (no quoting), CSV (RFC 4180 quoting) and JSON Lines files.

Every iterator yields ``(line_number, record)`` with 1-based line numbers and raises
:class:`~bertkit.errors.DataFormatError` naming the file and line on malformed input.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bertkit.errors import DataFormatError
from bertkit.fileio import read_lines

__all__ = [
    "TextExample",
    "detect_format",
    "iter_csv_rows",
    "iter_jsonl",
    "iter_records",
    "iter_tsv_rows",
    "parse_label",
    "read_json",
]

_BOM = "\ufeff"


@dataclass
class TextExample:
    """One sentence or sentence pair with its label.

    ``label`` is the label string for classification (one of the task's labels), a float
    for regression, and ``None`` when the file has no labels (e.g. a GLUE test set).
    ``line`` is the file line the example starts on.
    """

    guid: str
    text_a: str
    text_b: str | None = None
    label: str | float | None = None
    line: int | None = None


def _strip_bom(lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """Drop a UTF-8 byte-order mark at the start of line 1."""
    for number, text in lines:
        yield number, (text[1:] if number == 1 and text.startswith(_BOM) else text)


def iter_tsv_rows(path: str | Path) -> Iterator[tuple[int, list[str]]]:
    """Tab-separated fields of every non-empty line; quote characters are plain text."""
    for number, text in _strip_bom(read_lines(path)):
        if text.strip():
            yield number, text.split("\t")


def iter_csv_rows(path: str | Path, delimiter: str = ",") -> Iterator[tuple[int, list[str]]]:
    """CSV rows (quoted fields may span lines), each with the line it starts on."""
    lines = (text + "\n" for _, text in _strip_bom(read_lines(path)))
    reader = csv.reader(lines, delimiter=delimiter, strict=True)
    start = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise DataFormatError(path, f"malformed CSV: {e}", reader.line_num) from None
        if any(field.strip() for field in row):
            yield start, row
        start = reader.line_num + 1


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """One JSON object per non-empty line."""
    for number, text in _strip_bom(read_lines(path)):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataFormatError(path, f"invalid JSON: {e.msg} (column {e.colno})", number) from None
        except (ValueError, RecursionError) as e:
            raise DataFormatError(path, f"unreadable JSON: {_json_limit(e)}", number) from None
        if not isinstance(record, dict):
            raise DataFormatError(path, "expected a JSON object on this line", number)
        if "\\u" in text:  # only an escape can hold a lone surrogate: no tokenizer reads one
            _check_unicode(record, path, number)
        yield number, record


def _check_unicode(value, path, line: int) -> None:
    """A :class:`DataFormatError` naming the line for a string holding a lone UTF-16
    surrogate (``"\\ud800"``), which is not Unicode text and cannot be written as UTF-8."""
    if isinstance(value, dict):
        for item in value.values():
            _check_unicode(item, path, line)
    elif isinstance(value, list):
        for item in value:
            _check_unicode(item, path, line)
    elif isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise DataFormatError(path, f"a string holds a lone surrogate (\\u{ord(value[e.start]):04x}): "
                                        "it is not Unicode text", line) from None


def read_json(path: str | Path):
    """Parse a whole JSON file; syntax errors and undecodable bytes name their line."""
    text = "\n".join(line for _, line in _strip_bom(read_lines(path)))
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DataFormatError(path, f"invalid JSON: {e.msg} (column {e.colno})", e.lineno) from None
    except (ValueError, RecursionError) as e:
        raise DataFormatError(path, f"unreadable JSON: {_json_limit(e)}") from None


def _json_limit(error: Exception) -> str:
    """What a JSON parser limit (not a syntax error) says, shortly."""
    if isinstance(error, RecursionError):
        return "arrays or objects nested too deeply"
    return str(error).split(";")[0]  # e.g. an integer of more than 4300 digits


def _table_records(path, rows: Iterator[tuple[int, list[str]]]) -> Iterator[tuple[int, dict]]:
    """Header row + data rows -> dicts; a row with the wrong number of fields is an error."""
    header = None
    for number, fields in rows:
        if header is None:
            header = [name.strip() for name in fields]
            continue
        if len(fields) != len(header):
            raise DataFormatError(
                path, f"expected {len(header)} fields (as the header), found {len(fields)}", number
            )
        yield number, dict(zip(header, fields))


_SUFFIX_FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl"}


def detect_format(path: str | Path, file_format: str | None = None) -> str:
    """``file_format`` if given, else from the suffix: csv, tsv, jsonl (.jsonl/.json/.ndjson)."""
    fmt = file_format or _SUFFIX_FORMATS.get(Path(path).suffix.lower())
    if fmt not in ("csv", "tsv", "jsonl"):
        raise DataFormatError(path, f"cannot tell the format ({file_format or 'unknown suffix'}); "
                                    "expected csv, tsv or jsonl")
    return fmt


def iter_records(path: str | Path, file_format: str | None = None) -> Iterator[tuple[int, dict]]:
    """Named-field records of a CSV/TSV file with a header row, or of a JSON Lines file."""
    fmt = detect_format(path, file_format)
    if fmt == "jsonl":
        return iter_jsonl(path)
    rows = iter_csv_rows(path) if fmt == "csv" else iter_tsv_rows(path)
    return _table_records(path, rows)


# The largest regression target: its squared error must stay finite in float32 (3.4e38), with
# room to sum a batch; real targets (STS-B's 0-5, ratings, prices) are far below.
REGRESSION_LIMIT = 1e15


def parse_label(path, line: int, value, labels: Sequence[str] | None, regression: bool):
    """Validate one label: a float for regression, else a string among ``labels`` (if given)."""
    if regression:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise DataFormatError(path, f"label {value!r} is not a number", line) from None
        if not abs(number) <= REGRESSION_LIMIT:  # nan, inf, 1e999, 1e30: a NaN or infinite loss
            raise DataFormatError(path, f"label {value!r} is not a finite number within "
                                        f"±{REGRESSION_LIMIT:g} (its squared error would not be)", line)
        return number
    label = value if isinstance(value, str) else json.dumps(value)
    label = label.strip()
    if value is None or not label:
        raise DataFormatError(path, "empty label: every example needs one (a blank label would "
                                    "silently become a class of its own)", line)
    if labels is not None and label not in labels:
        raise DataFormatError(
            path, f"unknown label {label!r}; expected one of {', '.join(map(repr, labels))}", line
        )
    return label
