"""The [UNK] rate of a text and its likely cause."""

from __future__ import annotations

import warnings

import pytest

from bertkit.cli.main import main
from bertkit.tokenizer import BertTokenizer, Vocab
from bertkit.tokenizer.unknown import WARN_RATE, UnknownReport, unknown_report, warn_unknown

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
KOREAN = ["대한민국은 민주공화국이다.", "모든 국민은 법 앞에 평등하다."]


def cased_korean_vocab() -> Vocab:
    words = {w for line in KOREAN for w in BertTokenizer(Vocab(SPECIALS), lowercase=False).basic.words(line)}
    return Vocab(SPECIALS + sorted(words))


def test_casing_is_named_with_the_flag_that_fixes_it():
    tok = BertTokenizer(cased_korean_vocab(), lowercase=True)  # NFD: Hangul becomes jamo
    report = unknown_report(tok, KOREAN)
    assert report.unknown == 7 and report.tokens == 9  # every word but the two full stops
    assert "likely the casing" in report.cause and "--cased" in report.cause
    assert "0.0% [UNK] instead of 77.8%" in report.cause
    fixed = unknown_report(BertTokenizer(cased_korean_vocab(), lowercase=False), KOREAN)
    assert fixed.unknown == 0 and fixed.cause is None


def test_accents_are_named():
    vocab = Vocab(SPECIALS + ["café", "crème", "##é"])
    report = unknown_report(BertTokenizer(vocab, lowercase=True), ["Café crème"])
    assert report.rate == 1.0
    assert "likely the accents" in report.cause and "--no-strip-accents" in report.cause


def test_a_vocabulary_of_another_script_is_named(tiny_vocab_file):
    report = unknown_report(BertTokenizer.from_file(tiny_vocab_file), KOREAN + ["the man went"])
    assert report.unknown == 7
    assert "the vocabulary has no HANGUL characters" in report.cause
    assert "another language" in report.cause


def test_missing_characters_of_a_known_script_are_named():
    vocab = Vocab(SPECIALS + ["대", "##한", "##민", "##국"])
    report = unknown_report(BertTokenizer(vocab, lowercase=False), ["대한민국 만세"])
    assert "characters missing from the vocabulary: 만 세 (HANGUL)" in report.cause


def test_warn_only_above_the_threshold():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_unknown(UnknownReport(1000, int(1000 * WARN_RATE))) is None
    with pytest.warns(UserWarning, match=r"5.0% of the tokens of the corpus \(5 of 100\) are \[UNK\]: why"):
        warn_unknown(UnknownReport(100, 5, "why"), "the corpus")


def test_tokenize_warns_with_the_cause(tiny_vocab_file, capsys):
    with pytest.warns(UserWarning, match="has no HANGUL characters"):
        assert main(["tokenize", "--vocab", str(tiny_vocab_file), KOREAN[0]]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["tokenize", "--vocab", str(tiny_vocab_file), "the man went"]) == 0
