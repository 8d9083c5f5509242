"""Masked-LM masking, shared by static masking (at creation) and dynamic masking (at load).

The rule is BERT's: among the non-special tokens of a sequence, choose
``min(max_predictions, max(1, round(n_candidates * masked_lm_prob)))`` positions in random
order; of the chosen positions 80% become ``[MASK]``, 10% a random token and 10% stay
unchanged (decided independently per position). Special tokens (``[PAD] [UNK] [CLS] [SEP]
[MASK]``) are never chosen. With whole-word masking a word (a piece and the ``##`` pieces
that follow it) is chosen or left as a whole; words that would overshoot the budget are
skipped, as in the original. Random replacements are drawn uniformly from the vocabulary
without the bracketed tokens (``[PAD]``, ``[unused0]``, ...), so a replacement is never a
special token either.

Everything is a pure function of the input ids and the ``numpy.random.Generator`` given.
:func:`mask_batch` masks many rows at once (static masking of a chunk); dynamic masking
calls :func:`mask_sequence`, the same code on one row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bertkit.pretraining.data_config import MaskingConfig  # the settings, declared as options
from bertkit.tokenizer.vocab import SPECIAL_TOKENS


@dataclass(frozen=True)
class VocabInfo:
    """What masking needs to know about a vocabulary, derived once from its token list.

    ``continuation[i]``: token ``i`` is a ``##`` piece; ``special[i]``: never masked;
    ``random_pool``: ids a random replacement is drawn from.
    """

    continuation: np.ndarray  # bool (V,)
    special: np.ndarray  # bool (V,)
    random_pool: np.ndarray  # int32 (R,)
    mask_id: int

    @classmethod
    def from_tokens(cls, tokens: Sequence[str]) -> VocabInfo:
        """Build from the vocabulary's tokens in id order (``tokens[i]`` has id ``i``)."""
        if "[MASK]" not in tokens:
            raise ValueError("the vocabulary has no [MASK] token")
        continuation = np.array([t.startswith("##") for t in tokens], dtype=bool)
        special = np.array([t in SPECIAL_TOKENS for t in tokens], dtype=bool)
        bracketed = np.array([t.startswith("[") and t.endswith("]") for t in tokens], dtype=bool)
        random_pool = np.flatnonzero(~bracketed).astype(np.int32)
        if random_pool.size == 0:
            raise ValueError("the vocabulary has no ordinary token to draw random replacements from")
        return cls(continuation, special, random_pool, list(tokens).index("[MASK]"))


def _budgets(special: np.ndarray, config: MaskingConfig) -> np.ndarray:
    """Predictions per row: ``min(max_predictions, max(1, round(candidates * prob)))``."""
    candidates = (~special).sum(axis=1)
    budget = np.minimum(
        config.max_predictions_per_seq, np.maximum(1, np.rint(candidates * config.masked_lm_prob))
    ).astype(np.int64)
    return np.where(candidates > 0, budget, 0)


