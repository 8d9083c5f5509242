"""Exact parity with Hugging Face ``tokenizers`` on every real text in ../shared/data.

Skips when the data or the reference library is absent.
"""

from __future__ import annotations

import json

import pytest

from bertkit.tokenizer import BertTokenizer
from tests.conftest import shared_path

tokenizers = pytest.importorskip("tokenizers")


def _lines(path) -> list[str]:
    return [line.rstrip("\n") for line in open(path, encoding="utf-8")]


def _tsv_column_texts(path, columns, header) -> list[str]:
    rows = [line.split("\t") for line in _lines(path)[1 if header else 0:] if line]
    return [row[c] for row in rows for c in columns if len(row) > max(columns)]


def _glue_texts():
    base = shared_path("glue")
    texts = []
    texts += _tsv_column_texts(base / "SST-2" / "train.tsv", [0], True)
    texts += _tsv_column_texts(base / "SST-2" / "dev.tsv", [0], True)
    for split in ("train", "dev"):
        texts += _tsv_column_texts(base / "CoLA" / f"{split}.tsv", [3], False)
        texts += _tsv_column_texts(base / "STS-B" / f"{split}.tsv", [7, 8], True)
        texts += _tsv_column_texts(base / "RTE" / f"{split}.tsv", [1, 2], True)
        texts += _tsv_column_texts(base / "WNLI" / f"{split}.tsv", [1, 2], True)
    for split in ("train", "test"):
        texts += _tsv_column_texts(base / "MRPC" / f"msr_paraphrase_{split}.txt", [3, 4], True)
    return texts


def _conll_sentences():
    sentences = []
    for split in ("train", "dev", "test"):
        words = []
        for line in _lines(shared_path("conll2003", f"{split}.txt")):
            if not line.strip():
                if words:
                    sentences.append(words)
                words = []
            else:
                words.append(line.split()[0])
        if words:
            sentences.append(words)
    return sentences


def _squad():
    contexts, questions = [], []
    for name in ("dev-v1.1.json", "dev-v2.0.json"):
        data = json.loads(shared_path("squad", name).read_text(encoding="utf-8"))
        for article in data["data"]:
            for para in article["paragraphs"]:
                contexts.append(para["context"])
                for qa in para["qas"]:
                    questions.append((qa["question"], para["context"]))
    return contexts, questions


@pytest.fixture(scope="module")
def vocab_path():
    return shared_path("vocab", "bert-base-uncased-vocab.txt")


@pytest.fixture(scope="module")
def ours(vocab_path):
    return BertTokenizer.from_file(vocab_path, lowercase=True)


def reference(vocab_path, lowercase=True, max_length=None, strategy="longest_first"):
    ref = tokenizers.BertWordPieceTokenizer(str(vocab_path), lowercase=lowercase)
    assert ref.get_vocab_size() == 30522
    if max_length:
        ref.enable_truncation(max_length, strategy=strategy)
    return ref


def assert_same(ours, ref, texts, pairs=None, max_length=None, strategy="longest_first"):
    """Compare ids, segment ids, offsets and the special-token mask for every input."""
    theirs = ref.encode_batch(list(zip(texts, pairs)) if pairs is not None else list(texts))
    mismatches = []
    for i, expected in enumerate(theirs):
        got = ours.encode(texts[i], pairs[i] if pairs is not None else None, max_length=max_length,
                          truncation=strategy, return_offsets=True)
        if (got.input_ids != expected.ids or got.token_type_ids != expected.type_ids
                or got.offsets != [tuple(o) for o in expected.offsets]
                or got.special_tokens_mask != expected.special_tokens_mask):
            mismatches.append((texts[i], pairs[i] if pairs is not None else None))
    assert not mismatches, f"{len(mismatches)} of {len(texts)} differ, e.g. {mismatches[:3]}"


def test_kjv_every_line_single_and_paired(ours, vocab_path):
    lines = [line for line in _lines(shared_path("corpus", "kjv.txt")) if line]
    assert_same(ours, reference(vocab_path), lines)
    assert_same(ours, reference(vocab_path, max_length=128), lines[:-1], lines[1:], max_length=128)


def test_glue_sentences_single_and_paired_truncated(ours, vocab_path):
    texts = _glue_texts()
    assert len(texts) > 80_000
    assert_same(ours, reference(vocab_path), texts)
    assert_same(ours, reference(vocab_path, max_length=128), texts[:-1], texts[1:], max_length=128)


