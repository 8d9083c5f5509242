"""``google_compat=True``: exactly the ids of Google's original ``tokenization.py``.

Compared with a test-only transcription of Google's algorithm (``google_reference``) on
Greek, long words, mixed scripts and real text; the default stays Hugging Face's.
"""

from __future__ import annotations

import json

import pytest

from bertkit.tokenizer import BertTokenizer, Vocab
from tests.conftest import shared_path
from tests.tokenizer.google_reference import GoogleFullTokenizer, load_vocab

GREEK_VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "ο", "##δ", "##ος", "##ο", "##σ", "##ς",
    "σ", "ς", "α", "##α", "β", "##β", "a", "##a", "b", "[", "]", "mask", "sep", ".", "-", "i",
    "\ue000", "\u0378", "中", "x", "##x",
]

CASES = [
    "ΟΔΟΣ", "ΟΔΟΣ.", "ΟΔΟΣ-Α", "Σ", "ΑΣ", "ΑΣΑ", "ΑΣ Β", "ΑΣ.Β", "ΑΣ\u00adΒ", "ΑΣ\x01Β",
    "ΑΣ\ufffdΒ", "ΑΣ\u200bΒ", "Α\u0301Σ", "Α\u0301Σ\u0301", "ΑΣ\u2028Β", "ΑΣ中Β", "ΑΣ[MASK]",
    "a" * 99, "a" * 100, "a" * 101, "a" * 199, "a" * 200, "a" * 201, "x" * 300,
    "[MASK] a [SEP]", "x[MASK]x", "private \ue000 unassigned \u0378 chars", "\ue000\u0378",
    "İstanbul ΣΊΣΥΦΟΣ straße ǅ ﬁ Ⅻ", "soft\u00adhyphen zero\u200bwidth\ufeffbom",
    "control\x00\x01\x07chars\x7f\x9f here", "nbsp\u00a0line\u2028para\u2029end",
    "中文字符测试，混合English文本。", "ქართული Ελληνικά русский עברית العربية हिन्दी",
    "emoji 😀👍🏽 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "a\u0301e\u0300 combining", "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ",
]


def _pair(vocab_tokens=None, path=None, lowercase=True):
    """(bertkit google mode, bertkit default, reference) over one vocabulary."""
    vocab = Vocab(vocab_tokens) if vocab_tokens is not None else Vocab.from_file(path)
    google = BertTokenizer(vocab, lowercase=lowercase, google_compat=True)
    default = BertTokenizer(vocab, lowercase=lowercase)
    table = ({t: i for i, t in enumerate(vocab_tokens)} if vocab_tokens is not None
             else load_vocab(path))
    return google, default, GoogleFullTokenizer(table, do_lower_case=lowercase)


def _assert_same(tok, ref, texts):
    bad = [t for t in texts if tok.text_to_ids(t) != ref.ids(t)]
    assert not bad, f"{len(bad)} of {len(texts)} differ from Google's, e.g. {bad[:3]!r}"
    # The offsets path gives the same ids, and each span is a piece of the original text.
    for text in texts:
        ids, offsets = tok.text_to_ids_and_offsets(text)
        assert ids == ref.ids(text)
        assert all(0 <= a < b <= len(text) for a, b in offsets)


def test_final_sigma_and_the_default():
    google, default, ref = _pair(GREEK_VOCAB)
    assert google.tokenize("ΟΔΟΣ") == ["ο", "##δ", "##ος"] == ref.tokenize("ΟΔΟΣ")
    assert default.tokenize("ΟΔΟΣ") == ["ο", "##δ", "##ο", "##σ"]  # Hugging Face, per character
    enc = google.encode("ΟΔΟΣ", return_offsets=True)
    assert enc.offsets[1:-1] == [(0, 1), (1, 2), (2, 4)]


def test_long_words_up_to_200_characters():
    google, default, ref = _pair(GREEK_VOCAB)
    assert google.tokenize("a" * 200) == ["a"] + ["##a"] * 199 == ref.tokenize("a" * 200)
    assert google.tokenize("a" * 201) == ["[UNK]"]
    assert default.tokenize("a" * 101) == ["[UNK]"]


