"""Reading the pre-training corpus: documents of sentences, streamed, and grouped into chunks.

Input layout (BERT's): one sentence per line, a blank line between documents; the end of a
file also ends a document. With ``split_sentences=True`` every non-blank line is taken as a
paragraph and cut into sentences by :func:`split_into_sentences` (blank lines still separate
documents).

Nothing here holds more than one chunk of documents in memory: :func:`iter_documents`
yields one document at a time and :func:`iter_chunks` groups them into chunks whose
boundaries depend only on the corpus and ``chunk_sentences`` (never on the worker count),
so that per-chunk seeds make the output independent of how many processes run.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bertkit.fileio import decode_line, read_lines

# Abbreviations after which a period does not end a sentence (compared lowercased, no dot).
ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e cf fig no vol ch p pp approx dept est inc ltd co"
    " jan feb mar apr jun jul aug sep sept oct nov dec gen col lt sgt capt mt".split()
)

# A candidate boundary: end punctuation, optional closing quotes/brackets, whitespace, then
# something that can start a sentence (an upper-case letter, a digit or an opening quote).
_BOUNDARY = re.compile(r"([.!?]+)([\"'\u2019\u201d)\]]*)\s+(?=[\"'\u2018\u201c(\[]?[A-Z0-9])")
_LAST_WORD = re.compile(r"(\S+)$")


def split_into_sentences(paragraph: str) -> list[str]:
    """Cut a paragraph into sentences with a simple rule-based splitter.

    A sentence ends at ``.``, ``!`` or ``?`` (runs such as ``?!`` or ``...`` count once),
    optionally followed by closing quotes or brackets, when whitespace and an upper-case
    letter, digit or opening quote follow. A period does not end a sentence after a known
    abbreviation (:data:`ABBREVIATIONS`, e.g. ``Mr.``, ``e.g.``) or a single-letter initial
    (``J. R. R. Tolkien``). Empty pieces are dropped; whitespace is stripped.
    """
    sentences: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(paragraph):
        if match.group(1) == ".":
            before = _LAST_WORD.search(paragraph, start, match.start())
            word = before.group(1).lower().rstrip(".") if before else ""
            word = word.lstrip("\"'(\u2018\u201c[")
            if word in ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
                continue
        sentences.append(paragraph[start : match.end(2)].strip())
        start = match.end()
    sentences.append(paragraph[start:].strip())
    return [s for s in sentences if s]


def iter_documents(
    paths: Iterable[str | Path], split_sentences: bool = False, shuffle_seed: int | None = None
) -> Iterator[list[str]]:
    """Yield documents (lists of non-empty sentence strings) from the files.

    In file order by default. With ``shuffle_seed``, in a random order over all the files,
    as BERT's ``create_pretraining_data.py`` shuffles all documents before packing: chunks
    (and so the documents a NotNext segment is drawn from) then mix the whole corpus instead
    of runs of neighbouring documents, which are often sections of one text on one topic.
    Shuffling reads the files twice (an index of document offsets, then each document by a
    seek), so memory stays at one document plus 20 bytes per document.

    Undecodable bytes raise :class:`~bertkit.errors.DataFormatError` naming the file and
    line (from ``read_lines``).
    """
    paths = [Path(p) for p in paths]
    if shuffle_seed is not None:
        yield from _shuffled_documents(paths, split_sentences, shuffle_seed)
        return
    for path in paths:
        document: list[str] = []
        for _, line in read_lines(path):
            if _add_line(document, line, split_sentences):
                continue
            if document:
                yield document
                document = []
        if document:
            yield document


def _add_line(document: list[str], line: str, split_sentences: bool) -> bool:
    """Add a line's sentences to ``document``; False for a blank line (a boundary)."""
    text = line.strip()
    if not text:
        return False
    document.extend(split_into_sentences(text) if split_sentences else [text])
    return True


def _document_index(paths: list[Path]) -> np.ndarray:
    """``(file index, byte offset, line number)`` of every document's first line."""
    starts: list[tuple[int, int, int]] = []
    for k, path in enumerate(paths):
        offset, inside = 0, False
        for number, line in read_lines(path, keep_ends=True):
            blank = not line.strip()
            if not blank and not inside:
                starts.append((k, offset, number))
            inside = not blank
            offset += len(line.encode("utf-8"))
    return np.array(starts, dtype=np.int64).reshape(-1, 3)


def _shuffled_documents(paths: list[Path], split_sentences: bool, seed: int) -> Iterator[list[str]]:
    index = _document_index(paths)
    order = np.random.default_rng([seed, 0xD0C]).permutation(len(index))
    with contextlib.ExitStack() as stack:
        files = [stack.enter_context(open(path, "rb")) for path in paths]
        for k, offset, first_line in index[order].tolist():
            f = files[k]
            f.seek(offset)
            document: list[str] = []
            for number in itertools.count(first_line):
                raw = f.readline()
                if not raw or not _add_line(document, decode_line(raw, paths[k], number), split_sentences):
                    break
            if document:
                yield document


@dataclass
class Chunk:
    """A run of consecutive documents processed together with its own seed (its ``index``)."""

    index: int
    documents: list[list[str]]

    @property
    def num_sentences(self) -> int:
        return sum(len(d) for d in self.documents)


def iter_chunks(documents: Iterable[list[str]], chunk_sentences: int = 20_000) -> Iterator[Chunk]:
    """Group documents into chunks of at least ``chunk_sentences`` sentences.

    A chunk closes at the first document boundary at or after ``chunk_sentences``
    sentences. The last chunk is merged into the previous one when it holds fewer than
    ``chunk_sentences // 2`` sentences or fewer than two documents, so every chunk but
    a lone one has at least two documents (NotNext needs another document). One chunk is
    held back for that look-ahead: memory stays at about two chunks.
    """
    if chunk_sentences < 1:
        raise ValueError("chunk_sentences must be at least 1")
    pending: list[list[str]] | None = None  # the last closed chunk, not yet yielded
    current: list[list[str]] = []
    count = 0
    index = 0
    for document in documents:
        current.append(document)
        count += len(document)
        if count >= chunk_sentences and len(current) >= 2:
            if pending is not None:
                yield Chunk(index, pending)
                index += 1
            pending, current, count = current, [], 0
    if current and pending is not None and (count < chunk_sentences // 2 or len(current) < 2):
        pending.extend(current)
        current = []
    if pending is not None:
        yield Chunk(index, pending)
        index += 1
    if current:
        yield Chunk(index, current)
