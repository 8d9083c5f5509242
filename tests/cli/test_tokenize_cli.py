"""``bertkit tokenize`` prints tokens, ids and segment ids."""

from __future__ import annotations

import json

from bertkit.cli.main import main


def test_tokenize_pair_json(tiny_vocab_file, capsys):
    assert main(["tokenize", "--vocab", str(tiny_vocab_file), "--pair", "the store",
                 "--json", "--offsets", "He went"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["tokens"] == ["[CLS]", "he", "went", "[SEP]", "the", "store", "[SEP]"]
    assert record["token_type_ids"] == [0, 0, 0, 0, 1, 1, 1]
    assert record["offsets"][1] == [0, 2]


def test_tokenize_table_and_bad_vocab(tiny_vocab_file, tmp_path, capsys):
    assert main(["tokenize", "--vocab", str(tiny_vocab_file), "the man"]) == 0
    assert "man" in capsys.readouterr().out
    bad = tmp_path / "bad.txt"
    bad.write_text("a\nb\n", encoding="utf-8")
    assert main(["tokenize", "--vocab", str(bad), "x"]) == 1
    assert "lacks the special tokens" in capsys.readouterr().err