def test_special_tokens_in_text_are_split_like_google():
    google, default, ref = _pair(GREEK_VOCAB)
    assert google.tokenize("[MASK] a") == ["[", "mask", "]", "a"] == ref.tokenize("[MASK] a")
    assert default.tokenize("[MASK] a") == ["[MASK]", "a"]


@pytest.mark.parametrize("lowercase", [True, False])
def test_cases_against_google_tiny_vocab(lowercase):
    google, _, ref = _pair(GREEK_VOCAB, lowercase=lowercase)
    _assert_same(google, ref, CASES)


def test_default_differs_from_google_where_documented():
    _, default, ref = _pair(GREEK_VOCAB)
    differing = [t for t in CASES if default.text_to_ids(t) != ref.ids(t)]
    assert "ΟΔΟΣ" in differing and "a" * 150 not in CASES
    assert "a" * 101 in differing and "\ue000\u0378" in differing and "[MASK] a [SEP]" in differing


def test_save_and_load_keeps_the_mode(tmp_path):
    google, _, _ = _pair(GREEK_VOCAB)
    google.save_pretrained(tmp_path)
    loaded = BertTokenizer.from_pretrained(tmp_path)
    assert loaded.google_compat and loaded.tokenize("ΟΔΟΣ") == ["ο", "##δ", "##ος"]
    with pytest.raises(ValueError, match="google_compat"):
        BertTokenizer(Vocab(GREEK_VOCAB), strip_accents=False, google_compat=True)


# ------------------------------------------------------------------ real vocabulary and text
@pytest.fixture(scope="module")
def real():
    return _pair(path=shared_path("vocab", "bert-base-uncased-vocab.txt"))


@pytest.mark.parametrize("lowercase", [True, False])
def test_cases_against_google_real_vocab(lowercase):
    google, _, ref = _pair(path=shared_path("vocab", "bert-base-uncased-vocab.txt"),
                           lowercase=lowercase)
    _assert_same(google, ref, CASES + [c.upper() for c in CASES] + [c.lower() for c in CASES])


def _sample(name, every):
    """Every non-ASCII line of a corpus, and every ``every``-th other line."""
    lines = shared_path("corpus", name).read_text(encoding="utf-8").splitlines()
    return [line for i, line in enumerate(lines) if line and (not line.isascii() or i % every == 0)]


@pytest.mark.parametrize("name", ["kjv.txt", "python-docs.txt", "linux-docs.txt"])
def test_real_corpora_identical_ids(real, name):
    google, _, ref = real
    lines = _sample(name, 25)
    assert len(lines) > 1000
    bad = [t for t in lines if google.text_to_ids(t) != ref.ids(t)]
    assert not bad, f"{len(bad)} of {len(lines)} lines differ, e.g. {bad[:2]!r}"


def test_pretrain_data_google_tokenizer_flag(tmp_path, capsys):
    from bertkit.cli.main import main

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(GREEK_VOCAB) + "\n", encoding="utf-8")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(("ΟΔΟΣ " + "a" * 150 + "\nb a.\n\nx a b\na.\n\n") * 3, encoding="utf-8")
    summaries = {}
    for flag in ([], ["--google-tokenizer"]):
        out = tmp_path / f"data{len(flag)}"
        assert main(["pretrain-data", "--input", str(corpus), "--vocab", str(vocab), "--output",
                     str(out), "--dupe-factor", "1", "--max-seq-length", "256", "--quiet",
                     *flag]) == 0
        meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
        assert meta["settings"]["google_tokenizer"] == bool(flag)
        summaries[bool(flag)] = meta["summary"]
    capsys.readouterr()
    # The 150-character word is 150 pieces in Google mode, one [UNK] by default: every
    # instance holding one of its 3 copies is far longer.
    assert summaries[True]["tokens"] > summaries[False]["tokens"] + 3 * 100
