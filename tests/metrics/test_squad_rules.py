"""SQuAD v1.1 files by the v1.1 rules, v2.0 files by the v2.0 rules.

The two official scripts differ on questions without a prediction (v1.1: counted, score
0; v2.0: left out) and on gold answers that normalise to nothing (v1.1: F1 0 unless a
token is shared; v2.0: such gold is dropped, "" matches "" with F1 1). ``_official_v11``
below is a test-only transcription of the logic of the official ``evaluate-v1.1.py``
(rajpurkar/SQuAD-explorer), used as the reference.
"""

from __future__ import annotations

import copy
import json
import re
import string
from collections import Counter

import pytest

from bertkit.cli.main import main
from bertkit.metrics import squad_evaluate, squad_rules


# ------------------------------------------------------------------ reference (v1.1 script)
def _ref_normalize(s):
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def _ref_f1(prediction, ground_truth):
    p, g = _ref_normalize(prediction).split(), _ref_normalize(ground_truth).split()
    num_same = sum((Counter(p) & Counter(g)).values())
    if num_same == 0:
        return 0
    precision, recall = 1.0 * num_same / len(p), 1.0 * num_same / len(g)
    return (2 * precision * recall) / (precision + recall)


def _ref_em(prediction, ground_truth):
    return _ref_normalize(prediction) == _ref_normalize(ground_truth)


def _official_v11(dataset, predictions):
    f1 = exact_match = total = 0
    unanswered = []
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                if qa["id"] not in predictions:
                    unanswered.append(qa["id"])
                    continue
                ground_truths = [x["text"] for x in qa["answers"]]
                prediction = predictions[qa["id"]]
                exact_match += max(_ref_em(prediction, g) for g in ground_truths)
                f1 += max(_ref_f1(prediction, g) for g in ground_truths)
    return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}, unanswered


# ------------------------------------------------------------------ hand-made fixtures
def _dataset(version, *qas):
    return {"version": version,
            "data": [{"title": "t", "paragraphs": [{"context": "c", "qas": list(qas)}]}]}


def _qa(qid, *answers):
    return {"id": qid, "question": "?", "answers": [{"text": a, "answer_start": 0} for a in answers]}


# q2's gold answers all normalise to nothing; q4 has no prediction.
HAND = _dataset("1.1", _qa("q1", "Paris"), _qa("q2", "The", "a !"), _qa("q3", "blue sky"),
                _qa("q4", "Rome"))
HAND_PREDS = {"q1": "paris.", "q2": "", "q3": "sky"}


def test_v11_rules_by_hand():
    # EM: q1 1, q2 1 ("" == ""), q3 0, q4 0 (no prediction).  F1: 1, 0 (no shared token),
    # 2/3, 0.  Every one of the 4 questions counts.
    result = squad_evaluate(HAND, HAND_PREDS)
    assert list(result) == ["exact_match", "f1"]
    assert result["exact_match"] == 50.0
    assert result["f1"] == 100.0 * (1 + 0 + 2 / 3) / 4
    assert result == _official_v11(HAND["data"], HAND_PREDS)[0]


def test_v20_rules_on_the_same_questions_by_hand():
    # v2.0: q2's gold becomes [""], so "" scores EM 1 and F1 1; q4 is left out (3 questions).
    result = squad_evaluate(HAND, HAND_PREDS, version="v2.0")
    assert (result["exact"], result["total"]) == (200.0 / 3, 3)
    assert result["f1"] == 100.0 * (1 + 1 + 2 / 3) / 3
    # A prediction that also normalises to nothing: v1.1 EM 1 / F1 0, v2.0 EM 1 / F1 1.
    preds = {"q1": "x", "q2": "an", "q3": "x", "q4": "x"}
    assert squad_evaluate(HAND, preds) == {"exact_match": 25.0, "f1": 0.0}
    assert squad_evaluate(HAND, preds, version="2.0")["f1"] == 25.0


def test_rules_come_from_the_version_field_or_the_override():
    assert squad_rules({"version": "1.1"}) == "v1.1" and squad_rules({"version": "v2.0"}) == "v2.0"
    assert squad_rules({"version": "1.1"}, "2.0") == "v2.0"
    assert squad_rules({"data": []}, "v1.1") == "v1.1"
    with pytest.raises(ValueError, match="no 'version' field"):
        squad_rules({"data": []})
    with pytest.raises(ValueError, match="'3.0' is not one of"):
        squad_rules({"version": "3.0"})


