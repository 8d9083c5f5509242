"""The WordPiece trainer's contract written the plain way (every round recounts every pair of
every word, in Python), to check the incremental trainer of ``bertkit.tokenizer.train``."""

from __future__ import annotations

import heapq
import math
from collections import Counter

from bertkit.tokenizer.vocab import SPECIAL_TOKENS


def recount_train(word_counts: dict[str, int], vocab_size: int, min_frequency: int = 2,
                  merge_fraction: float = 0.02) -> list[str]:
    """The vocabulary (special tokens first) that full recounts give, with every character of
    the corpus in the alphabet and its unseen form (``c`` or ``##c``) appended last."""
    char_counts: Counter = Counter()
    for word, count in word_counts.items():
        for char in word:
            char_counts[char] += count
    pieces: list[str] = []
    index: dict[str, int] = {}

    def intern(piece: str) -> int:
        if piece not in index:
            index[piece] = len(pieces)
            pieces.append(piece)
        return index[piece]

    words, freqs = [], []
    for word, count in sorted(word_counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(word) <= 100:
            words.append([intern(c if i == 0 else "##" + c) for i, c in enumerate(word)])
            freqs.append(count)
    size = vocab_size - len(SPECIAL_TOKENS)
    forms = [f for c, _ in char_counts.most_common() for f in (c, "##" + c) if f not in index]
    forms = forms[: size // 10]
    target = size - len(forms)
    while len(pieces) < target:
        piece_counts = [0] * len(pieces)
        pair_counts: Counter = Counter()
        for word, freq in zip(words, freqs):
            for token in word:
                piece_counts[token] += freq
            for pair in zip(word, word[1:]):
                pair_counts[pair] += freq
        total = sum(piece_counts)
        scored = [(n * math.log(n * total / (piece_counts[a] * piece_counts[b])), n, pieces[a], a, b)
                  for (a, b), n in pair_counts.items() if n >= min_frequency]
        budget = max(1, min(target - len(pieces), int(len(pieces) * merge_fraction)))
        chosen, used = {}, set()
        for *_, a, b in heapq.nlargest(budget * 4, scored):
            merged = pieces[a] + pieces[b][2:]
            if a in used or b in used or merged in index:
                continue
            chosen[(a, b)] = intern(merged)
            used.update((a, b))
            if len(chosen) == budget:
                break
        if not chosen:
            break
        for w, word in enumerate(words):
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) in chosen:
                    out.append(chosen[(word[i], word[i + 1])])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            words[w] = out
    return list(SPECIAL_TOKENS) + pieces[:target] + forms
