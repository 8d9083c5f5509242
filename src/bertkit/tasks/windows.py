"""Sliding windows over token sequences longer than the model's limit: one home for the
window arithmetic of SQuAD's document stride and of ``--long-text window``.

Contract:

* :func:`sliding_windows` cuts ``num_tokens`` tokens into ``(start, length)`` windows of at
  most ``window`` tokens whose starts are ``stride`` tokens apart (BERT's ``doc_stride``
  meaning: consecutive windows overlap by ``window - stride`` tokens); the last window ends
  at the last token, so every token is in at least one window. ``stride`` must be at least 1
  and smaller than ``window`` (:func:`check_stride`), else tokens could fall between windows
  or no token would be seen twice;
* :func:`max_context_window` is the window that gives a token the most context: the largest
  ``min(tokens left of it, tokens right of it)`` inside the window, ties to the longer
  window (BERT's ``_check_is_max_context``). A token's prediction is read from that window;
* :func:`pool_rows` pools per-window rows (logits, vectors) into one per example, ``mean`` or
  ``max``; an example with one window gets that window's row unchanged;
* :class:`LongText` is the user's choice (``truncate`` or ``window``, ``stride``, ``pool``)
  as carried by task options (``long_text``, ``stride``, ``pool_windows``) and by
  ``bertkit embed``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bertkit.errors import BertkitError

__all__ = [
    "LONG_TEXT_MODES",
    "LONG_TEXT_OPTIONS",
    "POOL_MODES",
    "LongText",
    "check_stride",
    "max_context_flags",
    "max_context_window",
    "pool_rows",
    "sliding_windows",
    "text_windows",
]

LONG_TEXT_MODES = ("truncate", "window")
POOL_MODES = ("mean", "max")
LONG_TEXT_OPTIONS = ("long_text", "stride", "pool_windows")  # task option names


def check_stride(window: int, stride: int, option: str = "--stride") -> None:
    """BertkitError naming ``option`` unless ``1 <= stride < window``."""
    if window < 1:
        raise BertkitError(f"{option}: the window holds no token (window of {window})")
    if not 1 <= stride < window:
        raise BertkitError(f"{option}={stride} must be at least 1 and smaller than the window of "
                           f"{window} tokens (windows start {option} tokens apart; a stride not "
                           "smaller than the window would leave no overlap or skip tokens)")


def sliding_windows(num_tokens: int, window: int, stride: int) -> list[tuple[int, int]]:
    """``(start, length)`` of the windows over ``num_tokens`` tokens (one window, possibly
    empty, when they all fit). Callers check the stride with :func:`check_stride`."""
    spans, start = [], 0
    while True:
        length = min(num_tokens - start, window)
        spans.append((start, length))
        if start + length >= num_tokens:
            return spans
        start += min(length, stride)


def max_context_window(spans: Sequence[tuple[int, int]], token: int) -> int:
    """Index of the window giving ``token`` the most context (ties: the longer, then the
    earlier window); -1 when no window holds it."""
    best, best_score = -1, None
    for i, (start, length) in enumerate(spans):
        end = start + length - 1
        if not start <= token <= end:
            continue
        score = min(token - start, end - token) + 0.01 * length
        if best_score is None or score > best_score:
            best, best_score = i, score
    return best


def max_context_flags(spans: Sequence[tuple[int, int]], w: int) -> list[bool]:
    """For each token of window ``w``, whether ``w`` is its max-context window."""
    start, length = spans[w]
    return [max_context_window(spans, t) == w for t in range(start, start + length)]


def pool_rows(owners: Sequence[int], rows: Sequence[np.ndarray], num_examples: int,
              mode: str = "mean") -> list[np.ndarray]:
    """One row per example from the rows of its windows (``owners[k]`` = example of row k).

    ``mean`` averages, ``max`` takes the element-wise maximum; one window gives its row
    exactly. An example without rows is a ValueError (every example has a window)."""
    if mode not in POOL_MODES:
        raise ValueError(f"pool must be one of {POOL_MODES}, got {mode!r}")
    groups: list[list[np.ndarray]] = [[] for _ in range(num_examples)]
    for owner, row in zip(owners, rows):
        groups[owner].append(np.asarray(row))
    pooled = []
    for e, group in enumerate(groups):
        if not group:
            raise ValueError(f"example {e} has no window")
        if len(group) == 1:
            pooled.append(group[0])
        elif mode == "mean":
            pooled.append(np.mean(np.stack(group), axis=0).astype(group[0].dtype))
        else:
            pooled.append(np.max(np.stack(group), axis=0))
    return pooled


@dataclass(frozen=True)
class LongText:
    """What to do with an input longer than the window: ``truncate`` (keep its start) or
    ``window`` (sliding windows ``stride`` tokens apart, default half the window; outputs
    pooled with ``pool``, ``mean`` or ``max``)."""

    mode: str = "truncate"
    stride: int | None = None
    pool: str = "mean"

    def __post_init__(self) -> None:
        if self.mode not in LONG_TEXT_MODES:
            raise BertkitError(f"--long-text must be one of {', '.join(LONG_TEXT_MODES)}, "
                               f"got {self.mode!r}")
        if self.pool not in POOL_MODES:
            raise BertkitError(f"--pool-windows must be one of {', '.join(POOL_MODES)}, "
                               f"got {self.pool!r}")
        if self.stride is not None and (not isinstance(self.stride, int) or self.stride < 1):
            raise BertkitError(f"--stride must be a positive whole number, got {self.stride!r}")

    @property
    def windowed(self) -> bool:
        return self.mode == "window"

    @classmethod
    def from_options(cls, options: Mapping) -> LongText:
        """From task options ``long_text``, ``stride``, ``pool_windows`` (absent: truncate)."""
        stride = options.get("stride")
        if isinstance(stride, str) and stride.strip().isdigit():
            stride = int(stride)
        return cls(options.get("long_text") or "truncate", stride,
                   options.get("pool_windows") or "mean")

    def options(self) -> dict:
        """The task options that rebuild this choice (empty for plain truncation)."""
        if not self.windowed:
            return {}
        out: dict = {"long_text": "window", "pool_windows": self.pool}
        if self.stride is not None:
            out["stride"] = self.stride
        return out

    def spans(self, num_tokens: int, window: int) -> list[tuple[int, int]]:
        """The windows of a ``num_tokens`` sequence (one truncated window when not windowed);
        the stride is checked against ``window``."""
        if not self.windowed:
            return [(0, min(num_tokens, window))]
        stride = self.stride if self.stride is not None else max(1, window // 2)
        check_stride(window, stride)
        return sliding_windows(num_tokens, window, stride)


def text_windows(tokenizer, first: Sequence[int], second: Sequence[int] | None, max_seq_length: int,
                 long_text: LongText) -> tuple[list[tuple[list[int], list[int]]], int]:
    """``([(input_ids, token_type_ids), ...], cut)``: the windows of one text (WordPiece ids
    ``first``) or pair (``second``), each ``[CLS] piece... [SEP]`` (+ ``second [SEP]`` as
    segment B) within ``max_seq_length`` tokens; ``cut`` = pieces of ``second`` dropped.

    The first text is cut by ``long_text.spans(len(first), window)``; a second text, cut to
    half the room when both do not fit, is repeated in every window. A text that fits gives
    one window equal to the tokenizer's unwindowed encoding. The one builder of
    classification and embedding windows (tasks, ``bertkit embed``, the server)."""
    room = max_seq_length - (3 if second is not None else 2)
    cut = 0
    if second is not None and len(first) + len(second) > room:
        cut = len(second) - room // 2
        second = second[: room // 2]
    window = room - (len(second) if second is not None else 0)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    out = []
    for start, length in long_text.spans(len(first), window):
        ids = [cls, *first[start: start + length], sep]
        types = [0] * len(ids)
        if second is not None:
            ids += [*second, sep]
            types += [1] * (len(second) + 1)
        out.append((ids, types))
    return out, max(cut, 0)
