"""Train a WordPiece vocabulary from a corpus with the WordPiece likelihood criterion.

Start from the characters of the corpus words (a first character as ``c``, any other as
``##c``) and repeatedly add the merged pair ``ab`` that most increases the likelihood of
the corpus under a unigram model of the pieces (Schuster & Nakajima's WordPiece
criterion, used for BERT's vocabulary). Merging ``a b`` into ``ab`` changes the
log-likelihood by about

    gain(a, b) = count(ab) * log(count(ab) * N / (count(a) * count(b)))

with ``N`` the number of pieces in the corpus: the pointwise mutual information of the
pair, weighted by how often it occurs. (The unweighted ratio
``count(ab) / (count(a) * count(b))`` that is sometimes quoted favours pairs of rare
pieces and gives about twice as many tokens per word on the same budget.)
Each round merges a small batch of the best pairs at once (at most ``merge_fraction`` of
the current vocabulary, never two pairs that share a piece). Pairs seen fewer than
``min_frequency`` times are never merged.

Speed: the pair and piece counts are kept up to date incrementally (only the words that
hold a merged pair are re-counted, each pair knows the words it occurs in) and every
round scores all pairs at once with numpy; the few best are then re-scored with Python's
``math.log`` and ranked by ``(gain, count, text)``, so the vocabulary is the one a full
recount each round gives (``tests/tokenizer/test_train.py`` compares the two).

The alphabet: every character of the corpus (``max_alphabet=None``, the default: a
language's characters are all kept, Korean's ~1,700 syllables or Chinese's thousands of
ideographs alike, and a character seen once costs at most two tokens), or the
``max_alphabet`` most frequent ones. Words holding another character are left out of
training and become ``[UNK]``; :func:`choose_alphabet` says how many. Each character of
the alphabet is in the vocabulary both as a word start ``c`` and as a continuation ``##c``
(the form the corpus never showed is appended after the merges, taking their last slots,
at most a tenth of the vocabulary), so a new word made of known characters is never
``[UNK]``. Before this, a character seen only word-initially made every word holding it
elsewhere ``[UNK]``; the merges and their ids are otherwise those of the earlier trainer.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np
from tqdm.auto import tqdm

from bertkit.runlog import bar_disabled
from bertkit.tokenizer.basic import BasicTokenizer
from bertkit.tokenizer.vocab import SPECIAL_TOKENS, Vocab

MAX_WORD_CHARS = 100  # longer words become [UNK] in the tokenizer: not trained on


def count_words(lines: Iterable[str], lowercase: bool = True, strip_accents: bool | None = None,
                progress: bool | None = None) -> Counter:
    """Word frequencies of ``lines`` after BERT's basic tokenization (``strip_accents``
    None follows ``lowercase``)."""
    basic = BasicTokenizer(lowercase=lowercase, strip_accents=strip_accents)
    counts: Counter = Counter()
    for line in tqdm(lines, desc="counting words", unit=" lines", disable=bar_disabled(progress)):
        counts.update(basic.words(line))
    return counts


class Alphabet(NamedTuple):
    """The characters training starts from, and what leaving the others out costs."""

    chars: set[str]
    by_frequency: list[str]  # the same characters, most frequent first (ties: first seen)
    dropped: int  # distinct characters left out
    dropped_words: int  # corpus word occurrences holding one of them (they become [UNK])
    total_words: int

    def summary(self) -> str:
        """One line for the user: the alphabet's size and what was left out."""
        share = self.dropped_words / max(1, self.total_words)
        return (f"alphabet: {len(self.chars):,} characters; {self.dropped:,} rarer ones left "
                f"out, in {self.dropped_words:,} corpus words ({share:.3%}), which become [UNK]")


def choose_alphabet(word_counts: dict[str, int], max_alphabet: int | None = None) -> Alphabet:
    """The ``max_alphabet`` most frequent characters of the corpus (ties: first seen first),
    or, when ``max_alphabet`` is None, every character of the corpus."""
    char_counts: Counter = Counter()
    for word, count in word_counts.items():
        for char in word:
            char_counts[char] += count
    ranked = [c for c, _ in char_counts.most_common(max_alphabet)]
    chars = set(ranked)
    dropped_words = sum(n for w, n in word_counts.items() if any(c not in chars for c in w))
    return Alphabet(chars, ranked, len(char_counts) - len(chars), dropped_words,
                    sum(word_counts.values()))


