"""Scoring a task on its evaluation splits: read and featurize them, run the model (the one
runner, :func:`bertkit.inference.features.run_model`), score with the task's own metrics, and
write the predictions. Used after every fine-tuning epoch and by ``bertkit evaluate``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bertkit.fileio import atomic_write
from bertkit.inference.features import run_model
from bertkit.runlog import RunLogger
from bertkit.tasks.base import FeatureSet, Task, featurize
from bertkit.training.distributed import DistContext


@dataclass
class EvalSet:
    """An evaluation split: its examples and their features."""

    split: str
    examples: list
    features: FeatureSet


def load_eval_sets(task: Task, data_dir, tokenizer, max_seq_length: int,
                   splits: Sequence[str] | None = None, logger: RunLogger | None = None) -> list[EvalSet]:
    """Read and featurize the evaluation splits (default: ``task.eval_splits()``)."""
    sets = []
    for split in splits or task.eval_splits():
        examples = task.read(data_dir, split)
        sets.append(EvalSet(split, examples, featurize(task, examples, tokenizer, max_seq_length,
                                                       False, split, logger)))
    return sets


def evaluate_sets(task: Task, model, sets: Sequence[EvalSet], batch_size: int,
                  device="cpu", precision="fp32", progress: bool | None = None,
                  ctx: DistContext | None = None) -> tuple[dict[str, float], list[dict]]:
    """Metrics over every eval set (:func:`score_sets`) and each set's raw outputs (for
    predictions). Distributed ``ctx``: see :func:`run_model` (every rank gets the same
    metrics)."""
    raw = [run_model(task, model, s.features, batch_size, device, precision, progress,
                     desc=f"eval {s.split}", ctx=ctx) for s in sets]
    return score_sets(task, sets, raw), raw


def score_sets(task: Task, sets: Sequence[EvalSet], raw: Sequence[dict]) -> dict[str, float]:
    """The task's metrics of every eval set's outputs, flat: the first set's names as they
    are, the others prefixed ``<split>.``."""
    metrics: dict[str, float] = {}
    for k, (s, outputs) in enumerate(zip(sets, raw)):
        scores = task.evaluate(s.examples, s.features, outputs)
        metrics.update({(name if k == 0 else f"{s.split}.{name}"): float(v) for name, v in scores.items()})
    return metrics


def write_predictions(task: Task, sets: Sequence[EvalSet], raw: Sequence[dict], out_dir: Path) -> None:
    """``out_dir/predictions_<split>.jsonl`` for every eval set."""
    for s, outputs in zip(sets, raw):
        with atomic_write(out_dir / f"predictions_{s.split}.jsonl") as f:
            for record in task.predict(s.examples, s.features, outputs):
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        writer = getattr(task, "write_outputs", None)  # task-specific files (SQuAD's JSONs)
        if writer is not None:
            writer(out_dir, s.split, s.examples, s.features, outputs)
