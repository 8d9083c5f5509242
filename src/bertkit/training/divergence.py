"""Stop a run whose steps keep being skipped (loss or gradients not finite): it has diverged.

The training step skips an update whose gradient norm is NaN or infinite and counts it. A few
skips are normal with fp16 loss scaling (the scale is being calibrated); a whole logging
interval of skipped steps after several skips in all means the weights or the learning rate
are broken (``--lr 1e6``), and going on would only export a model trained on nothing. So does
a run of skipped steps in a row as long as that threshold, wherever it falls between two checks
(the fine-tuning and distillation loop checks at each log point and before each evaluation,
so a diverged epoch is never evaluated or saved).
"""

from __future__ import annotations

from bertkit.errors import BertkitError

MIN_SKIPPED = 5  # skips in all before a fully skipped interval counts as divergence
MIN_SKIPPED_FP16 = 20  # fp16 loss scaling skips steps while it halves its scale


class DivergenceError(BertkitError):
    """Training diverged: every recent step was skipped for non-finite gradients."""


class SkipWatch:
    """Call :meth:`check` at each log point with the step and the cumulative skipped count
    (and, where the loop has it, the skips in a row since the last finite step)."""

    def __init__(self, step: int = 0, skipped: int = 0, loss_scaling: bool = False):
        self.step, self.skipped = step, skipped
        self.threshold = MIN_SKIPPED_FP16 if loss_scaling else MIN_SKIPPED

    def check(self, step: int, skipped: int, lr: float | None = None, in_a_row: int | None = None,
              outcome: str = "no model was exported") -> None:
        """Raise :class:`DivergenceError` when every step since the last call was skipped and
        at least ``threshold`` steps were skipped in all, or when the last ``in_a_row`` steps
        (``threshold`` or more) were all skipped; ``outcome`` says what the run left behind."""
        steps, new = step - self.step, skipped - self.skipped
        self.step, self.skipped = step, skipped
        interval = steps > 0 and new >= steps and skipped >= self.threshold
        trailing = in_a_row is not None and in_a_row >= self.threshold
        if not (interval or trailing):
            return
        last = f"all of the last {steps} step(s)" if interval else f"the last {in_a_row} steps in a row"
        rate = f" (--lr {lr:g})" if lr is not None else ""
        raise DivergenceError(
            f"training diverged at step {step}: the loss or gradients are NaN or infinite, "
            f"so {last} were skipped ({skipped} of {step} in all); {outcome}. Lower the "
            f"learning rate{rate} or check the data, the loss settings and the initial "
            "weights, then start a new run")
