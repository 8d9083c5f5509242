"""SWAG CSV and generic CSV/TSV/JSONL readers on small files the tests write."""

from __future__ import annotations

import json

import pytest

from bertkit.errors import DataFormatError
from bertkit.tasks.formats import read_swag, read_text_classification, read_token_classification

SWAG_HEADER = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def test_swag_rows_with_quotes(tmp_path):
    row = '0,v1,5,"She opens, then","She opens the door.",She,gold,walks,"says ""hi""",runs,sits,1\n'
    [example] = read_swag(_write(tmp_path, "val.csv", SWAG_HEADER + row))
    assert (example.id, example.context, example.start) == ("5", "She opens the door.", "She")
    assert example.endings == ["walks", 'says "hi"', "runs", "sits"] and example.label == 1


def test_swag_test_file_without_label(tmp_path):
    header = SWAG_HEADER.replace(",label\n", "\n")
    [example] = read_swag(_write(tmp_path, "test.csv", header + "0,v,9,s,A.,B,g,e0,e1,e2,e3\n"))
    assert example.label is None and example.id == "9"


def test_swag_bad_rows_name_lines(tmp_path):
    good = "0,v,1,s,A.,B,g,e0,e1,e2,e3,0\n"
    with pytest.raises(DataFormatError, match=r"train.csv:3: unknown label '4'"):
        read_swag(_write(tmp_path, "train.csv", SWAG_HEADER + good + "1,v,2,s,A.,B,g,e0,e1,e2,e3,4\n"))
    with pytest.raises(DataFormatError, match=r"train.csv:3: expected 12 fields"):
        read_swag(_write(tmp_path, "train.csv", SWAG_HEADER + good + "1,v,2,s,A.,B\n"))
    multiline = '0,v,1,s,"A\nB.",B,g,e0,e1,e2,e3,0\n'
    with pytest.raises(DataFormatError, match=r"train.csv:4: unknown label '9'"):
        read_swag(_write(tmp_path, "train.csv", SWAG_HEADER + multiline + "1,v,2,s,A.,B,g,e0,e1,e2,e3,9\n"))


def test_generic_csv_tsv_jsonl(tmp_path):
    csv_path = _write(tmp_path, "d.csv", 'id,text,other,label\na,"Hi, there",x,pos\nb,Bye,y,neg\n')
    examples = read_text_classification(csv_path, pair_column="other", id_column="id",
                                        labels=["neg", "pos"])
    assert [(e.guid, e.text_a, e.text_b, e.label) for e in examples] == [
        ("a", "Hi, there", "x", "pos"), ("b", "Bye", "y", "neg")]
    tsv_path = _write(tmp_path, "d.tsv", 'text\tscore\n"quoted\t0.5\n')
    [example] = read_text_classification(tsv_path, label_column="score", regression=True)
    assert (example.text_a, example.label, example.line) == ('"quoted', 0.5, 2)
    jsonl = _write(tmp_path, "d.jsonl", json.dumps({"text": "A", "label": 1}) + "\n\n"
                   + json.dumps({"text": "B", "label": 0}) + "\n")
    assert [e.label for e in read_text_classification(jsonl)] == ["1", "0"]
    unlabelled = read_text_classification(jsonl, label_column=None)
    assert [e.label for e in unlabelled] == [None, None]


def test_generic_errors_name_file_and_line(tmp_path):
    csv_path = _write(tmp_path, "d.csv", "text,label\nfine,pos\nodd,maybe\n")
    with pytest.raises(DataFormatError, match=r"d.csv:3: unknown label 'maybe'"):
        read_text_classification(csv_path, labels=["neg", "pos"])
    with pytest.raises(DataFormatError, match=r"d.csv:2: missing column 'sentence'"):
        read_text_classification(csv_path, text_column="sentence")
    ragged = _write(tmp_path, "r.tsv", "text\tlabel\na\t1\nb\n")
    with pytest.raises(DataFormatError, match=r"r.tsv:3: expected 2 fields"):
        read_text_classification(ragged)
    bad_json = _write(tmp_path, "b.jsonl", '{"text": "a", "label": 1}\n{"text": \n')
    with pytest.raises(DataFormatError, match=r"b.jsonl:2: invalid JSON"):
        read_text_classification(bad_json)
    with pytest.raises(DataFormatError, match=r"b.jsonl:2: not valid UTF-8"):
        read_text_classification(_write(tmp_path, "b.jsonl", b'{"text": "a", "label": 1}\n\xff\n'))
    with pytest.raises(DataFormatError, match="cannot tell the format"):
        read_text_classification(_write(tmp_path, "x.txt", "text\n"))


def test_generic_token_classification(tmp_path):
    jsonl = _write(tmp_path, "t.jsonl", json.dumps({"tokens": ["EU", "rejects"], "tags": ["I-ORG", "O"]}) + "\n")
    [sentence] = read_token_classification(jsonl, to_iob2=True)
    assert (sentence.words, sentence.tags) == (["EU", "rejects"], ["B-ORG", "O"])
    conll = _write(tmp_path, "t.conll", "EU B-ORG\nrejects O\n")
    assert read_token_classification(conll)[0].tags == ["B-ORG", "O"]
    mismatch = _write(tmp_path, "m.jsonl", "\n" + json.dumps({"tokens": ["a", "b"], "tags": ["O"]}) + "\n")
    with pytest.raises(DataFormatError, match=r"m.jsonl:2: 2 tokens but 1 tags"):
        read_token_classification(mismatch)
    with pytest.raises(DataFormatError, match=r"t.jsonl:1: unknown tag 'I-ORG'"):
        read_token_classification(jsonl, labels=["O", "B-ORG"])


def test_an_empty_label_is_an_error_not_a_class(tmp_path):
    from bertkit.errors import DataFormatError
    from bertkit.tasks.formats.generic import read_text_classification

    path = tmp_path / "train.tsv"
    path.write_text("text\tlabel\na good day\tpos\na bad day\t\nfine\tneg\n")
    with pytest.raises(DataFormatError, match=r"train.tsv:3: empty label"):
        read_text_classification(path)


def test_a_jsonl_line_holding_a_lone_surrogate_is_named(tmp_path):
    """2026-11-25 faults #331: predict said only "'utf-8' codec can't encode character '\\ud800'",
    with no file or line."""
    path = _write(tmp_path, "p.jsonl", '{"text": "fine"}\n{"text": "bad \\ud800 film"}\n')
    with pytest.raises(DataFormatError, match=r"p.jsonl:2: a string holds a lone surrogate \(\\ud800\)"):
        read_text_classification(path, label_column=None)
    ok = _write(tmp_path, "q.jsonl", '{"text": "caf\\u00e9 \\ud83d\\ude00"}\n')  # a pair is fine
    assert [e.text_a for e in read_text_classification(ok, label_column=None)] == ["café 😀"]
