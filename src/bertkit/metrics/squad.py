"""SQuAD exact match and F1, exactly as the official evaluation scripts.

There are two official scripts and they disagree on two points, so a file is scored by the
rules of its own version (:func:`squad_rules` reads the dataset's ``version`` field):

* **v1.1** (``evaluate-v1.1.py``): every question of the dataset counts in the total; one
  without a prediction scores 0 (the script prints ``Unanswered question ID will receive
  score 0.``). F1 is 0 whenever prediction and gold share no token, even when both
  normalise to nothing. Output: ``{"exact_match", "f1"}``.
* **v2.0** (``evaluate-v2.0.py``): questions without a prediction are left out; gold
  answers that normalise to nothing are dropped (none left: the gold is ``""``), and two
  empty token lists have F1 1. Output: ``exact, f1, total`` and the HasAns/NoAns and
  best-threshold figures.

:func:`squad_evaluate` returns the chosen script's JSON dict: same keys, same order, same
float values (sums are taken in the same order).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterator, Mapping

__all__ = [
    "SQUAD_RULES",
    "check_dataset",
    "compute_exact",
    "compute_f1",
    "compute_f1_v1",
    "find_best_threshold",
    "missing_predictions",
    "normalize_answer",
    "squad_evaluate",
    "squad_evaluate_v1",
    "squad_rules",
]

SQUAD_RULES = ("v1.1", "v2.0")

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, drop ASCII punctuation, drop the articles a/an/the, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _tokens(text: str) -> list[str]:
    return normalize_answer(text).split() if text else []


def compute_exact(gold: str, prediction: str) -> int:
    """1 when the normalised strings are equal, else 0."""
    return int(normalize_answer(gold) == normalize_answer(prediction))


def compute_f1(gold: str, prediction: str) -> float:
    """Bag-of-tokens F1 of the normalised strings; an empty side scores 1 only if both are."""
    gold_tokens, pred_tokens = _tokens(gold), _tokens(prediction)
    if not gold_tokens or not pred_tokens:
        return int(gold_tokens == pred_tokens)
    same = sum((Counter(gold_tokens) & Counter(pred_tokens)).values())
    if same == 0:
        return 0
    precision = 1.0 * same / len(pred_tokens)
    recall = 1.0 * same / len(gold_tokens)
    return (2 * precision * recall) / (precision + recall)


def compute_f1_v1(gold: str, prediction: str) -> float:
    """F1 by the v1.1 script: 0 when no token is shared, even if both sides are empty."""
    gold_tokens, pred_tokens = normalize_answer(gold).split(), normalize_answer(prediction).split()
    same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if same == 0:
        return 0
    precision = 1.0 * same / len(pred_tokens)
    recall = 1.0 * same / len(gold_tokens)
    return (2 * precision * recall) / (precision + recall)


def squad_rules(dataset_json, override: str | None = None) -> str:
    """``"v1.1"`` or ``"v2.0"``: ``override`` if given, else the dataset's ``version`` field.

    Both spellings (``1.1`` / ``v1.1``, ``2.0`` / ``v2.0``) are accepted; a missing or
    other version is a ``ValueError`` asking for an explicit choice.
    """
    given = override
    if given is None:
        given = dataset_json.get("version") if isinstance(dataset_json, Mapping) else None
        if given is None:
            raise ValueError("the dataset has no 'version' field: choose the scoring rules "
                             "(v1.1 or v2.0) explicitly")
    rules = str(given) if str(given).startswith("v") else f"v{given}"
    if rules not in SQUAD_RULES:
        source = "requested" if override is not None else "the dataset's"
        raise ValueError(f"{source} SQuAD version {given!r} is not one of 1.1, 2.0")
    return rules


def missing_predictions(dataset_json, predictions: Mapping[str, str]) -> list[str]:
    """Question ids of the dataset (in its order) that have no prediction."""
    return [qa["id"] for qa in _questions(dataset_json) if qa["id"] not in predictions]


def squad_evaluate_v1(dataset_json, predictions: Mapping[str, str]) -> dict:
    """The official v1.1 script's output ``{"exact_match", "f1"}`` (percent).

    Every question counts; one without a prediction scores 0. A question without any
    gold answer cannot be scored by these rules (the script crashes): ``ValueError``.
    """
    exact_match = f1 = total = 0
    for qa in _questions(dataset_json):
        total += 1
        if qa["id"] not in predictions:
            continue
        gold = [a["text"] for a in qa["answers"]]
        if not gold:
            raise ValueError(f"question {qa['id']} has no gold answer: v1.1 rules need one "
                             "(score SQuAD v2.0 data by the v2.0 rules)")
        prediction = predictions[qa["id"]]
        exact_match += max(normalize_answer(prediction) == normalize_answer(g) for g in gold)
        f1 += max(compute_f1_v1(g, prediction) for g in gold)
    if not total:
        raise ValueError("the dataset has no question")
    return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


def check_dataset(dataset_json) -> None:
    """Raise ``ValueError`` naming the place unless the scorer can read ``dataset_json``.

    What the scripts read must be there: ``data`` a list of articles, each with a list of
    ``paragraphs``, each with a list of ``qas``, each with a string ``id`` and a list of
    ``answers`` whose ``text`` is a string (contexts and questions are not needed).
    """
    def need(obj, key, kind, where):
        if not isinstance(obj, dict) or key not in obj:
            raise ValueError(f"{where}: missing field {key!r}")
        if not isinstance(obj[key], kind):
            raise ValueError(f"{where}: field {key!r} should be a {kind.__name__}")
        return obj[key]

    articles = need(dataset_json, "data", list, "top level") \
        if isinstance(dataset_json, Mapping) else dataset_json
    if not isinstance(articles, list):
        raise ValueError("top level: expected a list of articles")
    for a, article in enumerate(articles):
        for p, paragraph in enumerate(need(article, "paragraphs", list, f"article {a}")):
            for q, qa in enumerate(need(paragraph, "qas", list, f"article {a} paragraph {p}")):
                where = f"article {a} paragraph {p} question {q}"
                where = f"question {need(qa, 'id', str, where)}"
                for answer in need(qa, "answers", list, where):
                    need(answer, "text", str, f"{where}, an answer")


def _questions(dataset_json) -> Iterator[dict]:
    """Every question dict of a SQuAD file (the parsed JSON, or its ``data`` list)."""
    articles = dataset_json["data"] if isinstance(dataset_json, Mapping) else dataset_json
    for article in articles:
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


def _raw_scores(dataset_json, predictions: Mapping[str, str]):
    """Per-question (exact, f1) maxed over gold answers; unanswerable gold is ``[""]``.

    Returns ``(has_answer, exact, f1)`` dicts keyed by question id in dataset order;
    questions without a prediction are left out of ``exact``/``f1`` (as the script).
    """
    has_answer, exact, f1 = {}, {}, {}
    for qa in _questions(dataset_json):
        qid = qa["id"]
        has_answer[qid] = bool(qa["answers"])
        gold = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
        if qid not in predictions:
            continue
        exact[qid] = max(compute_exact(g, predictions[qid]) for g in gold)
        f1[qid] = max(compute_f1(g, predictions[qid]) for g in gold)
    return has_answer, exact, f1


def _apply_threshold(scores, na_probs, has_answer, threshold):
    """Questions with ``na_prob > threshold`` are predicted unanswerable: 1.0 iff they are."""
    return {
        qid: float(not has_answer[qid]) if na_probs[qid] > threshold else score
        for qid, score in scores.items()
    }


def _summary(exact, f1, qids=None) -> dict:
    """``{"exact", "f1", "total"}`` in percent over ``qids`` (all scored ids when empty)."""
    if not qids:
        total = len(exact)
        return {
            "exact": 100.0 * sum(exact.values()) / total,
            "f1": 100.0 * sum(f1.values()) / total,
            "total": total,
        }
    total = len(qids)
    return {
        "exact": 100.0 * sum(exact[k] for k in qids) / total,
        "f1": 100.0 * sum(f1[k] for k in qids) / total,
        "total": total,
    }


def find_best_threshold(predictions, scores, na_probs, has_answer) -> tuple[float, float]:
    """Best score (percent) over no-answer thresholds, and the threshold reaching it.

    Start from "abstain everywhere" (score = number of unanswerable questions); walk the
    questions by increasing ``na_prob`` (ties in ``na_probs`` order), answering each in
    turn: an answerable one adds its score, an unanswerable one loses 1 if the model gave
    a non-empty answer. The threshold is the ``na_prob`` where the running score peaks
    (0.0 if abstaining everywhere is best). Percent is of the number of scored questions.
    """
    current = best = sum(1 for v in has_answer.values() if not v)
    best_threshold = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            current += scores[qid]
        elif predictions[qid]:
            current -= 1
        if current > best:
            best, best_threshold = current, na_probs[qid]
    return 100.0 * best / len(scores), best_threshold


def _check_inputs(exact, na_probs) -> None:
    """Refuse inputs the official script would crash on, with a clear message."""
    if not exact:
        raise ValueError("no question of the dataset has a prediction")
    missing = [qid for qid in exact if qid not in na_probs]
    if missing:
        raise ValueError(f"{len(missing)} questions lack a no-answer probability, e.g. {missing[0]}")


def squad_evaluate(dataset_json, predictions: Mapping[str, str], na_probs=None,
                   na_prob_thresh: float = 1.0, version: str | None = None) -> dict:
    """The official script's output dict for ``predictions`` ({id: text}).

    The rules are those of ``version`` (``"v1.1"``/``"v2.0"``, or ``1.1``/``2.0``), by
    default the dataset's ``version`` field (:func:`squad_rules`). v1.1:
    :func:`squad_evaluate_v1` (``na_probs`` and ``na_prob_thresh`` do not apply).

    v2.0 keys, in order: ``exact, f1, total``, then ``HasAns_exact/_f1/_total`` if any question
    is answerable, ``NoAns_…`` if any is not, and when ``na_probs`` ({id: probability or
    null odds}) is given ``best_exact, best_exact_thresh, best_f1, best_f1_thresh``.
    Scores are percentages. Questions without a prediction are skipped in the overall
    figures as in the script; the script then fails on the HasAns/NoAns breakdown, which
    here counts only the questions that have a prediction.
    """
    if squad_rules(dataset_json, version) == "v1.1":
        if na_probs is not None or na_prob_thresh != 1.0:
            raise ValueError("no-answer probabilities and thresholds belong to the v2.0 rules; "
                             "the v1.1 rules score every question as answerable")
        return squad_evaluate_v1(dataset_json, predictions)
    has_answer, exact_raw, f1_raw = _raw_scores(dataset_json, predictions)
    given_probs = na_probs is not None
    na_probs = na_probs if given_probs else {k: 0.0 for k in predictions}
    _check_inputs(exact_raw, na_probs)
    exact = _apply_threshold(exact_raw, na_probs, has_answer, na_prob_thresh)
    f1 = _apply_threshold(f1_raw, na_probs, has_answer, na_prob_thresh)
    result = _summary(exact, f1)
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [k for k, v in has_answer.items() if v is wanted and k in exact]
        if qids:
            result.update({f"{prefix}_{k}": v for k, v in _summary(exact, f1, qids).items()})
    if given_probs:
        for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
            best, threshold = find_best_threshold(predictions, raw, na_probs, has_answer)
            result[f"best_{name}"], result[f"best_{name}_thresh"] = best, threshold
    return result
