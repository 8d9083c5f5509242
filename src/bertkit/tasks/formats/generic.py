"""User data with named columns: CSV / TSV (header row) or JSON Lines.

* sentence (pair) classification or regression: :func:`read_text_classification`;
* token classification: :func:`read_token_classification` from JSON Lines records with a
  list of tokens and a list of tags, or from a CoNLL file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bertkit.errors import DataFormatError
from bertkit.tasks.formats.base import TextExample, iter_jsonl, iter_records, parse_label
from bertkit.tasks.formats.conll import TaggedSentence, check_tags, iob1_to_iob2, read_conll

__all__ = ["read_text_classification", "read_token_classification"]


def _field(path, line: int, record: dict, name: str, kind=str):
    """``record[name]`` checked to be a ``kind``."""
    if name not in record:
        raise DataFormatError(path, f"missing column {name!r} (have: {', '.join(record)})", line)
    value = record[name]
    if not isinstance(value, kind):
        raise DataFormatError(path, f"column {name!r} should be {kind.__name__}, "
                                    f"got {type(value).__name__}", line)
    return value


def read_text_classification(
    path: str | Path,
    text_column: str = "text",
    pair_column: str | None = None,
    label_column: str | None = "label",
    labels: Sequence[str] | None = None,
    regression: bool = False,
    id_column: str | None = None,
    file_format: str | None = None,
) -> list[TextExample]:
    """Examples of a CSV/TSV/JSONL file (format from the suffix unless ``file_format``).

    ``label_column=None`` reads an unlabelled file (labels ``None``). Classification labels
    are strings (JSON numbers become their text, e.g. ``"1"``) and must be in ``labels``
    when it is given; with ``regression`` they must parse as floats. Missing columns,
    unknown labels and malformed rows raise DataFormatError with file and line.
    """
    examples = []
    for line, record in iter_records(path, file_format):
        label = None
        if label_column is not None:
            value = _field(path, line, record, label_column, object)
            label = parse_label(path, line, value, labels, regression)
        examples.append(TextExample(
            guid=str(_field(path, line, record, id_column, object)) if id_column else str(line),
            text_a=_field(path, line, record, text_column),
            text_b=_field(path, line, record, pair_column) if pair_column else None,
            label=label,
            line=line,
        ))
    return examples


def _jsonl_sentences(path, tokens_field: str, tags_field: str | None):
    """(line, tokens, tags) from JSON Lines; tags is None when ``tags_field`` is None."""
    for line, record in iter_jsonl(path):
        tokens = _field(path, line, record, tokens_field, list)
        tags = _field(path, line, record, tags_field, list) if tags_field else None
        if not all(isinstance(t, str) for t in tokens + (tags or [])):
            raise DataFormatError(path, "tokens and tags must be lists of strings", line)
        if tags is not None and len(tags) != len(tokens):
            raise DataFormatError(path, f"{len(tokens)} tokens but {len(tags)} tags", line)
        yield line, tokens, tags


def read_token_classification(
    path: str | Path,
    tokens_field: str = "tokens",
    tags_field: str | None = "tags",
    labels: Sequence[str] | None = None,
    bio: bool = False,
    to_iob2: bool = False,
    file_format: str | None = None,
) -> list[TaggedSentence]:
    """Tagged sentences from JSON Lines (``.jsonl``/``.json``) or a CoNLL file (other suffixes).

    JSONL: each record holds ``tokens_field`` and ``tags_field`` lists of equal length
    (``tags_field=None``: unlabelled, tags come back empty). CoNLL: see
    :func:`~bertkit.tasks.formats.conll.read_conll`. ``labels``: allowed tags; ``bio``:
    require O/B-/I-/E-/S- tags; ``to_iob2``: convert IOB1 to IOB2.
    """
    fmt = file_format or ("jsonl" if Path(path).suffix.lower() in (".jsonl", ".json") else "conll")
    if fmt == "conll":
        return read_conll(path, labels=labels, bio=bio or to_iob2, to_iob2=to_iob2)
    if fmt != "jsonl":
        raise DataFormatError(path, f"unknown token-classification format {fmt!r}; use jsonl or conll")
    sentences = []
    for line, tokens, tags in _jsonl_sentences(path, tokens_field, tags_field):
        if tags is not None:
            check_tags(path, line, tags, labels, bio or to_iob2)
            tags = iob1_to_iob2(tags) if to_iob2 else tags
        sentences.append(TaggedSentence(tokens, tags or [], line))
    return sentences
