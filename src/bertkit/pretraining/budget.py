"""A wall-clock budget for ``bertkit pretrain --budget 1h`` (also ``90m``, ``3600s``, ``1h30m``).

Design: *measure, then fix the step count*. Before training, the run times a few probe
steps (:data:`PROBE_STEPS`, the first one discarded as warm-up) on a throw-away copy of the
model and optimizer with the run's real batches, precision and accumulation; the RNG
states are put back afterwards, so the probe leaves no trace in the run. From the median
step time it fixes::

    steps = floor((budget * (1 - RESERVE_FRACTION) - spent) / step_seconds)

and lays the usual schedule (linear warm-up over ``warmup_fraction`` of ``steps``, then
linear decay to 0) over those steps. The step count, the measured step time and the time
spent so far are stored in every checkpoint (``extra["budget"]``). Why not a schedule
driven by the clock itself: the learning rate at a step would then depend on how fast the
machine happened to be, so a resumed run could never repeat an uninterrupted one. With a
fixed step count a resumed run keeps the planned steps (it does not measure again), the
schedule is a pure function of the step, and resume stays exact.

**One re-plan from the run's own pace.** A few probe steps at the start are a fragile
measure on a shared machine: two real runs on the 2-core development machine finished
their planned steps with a third of the budget unused (a 60-minute budget planned at
0.736 s a step, run at 0.484). So once, when :data:`REPLAN_FRACTION` of the planned steps
are done (:func:`replan_step`; runs planned at fewer than :data:`REPLAN_MIN_STEPS` steps
keep the probe's plan), the run measures its own seconds per step since its first step
(evaluations and checkpoints included; the slowest rank's), and fixes the steps again
from what is left of the budget. The schedule is laid over the new count from that step on
(during warm-up, so the rate bends, it does not jump back); the new plan goes into the
checkpoints and a resumed run keeps it. A run resumed before the re-plan step re-plans
there from its own pace.

Time accounting: the clock starts when the budget is set up (the probe counts); a resumed
run starts from the time spent recorded in the checkpoint it resumes (work lost after that
checkpoint is done again and counted again). The run also stops at the deadline if the
machine turns out slower than measured (load from other processes): after the step that
reaches ``budget - reserve`` it checkpoints, evaluates and exports like a finished run, with
the learning rate not fully decayed; a ``budget_stop`` record in ``log.jsonl`` says so. The
reserve (:data:`RESERVE_FRACTION` of the budget) is left for the final checkpoint,
evaluation and export.

Errors (:class:`~bertkit.errors.BertkitError`, before any training): a malformed budget
(``1x``, ``h``, ``90``), a zero or negative budget, one longer than a year
(:data:`MAX_BUDGET_S`: ``99999999h`` would plan trillions of steps whose learning rate never
leaves its warm-up), or a budget that does not leave room for the probe plus one step at the
measured speed (the message gives the least budget that would).
"""

from __future__ import annotations

import copy
import math
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from bertkit.errors import BertkitError

PROBE_STEPS = 5
RESERVE_FRACTION = 0.02
REPLAN_FRACTION = 0.05
REPLAN_MIN_STEPS = 40
MAX_BUDGET_S = 366 * 86400.0  # one year: longer plans are typing mistakes
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0}
_BUDGET = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")


def now() -> float:
    """The budget's clock (monotonic seconds); tests replace it with a fake one."""
    return time.monotonic()


def parse_budget(text: str) -> float:
    """Seconds of a budget written ``1h``, ``90m``, ``3600s``, ``1h30m`` or ``1.5h``."""
    spec = str(text).strip().lower().replace(" ", "")
    if spec.startswith("-"):
        raise BertkitError(f"--budget {text!r}: a budget cannot be negative; give a duration such "
                           f"as {spec[1:] or '1h'}")
    match = _BUDGET.fullmatch(spec)
    if not spec or match is None or not any(match.groups()):
        raise BertkitError(f"--budget {text!r}: expected a duration with units h, m and/or s, "
                           "e.g. 1h, 90m, 3600s or 1h30m")
    seconds = sum(float(v) * _UNITS[u] for v, u in zip(match.groups(), "hms") if v)
    if seconds <= 0:
        raise BertkitError(f"--budget {text!r}: the budget must be longer than 0 seconds")
    if seconds > MAX_BUDGET_S:
        raise BertkitError(f"--budget {text!r} is {seconds / 86400 / 365:,.1f} years; at most "
                           f"{MAX_BUDGET_S / 3600:g}h (one year) is accepted - a longer plan would "
                           "spread its warm-up and decay over so many steps that the learning "
                           "rate stays near 0; give a shorter budget (or --steps)")
    return seconds


