"""One optimizer step, shared by pre-training and fine-tuning.

Contract: ``TrainStep(model, optimizer, scheduler, device=..., precision=...)`` is called
with a list of micro-batches and ``compute(model, batch) -> output`` (an object with a scalar
``.loss``). It runs forward under autocast (bf16, or fp16 with a ``GradScaler``; fp32 by
default), backward of ``loss / len(micro_batches)`` - or of ``loss * weights[i]`` when
``weights`` are given (uneven micro-batches) - (gradient accumulation; DDP gradients
are all-reduced on the last micro-batch only), unscales, clips the global gradient norm at
``max_grad_norm``, steps optimizer and scheduler and clears gradients (``set_to_none``).
A step whose gradient norm is not finite is skipped (no parameter or moment update; the
schedule still advances) and counted in ``skipped_steps``, and ``skipped_in_a_row`` counts the
skips since the last finite step (what :class:`~bertkit.training.divergence.SkipWatch` reads at a
log point) - without a device sync when the optimizer is fused (the kernel receives the flag),
so nothing calls ``.item()`` per step.
``MetricSums`` accumulates on-device sums and reduces them (across ranks too) once per log.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from bertkit.precision import autocast
from bertkit.training.distributed import all_reduce_sum
from bertkit.training.optim import is_fused


@dataclass
class StepResult:
    outputs: list[Any]
    grad_norm: torch.Tensor
    finite: torch.Tensor  # bool scalar on the device
    lr: float


class TrainStep:
    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: Any,
        *,
        device: torch.device,
        precision: str = "fp32",
        max_grad_norm: float = 1.0,
    ):
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.device = device
        self.precision = precision
        self.max_grad_norm = max_grad_norm
        self.scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
        self.params = [p for g in optimizer.param_groups for p in g["params"]]
        self.skipped_steps = torch.zeros((), dtype=torch.long, device=device)
        self.skipped_in_a_row = torch.zeros((), dtype=torch.long, device=device)

    def _no_sync(self, last: bool):
        if not last and hasattr(self.model, "no_sync"):
            return self.model.no_sync()
        return contextlib.nullcontext()

    def __call__(self, micro_batches: Sequence[Any], compute: Callable[[nn.Module, Any], Any],
                 weights: Sequence[float] | None = None) -> StepResult:
        n = len(micro_batches)
        outputs = []
        for i, batch in enumerate(micro_batches):
            with self._no_sync(i == n - 1):
                with autocast(self.precision, self.device):
                    out = compute(self.model, batch)
                scaled = out.loss / n if weights is None else out.loss * weights[i]
                self.scaler.scale(scaled).backward()
            outputs.append(out)
        self.scaler.unscale_(self.optimizer)
        norm = torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm, foreach=True)
        finite = torch.isfinite(norm)
        lr = self.optimizer.param_groups[0]["lr"]
        if self.scaler.is_enabled():
            self.scaler.step(self.optimizer)  # skips on inf/nan itself
            self.scaler.update()
        elif is_fused(self.optimizer):
            self.optimizer.found_inf = (~finite).float()  # the fused kernel skips; no sync
            self.optimizer.step()
        elif bool(finite):
            self.optimizer.step()
        with warnings.catch_warnings():  # a skipped first step is counted, not torch's business
            warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step", category=UserWarning)
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.skipped_steps += (~finite).long()
        self.skipped_in_a_row.add_(1).mul_((~finite).long())  # back to 0 on a finite step
        return StepResult(outputs, norm.detach(), finite, lr)


class MetricSums:
    """Named running sums; ``reduce()`` returns floats (summed over ranks) and resets.

    Tensors stay on their device and Python numbers on the host until ``reduce()``, so adding
    never waits for the device (no ``.item()``, no host-to-device copy per step).
    """

    def __init__(self, device: torch.device):
        self.device = device
        self.sums: dict[str, torch.Tensor] = {}
        self.host: dict[str, float] = {}

    def add(self, **values: torch.Tensor | float) -> None:
        for name, value in values.items():
            if isinstance(value, torch.Tensor):
                value = value.detach().to(torch.float64)
                self.sums[name] = self.sums[name] + value if name in self.sums else value
            else:
                self.host[name] = self.host.get(name, 0.0) + float(value)

    def reduce(self, across_ranks: bool = True) -> dict[str, float]:
        """Sums over the interval (and over ranks: every rank must call with the same names)."""
        names = sorted(set(self.sums) | set(self.host))
        if not names:
            return {}
        stacked = torch.stack([
            self.sums[n].to(self.device) if n in self.sums else torch.zeros((), dtype=torch.float64, device=self.device)
            for n in names
        ])
        stacked += torch.tensor([self.host.get(n, 0.0) for n in names], dtype=torch.float64).to(self.device)
        if across_ranks:
            all_reduce_sum(stacked)
        self.sums, self.host = {}, {}
        return dict(zip(names, stacked.tolist()))

    def state_dict(self) -> dict[str, float]:
        """Plain values, for a checkpoint taken between two logs."""
        state = dict(self.host)
        for name, value in self.sums.items():
            state[name] = state.get(name, 0.0) + float(value)
        return state

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.sums, self.host = {}, {n: float(v) for n, v in state.items()}
