"""Batches and metrics of the pre-training objectives.

Contract: ``prepare_batch(items, objective, device=None)`` collates dataset items and returns
``{"inputs": model kwargs, "targets": labelled ids in label order, "tokens": int}`` (on the
CPU, or on ``device``; ``to_device`` moves a CPU batch):

* ``mlm+nsp``: masked input, ``mlm_labels`` and ``next_sentence_label``;
* ``mlm``: the same without the NSP label;
* ``ltr``: left-to-right LM (the model has causal attention): the original tokens as input
  (labelled positions of static-masked data put back to their labels) and, as
  ``mlm_labels``, the next token at every position whose next position is not padding.

Targets are selected on the CPU, so computing accuracies needs no device sync.
``add_step_metrics(sums, outputs, batches)`` adds losses, correct counts and counts of one
step to a :class:`~bertkit.training.MetricSums`; ``summarize(sums, prefix)`` turns reduced
sums into ``{prefix}mlm_loss, mlm_acc, nsp_loss, nsp_acc``.
"""

from __future__ import annotations

from typing import Any

import torch

from bertkit.config import IGNORE_INDEX
from bertkit.pretraining.data import collate


def ltr_labels(input_ids: torch.Tensor, attention_mask: torch.Tensor, mlm_labels: torch.Tensor):
    """``(original_ids, next_token_labels)`` for a left-to-right language model."""
    original = torch.where(mlm_labels != IGNORE_INDEX, mlm_labels, input_ids)
    labels = torch.full_like(original, IGNORE_INDEX)
    keep = attention_mask[:, 1:].bool() & attention_mask[:, :-1].bool()
    labels[:, :-1] = torch.where(keep, original[:, 1:], IGNORE_INDEX)
    return original, labels


def prepare_batch(items: list[dict], objective: str, device: torch.device | None = None,
                  pin_memory: bool = False) -> dict[str, Any]:
    """The batch of ``items`` for ``objective`` (on ``device`` when given, else on the CPU,
    in pinned memory if asked, ready for :func:`to_device`)."""
    batch = collate(items)
    if objective == "ltr":
        batch["input_ids"], batch["mlm_labels"] = ltr_labels(
            batch["input_ids"], batch["attention_mask"], batch["mlm_labels"]
        )
    labels = batch["mlm_labels"]
    names = ["input_ids", "token_type_ids", "attention_mask", "mlm_labels"]
    if objective == "mlm+nsp":
        names.append("next_sentence_label")
    prepared = {
        "inputs": {n: batch[n] for n in names},
        "targets": labels[labels != IGNORE_INDEX],
        "tokens": int(batch["attention_mask"].sum()),
    }
    if pin_memory:
        prepared["inputs"] = {n: t.pin_memory() for n, t in prepared["inputs"].items()}
        prepared["targets"] = prepared["targets"].pin_memory()
    return prepared if device is None else to_device(prepared, device)


def to_device(batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
    non_blocking = device.type == "cuda"
    return {
        "inputs": {n: t.to(device, non_blocking=non_blocking) for n, t in batch["inputs"].items()},
        "targets": batch["targets"].to(device, non_blocking=non_blocking),
        "tokens": batch["tokens"],
    }


def compute(model, batch: dict[str, Any]):
    """The ``compute`` callable of :class:`~bertkit.training.TrainStep`."""
    return model(**batch["inputs"])


def add_step_metrics(sums, outputs: list, batches: list[dict[str, Any]]) -> None:
    for out, batch in zip(outputs, batches):
        targets = batch["targets"]
        sums.add(
            micro_batches=1,
            mlm_loss=out.mlm_loss.detach(),
            mlm_correct=(out.mlm_logits.detach().argmax(-1) == targets).sum(),
            mlm_count=targets.numel(),
            tokens=batch["tokens"],
        )
        nsp_label = batch["inputs"].get("next_sentence_label")
        if nsp_label is not None:
            sums.add(
                nsp_loss=out.nsp_loss.detach(),
                nsp_correct=(out.nsp_logits.detach().argmax(-1) == nsp_label).sum(),
                nsp_count=nsp_label.numel(),
            )


def summarize(totals: dict[str, float], prefix: str = "") -> dict[str, float]:
    micro = max(1.0, totals.get("micro_batches", 0.0))
    record = {
        f"{prefix}mlm_loss": totals["mlm_loss"] / micro,
        f"{prefix}mlm_acc": totals["mlm_correct"] / max(1.0, totals["mlm_count"]),
    }
    if "nsp_loss" in totals:
        record[f"{prefix}nsp_loss"] = totals["nsp_loss"] / micro
        record[f"{prefix}nsp_acc"] = totals["nsp_correct"] / max(1.0, totals["nsp_count"])
    return record
