"""bertkit's encode equals Hugging Face ``tokenizers``' on Korean text and on mixed-script
text (Hangul, CJK, Arabic, Cyrillic, Greek, Devanagari, Latin with accents, emoji), in every
combination of lower-casing and accent stripping: ids, offsets and segment ids, single texts
and pairs, through ``BertWordPieceTokenizer`` and through the saved ``tokenizer.json``."""

from __future__ import annotations

import itertools

import pytest

tokenizers = pytest.importorskip("tokenizers")

from bertkit.tokenizer import BertTokenizer  # noqa: E402
from bertkit.tokenizer.train import count_words, train_wordpiece  # noqa: E402

from ..conftest import SHARED_DATA  # noqa: E402

MIXED = [
    "대한민국은 민주공화국이다. 모든 권력은 국민으로부터 나온다.",
    "한국어와 English를 섞은 문장: BERT는 Transformer의 인코더다 ㅋㅋㅋ ㅎㅎ",
    "中华人民共和国 日本語のテキスト、カタカナとひらがな。漢字",
    "مرحبا بالعالم، هذه جملة عربية مع تشكيل: كَتَبَ",
    "Привет, мир! Ёжик в тумане. ПРОПИСНЫЕ буквы",
    "ΟΔΟΣ Ἀθῆναι ὁδός — Greek with tonos and breathings",
    "नमस्ते दुनिया, हिन्दी में वाक्य",
    "Crème brûlée, naïve façade, Ångström, İstanbul, straße, ǅemal, ﬁnance",
    "emoji 👍🏽 🇰🇷 👨‍👩‍👧 ❤️ and fullwidth ＡＢＣ half ｶﾀｶﾅ",
    "Café DÉJÀ VU résumé coöperate Zoë São Paulo Kraków Dvořák",
]
SETTINGS = list(itertools.product([True, False], [True, False]))  # (lowercase, strip_accents)


def korean_lines() -> list[str]:
    path = SHARED_DATA / "corpus" / "ko" / "kolaw-kobill.txt"
    if not path.exists():
        return []
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return MIXED + korean_lines()


def pair(tok_ours, fast, text, other, offsets=True):
    mine = tok_ours.encode(text, other, return_offsets=offsets)
    theirs = fast.encode(text, other) if other is not None else fast.encode(text)
    got = (mine.input_ids, mine.token_type_ids, [tuple(o) for o in mine.offsets])
    want = (theirs.ids, theirs.type_ids, [tuple(o) for o in theirs.offsets])
    return got, want


@pytest.mark.parametrize("lowercase,strip_accents", SETTINGS)
def test_same_ids_offsets_and_segments_in_every_setting(tmp_path, texts, lowercase, strip_accents):
    counts = count_words(texts, lowercase, strip_accents, progress=False)
    vocab = train_wordpiece(counts, 3000, progress=False)
    ours = BertTokenizer(vocab, lowercase=lowercase, strip_accents=strip_accents)
    ours.save_vocabulary(tmp_path / "vocab.txt")
    assert BertTokenizer.from_file(tmp_path / "vocab.txt").settings == ours.settings
    references = {
        "BertWordPieceTokenizer": tokenizers.BertWordPieceTokenizer(
            str(tmp_path / "vocab.txt"), lowercase=lowercase, strip_accents=strip_accents,
            clean_text=True, handle_chinese_chars=True),
        "tokenizer.json": tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json")),
    }
    unknown = 0
    for name, fast in references.items():
        for i, text in enumerate(texts):
            got, want = pair(ours, fast, text, None)
            assert got == want, (name, text)
            other = texts[(i * 7 + 3) % len(texts)]
            got, want = pair(ours, fast, text, other)
            assert got == want, (name, text, other)
            unknown += got[0].count(ours.unk_token_id)
    # the vocabulary was trained on these texts: the comparison is over real pieces, not [UNK]
    assert unknown == 0
    if korean_lines():
        assert len(texts) > 2000


def test_uncased_decomposes_hangul_as_the_reference_does():
    ours = BertTokenizer(train_wordpiece(count_words(MIXED[:2], progress=False), 300, progress=False))
    pieces = "".join(t.removeprefix("##") for t in ours.tokenize("민주"))
    assert len(pieces) == 5 and all("\u1100" <= c <= "\u11ff" for c in pieces)  # ㅁㅣㄴㅈㅜ
