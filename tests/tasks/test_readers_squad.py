"""SQuAD JSON reader: real dev sets and malformed files."""

from __future__ import annotations

import json

import pytest

from bertkit.errors import DataFormatError
from bertkit.tasks.formats import read_squad


def test_real_squad_v11(shared):
    examples = read_squad(shared("squad", "dev-v1.1.json"))
    assert len(examples) == 10570
    assert not any(e.is_impossible for e in examples)
    assert len({e.qid for e in examples}) == 10570 and all(e.title for e in examples)
    assert all(e.answers for e in examples)


def test_real_squad_v20(shared):
    examples = read_squad(shared("squad", "dev-v2.0.json"))
    assert len(examples) == 11873
    impossible = [e for e in examples if e.is_impossible]
    assert len(impossible) == 5945 and all(not e.answers for e in impossible)


def _squad(tmp_path, qa, context="The cat sat on the mat."):
    path = tmp_path / "data.json"
    data = {"version": "v2.0", "data": [{"title": "T", "paragraphs": [{"context": context, "qas": [qa]}]}]}
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_answer_not_at_answer_start_names_question(tmp_path):
    qa = {"id": "q7", "question": "Where?", "answers": [{"text": "the mat", "answer_start": 3}]}
    with pytest.raises(DataFormatError, match=r"question q7: answer 'the mat' is not at answer_start 3"):
        read_squad(_squad(tmp_path, qa))


def test_good_example_and_missing_field(tmp_path):
    qa = {"id": "q1", "question": "Where?", "answers": [{"text": "the mat", "answer_start": 15}]}
    [example] = read_squad(_squad(tmp_path, qa))
    assert (example.qid, example.answers[0].text, example.is_impossible) == ("q1", "the mat", False)
    del qa["question"]
    with pytest.raises(DataFormatError, match=r"question q1: missing field 'question'"):
        read_squad(_squad(tmp_path, qa))


def test_impossible_with_answers_is_an_error(tmp_path):
    qa = {"id": "q2", "question": "?", "is_impossible": True,
          "answers": [{"text": "The", "answer_start": 0}]}
    with pytest.raises(DataFormatError, match="is_impossible is true but it has answers"):
        read_squad(_squad(tmp_path, qa))


def test_json_syntax_error_names_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"data": [\n  {"title": "x",\n  "paragraphs": [}\n]}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"bad.json:3: invalid JSON") as info:
        read_squad(path)
    assert info.value.line == 3


def test_undecodable_bytes_name_the_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_bytes(b'{"data":\n[\xff]}\n')
    with pytest.raises(DataFormatError, match=r"bad.json:2: not valid UTF-8"):
        read_squad(path)
