"""The result of encoding a text or a text pair, and how sequences are truncated."""

from __future__ import annotations

from dataclasses import dataclass, field

TRUNCATION_STRATEGIES = ("longest_first", "only_first", "only_second")


@dataclass
class Encoding:
    """Model inputs for one sequence (``[CLS] A [SEP]``) or pair (``[CLS] A [SEP] B [SEP]``).

    ``offsets`` are character spans into the original text (into the pair's own text for
    tokens of the second segment), ``(0, 0)`` for special tokens and padding.
    ``sequence_ids`` is 0 or 1 for tokens of the first or second text, ``None`` otherwise.
    ``num_truncated`` counts the tokens that truncation removed.
    """

    input_ids: list[int]
    token_type_ids: list[int]
    attention_mask: list[int]
    special_tokens_mask: list[int]
    sequence_ids: list[int | None]
    offsets: list[tuple[int, int]] | None = None
    word_ids: list[int | None] | None = None
    num_truncated: int = 0
    tokens: list[str] | None = field(default=None, repr=False)

    def __getitem__(self, key: str):
        return getattr(self, key)

    def __len__(self) -> int:
        return len(self.input_ids)

    def keys(self) -> list[str]:
        return ["input_ids", "token_type_ids", "attention_mask", "special_tokens_mask"]

    def pad(self, length: int, pad_id: int) -> None:
        """Pad on the right to ``length`` tokens (no-op when already that long)."""
        n = length - len(self.input_ids)
        if n <= 0:
            return
        self.input_ids += [pad_id] * n
        self.token_type_ids += [0] * n
        self.attention_mask += [0] * n
        self.special_tokens_mask += [1] * n
        self.sequence_ids += [None] * n
        if self.offsets is not None:
            self.offsets += [(0, 0)] * n
        if self.word_ids is not None:
            self.word_ids += [None] * n


def truncated_lengths(n1: int, n2: int | None, budget: int, strategy: str) -> tuple[int, int | None]:
    """Lengths the first and second sequence keep so that together they fit ``budget``.

    ``longest_first`` takes tokens from the longer sequence first; when both exceed half
    the budget the first keeps ``budget // 2`` and the second the rest (the first is the
    shorter one when they differ). ``only_first``/``only_second`` shorten that sequence
    alone and raise ``ValueError`` when that cannot make the pair fit.
    """
    if strategy not in TRUNCATION_STRATEGIES:
        raise ValueError(f"unknown truncation strategy {strategy!r}; use one of {TRUNCATION_STRATEGIES}")
    total = n1 + (n2 or 0)
    if total <= budget:
        return n1, n2
    if n2 is None:
        if strategy == "only_second":
            raise ValueError("truncation='only_second' needs a pair of sequences")
        return budget, None
    if strategy == "only_first":
        if n2 > budget:
            raise ValueError(f"cannot truncate the first sequence alone: the second has {n2} tokens "
                             f"and the budget is {budget}")
        return budget - n2, n2
    if strategy == "only_second":
        if n1 > budget:
            raise ValueError(f"cannot truncate the second sequence alone: the first has {n1} tokens "
                             f"and the budget is {budget}")
        return n1, budget - n1
    short, long_ = (n2, n1) if n1 > n2 else (n1, n2)
    long_ = max(short, budget - short) if short <= budget else short
    if short + long_ > budget:
        short, long_ = budget // 2, budget // 2 + budget % 2
    return (long_, short) if n1 > n2 else (short, long_)
