"""CoNLL reader: real CoNLL-2003 counts, IOB1 conversion, malformed files."""

from __future__ import annotations

import pytest

from bertkit.errors import DataFormatError
from bertkit.metrics import get_entities
from bertkit.tasks.formats import iob1_to_iob2, read_conll

CONLL_TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC"]


@pytest.mark.parametrize("split,count", [("train", 14041), ("dev", 3250), ("test", 3453)])
def test_real_conll2003_sentence_counts(shared, split, count):
    sentences = read_conll(shared("conll2003", f"{split}.txt"), labels=CONLL_TAGS)
    assert len(sentences) == count
    assert all(len(s.words) == len(s.tags) > 0 for s in sentences)
    # The shared files are IOB2 already: converting changes nothing.
    assert all(iob1_to_iob2(s.tags) == s.tags for s in sentences[:500])


def test_real_conll2003_first_sentence(shared):
    first = read_conll(shared("conll2003", "train.txt"))[0]
    assert first.words[:3] == ["EU", "rejects", "German"]
    assert first.tags[:3] == ["B-ORG", "O", "B-MISC"] and first.line == 1


def _write(tmp_path, text, name="data.txt"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def test_docstart_blank_lines_and_four_columns(tmp_path):
    text = ("-DOCSTART- -X- -X- O\n\nEU NNP B-NP I-ORG\nrejects VBZ B-VP O\n\n\n"
            "Peter NNP B-NP I-PER\nBlackburn NNP I-NP I-PER\n-DOCSTART- -X- -X- O\n"
            "Paris NNP B-NP I-LOC\n")
    sentences = read_conll(_write(tmp_path, text))
    assert [(s.words, s.tags, s.line) for s in sentences] == [
        (["EU", "rejects"], ["I-ORG", "O"], 3),
        (["Peter", "Blackburn"], ["I-PER", "I-PER"], 7),
        (["Paris"], ["I-LOC"], 10),
    ]
    converted = read_conll(_write(tmp_path, text), to_iob2=True)
    assert converted[0].tags == ["B-ORG", "O"] and converted[1].tags == ["B-PER", "I-PER"]


def test_iob1_to_iob2_keeps_entities():
    iob1 = ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG", "B-ORG"]
    iob2 = iob1_to_iob2(iob1)
    assert iob2 == ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG", "B-ORG"]
    assert get_entities(iob1) == get_entities(iob2)


def test_ragged_columns_name_the_line(tmp_path):
    path = _write(tmp_path, "a DT O\nman NN\n")
    with pytest.raises(DataFormatError, match=r"data.txt:2: expected 3 whitespace-separated columns"):
        read_conll(path)


def test_unknown_tag_names_the_line(tmp_path):
    path = _write(tmp_path, "a DT O\nman NN B-PERSON\n")
    with pytest.raises(DataFormatError, match=r"data.txt:2: unknown tag 'B-PERSON'"):
        read_conll(path, labels=CONLL_TAGS)
    with pytest.raises(DataFormatError, match=r"data.txt:1: unknown tag 'NN'"):
        read_conll(_write(tmp_path, "man NN\n"))
    assert read_conll(_write(tmp_path, "man NN\n"), bio=False)[0].tags == ["NN"]


def test_undecodable_bytes_name_the_line(tmp_path):
    path = _write(tmp_path, b"a DT O\n\nb\xe9 NN O\n")
    with pytest.raises(DataFormatError, match=r"data.txt:3: not valid UTF-8"):
        read_conll(path)


def test_an_unknown_entity_type_is_named_with_its_line(tmp_path):
    from bertkit.errors import DataFormatError
    from bertkit.tasks import get_task

    (tmp_path / "train.txt").write_text("EU B-ORG\nrejects O\n\nPeter I-PER\nin O\nFooland I-FOO\n")
    with pytest.raises(DataFormatError, match=r"train.txt:6: unknown entity type 'FOO'"):
        get_task("conll2003").read(tmp_path, "train")


def test_a_conll_file_starting_with_a_bom_is_read_as_without_one(tmp_path, capsys):
    """2026-11-25 faults #350: conll-eval on a file starting with a BOM said "unknown tag
    '-X-'" (the -DOCSTART- line was not recognised); the TSV, CSV and JSONL readers strip it."""
    from bertkit.cli.main import main

    text = "-DOCSTART- -X- O O\n\nEU B-ORG B-ORG\nrejects O O\nGerman B-MISC B-MISC\n"
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf" + text.encode())
    (tmp_path / "plain.txt").write_text(text)
    assert main(["conll-eval", "--json", str(tmp_path / "bom.txt")]) == 0
    with_bom = capsys.readouterr().out
    assert main(["conll-eval", "--json", str(tmp_path / "plain.txt")]) == 0
    assert with_bom == capsys.readouterr().out
    assert len(read_conll(tmp_path / "bom.txt")) == 1
