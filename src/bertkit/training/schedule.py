"""Learning-rate schedule: linear warm-up, then linear decay to 0 (BERT's schedule).

Contract: ``linear_warmup_decay(optimizer, warmup_steps, total_steps)`` returns a
``LambdaLR`` whose factor for update ``step`` (0-based) is ``step / warmup_steps`` during
warm-up and ``(total_steps - step) / (total_steps - warmup_steps)`` afterwards: the first
update of a run with warm-up is made at rate 0, the peak is reached by update
``warmup_steps`` and the rate reaches 0 after ``total_steps`` updates. Its ``state_dict``
round-trips (resumable).

The warm-up is both references' own: Google's ``optimization.py`` (``global_step /
num_warmup_steps * init_lr``, ``global_step`` 0 at the first update) and transformers'
``get_linear_schedule_with_warmup`` (``current_step / num_warmup_steps``). The whole rule
equals transformers' update for update (tested); Google's decay differs after warm-up
(``1 - global_step / num_train_steps``, so its rate never quite reaches the peak). Until
2026-11-26 the warm-up was ``(step + 1) / warmup_steps``, one update ahead of both.
"""

from __future__ import annotations

import math

import torch


class WarmupLinearDecay:
    """The factor as a picklable callable (``LambdaLR`` saves its ``__dict__``)."""

    def __init__(self, warmup_steps: int, total_steps: int):
        self.relay(warmup_steps, total_steps)

    def relay(self, warmup_steps: int, total_steps: int) -> None:
        """Lay the schedule over a new step count (``--budget``'s re-plan), from the next
        update on; the factors of updates already made are not revisited."""
        if total_steps < 1 or not 0 <= warmup_steps <= total_steps:
            raise ValueError(
                f"need 0 <= warmup_steps <= total_steps and total_steps >= 1, "
                f"got warmup_steps={warmup_steps} total_steps={total_steps}"
            )
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return step / self.warmup_steps
        remaining = self.total_steps - step
        return max(0.0, remaining / max(1, self.total_steps - self.warmup_steps))


def default_warmup(total_steps: int, fraction: float = 0.01) -> int:
    """Warm-up scaled to the run: ``fraction`` of the steps (paper: 10k of 1M = 1%)."""
    return min(total_steps, math.ceil(fraction * total_steps))


def linear_warmup_decay(
    optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, WarmupLinearDecay(warmup_steps, total_steps))
