"""``bertkit squad-eval`` and ``bertkit conll-eval``."""

from __future__ import annotations

import json

import pytest

from bertkit.cli.main import main


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("version,expected", [
    ("1.1", {"exact_match": 86.206, "f1": 92.196}),
    ("2.0", {"exact": 78.742, "f1": 81.775, "total": 11873, "HasAns_exact": 74.106,
             "HasAns_f1": 80.182, "HasAns_total": 5928, "NoAns_exact": 83.364, "NoAns_total": 5945}),
])
def test_squad_eval_reproduces_official_figures(shared, capsys, version, expected):
    data = shared("squad", f"dev-v{version}.json")
    preds = shared("squad", f"bert-predictions-dev-v{version}.json")
    code, out, _ = _run(capsys, "squad-eval", str(data), str(preds))
    assert code == 0
    result = json.loads(out)
    assert out.startswith('{\n  "exact')  # json.dumps(indent=2)
    assert list(result)[:2] == list(expected)[:2]  # the script's keys, in its order
    assert {k: round(result[k], 3) for k in expected} == expected


def _tiny_squad(tmp_path):
    qas = [{"id": "q1", "question": "?", "answers": [{"text": "cat", "answer_start": 4}]},
           {"id": "q2", "question": "?", "answers": [], "is_impossible": True}]
    data = {"version": "v2.0",
            "data": [{"title": "t", "paragraphs": [{"context": "The cat.", "qas": qas}]}]}
    (tmp_path / "data.json").write_text(json.dumps(data), encoding="utf-8")
    (tmp_path / "preds.json").write_text(json.dumps({"q1": "the cat", "q2": "cat"}), encoding="utf-8")
    (tmp_path / "na.json").write_text(json.dumps({"q1": 0.2, "q2": 0.9}), encoding="utf-8")
    return tmp_path / "data.json", tmp_path / "preds.json", tmp_path / "na.json"


def test_squad_eval_na_prob_and_out_file(tmp_path, capsys):
    data, preds, na = _tiny_squad(tmp_path)
    out_file = tmp_path / "eval.json"
    code, out, _ = _run(capsys, "squad-eval", str(data), str(preds), "--na-prob", str(na),
                        "--na-prob-thresh", "0.5", "--out-file", str(out_file))
    assert code == 0 and out == ""
    result = json.loads(out_file.read_text())
    assert (result["exact"], result["best_exact"], result["best_exact_thresh"]) == (100.0, 100.0, 0.2)


def test_squad_eval_bad_predictions_file(tmp_path, capsys):
    data, preds, _ = _tiny_squad(tmp_path)
    preds.write_text('["not", "a dict"]', encoding="utf-8")
    code, _, err = _run(capsys, "squad-eval", str(data), str(preds))
    assert code == 1 and "expected a JSON object of predictions" in err


def test_conll_eval_report_and_json(tmp_path, capsys):
    path = tmp_path / "out.txt"
    path.write_text("EU B-ORG B-ORG\nrejects O O\nGerman B-MISC B-LOC\n\nPeter B-PER B-PER\n",
                    encoding="utf-8")
    code, out, _ = _run(capsys, "conll-eval", str(path))
    assert code == 0
    assert out.splitlines()[0] == "processed 4 tokens with 3 phrases; found: 3 phrases; correct: 2."
    assert "FB1:  66.67" in out.splitlines()[1]
    assert out.splitlines()[2] == "              LOC: precision:   0.00%; recall:   0.00%; FB1:   0.00  1"
    code, out, _ = _run(capsys, "conll-eval", str(path), "--json")
    assert json.loads(out)["f1"] == pytest.approx(2 / 3)


def test_squad_eval_names_the_wrong_field_and_the_wrong_file(tmp_path, capsys):
    import json

    from bertkit.cli.main import main

    good_qa = {"id": "q1", "question": "?", "answers": [{"text": "a", "answer_start": 0}]}
    data = {"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": "a b", "qas": [good_qa, {"id": "q2", "question": "?", "answers": "a"}]}]}]}
    (tmp_path / "d.json").write_text(json.dumps(data))
    (tmp_path / "p.json").write_text(json.dumps({"q1": "a", "q2": "b"}))
    assert main(["squad-eval", str(tmp_path / "d.json"), str(tmp_path / "p.json")]) == 1
    err = capsys.readouterr().err
    assert "d.json: " in err and "answers" in err and "Traceback" not in err
    data["data"][0]["paragraphs"][0]["qas"] = [good_qa]
    (tmp_path / "d.json").write_text(json.dumps(data))
    (tmp_path / "na.json").write_text(json.dumps({"q1": "high"}))
    assert main(["squad-eval", str(tmp_path / "d.json"), str(tmp_path / "p.json"),
                 "--na-prob", str(tmp_path / "na.json")]) == 1
    err = capsys.readouterr().err
    assert "na.json: the no-answer probability for q1 is not a number" in err
