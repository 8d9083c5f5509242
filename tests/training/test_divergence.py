"""Training that keeps skipping steps (NaN/inf gradients) stops with a clear error."""

from __future__ import annotations

import pytest

from bertkit.errors import BertkitError
from bertkit.training.divergence import SkipWatch


def test_a_fully_skipped_interval_after_enough_skips_stops():
    watch = SkipWatch(step=2, skipped=1)
    watch.check(4, 3)  # every step skipped, but only 3 in all: fp32 noise is possible
    with pytest.raises(BertkitError, match=r"diverged at step 6.*--lr 1e\+06"):
        watch.check(6, 5, lr=1e6)


def test_occasional_skips_and_fp16_calibration_go_on():
    watch = SkipWatch()
    for step in range(10, 200, 10):
        watch.check(step, step // 10)  # one skip per interval, never a whole interval
    fp16 = SkipWatch(loss_scaling=True)
    for step in range(2, 20, 2):
        fp16.check(step, step)  # the scale halves on each of the first steps
