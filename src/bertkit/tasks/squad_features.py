"""SQuAD examples -> model windows (the ``convert_examples_to_features`` of BERT's run_squad).

Contract:

* the question is segment A, cut to ``max_query_length`` WordPieces; the passage is
  segment B, cut into windows of at most ``max_seq_length - len(question) - 3`` pieces
  that start ``doc_stride`` pieces apart (the last one ends at the passage end), so
  ``[CLS] question [SEP] window [SEP]`` never exceeds ``max_seq_length``;
* :func:`check_window_settings` refuses settings where the stride does not fit in the
  smallest possible window (``doc_stride >= max_seq_length - max_query_length - 3``),
  since passage pieces would then fall between windows;
* each window keeps, per position, the character span of its passage piece in the
  *original* context (``None`` for question, special and padding positions) and whether
  the window is the piece's "max context" window (most context on its shorter side), which
  the post-processing uses to pick one window per start position;
* training labels: a window that contains the whole first gold answer gets its first
  and last piece positions; any other window, and every window of an unanswerable
  question, gets ``0`` / ``0`` (the ``[CLS]`` position).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bertkit.tasks.base import FeatureSet
from bertkit.tasks.formats.squad import SquadExample
from bertkit.tasks.windows import max_context_flags, sliding_windows

__all__ = [
    "SquadWindow",
    "answer_token_span",
    "check_window_settings",
    "doc_windows",
    "featurize_squad",
]


@dataclass
class SquadWindow:
    """Side information of one window of example ``example``: per position, the character
    span of its passage piece in the original context (``None`` elsewhere) and whether
    this window is that piece's max-context window."""

    example: int
    window: int
    offsets: list[tuple[int, int] | None]
    max_context: list[bool]


def check_window_settings(max_seq_length: int, doc_stride: int, max_query_length: int) -> None:
    """ValueError unless every window can hold a passage piece and the stride fits in it."""
    room = max_seq_length - max_query_length - 3
    if room < 1:
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room for the passage after a "
                         f"question of max_query_length={max_query_length} and 3 special tokens")
    if doc_stride < 1 or doc_stride >= room:
        raise ValueError(f"doc_stride={doc_stride} does not fit: it must be at least 1 and below "
                         f"max_seq_length - max_query_length - 3 = {room}, or passage pieces "
                         "would fall between windows")


def doc_windows(num_pieces: int, window: int, stride: int) -> list[tuple[int, int]]:
    """``(start, length)`` of the sliding windows over ``num_pieces`` passage pieces
    (:func:`bertkit.tasks.windows.sliding_windows`, the shared window arithmetic)."""
    return sliding_windows(num_pieces, window, stride)


def answer_token_span(offsets: Sequence[tuple[int, int]], start_char: int,
                      end_char: int) -> tuple[int, int] | None:
    """First and last piece index overlapping the character span ``[start_char, end_char)``."""
    first = next((i for i, (_, e) in enumerate(offsets) if e > start_char), None)
    last = next((i for i in range(len(offsets) - 1, -1, -1) if offsets[i][0] < end_char), None)
    if first is None or last is None or last < first:
        return None
    return first, last


def featurize_squad(
    tokenizer,
    examples: Sequence[SquadExample],
    max_seq_length: int = 384,
    doc_stride: int = 128,
    max_query_length: int = 64,
    with_positions: bool = False,
) -> FeatureSet:
    """A :class:`FeatureSet` of the windows of every example, in example order, ``meta`` a
    :class:`SquadWindow` each (see the module docstring).

    Features hold ``input_ids``, ``token_type_ids``, ``attention_mask`` and, with
    ``with_positions``, ``start_positions`` / ``end_positions`` of the first gold answer.
    """
    check_window_settings(max_seq_length, doc_stride, max_query_length)
    features, meta = [], []
    for e, example in enumerate(examples):
        query = tokenizer.text_to_ids(example.question)[:max_query_length]
        pieces, offsets = tokenizer.text_to_ids_and_offsets(example.context)
        answer = None
        if with_positions and example.answers and not example.is_impossible:
            gold = example.answers[0]
            answer = answer_token_span(offsets, gold.answer_start,
                                       gold.answer_start + len(gold.text))
        spans = doc_windows(len(pieces), max_seq_length - len(query) - 3, doc_stride)
        prefix = [tokenizer.cls_token_id, *query, tokenizer.sep_token_id]
        for w, (start, length) in enumerate(spans):
            doc = range(start, start + length)
            ids = prefix + pieces[start:start + length] + [tokenizer.sep_token_id]
            feature = {"input_ids": np.array(ids, dtype=np.int64),
                       "token_type_ids": np.array([0] * len(prefix) + [1] * (length + 1),
                                                  dtype=np.int64),
                       "attention_mask": np.ones(len(ids), dtype=np.int64)}
            if with_positions:
                inside = answer is not None and start <= answer[0] and answer[1] < start + length
                shift = len(prefix) - start
                feature["start_positions"] = np.int64(answer[0] + shift if inside else 0)
                feature["end_positions"] = np.int64(answer[1] + shift if inside else 0)
            features.append(feature)
            meta.append(SquadWindow(
                example=e, window=w,
                offsets=[None] * len(prefix) + [offsets[i] for i in doc] + [None],
                max_context=[False] * len(prefix) + max_context_flags(spans, w) + [False],
            ))
    pad = {"input_ids": tokenizer.pad_token_id, "token_type_ids": 0, "attention_mask": 0}
    return FeatureSet(features, meta, pad, num_examples=len(examples))
