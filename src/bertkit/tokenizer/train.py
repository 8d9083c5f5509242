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
To stay fast, each round merges a small batch of the best pairs at once (at most
``merge_fraction`` of the current vocabulary, never two pairs that share a piece), then
recounts. Pairs seen fewer than ``min_frequency`` times are never merged.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Iterable

from tqdm.auto import tqdm

from bertkit.runlog import bar_disabled
from bertkit.tokenizer.basic import BasicTokenizer
from bertkit.tokenizer.vocab import SPECIAL_TOKENS, Vocab


def count_words(lines: Iterable[str], lowercase: bool = True, progress: bool | None = None) -> Counter:
    """Word frequencies of ``lines`` after BERT's basic tokenization."""
    basic = BasicTokenizer(lowercase=lowercase)
    counts: Counter = Counter()
    for line in tqdm(lines, desc="counting words", unit=" lines", disable=bar_disabled(progress)):
        counts.update(basic.words(line))
    return counts


def train_wordpiece(word_counts: dict[str, int], vocab_size: int, min_frequency: int = 2,
                    max_alphabet: int = 1000, merge_fraction: float = 0.02,
                    progress: bool | None = None) -> Vocab:
    """Learn a vocabulary of at most ``vocab_size`` tokens (special tokens first)."""
    if not word_counts:
        raise ValueError("cannot train a vocabulary on an empty corpus")
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens")
    # The alphabet: the most frequent characters, each as a word start and as a continuation.
    char_counts: Counter = Counter()
    for word, count in word_counts.items():
        for char in word:
            char_counts[char] += count
    alphabet = {c for c, _ in char_counts.most_common(max_alphabet)}
    pieces: list[str] = []
    piece_id: dict[str, int] = {}

    def intern(piece: str) -> int:
        if piece not in piece_id:
            piece_id[piece] = len(pieces)
            pieces.append(piece)
        return piece_id[piece]

    words: list[list[int]] = []
    freqs: list[int] = []
    for word, count in sorted(word_counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(word) > 100 or any(c not in alphabet for c in word):
            continue  # such words become [UNK] anyway
        words.append([intern(c if i == 0 else "##" + c) for i, c in enumerate(word)])
        freqs.append(count)
    target = vocab_size - len(SPECIAL_TOKENS)
    bar = tqdm(total=target, initial=min(len(pieces), target), desc="learning wordpieces",
               unit=" tokens", disable=bar_disabled(progress))
    while len(pieces) < target:
        piece_counts = [0] * len(pieces)
        pair_counts: Counter = Counter()
        for word, freq in zip(words, freqs):
            for token in word:
                piece_counts[token] += freq
            for pair in zip(word, word[1:]):
                pair_counts[pair] += freq
        total = sum(piece_counts)
        candidates = [(count * math.log(count * total / (piece_counts[a] * piece_counts[b])),
                       count, pieces[a], a, b)
                      for (a, b), count in pair_counts.items() if count >= min_frequency]
        if not candidates:
            break
        budget = max(1, min(target - len(pieces), int(len(pieces) * merge_fraction)))
        chosen: dict[tuple[int, int], int] = {}
        used: set[int] = set()
        # Highest score first; ties by frequency then text, so training is deterministic.
        for _, _, _, a, b in heapq.nlargest(budget * 4, candidates):
            if a in used or b in used:
                continue
            merged = pieces[a] + pieces[b][2:]
            if merged in piece_id:
                continue
            chosen[(a, b)] = intern(merged)
            used.update((a, b))
            if len(chosen) == budget:
                break
        if not chosen:
            break
        for index, word in enumerate(words):
            if len(word) > 1:
                words[index] = _apply_merges(word, chosen)
        bar.update(len(chosen))
    bar.close()
    return Vocab(list(SPECIAL_TOKENS) + pieces[:target])


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