def _whole_word_choice(
    ids: np.ndarray, special: np.ndarray, info: VocabInfo, budget: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """(n, T) bool: whole words drawn in random order, skipping words that overshoot."""
    n, T = ids.shape
    candidate = ~special
    # A word starts at a candidate that is not a ## piece or that does not follow a candidate.
    follows = np.zeros_like(candidate)
    follows[:, 1:] = candidate[:, :-1]
    starts = candidate & ~(info.continuation[ids] & follows)
    word = np.cumsum(starts, axis=1) - 1  # the word of each candidate token
    words = starts.sum(axis=1)
    width = max(int(words.max(initial=0)), 1)
    sizes = np.zeros((n, width), dtype=np.int64)
    rows = np.broadcast_to(np.arange(n)[:, None], (n, T))
    np.add.at(sizes, (rows[candidate], word[candidate]), 1)
    keys = rng.random((n, width))
    keys[np.arange(width) >= words[:, None]] = np.inf
    order = np.argsort(keys, axis=1, kind="stable")  # words in random order, absent ones last
    ordered_sizes = np.take_along_axis(sizes, order, axis=1)
    taken = np.zeros((n, width), dtype=bool)
    total = np.zeros(n, dtype=np.int64)
    for k in range(width):
        if (total >= budget).all():
            break  # every row is full: no word can be taken any more
        take = (ordered_sizes[:, k] > 0) & (total + ordered_sizes[:, k] <= budget)
        taken[:, k] = take
        total += np.where(take, ordered_sizes[:, k], 0)
    chosen_word = np.zeros((n, width), dtype=bool)
    np.put_along_axis(chosen_word, order, taken, axis=1)
    return candidate & np.take_along_axis(chosen_word, np.maximum(word, 0), axis=1)


def choose_positions(
    ids: np.ndarray, info: VocabInfo, config: MaskingConfig, rng: np.random.Generator
) -> np.ndarray:
    """Positions to predict for each row of ``ids`` (n, T): (n, P) int64, sorted, -1 padded."""
    n, T = ids.shape
    P = min(config.max_predictions_per_seq, T)
    special = info.special[ids]
    budget = _budgets(special, config)
    if config.whole_word_mask:
        chosen = _whole_word_choice(ids, special, info, budget, rng)
        positions = np.sort(np.where(chosen, np.arange(T), T), axis=1)[:, :P]
    else:
        keys = rng.random((n, T))
        keys[special] = np.inf  # special tokens sort last and are never within the budget
        order = np.argsort(keys, axis=1, kind="stable")[:, :P]
        positions = np.sort(np.where(np.arange(P) < budget[:, None], order, T), axis=1)
    positions[positions == T] = -1
    return positions


def mask_batch(
    ids: np.ndarray, info: VocabInfo, config: MaskingConfig, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mask every row of ``ids`` (n, T) with specials and ``[PAD]`` padding.

    Returns ``(masked_ids, positions, labels)``: a masked copy of ``ids``, the predicted
    positions (n, P) sorted and -1 padded, and the original ids there (0 where padded).
    """
    ids = np.asarray(ids)
    positions = choose_positions(ids, info, config, rng)
    valid = positions >= 0
    rows = np.broadcast_to(np.arange(len(ids))[:, None], positions.shape)
    labels = np.where(valid, ids[rows, np.maximum(positions, 0)], 0).astype(ids.dtype)
    draw = rng.random(positions.shape)
    replacement = info.random_pool[rng.integers(0, info.random_pool.size, size=positions.shape)]
    masked = ids.copy()
    as_mask = valid & (draw < 0.8)
    randomized = valid & (draw >= 0.9)
    masked[rows[as_mask], positions[as_mask]] = info.mask_id
    masked[rows[randomized], positions[randomized]] = replacement[randomized]
    return masked, positions, labels


def mask_sequence(
    ids: np.ndarray, info: VocabInfo, config: MaskingConfig, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`mask_batch` for one 1-D sequence: ``(masked_ids, positions, labels)`` without
    padding in ``positions`` / ``labels``."""
    masked, positions, labels = mask_batch(np.asarray(ids)[None], info, config, rng)
    keep = positions[0] >= 0
    return masked[0], positions[0][keep], labels[0][keep]


def load_time_config(stored: MaskingConfig, rate: float, max_seq_length: int,
                     max_predictions: int | None = None) -> MaskingConfig:
    """The masking of ``--mask-rate`` (drawn at load time) over data made with ``stored``.

    The prediction cap is ``max_predictions`` when given, else the data's cap raised to
    ``ceil(rate * max_seq_length)`` so a higher rate is not silently clipped (BERT's 20 per
    128 tokens is 15%). Whole-word masking stays as the data was made.
    """
    import math

    cap = max_predictions or max(stored.max_predictions_per_seq, math.ceil(rate * max_seq_length))
    return MaskingConfig(float(rate), int(cap), stored.whole_word_mask)


def dynamic_rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    """The generator for dynamic masking of item ``index`` in ``epoch``: a pure function."""
    return np.random.default_rng([int(seed), int(epoch), int(index)])