def test_v11_rules_refuse_unanswerable_questions_and_na_probs():
    data = _dataset("v2.0", _qa("q1", "x"), _qa("q2"))
    with pytest.raises(ValueError, match="q2 has no gold answer"):
        squad_evaluate(data, {"q1": "x", "q2": ""}, version="1.1")
    with pytest.raises(ValueError, match="belong to the v2.0 rules"):
        squad_evaluate(HAND, HAND_PREDS, {"q1": 0.5})


# ------------------------------------------------------------------ real dev sets
def _load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def _all_qas(data):
    return [qa for article in data["data"] for p in article["paragraphs"] for qa in p["qas"]]


def test_v11_dev_with_missing_ids_and_empty_gold(shared):
    data = _load(shared("squad", "dev-v1.1.json"))
    preds = _load(shared("squad", "bert-predictions-dev-v1.1.json"))
    qas = _all_qas(data)
    missing = [qa["id"] for qa in qas[::814]]  # 13 ids, spread over the file
    assert len(missing) == 13
    partial = {k: v for k, v in preds.items() if k not in missing}
    result = squad_evaluate(data, partial)
    reference, unanswered = _official_v11(data["data"], partial)
    assert result == reference and unanswered == missing
    # Same sums as the v2.0 rules, over all 10,570 questions instead of 10,557.
    v2 = squad_evaluate(data, partial, version="v2.0")
    assert v2["total"] == 10557
    assert result["exact_match"] == pytest.approx(v2["exact"] * 10557 / 10570, abs=1e-9)
    assert result["f1"] == pytest.approx(v2["f1"] * 10557 / 10570, abs=1e-9)
    assert round(result["exact_match"], 4) != round(v2["exact"], 4)

    # Gold answers that normalise to nothing, with empty and non-empty predictions.
    blanked = copy.deepcopy(data)
    chosen = _all_qas(blanked)[5::1000]
    for i, qa in enumerate(chosen):
        for answer in qa["answers"]:
            answer["text"] = ("The", "  ", "a, an!")[i % 3]
        partial[qa["id"]] = ("", "the", preds[qa["id"]])[i % 3]
    result = squad_evaluate(blanked, partial)
    assert result == _official_v11(blanked["data"], partial)[0]
    v2 = squad_evaluate(blanked, partial, version="v2.0")
    assert v2["f1"] * v2["total"] > result["f1"] * 10570 + 100 * 6  # >= 7 pairs scored 1 vs 0


def test_v20_dev_missing_ids_are_left_out(shared):
    data = _load(shared("squad", "dev-v2.0.json"))
    preds = _load(shared("squad", "bert-predictions-dev-v2.0.json"))
    missing = {qa["id"] for qa in _all_qas(data)[::997]}
    partial = {k: v for k, v in preds.items() if k not in missing}
    result = squad_evaluate(data, partial)  # v2.0 rules, from the version field
    # Exactly the scores of the dataset without those questions.
    reduced = copy.deepcopy(data)
    for article in reduced["data"]:
        for paragraph in article["paragraphs"]:
            paragraph["qas"] = [qa for qa in paragraph["qas"] if qa["id"] not in missing]
    assert result == squad_evaluate(reduced, partial)
    assert result["total"] == 11873 - len(missing)
    full = squad_evaluate(data, preds)
    assert (round(full["exact"], 3), round(full["f1"], 3)) == (78.742, 81.775)


# ------------------------------------------------------------------ the command
def _write(tmp_path, data, preds):
    (tmp_path / "d.json").write_text(json.dumps(data), encoding="utf-8")
    (tmp_path / "p.json").write_text(json.dumps(preds), encoding="utf-8")
    return str(tmp_path / "d.json"), str(tmp_path / "p.json")


def test_squad_eval_v11_counts_unanswered_questions(tmp_path, capsys):
    data, preds = _write(tmp_path, HAND, HAND_PREDS)
    assert main(["squad-eval", data, preds]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {"exact_match": 50.0, "f1": 100.0 * (1 + 2 / 3) / 4}
    assert "Unanswered question q4 will receive score 0." in err
    assert main(["squad-eval", data, preds, "--squad-version", "2.0"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["total"] == 3 and "Missing prediction for q4" in err


def test_squad_eval_needs_a_known_version(tmp_path, capsys):
    data, preds = _write(tmp_path, {"data": HAND["data"]}, HAND_PREDS)
    assert main(["squad-eval", data, preds]) == 1
    assert "no 'version' field" in capsys.readouterr().err
    assert main(["squad-eval", data, preds, "--squad-version", "v1.1"]) == 0
    capsys.readouterr()
    data, preds = _write(tmp_path, HAND, HAND_PREDS)
    assert main(["squad-eval", data, preds, "--na-prob-thresh", "0.5"]) == 1
    assert "need the v2.0 rules" in capsys.readouterr().err
