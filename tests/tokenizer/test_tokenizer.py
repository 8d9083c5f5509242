"""Behaviour of the tokenizer on tiny vocabularies the tests write."""

from __future__ import annotations

import pytest

from bertkit.errors import DataFormatError
from bertkit.tokenizer import BertTokenizer, Vocab
from bertkit.tokenizer.encoding import truncated_lengths


@pytest.fixture
def tok(tiny_vocab_file):
    return BertTokenizer.from_file(tiny_vocab_file)


def test_wordpiece_greedy_longest_match(tok):
    assert tok.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert tok.tokenize("unwantedx") == ["[UNK]"]  # no segmentation: the whole word
    assert tok.tokenize("Hello, WORLD!") == ["hello", ",", "world", "!"]


def test_words_longer_than_100_chars_are_unknown(tok):
    assert tok.tokenize("s" * 101) == ["[UNK]"]


def test_accents_cjk_controls_and_special_tokens(tok):
    assert tok.tokenize("Café") == ["cafe"]
    assert tok.tokenize("中国") == ["中", "国"]
    assert tok.tokenize("he\x00llo\u200b the") == ["hello", "the"]
    assert tok.tokenize("the [MASK] .") == ["the", "[MASK]", "."]
    assert tok.tokenize("") == [] and tok.tokenize(" \t\n") == []


def test_cased_mode_keeps_case_and_accents(tiny_vocab_file):
    cased = BertTokenizer.from_file(tiny_vocab_file, lowercase=False)
    assert cased.tokenize("The cafe Café") == ["[UNK]", "cafe", "[UNK]"]


def test_encode_pair_layout_and_offsets(tok):
    enc = tok.encode("He went.", "the store", return_offsets=True)
    assert tok.convert_ids_to_tokens(enc.input_ids) == [
        "[CLS]", "he", "went", ".", "[SEP]", "the", "store", "[SEP]"]
    assert enc.token_type_ids == [0, 0, 0, 0, 0, 1, 1, 1]
    assert enc.special_tokens_mask == [1, 0, 0, 0, 1, 0, 0, 1]
    assert enc.sequence_ids == [None, 0, 0, 0, None, 1, 1, None]
    assert enc.offsets == [(0, 0), (0, 2), (3, 7), (7, 8), (0, 0), (0, 3), (4, 9), (0, 0)]
    text = "Un-wanted CAFÉ"
    enc = tok.encode(text, return_offsets=True)
    spans = [text[a:b] for a, b in enc.offsets[1:-1]]
    assert spans == ["Un", "-", "wanted", "CAFÉ"] or spans == ["Un", "-", "want", "ed", "CAFÉ"]


@pytest.mark.parametrize("n1,n2,budget,strategy,expected", [
    (10, 3, 8, "longest_first", (5, 3)),
    (3, 10, 8, "longest_first", (3, 5)),
    (10, 10, 9, "longest_first", (4, 5)),
    (10, 6, 8, "longest_first", (4, 4)),
    (10, 3, 8, "only_first", (5, 3)),
    (3, 10, 8, "only_second", (3, 5)),
    (5, None, 3, "longest_first", (3, None)),
    (2, 2, 8, "longest_first", (2, 2)),
])
def test_truncation_strategies(n1, n2, budget, strategy, expected):
    assert truncated_lengths(n1, n2, budget, strategy) == expected


def test_truncation_errors_and_warning(tok):
    with pytest.raises(ValueError, match="first sequence alone"):
        tok.encode("the", "the " * 20, max_length=8, truncation="only_first")
    with pytest.raises(ValueError, match="unknown truncation"):
        tok.encode("the " * 20, max_length=8, truncation="sideways")
    enc = tok.encode("the " * 20, max_length=8)
    assert len(enc) == 8 and enc.num_truncated == 14
    with pytest.warns(UserWarning, match="longer than max_length"):
        enc = tok.encode("the " * 20, max_length=8, truncation=None)
    assert len(enc) == 22


