"""Window logits -> SQuAD answers (the ``write_predictions`` of BERT's run_squad).

Contract, per example (over all its windows):

* candidates are the ``n_best_size`` highest start and end logits of each window; a pair
  is kept only when both positions are passage pieces, ``start <= end``, the span is at
  most ``max_answer_length`` pieces, and the window is the start piece's max-context one;
* a candidate's text is ``context[offsets[start][0]:offsets[end][1]]``: cut from the
  *original* passage through character offsets (so case, accents and spacing survive);
* the ``n_best_size`` best distinct texts (score = start + end logit) form the n-best list
  with softmax probabilities; with ``version_2`` the null answer ``""`` (score: the
  smallest ``[CLS]`` start + end logit over the windows) joins the list;
* v1.1: the prediction is the best non-null text. v2.0: ``null_odds`` = null score minus
  the best non-null score, and the prediction is ``""`` when ``null_odds`` exceeds the
  threshold, else the best non-null text.

:func:`write_prediction_files` writes ``predictions.json``, ``nbest_predictions.json``
and (v2.0) ``null_odds.json`` in the original layout.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bertkit.fileio import atomic_write
from bertkit.metrics import squad_evaluate
from bertkit.tasks.formats.squad import SquadExample
from bertkit.tasks.squad_features import SquadWindow

__all__ = ["SquadPredictions", "apply_null_threshold", "postprocess_squad", "usable_threshold",
           "write_prediction_files"]


@dataclass
class SquadPredictions:
    """``answers`` {qid: text} at the threshold used, ``best_non_null`` {qid: text},
    ``null_odds`` {qid: float} (v2.0 only), ``nbest`` {qid: [entry dicts]}, ``spans``
    {qid: (start, end)}: the character span of ``best_non_null`` in the context (absent when
    there is no non-null candidate), and ``candidate_spans`` {qid: {text: (start, end)}}: the
    span of every non-null n-best text."""

    answers: dict[str, str] = field(default_factory=dict)
    best_non_null: dict[str, str] = field(default_factory=dict)
    null_odds: dict[str, float] = field(default_factory=dict)
    nbest: dict[str, list[dict]] = field(default_factory=dict)
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)
    candidate_spans: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)


def _softmax(scores: list[float]) -> list[float]:
    if not scores:
        return []
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [x / total for x in exps]


def _window_candidates(feature: SquadWindow, start_logits, end_logits, n_best_size: int,
                       max_answer_length: int) -> list[tuple[float, float, int, int]]:
    """``(start_logit, end_logit, start, end)`` of the valid spans of one window."""
    n = min(len(feature.offsets), len(start_logits), len(end_logits))
    starts = np.argsort(-start_logits[:n], kind="stable")[:n_best_size]
    ends = np.argsort(-end_logits[:n], kind="stable")[:n_best_size]
    out = []
    for s in starts:
        if feature.offsets[s] is None or not feature.max_context[s]:
            continue
        for e in ends:
            if feature.offsets[e] is None or e < s or e - s + 1 > max_answer_length:
                continue
            out.append((float(start_logits[s]), float(end_logits[e]), int(s), int(e)))
    return out


def _example_nbest(example: SquadExample, features, logits, n_best_size, max_answer_length,
                   version_2) -> tuple[list[dict], float, dict[str, tuple[int, int]]]:
    """The n-best entries of one example, its null score (inf when not ``version_2``) and the
    character span of each entry's text."""
    candidates, null_score, null_entry = [], math.inf, None
    for feature, (start_logits, end_logits) in zip(features, logits):
        cls_score = float(start_logits[0] + end_logits[0])
        if cls_score < null_score:
            null_score, null_entry = cls_score, (float(start_logits[0]), float(end_logits[0]))
        for start_logit, end_logit, s, e in _window_candidates(
                feature, start_logits, end_logits, n_best_size, max_answer_length):
            span = (feature.offsets[s][0], feature.offsets[e][1])
            candidates.append((start_logit + end_logit, start_logit, end_logit,
                               example.context[span[0]:span[1]], span))
    candidates.sort(key=lambda c: -c[0])
    entries, seen, spans = [], set(), {}
    for _, start_logit, end_logit, text, span in candidates:
        if text in seen:
            continue
        seen.add(text)
        spans[text] = span
        entries.append({"text": text, "start_logit": start_logit, "end_logit": end_logit})
        if len(entries) == n_best_size:
            break
    if version_2 and "" not in seen and null_entry is not None:
        entries.append({"text": "", "start_logit": null_entry[0], "end_logit": null_entry[1]})
        entries.sort(key=lambda x: -(x["start_logit"] + x["end_logit"]))
    if not entries:
        entries.append({"text": "empty", "start_logit": 0.0, "end_logit": 0.0})
    probs = _softmax([x["start_logit"] + x["end_logit"] for x in entries])
    for entry, p in zip(entries, probs):
        entry["probability"] = p
    return [{"text": x["text"], "probability": x["probability"], "start_logit": x["start_logit"],
             "end_logit": x["end_logit"]} for x in entries], null_score, spans