def format_seconds(seconds: float) -> str:
    """``H:MM:SS`` (negative values shown as 0:00:00)."""
    s = max(0, int(round(seconds)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def plan_steps(budget_s: float, spent_s: float, step_s: float,
               reserve_fraction: float = RESERVE_FRACTION) -> int:
    """Optimizer steps that fit in what is left of the budget after the reserve."""
    if step_s <= 0 or not math.isfinite(step_s):
        raise BertkitError(f"cannot plan a budget from a measured step time of {step_s!r} s")
    usable = budget_s * (1.0 - reserve_fraction) - spent_s
    steps = math.floor(usable / step_s) if usable > 0 else 0
    if steps < 1:
        least = (spent_s + step_s) / (1.0 - reserve_fraction)
        raise BertkitError(
            f"--budget {budget_s:g} s leaves no time for one training step: measuring the step "
            f"time took {spent_s:.1f} s of it, a step takes {step_s:.2f} s here and "
            f"{reserve_fraction:.0%} is kept for checkpoint and export; give a budget of at "
            f"least {math.ceil(least)} s")
    return steps


def replan_step(steps: int) -> int:
    """The step at which a run planned at ``steps`` re-measures its pace (0: it does not)."""
    if steps < REPLAN_MIN_STEPS:
        return 0
    return max(REPLAN_MIN_STEPS // 2, math.ceil(REPLAN_FRACTION * steps))


class BudgetClock:
    """Seconds spent on a budget: ``spent_before`` (earlier runs) plus time since creation."""

    def __init__(self, budget_s: float, spent_before: float = 0.0,
                 clock: Callable[[], float] | None = None):
        self.budget_s = float(budget_s)
        self.spent_before = float(spent_before)
        self._clock = clock or now
        self._started = self._clock()

    def spent(self) -> float:
        return self.spent_before + self._clock() - self._started

    def left(self) -> float:
        return self.budget_s - self.spent()

    def over(self, reserve_fraction: float = RESERVE_FRACTION) -> bool:
        """True once the time before the reserve is used up."""
        return self.spent() >= self.budget_s * (1.0 - reserve_fraction)


def measure_step_seconds(step: Callable[[], None], probes: int = PROBE_STEPS,
                         clock: Callable[[], float] | None = None) -> float:
    """Median seconds of ``step()`` over ``probes`` calls, the first (warm-up) left out."""
    clock = clock or now
    times = []
    for _ in range(max(1, probes)):
        start = clock()
        step()
        times.append(clock() - start)
    return statistics.median(times[1:] if len(times) > 1 else times)


@dataclass
class Budget:
    """A run's budget: the clock and the plan (what a checkpoint stores, see :meth:`state`)."""

    budget_s: float
    steps: int
    step_s: float
    clock: BudgetClock
    replan_at: int = 0  # the step of the one re-plan still to come (0: none)
    _mark: tuple[int, float] | None = None  # (step, spent) after this process's first step

    def state(self) -> dict:
        """``extra["budget"]`` of a checkpoint: the plan and the time spent up to now."""
        return {"budget_s": self.budget_s, "steps": self.steps, "step_s": self.step_s,
                "spent_s": self.clock.spent(), "replan_at": self.replan_at}

    def pace(self, step: int) -> float | None:
        """Call after every step: this process's seconds per step since its first step, at
        the re-plan step; None at every other step."""
        if not self.replan_at or step > self.replan_at:
            return None
        if self._mark is None:  # this process's first step: warm-up, not timed
            self._mark = (step, self.clock.spent())
            return None
        if step < self.replan_at:
            return None
        first, spent = self._mark
        return (self.clock.spent() - spent) / (step - first)

    def replan(self, step: int, step_s: float) -> int:
        """Fix the steps again from ``step`` on at ``step_s`` seconds a step (once)."""
        usable = self.budget_s * (1.0 - RESERVE_FRACTION) - self.clock.spent()
        self.steps = step + max(1, math.floor(usable / step_s))
        self.step_s, self.replan_at = step_s, 0
        return self.steps

    def describe(self) -> dict:
        record = self.state()
        return {**record, "spent_s": round(record["spent_s"], 3), "step_s": round(self.step_s, 4)}

    def postfix(self) -> dict[str, str]:
        return {"left": format_seconds(self.clock.left())}


# ------------------------------------------------------------------ the run's side
def _probe(run) -> float:
    """Median seconds of one optimizer step of ``run`` (a pre-training ``_Run`` after its
    model, data, batches and precision are set up), measured on copies; RNG states restored."""
    import torch

    from bertkit.pretraining import objectives
    from bertkit.training import TrainStep, build_optimizer, capture_rng_state, restore_rng_state

    cfg, device = run.config, run.ctx.device
    rng = capture_rng_state()
    model = copy.deepcopy(run.model)
    optimizer = build_optimizer(model, cfg.lr, cfg.weight_decay, eps=cfg.adam_eps,
                                implementation=cfg.optimizer)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    trainer = TrainStep(model, optimizer, scheduler, device=device, precision=run.precision,
                        max_grad_norm=cfg.max_grad_norm)
    batches = run.batches.iterate({"epoch": 0, "batch": 0})
    run.train_data.set_epoch(0)

    def step() -> None:
        _, micro = next(batches)
        prepared = [objectives.prepare_batch([run.train_data[int(i)] for i in idx],
                                             cfg.objective, device) for idx in micro]
        trainer(prepared, objectives.compute)
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    try:
        return measure_step_seconds(step)
    finally:
        restore_rng_state(rng)


def start_budget(run) -> Budget | None:
    """The budget of ``run`` (None without ``--budget``): on resume the plan and the time
    spent come from the newest checkpoint; otherwise the step time is measured and the steps
    planned. Raises :class:`BertkitError` when the budget does not allow one step or does
    not match the checkpoint's."""
    from bertkit.training import distributed as dist

    cfg = run.config
    if not cfg.budget:
        return None
    budget_s = parse_budget(cfg.budget)
    latest = run.checkpoints.latest()
    if latest is not None:
        if not cfg.resume:  # the run's own check reports this (before any training)
            return Budget(budget_s, cfg.steps, 0.0, BudgetClock(budget_s))
        saved = run.checkpoints.load(latest)["extra"].get("budget")
        if saved is None:
            raise BertkitError(f"{latest}: written by a run without --budget; resume it without one")
        if not math.isclose(saved["budget_s"], budget_s):
            raise BertkitError(f"{latest}: written by a run with a budget of "
                               f"{format_seconds(saved['budget_s'])}; resume with the same --budget")
        return Budget(budget_s, int(saved["steps"]), float(saved["step_s"]),
                      BudgetClock(budget_s, spent_before=float(saved["spent_s"])),
                      replan_at=int(saved.get("replan_at", 0)))
    clock = BudgetClock(budget_s)
    step_s = max(dist.all_gather_objects(_probe(run)))  # the slowest rank sets the pace
    steps = plan_steps(budget_s, clock.spent(), step_s)
    if cfg.warmup_steps is not None and cfg.warmup_steps > steps:
        raise BertkitError(f"--warmup-steps {cfg.warmup_steps} is more than the {steps} steps the "
                           f"budget allows; use --warmup-fraction")
    return Budget(budget_s, steps, step_s, clock, replan_at=replan_step(steps))


def budget_replan(budget: Budget | None, step: int, device) -> int | None:
    """The re-planned step count at the budget's re-plan step (the slowest rank's pace sets
    it; every rank gets the same), None at every other step and without a budget."""
    from bertkit.training import distributed as dist

    if budget is None or not budget.replan_at:
        return None
    pace = budget.pace(step)  # also marks this process's first step
    if step != budget.replan_at:
        return None
    paces = dist.all_gather_objects(pace)
    known = [p for p in paces if p is not None]
    if not known:  # resumed at the re-plan step itself: nothing measured, keep the plan
        budget.replan_at = 0
        return None
    return budget.replan(step, max(known))


def budget_over(budget: Budget | None, device) -> bool:
    """True on every rank once any rank's clock passed the deadline (False without budget)."""
    from bertkit.training import distributed as dist

    return budget is not None and dist.any_rank(budget.clock.over(), device)


__all__ = ["Budget", "BudgetClock", "budget_over", "budget_replan", "format_seconds",
           "measure_step_seconds", "parse_budget", "plan_steps", "replan_step", "start_budget"]
