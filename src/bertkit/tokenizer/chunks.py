"""Ids and character offsets at the speed of the ids-only path: a cache per white-space chunk.

BERT's normalisation works one character at a time, and every white-space character that
is not a control character becomes a space, so a word never crosses white space. The text
can therefore be cut at white space into *chunks* (``str.split()``'s pieces) that are
tokenized independently, and each distinct chunk is tokenized once: its ids and the spans
of its tokens in the chunk's own characters are cached. On a cache hit no normalisation,
no regex per word and no WordPiece look-up runs.

The spans are cached as *deltas* (``gap before token 0, length of token 0, gap before
token 1, ...``, each gap measured from the end of the previous token), so the offsets of a
whole text are one running sum (``itertools.accumulate``) over the chained deltas of its
chunks, paired up by ``zip``: C-level iteration, no Python step per token. The common case
(chunks separated by single white-space characters, each chunk's last token ending at the
chunk's end) chains cached tuples only; any other text (runs of white space, leading or
trailing space, a chunk whose end is dropped or that has no token) adds the gaps with one
Python step per chunk. The deltas may be negative: a character that normalises to several
tokens (``İ`` -> ``i`` + a combining dot with accents kept) gives tokens with one span.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import accumulate, chain
from operator import itemgetter

# White space that is also a control character (category Cc): BERT drops these instead of
# treating them as a space, but ``str.split()`` splits at them.
_CONTROL_SPACE = "\x0b\x0c\x1c\x1d\x1e\x1f\x85"
_CONTROL_SPACE_RE = re.compile(f"[{_CONTROL_SPACE}]")
# Runs of the white space that BERT turns into spaces (``str.isspace()`` minus the above).
SPACE_RUN_RE = re.compile(f"([^\\S{_CONTROL_SPACE}]+)")

_IDS, _DELTAS, _DELTAS_AFTER_SPACE, _IRREGULAR = (itemgetter(i) for i in range(4))
MAX_CACHED_CHUNKS = 500_000


class ChunkCache(dict):
    """``cache[chunk]`` -> ``(ids, deltas, deltas_after_space, irregular, trail)`` of one chunk.

    ``tokenize(chunk)`` gives the chunk's ids and the ``(start, end)`` span of each token in
    the chunk. ``deltas`` encodes those spans (see the module docstring),
    ``deltas_after_space`` is the same with one more character of gap before the first
    token (the chunk follows a single white-space character), ``trail`` counts the chunk's
    characters after its last token (all of them when it has none), and ``irregular`` is
    true when ``trail`` is not 0 or the chunk has no token. The cache is emptied when it
    reaches ``max_size`` chunks, so it follows the text it sees without growing unbounded.
    """

    def __init__(self, tokenize: Callable[[str], tuple[list[int], list[tuple[int, int]]]],
                 max_size: int = MAX_CACHED_CHUNKS):
        super().__init__()
        self.tokenize = tokenize
        self.max_size = max_size

    def __missing__(self, chunk: str) -> tuple:
        ids, spans = self.tokenize(chunk)
        deltas: list[int] = []
        end = 0
        for start, stop in spans:
            deltas += (start - end, stop - start)
            end = stop
        trail = len(chunk) - end
        after_space = (deltas[0] + 1, *deltas[1:]) if deltas else ()
        entry = (tuple(ids), tuple(deltas), after_space, bool(trail) or not ids, trail)
        if len(self) >= self.max_size:
            self.clear()
        self[chunk] = entry
        return entry

    def ids_and_offsets(self, text: str, base: int = 0) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids of ``text`` and each token's ``(start, end)`` in ``text``, shifted by ``base``.

        Equal to tokenizing ``text`` whole with ``tokenize``, given that BERT's
        normalisation never joins characters across white space.
        """
        chunks = text.split()
        if not chunks:  # only white space (dropped control characters included): no token
            return [], []
        if not _CONTROL_SPACE_RE.search(text):  # else ``str.split()`` cuts where BERT joins
            entries = list(map(self.__getitem__, chunks))
            if (len(text) == sum(map(len, chunks)) + len(chunks) - 1
                    and not any(map(_IRREGULAR, entries))):
                # Single white-space characters between chunks that each end with a token.
                ids = list(chain.from_iterable(map(_IDS, entries)))
                deltas = chain(entries[0][1], chain.from_iterable(map(_DELTAS_AFTER_SPACE, entries[1:])))
                return ids, self._offsets(deltas, base)
        ids, deltas = self._irregular(text)
        return ids, self._offsets(deltas, base)

    @staticmethod
    def _offsets(deltas, base: int) -> list[tuple[int, int]]:
        """``(start, end)`` pairs from the running sum of ``deltas``, starting at ``base``."""
        positions = accumulate(deltas, initial=base)
        next(positions)  # the initial value: ``base`` itself
        return list(zip(positions, positions))

    def _irregular(self, text: str) -> tuple[list[int], list[int]]:
        """Ids and deltas of ``text`` for any spacing: one Python step per chunk."""
        parts = SPACE_RUN_RE.split(text)  # chunk, space run, chunk, ..., chunk ("" at the ends)
        entries = list(map(self.__getitem__, parts[0::2]))
        deltas: list[int] = []
        pending = 0  # characters since the end of the last token
        for (chunk_ids, chunk_deltas, _, _, trail), space in zip(entries, chain(map(len, parts[1::2]), (0,))):
            if chunk_ids:
                deltas.append(pending + chunk_deltas[0])
                deltas += chunk_deltas[1:]
                pending = trail + space
            else:
                pending += trail + space
        return list(chain.from_iterable(map(_IDS, entries))), deltas
