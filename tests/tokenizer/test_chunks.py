"""The per-chunk cache of the offsets path gives what tokenizing the whole text gives."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bertkit.tokenizer import BertTokenizer, Vocab
from bertkit.tokenizer.basic import CharNormalizer
from bertkit.tokenizer.chunks import SPACE_RUN_RE, ChunkCache
from tests.conftest import TINY_VOCAB

# Tokens that make 'İ' (lower-cased: 'i' + U+0307 when accents are kept) two tokens of one
# character's span, and a vocabulary word for cached chunks.
VOCAB = TINY_VOCAB + ["i", "##\u0307", "x", "##x"]

HARD_TEXTS = [
    "", " ", "   ", "\t\n\r ", "the man", "  the  man\t\twent \n", "the man ",
    "a\x1cb c\x85d e\x1fthe\x0bman\x0cwent",  # white space that BERT drops (joins the words)
    "\x1c", " \x85 ", "the\x00 man\x01 \x02\x03 went",  # chunks that end in, or are only, dropped characters
    "cafe\u0301 cafe\u0301  the", "\u0301 the", "İ İ  xİx", "İ\u0307 Σ ΟΔΟΣ ΟΔΟΣ. σ",
    "中国 人a中 国", "the\u3000man\xa0went\u2028to\u2029store\u2009!", "unwanted, running!",
    "a" * 120 + " the " + "a" * 99, "x [MASK] the[SEP]man", "\ufffd the \ufffd",
]


@pytest.fixture(scope="module", params=["uncased", "cased", "lower-keep-accents", "google"])
def tok(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    options = {"uncased": {}, "cased": {"lowercase": False},
               "lower-keep-accents": {"strip_accents": False},
               "google": {"google_compat": True}}[request.param]
    return BertTokenizer.from_file(path, **options)


def test_space_runs_are_exactly_what_bert_turns_into_a_space():
    """The chunk boundaries: every character ``SPACE_RUN_RE`` cuts at normalises to a space,
    and every character that normalises to a space and that ``str.split()`` cuts at is one."""
    for google in (False, True):
        chars = CharNormalizer(lowercase=True, strip_accents=True, google_compat=google)
        for code in range(sys.maxunicode + 1):
            c = chr(code)
            cut = SPACE_RUN_RE.fullmatch(c) is not None
            if cut or c.isspace():
                assert cut == (chars[c] == " "), (hex(code), google)


def test_hard_texts_equal_the_whole_text_computed_afresh(tok):
    for text in HARD_TEXTS:
        expected = tok._words_with_offsets(text) if "[" not in text else None
        for _ in range(2):  # the first call fills the cache, the second reads it
            got = tok._chunks.ids_and_offsets(text)
            if expected is not None:
                assert got == expected, text
            assert tok._chunks.ids_and_offsets(text, base=7) == (got[0], [(a + 7, b + 7) for a, b in got[1]])


def test_one_character_that_becomes_two_tokens_gives_both_its_span(tok):
    """With accents kept, 'İ' lower-cases to 'i' + U+0307: two tokens, one span each."""
    if not tok.lowercase or tok.strip_accents:
        pytest.skip("needs lower-casing with accents kept")
    ids, offsets = tok.text_to_ids_and_offsets("İ İ  xİ")
    assert tok.convert_ids_to_tokens(ids) == ["i", "##\u0307", "i", "##\u0307", "[UNK]"]
    assert offsets == [(0, 1), (0, 1), (2, 3), (2, 3), (5, 7)]


def test_special_tokens_in_text_shift_the_offsets_of_what_follows():
    tok = BertTokenizer(Vocab(VOCAB))
    ids, offsets = tok.text_to_ids_and_offsets("the [MASK]  man went")
    assert tok.convert_ids_to_tokens(ids) == ["the", "[MASK]", "man", "went"]
    assert offsets == [(0, 3), (4, 10), (12, 15), (16, 20)]


def test_cache_is_bounded_and_still_right():
    tok = BertTokenizer(Vocab(VOCAB))
    cache = ChunkCache(tok._words_with_offsets, max_size=3)
    text = "the man went to the store , he was good"
    expected = tok._words_with_offsets(text)
    for _ in range(3):
        assert cache.ids_and_offsets(text) == expected
        assert len(cache) <= 3


TEXTS = st.lists(st.one_of(st.sampled_from(list(" \t\n\x1c\x85\x00\u0301\u0307İΣσ中.,!\u3000\xa0") + VOCAB[5:]),
                           st.characters()), max_size=30).map("".join)


@given(text=TEXTS)
def test_cached_equals_the_whole_text_computed_afresh(tok, text):
    text = text.replace("[", "(")  # special tokens in text are split out before the cache
    expected = tok._words_with_offsets(text)
    assert tok._chunks.ids_and_offsets(text) == expected
    assert tok._chunks.ids_and_offsets(text) == expected  # from the cache
