"""Classification and regression metrics with their reference definitions (GLUE).

Every function takes two equal-length sequences (lists or numpy arrays) and returns a
Python ``float``. The definitions are those of scikit-learn / scipy, which the tests use
as references: ill-defined F1 is 0.0, degenerate MCC is 0.0, Pearson of a constant is NaN.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "GLUE_METRICS",
    "accuracy",
    "f1_score",
    "glue_metrics",
    "macro_f1",
    "matthews_corrcoef",
    "pearson",
    "rankdata",
    "spearman",
]


def _pair(predictions: Sequence, labels: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """Both inputs as 1-D numpy arrays of the same, non-zero length."""
    pred, gold = np.asarray(predictions), np.asarray(labels)
    if pred.ndim != 1 or gold.ndim != 1:
        raise ValueError("predictions and labels must be 1-D sequences")
    if len(pred) != len(gold):
        raise ValueError(f"{len(pred)} predictions but {len(gold)} labels")
    if len(gold) == 0:
        raise ValueError("no examples to score")
    return pred, gold


def accuracy(predictions: Sequence, labels: Sequence) -> float:
    """Fraction of positions where prediction equals label."""
    pred, gold = _pair(predictions, labels)
    return float(np.mean(pred == gold))


def _f1_counts(pred: np.ndarray, gold: np.ndarray, positive) -> float:
    """F1 of one class from its counts: 2tp / (2tp + fp + fn); 0.0 when undefined."""
    tp = int(np.sum((pred == positive) & (gold == positive)))
    fp = int(np.sum((pred == positive) & (gold != positive)))
    fn = int(np.sum((pred != positive) & (gold == positive)))
    denominator = 2 * tp + fp + fn
    return 2 * tp / denominator if denominator else 0.0


def f1_score(predictions: Sequence, labels: Sequence, pos_label=1) -> float:
    """Binary F1 of the class ``pos_label`` (as ``sklearn.metrics.f1_score``, average='binary')."""
    pred, gold = _pair(predictions, labels)
    return float(_f1_counts(pred, gold, pos_label))


def macro_f1(predictions: Sequence, labels: Sequence) -> float:
    """Unweighted mean of per-class F1 over every class seen in labels or predictions."""
    pred, gold = _pair(predictions, labels)
    classes = np.unique(np.concatenate([gold, pred]))
    return float(np.mean([_f1_counts(pred, gold, c) for c in classes]))


def matthews_corrcoef(predictions: Sequence, labels: Sequence) -> float:
    """Matthews correlation (multi-class R_K form, as sklearn); 0.0 when undefined.

    Undefined means all labels or all predictions fall in one class.
    """
    pred, gold = _pair(predictions, labels)
    classes, codes = np.unique(np.concatenate([gold, pred]), return_inverse=True)
    k = len(classes)
    confusion = np.zeros((k, k), dtype=np.float64)
    np.add.at(confusion, (codes[: len(gold)], codes[len(gold):]), 1.0)
    true_sum, pred_sum = confusion.sum(axis=1), confusion.sum(axis=0)
    n, correct = confusion.sum(), np.trace(confusion)
    cov_tp = correct * n - true_sum @ pred_sum
    cov_pp = n * n - pred_sum @ pred_sum
    cov_tt = n * n - true_sum @ true_sum
    if cov_pp * cov_tt == 0:
        return 0.0
    return float(cov_tp / np.sqrt(cov_tt * cov_pp))


def pearson(predictions: Sequence, labels: Sequence) -> float:
    """Pearson correlation coefficient; NaN when either input is constant."""
    x, y = (a.astype(np.float64) for a in _pair(predictions, labels))
    if len(x) < 2:
        raise ValueError("correlation needs at least 2 examples")
    xc, yc = x - x.mean(), y - y.mean()
    nx, ny = np.linalg.norm(xc), np.linalg.norm(yc)
    if nx == 0 or ny == 0:
        return float("nan")
    return float(np.clip(np.dot(xc / nx, yc / ny), -1.0, 1.0))


def rankdata(values: Sequence) -> np.ndarray:
    """1-based ranks, tied values sharing the average of their ranks (scipy's 'average')."""
    x = np.asarray(values)
    order = np.argsort(x, kind="mergesort")
    ordered = x[order]
    starts_group = np.r_[True, ordered[1:] != ordered[:-1]]
    group_of = np.cumsum(starts_group) - 1
    starts = np.flatnonzero(starts_group)
    sizes = np.diff(np.r_[starts, len(x)])
    mean_rank = starts + (sizes + 1) / 2.0
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = mean_rank[group_of]
    return ranks


def spearman(predictions: Sequence, labels: Sequence) -> float:
    """Spearman rank correlation: Pearson of average ranks (ties share their mean rank)."""
    pred, gold = _pair(predictions, labels)
    return pearson(rankdata(pred), rankdata(gold))


# Official GLUE metrics per task; the first one is the task's main metric (the BERT paper's).
GLUE_METRICS: dict[str, tuple[str, ...]] = {
    "cola": ("mcc",),
    "sst2": ("accuracy",),
    "mrpc": ("f1", "accuracy"),
    "stsb": ("spearman", "pearson"),
    "qqp": ("f1", "accuracy"),
    "mnli": ("accuracy",),
    "mnli-mm": ("accuracy",),
    "qnli": ("accuracy",),
    "rte": ("accuracy",),
    "wnli": ("accuracy",),
}

_METRIC_FUNCTIONS = {
    "accuracy": accuracy,
    "f1": f1_score,
    "mcc": matthews_corrcoef,
    "pearson": pearson,
    "spearman": spearman,
}


def glue_metrics(task: str, predictions: Sequence, labels: Sequence) -> dict[str, float]:
    """The official metrics of GLUE ``task`` as ``{name: value}``, main metric first.

    Classification tasks take class indices (binary F1 is of class 1, as GLUE's
    "1 = paraphrase / duplicate"); STS-B takes float scores.
    """
    key = task.lower()
    key = key if key in GLUE_METRICS else key.replace("-", "")
    if key not in GLUE_METRICS:
        raise ValueError(f"unknown GLUE task {task!r}; known: {', '.join(GLUE_METRICS)}")
    return {name: _METRIC_FUNCTIONS[name](predictions, labels) for name in GLUE_METRICS[key]}
