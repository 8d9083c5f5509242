"""CoNLL-style token tagging files: one token per line, the tag in the last column.

Lines are ``word POS chunk tag`` (CoNLL-2003) or ``word POS tag`` or ``word tag``,
separated by whitespace; a blank line ends a sentence; ``-DOCSTART-`` lines are skipped.
Tags may be IOB1 or IOB2 (:func:`iob1_to_iob2` converts); IOBES tags are accepted too.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bertkit.errors import DataFormatError
from bertkit.fileio import read_lines
from bertkit.metrics.ner import split_tag
from bertkit.tasks.formats.base import _strip_bom

__all__ = ["TaggedSentence", "check_tags", "conll_blocks", "iob1_to_iob2", "read_conll"]


@dataclass
class TaggedSentence:
    """The words of one sentence and their tags (same length); ``line``: its first line."""

    words: list[str]
    tags: list[str]
    line: int | None = None


def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """IOB1 -> IOB2: an ``I-X`` that opens a chunk (after ``O`` or another type) becomes ``B-X``.

    IOB2 input comes back unchanged, so the conversion is safe on either scheme.
    """
    converted = []
    prev_prefix, prev_kind = "O", ""
    for tag in tags:
        prefix, kind = split_tag(tag)
        if prefix == "I" and (prev_prefix == "O" or prev_kind != kind):
            tag = f"B-{kind}"
        converted.append(tag)
        prev_prefix, prev_kind = prefix, kind
    return converted


def check_tags(path, line: int, tags: Sequence[str], labels: Sequence[str] | None,
               bio: bool) -> None:
    """Raise DataFormatError unless every tag is in ``labels`` (if given) and, with ``bio``,
    is ``O`` or ``B-/I-/E-/S-TYPE``."""
    for offset, tag in enumerate(tags):
        if labels is not None and tag not in labels:
            raise DataFormatError(path, f"unknown tag {tag!r}; expected one of "
                                        f"{', '.join(map(repr, labels))}", line + offset)
        if bio:
            try:
                split_tag(tag)
            except ValueError as e:
                raise DataFormatError(path, str(e), line + offset) from None


def conll_blocks(path: str | Path) -> Iterator[tuple[int, list[list[str]]]]:
    """Yield ``(first line, token rows)`` per sentence, each row the whitespace-split columns.

    ``-DOCSTART-`` lines count as sentence breaks; every row of the file must have the same
    number (at least 2) of columns, else DataFormatError names the line.
    """
    rows: list[list[str]] = []
    first = width = None
    for number, text in _strip_bom(read_lines(path)):  # a BOM, as every other reader takes it
        fields = text.split()
        if fields and fields[0] == "-DOCSTART-":
            fields = []
        if not fields:
            if rows:
                yield first, rows
            rows = []
            continue
        width = width or len(fields)
        if len(fields) < 2 or len(fields) != width:
            raise DataFormatError(path, f"expected {max(width, 2)} whitespace-separated columns "
                                        f"(word ... tag), found {len(fields)}", number)
        first = number if not rows else first
        rows.append(fields)
    if rows:
        yield first, rows


def read_conll(path: str | Path, labels: Sequence[str] | None = None, bio: bool = True,
               to_iob2: bool = False) -> list[TaggedSentence]:
    """Sentences of a CoNLL file: the first column is the word, the last the tag.

    ``labels``: the allowed tags (an unknown one is a DataFormatError naming the line);
    ``bio``: require ``O``/``B-``/``I-``/``E-``/``S-`` tags (turn off for e.g. POS tags);
    ``to_iob2``: convert IOB1 tags to IOB2 (needs ``bio``).
    """
    sentences = []
    for first, rows in conll_blocks(path):
        words, tags = [r[0] for r in rows], [r[-1] for r in rows]
        check_tags(path, first, tags, labels, bio)
        if to_iob2:
            tags = iob1_to_iob2(tags)
        sentences.append(TaggedSentence(words, tags, first))
    return sentences