def test_conll_sentences_as_text_and_pre_tokenized(ours, vocab_path):
    sentences = _conll_sentences()
    assert len(sentences) == 14_041 + 3_250 + 3_453
    assert_same(ours, reference(vocab_path, max_length=128), [" ".join(s) for s in sentences],
                max_length=128)
    ref = reference(vocab_path)
    theirs = ref.encode_batch(sentences, is_pretokenized=True)
    for words, expected in zip(sentences, theirs):
        got = ours.encode(words, return_offsets=True)
        assert got.input_ids == expected.ids
        assert got.word_ids == expected.word_ids
        assert got.offsets == [tuple(o) for o in expected.offsets]


def test_squad_contexts_and_question_context_pairs(ours, vocab_path):
    contexts, questions = _squad()
    assert_same(ours, reference(vocab_path), contexts)
    assert_same(ours, reference(vocab_path, max_length=384), contexts, max_length=384)
    qs, cs = zip(*questions)
    assert_same(ours, reference(vocab_path, max_length=384, strategy="only_second"),
                list(qs), list(cs), max_length=384, strategy="only_second")
    assert_same(ours, reference(vocab_path, max_length=128), list(qs), list(cs), max_length=128)


EDGE_CASES = [
    "", "   ", "\t\n\r ", "Héllo Wörld, naïve café résumé", "ÀÉÎÕÜ àéîõü ÇçÑñ",
    "中文字符测试，混合English文本。", "日本語のテキストとカタカナ", "한국어 텍스트 토큰화 테스트",
    "emoji 😀👍🏽 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛", "zero\u200bwidth\u200cjoin\u200dchars\ufeffbom",
    "control\x00\x01\x07chars\x7f\x9f here", "tab\there\nnewline\rreturn\x0bvt\x0cff",
    "nbsp\u00a0thin\u2009ideo\u3000line\u2028para\u2029end",
    "a" * 99, "b" * 100, "c" * 101, "supercalifragilisticexpialidocious " * 3,
    "the man went to the [MASK] . [SEP] and [CLS] x[MASK]y [mask] [UNK] [PAD]",
    "punctuation!!! ... ??? ¿¡ «quotes» “curly” ‘single’ — – - _ ~ ^ $ % & * @ #",
    "İstanbul ΣΊΣΥΦΟΣ straße ǅ ﬁ ﬂ Ⅻ ①", "\ufffd replacement \ufffd", "a\u0301e\u0300 combining",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３", "ქართული Ελληνικά русский עברית العربية हिन्दी",
    "$1,000.00 10:30am e-mail U.S.A. don't can't it's",
    "  leading,  double  spaces\t\tand trailing \n", "joined\x1cby\x1dcontrol\x85spaces\x0bvt\x0cff",
    "accent at a word's end cafe\u0301 x\u0301 \u0301", "İİ İstanbul İ. KİM", "only\x00 \x01\x02 dropped\x7f",
]


@pytest.mark.parametrize("lowercase", [True, False])
def test_edge_cases(ours, vocab_path, lowercase):
    tok = ours if lowercase else BertTokenizer.from_file(vocab_path, lowercase=False)
    ref = reference(vocab_path, lowercase=lowercase)
    assert_same(tok, ref, EDGE_CASES)
    assert_same(tok, ref, EDGE_CASES, EDGE_CASES[::-1])
    short = reference(vocab_path, lowercase=lowercase, max_length=16)
    assert_same(tok, short, EDGE_CASES, EDGE_CASES[::-1], max_length=16)


def test_edge_cases_lower_cased_with_accents_kept(vocab_path):
    """Lower-casing without accent stripping: 'İ' becomes 'i' + U+0307, two tokens that
    share one character's span."""
    tok = BertTokenizer.from_file(vocab_path, lowercase=True, strip_accents=False)
    ref = tokenizers.BertWordPieceTokenizer(str(vocab_path), lowercase=True, strip_accents=False)
    assert_same(tok, ref, EDGE_CASES)
    assert_same(tok, ref, EDGE_CASES, EDGE_CASES[::-1])


def test_cased_mode_on_real_text(vocab_path):
    tok = BertTokenizer.from_file(vocab_path, lowercase=False)
    contexts, _ = _squad()
    assert_same(tok, reference(vocab_path, lowercase=False), contexts[:500])