def train_wordpiece(word_counts: dict[str, int], vocab_size: int, min_frequency: int = 2,
                    max_alphabet: int | None = None, merge_fraction: float = 0.02,
                    progress: bool | None = None) -> Vocab:
    """Learn a vocabulary of at most ``vocab_size`` tokens (special tokens first)."""
    if not word_counts:
        raise ValueError("cannot train a vocabulary on an empty corpus")
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens")
    alphabet = choose_alphabet(word_counts, max_alphabet)
    state = _PairState()
    for word, count in sorted(word_counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(word) > MAX_WORD_CHARS or any(c not in alphabet.chars for c in word):
            continue  # such words become [UNK] anyway
        state.add_word([state.intern(c if i == 0 else "##" + c) for i, c in enumerate(word)], count)
    state.flush()
    # each character also in the position the corpus never showed it in (``x`` only as a
    # word start: ``##x`` added), so that a new word with it is not [UNK]: appended last,
    # in slots taken from the end of the merges (at most a tenth of the vocabulary)
    size = vocab_size - len(SPECIAL_TOKENS)
    forms = [f for c in alphabet.by_frequency for f in (c, "##" + c) if f not in state.piece_id]
    forms = forms[: size // 10]
    target = size - len(forms)
    bar = tqdm(total=target, initial=min(len(state.pieces), target), desc="learning wordpieces",
               unit=" tokens", disable=bar_disabled(progress))
    while len(state.pieces) < target:
        budget = max(1, min(target - len(state.pieces), int(len(state.pieces) * merge_fraction)))
        best = state.best_pairs(budget * 4, min_frequency)
        if not best:
            break
        chosen = _choose(state, best, budget)
        if not chosen:
            break
        state.merge(chosen)
        bar.update(len(chosen))
    bar.close()
    return Vocab(list(SPECIAL_TOKENS) + state.pieces[:target] + forms)


def _choose(state: _PairState, best: list[tuple[int, int]], budget: int) -> dict[tuple[int, int], int]:
    """Up to ``budget`` of the ranked pairs ``best``, no two sharing a piece, none whose
    merged text is already a piece; each mapped to its new piece's id."""
    chosen: dict[tuple[int, int], int] = {}
    used: set[int] = set()
    for a, b in best:
        if a in used or b in used:
            continue
        merged = state.pieces[a] + state.pieces[b][2:]
        if merged in state.piece_id:
            continue
        chosen[(a, b)] = state.intern(merged)
        used.update((a, b))
        if len(chosen) == budget:
            break
    return chosen


class _PairState:
    """The words as piece ids and the counts of pieces and adjacent pairs, kept up to date
    as pairs are merged. Counts live in numpy arrays (indexed by piece id and pair id);
    changes are gathered in dicts and added at :meth:`flush`."""

    def __init__(self):
        self.pieces: list[str] = []
        self.piece_id: dict[str, int] = {}
        self.words: list[list[int]] = []
        self.freqs: list[int] = []
        self.pair_id: dict[tuple[int, int], int] = {}
        self.pair_a: list[int] = []
        self.pair_b: list[int] = []
        self.where: list[set[int]] = []  # per pair: the words it may occur in
        self.piece_counts = np.zeros(0, dtype=np.int64)
        self.pair_counts = np.zeros(0, dtype=np.int64)
        self._piece_delta: Counter = Counter()
        self._pair_delta: Counter = Counter()

    def intern(self, piece: str) -> int:
        if piece not in self.piece_id:
            self.piece_id[piece] = len(self.pieces)
            self.pieces.append(piece)
        return self.piece_id[piece]

    def _pair(self, a: int, b: int) -> int:
        key = (a, b)
        index = self.pair_id.get(key)
        if index is None:
            index = self.pair_id[key] = len(self.pair_a)
            self.pair_a.append(a)
            self.pair_b.append(b)
            self.where.append(set())
        return index

    def _count(self, word: list[int], freq: int, index: int) -> None:
        """Add ``freq`` (negative: remove) for the pieces and pairs of ``word``."""
        pieces, pairs = self._piece_delta, self._pair_delta
        for piece in word:
            pieces[piece] += freq
        for a, b in zip(word, word[1:]):
            pair = self._pair(a, b)
            pairs[pair] += freq
            if freq > 0:
                self.where[pair].add(index)

    def add_word(self, word: list[int], freq: int) -> None:
        self.words.append(word)
        self.freqs.append(freq)
        self._count(word, freq, len(self.words) - 1)

    def flush(self) -> None:
        """Add the gathered changes to the count arrays (growing them as needed)."""
        self.piece_counts = _grown(self.piece_counts, len(self.pieces))
        self.pair_counts = _grown(self.pair_counts, len(self.pair_a))
        for counts, delta in ((self.piece_counts, self._piece_delta), (self.pair_counts, self._pair_delta)):
            if delta:
                keys = np.fromiter(delta.keys(), dtype=np.int64, count=len(delta))
                counts[keys] += np.fromiter(delta.values(), dtype=np.int64, count=len(delta))
            delta.clear()

    def best_pairs(self, k: int, min_frequency: int) -> list[tuple[int, int]]:
        """The ``k`` pairs of highest gain (ties: higher count, then the first piece's text,
        then the ids), among those seen at least ``min_frequency`` times."""
        n = len(self.pair_a)
        counts = self.pair_counts[:n]
        live = np.flatnonzero(counts >= max(1, min_frequency))
        if not len(live):
            return []
        a = self._cached("_a", self.pair_a)[live]
        b = self._cached("_b", self.pair_b)[live]
        c = counts[live].astype(np.float64)
        total = float(self.piece_counts.sum())
        scores = c * np.log(c * total / (self.piece_counts[a] * self.piece_counts[b]))
        if len(live) > k:
            cut = np.partition(scores, len(scores) - k)[len(scores) - k]
            # numpy's log may differ from math.log in the last bit: keep a margin, then rank
            # the survivors exactly as a plain Python recount would
            margin = abs(cut) * 1e-9 + 1e-9
            keep = np.flatnonzero(scores >= cut - margin)
            live, a, b = live[keep], a[keep], b[keep]
        total_int = int(self.piece_counts.sum())
        pc = self.piece_counts
        ranked = heapq.nlargest(k, (
            (count * math.log(count * total_int / (int(pc[x]) * int(pc[y]))), count, self.pieces[x], x, y)
            for count, x, y in zip(counts[live].tolist(), a.tolist(), b.tolist())))
        return [(x, y) for _, _, _, x, y in ranked]

    def _cached(self, name: str, values: list[int]) -> np.ndarray:
        """``values`` as an array, extended (not rebuilt) as pairs are added."""
        array = getattr(self, name, None)
        if array is None or len(array) != len(values):
            start = 0 if array is None else len(array)
            tail = np.asarray(values[start:], dtype=np.int64)
            array = tail if array is None else np.concatenate([array, tail])
            setattr(self, name, array)
        return array

    def merge(self, merges: dict[tuple[int, int], int]) -> None:
        """Apply ``merges`` (pairs sharing no piece) to every word holding one, left to right,
        and update the counts."""
        touched: set[int] = set()
        for pair in merges:
            index = self.pair_id.get(pair)
            if index is not None:
                touched |= self.where[index]
        for index in sorted(touched):
            word = self.words[index]
            merged = _apply_merges(word, merges)
            if len(merged) == len(word):
                continue  # a stale entry: the pair is no longer in this word
            freq = self.freqs[index]
            self._count(word, -freq, index)
            self._count(merged, freq, index)
            self.words[index] = merged
        self.flush()


def _grown(array: np.ndarray, size: int) -> np.ndarray:
    """``array`` with room for ``size`` entries (new ones zero), doubling its capacity."""
    if size <= len(array):
        return array
    out = np.zeros(max(size, 2 * len(array)), dtype=array.dtype)
    out[: len(array)] = array
    return out


def _apply_merges(word: list[int], merges: dict[tuple[int, int], int]) -> list[int]:
    out: list[int] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) in merges:
            out.append(merges[(word[i], word[i + 1])])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


def tokens_per_word(vocab: Vocab, word_counts: dict[str, int], lowercase: bool = True) -> float:
    """Mean WordPiece tokens per corpus word (frequency-weighted) under ``vocab``."""
    from bertkit.tokenizer.wordpiece import WordPiece

    wordpiece = WordPiece(vocab)
    total = sum(word_counts.values())
    return sum(len(wordpiece[w][0]) * c for w, c in word_counts.items()) / total
