"""SQuAD scoring: the official script's figures on real data, and hand-computed cases."""

from __future__ import annotations

import json

import pytest

from bertkit.metrics import (
    compute_exact,
    compute_f1,
    find_best_threshold,
    normalize_answer,
    squad_evaluate,
)


def _load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_normalisation_and_token_f1():
    assert normalize_answer("The  Quick, brown fox!") == "quick brown fox"
    assert normalize_answer("an apple a day") == "apple day"
    assert normalize_answer("theory") == "theory"  # articles only as whole words
    assert compute_exact("The Eiffel Tower", "eiffel tower.") == 1
    assert compute_f1("blue sky", "sky") == pytest.approx(2 / 3)
    assert compute_f1("", "") == 1 and compute_f1("", "x") == 0 and compute_f1("a", "") == 1
    assert compute_f1("cat dog", "bird") == 0


def _article(*qas, version="v2.0"):
    return {"version": version,
            "data": [{"title": "t", "paragraphs": [{"context": "c", "qas": list(qas)}]}]}


def _qa(qid, *answers):
    return {"id": qid, "question": "?", "answers": [{"text": a, "answer_start": 0} for a in answers],
            "is_impossible": not answers}


HAND = _article(_qa("q1", "Paris"), _qa("q2", "blue sky"), _qa("q3"), _qa("q4"))
PREDS = {"q1": "Paris", "q2": "sky", "q3": "London", "q4": ""}
NA_PROBS = {"q1": 0.1, "q2": 0.6, "q3": 0.7, "q4": 0.8}


def test_hand_made_scores_and_best_threshold():
    # Raw: exact q1..q4 = 1, 0, 0, 1; F1 = 1, 2/3, 0, 1.
    # Best threshold walk from "abstain everywhere" = 2 (the two unanswerable):
    #   q1 (0.1): +1 -> 3   q2 (0.6): +0 exact / +2/3 F1   q3 (0.7): -1 ("London")   q4: +0
    # best exact 3/4 at 0.1; best F1 (3 + 2/3)/4 at 0.6.
    result = squad_evaluate(HAND, PREDS, NA_PROBS)
    assert list(result) == [
        "exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
        "NoAns_exact", "NoAns_f1", "NoAns_total",
        "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh",
    ]
    assert result["exact"] == 50.0 and result["f1"] == pytest.approx(100 * (8 / 3) / 4)
    assert result["HasAns_f1"] == pytest.approx(100 * (5 / 3) / 2) and result["NoAns_exact"] == 50.0
    assert result["best_exact"] == 75.0 and result["best_exact_thresh"] == 0.1
    assert result["best_f1"] == pytest.approx(100 * (11 / 3) / 4) and result["best_f1_thresh"] == 0.6


def test_na_prob_threshold_predicts_no_answer():
    # Above 0.5: q2 (answerable) scores 0, q3 and q4 (unanswerable) score 1.
    result = squad_evaluate(HAND, PREDS, NA_PROBS, na_prob_thresh=0.5)
    assert (result["exact"], result["f1"]) == (75.0, 75.0)


def test_best_threshold_stays_zero_when_abstaining_is_best():
    scores = {"a": 0, "b": 0}
    best, thresh = find_best_threshold({"a": "x", "b": "y"}, scores, {"a": 0.2, "b": 0.4},
                                       {"a": True, "b": False})
    assert (best, thresh) == (50.0, 0.0)


def test_unanswerable_gold_with_blank_answers_counts_as_empty():
    data = _article({"id": "q", "question": "?", "answers": [{"text": "  ", "answer_start": 0}]})
    assert squad_evaluate(data, {"q": ""})["exact"] == 100.0


def test_missing_na_prob_is_a_clear_error():
    with pytest.raises(ValueError, match="lack a no-answer probability"):
        squad_evaluate(HAND, PREDS, {"q1": 0.0})


def test_official_figures_v11(shared):
    data = _load(shared("squad", "dev-v1.1.json"))
    preds = _load(shared("squad", "bert-predictions-dev-v1.1.json"))
    result = squad_evaluate(data, preds)  # v1.1 rules, from the file's version field
    assert list(result) == ["exact_match", "f1"]
    assert (round(result["exact_match"], 3), round(result["f1"], 3)) == (86.206, 92.196)
    assert result["exact_match"] == pytest.approx(86.20624408703878, abs=1e-11)
    # On this complete file the v2.0 rules give the same two figures (SOURCES.md).
    v2 = squad_evaluate(data, preds, version="v2.0")
    assert (v2["exact"], v2["f1"], v2["total"]) == (result["exact_match"], result["f1"], 10570)


def test_official_figures_v20(shared):
    data = _load(shared("squad", "dev-v2.0.json"))
    preds = _load(shared("squad", "bert-predictions-dev-v2.0.json"))
    r = squad_evaluate(data, preds)
    assert (round(r["exact"], 3), round(r["f1"], 3), r["total"]) == (78.742, 81.775, 11873)
    assert (round(r["HasAns_exact"], 3), round(r["HasAns_f1"], 3), r["HasAns_total"]) == (74.106, 80.182, 5928)
    assert (round(r["NoAns_exact"], 3), r["NoAns_total"]) == (83.364, 5945)
    # With no-answer "probabilities" 1 for empty predictions and 0 otherwise, every threshold
    # in [0, 1) reproduces the predictions, so the search's best is at least the plain score.
    na = {k: float(v == "") for k, v in preds.items()}
    best = squad_evaluate(data, preds, na)
    # (The walk sums in another order, so compare up to rounding.)
    assert best["best_exact"] >= r["exact"] - 1e-9 and best["best_f1"] >= r["f1"] - 1e-9
    assert {k: best[k] for k in r} == r