def postprocess_squad(
    examples: Sequence[SquadExample],
    windows: Sequence[SquadWindow],
    start_logits: Sequence[np.ndarray],
    end_logits: Sequence[np.ndarray],
    n_best_size: int = 20,
    max_answer_length: int = 30,
    version_2: bool = False,
    null_score_diff_threshold: float = 0.0,
) -> SquadPredictions:
    """Answers for every example from the per-window logits (``windows[k]`` <-> logits ``k``)."""
    by_example: dict[int, list[int]] = {}
    for k, window in enumerate(windows):
        by_example.setdefault(window.example, []).append(k)
    out = SquadPredictions()
    for e, example in enumerate(examples):
        ks = by_example.get(e, [])
        nbest, null_score, spans = _example_nbest(
            example, [windows[k] for k in ks],
            [(np.asarray(start_logits[k]), np.asarray(end_logits[k])) for k in ks],
            n_best_size, max_answer_length, version_2)
        best = next((x for x in nbest if x["text"]), None)
        out.nbest[example.qid] = nbest
        out.candidate_spans[example.qid] = spans
        out.best_non_null[example.qid] = best["text"] if best else ""
        if best and best["text"] in spans:  # not the "empty" placeholder
            out.spans[example.qid] = spans[best["text"]]
        if version_2:
            best_score = best["start_logit"] + best["end_logit"] if best else -math.inf
            out.null_odds[example.qid] = null_score - best_score
    out.answers = apply_null_threshold(out, null_score_diff_threshold) if version_2 \
        else dict(out.best_non_null)
    return out


def apply_null_threshold(predictions: SquadPredictions, threshold: float) -> dict[str, str]:
    """v2.0 answers: ``""`` where ``null_odds > threshold``, else the best non-null text."""
    return {qid: "" if predictions.null_odds[qid] > threshold else text
            for qid, text in predictions.best_non_null.items()}


def write_prediction_files(predictions: SquadPredictions, directory: str | Path) -> list[Path]:
    """Write predictions.json, nbest_predictions.json and (if any) null_odds.json atomically."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    files = [("predictions.json", predictions.answers),
             ("nbest_predictions.json", predictions.nbest)]
    if predictions.null_odds:
        files.append(("null_odds.json", predictions.null_odds))
    written = []
    for name, content in files:
        with atomic_write(directory / name) as f:
            json.dump(content, f, indent=2, ensure_ascii=False)
            f.write("\n")
        written.append(directory / name)
    return written


def usable_threshold(dataset: dict, predictions: SquadPredictions, result: dict) -> float:
    """The best-F1 null threshold as a value to apply (answer iff ``null_odds <= t``).

    The official search reports 0.0 when abstaining everywhere scores best, which is right
    for probabilities but not for null odds (0.0 may answer everything): then the
    threshold returned lies below every null odds.
    """
    threshold = float(result["best_f1_thresh"])
    at = squad_evaluate(dataset, predictions.best_non_null, predictions.null_odds, threshold,
                        version="v2.0")
    if at["f1"] < result["best_f1"] - 1e-9:
        threshold = min(predictions.null_odds.values()) - 1.0
    return threshold