def test_padding(tok):
    enc = tok.encode("the man", max_length=6, padding="max_length", return_offsets=True)
    assert enc.input_ids == [2, 5, 6, 3, 0, 0]
    assert enc.attention_mask == [1, 1, 1, 1, 0, 0]
    assert enc.special_tokens_mask == [1, 0, 0, 1, 1, 1]
    assert enc.offsets[-2:] == [(0, 0), (0, 0)]
    batch = tok.encode_batch(["the", "the man went"], padding="longest")
    assert [len(e) for e in batch] == [5, 5]
    assert batch[0].attention_mask == [1, 1, 1, 0, 0]


def test_pre_tokenized_words_give_word_ids(tok):
    enc = tok.encode(["Unwanted", "running", "."], return_offsets=True)
    assert tok.convert_ids_to_tokens(enc.input_ids)[1:-1] == ["un", "##want", "##ed", "runn", "##ing", "."]
    assert enc.word_ids == [None, 0, 0, 0, 1, 1, 2, None]
    assert enc.offsets[1:4] == [(0, 2), (2, 6), (6, 8)]


def test_decode_and_conversions(tok):
    ids = tok.encode("unwanted running!").input_ids
    assert tok.decode(ids) == "[CLS] unwanted running! [SEP]"
    assert tok.decode(ids, skip_special_tokens=True) == "unwanted running!"
    assert tok.decode(ids, clean_up_tokenization_spaces=False) == "[CLS] unwanted running ! [SEP]"
    ids = tok.encode("he's unwanted, she ' s good.", add_special_tokens=False).input_ids
    assert tok.decode(ids) == "he's unwanted, she's good."
    assert tok.decode(ids, clean_up_tokenization_spaces=False) == "he ' s unwanted , she ' s good ."
    assert tok.convert_ids_to_tokens(tok.convert_tokens_to_ids(["the", "zzz"])) == ["the", "[UNK]"]


def test_save_and_load_round_trip(tok, tmp_path):
    tok.save_pretrained(tmp_path / "model")
    again = BertTokenizer.from_pretrained(tmp_path / "model")
    assert again.vocab.tokens == tok.vocab.tokens and again.lowercase
    assert again.encode("unwanted cafe").input_ids == tok.encode("unwanted cafe").input_ids


def test_saved_directory_loads_in_hugging_face(tok, tmp_path):
    transformers = pytest.importorskip("transformers")
    tok.save_pretrained(tmp_path)
    ref = transformers.BertTokenizerFast.from_pretrained(str(tmp_path))
    assert len(ref) == len(tok)
    assert ref("Unwanted running")["input_ids"] == tok.encode("Unwanted running").input_ids


def test_vocab_errors_name_file_and_line(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        Vocab.from_file(tmp_path / "missing.txt")
    path = tmp_path / "v.txt"
    path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"lacks the special tokens \[MASK\]"):
        Vocab.from_file(path)
    path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nthe\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"v.txt:7: duplicate token 'the' \(first on line 6\)"):
        Vocab.from_file(path)
    path.write_bytes(b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n\xff\xfe\n")
    with pytest.raises(DataFormatError, match=r"v.txt:6: not valid UTF-8"):
        Vocab.from_file(path)


def test_a_long_text_is_tokenised_in_pieces_with_the_same_ids(tok):
    from bertkit.tokenizer import tokenizer as module

    words = ["Café", "unwanted", "running,", "中国", "[MASK]", "he\tis", "good!\n", "x" * 120]
    text = " ".join(words[i % len(words)] for i in range(40_000))
    pieces = module.whitespace_pieces(text, 1000)
    assert "".join(pieces) == text and len(pieces) > 100
    assert all(p[0].isspace() for p in pieces[1:])  # every cut is at white space
    assert module.whitespace_pieces("a" * 5000, 1000) == ["a" * 5000]  # no white space: one piece
    assert len(text) > module.LONG_TEXT_PIECE
    assert tok.text_to_ids(text) == tok._text_to_ids(text)  # in pieces = in one go
