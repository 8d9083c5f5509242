"""The one runner of a task's features through a model: length-sorted batches, eval mode,
no gradients, at a precision, optionally split across the ranks of a distributed run. Every
door that scores prepared features goes through it: the evaluation after each fine-tuning
epoch, ``bertkit evaluate`` and ``bertkit predict`` (:meth:`bertkit.inference.engine.
BertInference.run_features`)."""

from __future__ import annotations

import numpy as np
import torch
from tqdm.auto import tqdm

from bertkit.errors import BertkitError
from bertkit.precision import autocast
from bertkit.runlog import bar_disabled
from bertkit.tasks.base import FeatureSet, Task
from bertkit.training import distributed as dist
from bertkit.training.distributed import DistContext
from bertkit.training.sampler import length_batches


def to_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def run_model(task: Task, model, features: FeatureSet, batch_size: int,
              device: torch.device | str = "cpu", precision: str = "fp32",
              progress: bool | None = None, desc: str = "eval",
              ctx: DistContext | None = None) -> dict[str, list[np.ndarray]]:
    """The model's ``task.output_names`` for every feature, in feature order (eval mode, no
    gradients, length-sorted batches); rows of token outputs cut to the feature's length.

    With a distributed ``ctx`` every rank must call it: rank ``r`` runs batches ``r``,
    ``r + world_size``, ... and the outputs are gathered, so every rank returns all of them."""
    device = torch.device(device)
    rank, world = (ctx.rank, ctx.world_size) if ctx is not None else (0, 1)
    model.eval()
    mine: list[tuple[int, dict[str, np.ndarray]]] = []
    batches = length_batches(features.lengths, batch_size)[rank::world]
    with torch.inference_mode():
        for idx in tqdm(batches, desc=desc, disable=bar_disabled(progress), leave=False):
            with autocast(precision, device):
                out = task.infer(model, to_device(features.collate(idx), device))
            values = {name: getattr(out, name).float().cpu().numpy() for name in task.output_names}
            for k, i in enumerate(idx):
                mine.append((int(i), {name: v[k][: features.widths[i]] if task.token_outputs else v[k]
                                      for name, v in values.items()}))
    parts = dist.all_gather_objects(mine) if world > 1 else [mine]
    outputs: dict[str, list] = {name: [None] * len(features) for name in task.output_names}
    seen = 0
    for part in parts:
        for i, rows in part:
            for name, row in rows.items():
                outputs[name][i] = row
        seen += len(part)
    if seen != len(features) or any(x is None for x in outputs[task.output_names[0]]):
        raise RuntimeError(f"run_model: {seen} outputs gathered for {len(features)} features")
    _require_finite(outputs, len(features))
    return outputs


def _require_finite(outputs: dict[str, list[np.ndarray]], count: int) -> None:
    """A BertkitError when any output is NaN or infinite: such a model's answers (and any
    metric computed from them) mean nothing, and NaN is not even valid JSON."""
    bad = sum(1 for i in range(count) if not all(np.isfinite(rows[i]).all() for rows in outputs.values()))
    if bad:
        raise NonFiniteOutputs(f"the model gave NaN or infinite outputs for {bad} of {count} input(s)")


class NonFiniteOutputs(BertkitError):
    """A model's outputs hold NaN or infinite values (``detail`` says for how many inputs)."""

    def __init__(self, detail: str):
        self.detail = detail
        super().__init__(f"{detail}: its weights are broken (a fine-tuning that diverged?); train it "
                         "again with a lower learning rate")
