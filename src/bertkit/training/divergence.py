"""Stop a run whose steps keep being skipped (loss or gradients not finite): it has diverged.

The training step skips an update whose gradient norm is NaN or infinite and counts it. A few
skips are normal with fp16 loss scaling (the scale is being calibrated); a whole logging
interval of skipped steps after several skips in all means the weights or the learning rate
are broken (``--lr 1e6``), and going on would only export a model trained on nothing.
"""

from __future__ import annotations

from bertkit.errors import BertkitError

MIN_SKIPPED = 5  # skips in all before a fully skipped interval counts as divergence
MIN_SKIPPED_FP16 = 20  # fp16 loss scaling skips steps while it halves its scale


class DivergenceError(BertkitError):
    """Training diverged: every recent step was skipped for non-finite gradients."""


class SkipWatch:
    """Call :meth:`check` at each log point with the step and the cumulative skipped count."""

    def __init__(self, step: int = 0, skipped: int = 0, loss_scaling: bool = False):
        self.step, self.skipped = step, skipped
        self.threshold = MIN_SKIPPED_FP16 if loss_scaling else MIN_SKIPPED

    def check(self, step: int, skipped: int, lr: float | None = None) -> None:
        """Raise :class:`DivergenceError` when every step since the last call was skipped and
        at least ``threshold`` steps were skipped in all."""
        steps, new = step - self.step, skipped - self.skipped
        self.step, self.skipped = step, skipped
        if steps > 0 and new >= steps and skipped >= self.threshold:
            rate = f" (--lr {lr:g})" if lr is not None else ""
            raise DivergenceError(
                f"training diverged at step {step}: the loss or gradients are NaN or infinite, "
                f"so every one of the last {steps} step(s) was skipped ({skipped} of {step} in "
                f"all); no model was exported. Lower the learning rate{rate} or check the data "
                "and the initial weights, then start a new run")
