"""``decode`` equals Hugging Face's ``BertTokenizer`` / ``BertTokenizerFast`` decode on real
text (clean-up of tokenization spaces on), and the ``tokenizers`` WordPiece decoder without
clean-up when the raw spacing is kept."""

from __future__ import annotations

import json
import warnings

import pytest

from bertkit.tokenizer import BertTokenizer
from tests.conftest import shared_path

transformers = pytest.importorskip("transformers")
decoders = pytest.importorskip("tokenizers.decoders")


@pytest.fixture(scope="module")
def setup():
    path = shared_path("vocab", "bert-base-uncased-vocab.txt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        slow = transformers.BertTokenizer(str(path))
        fast = transformers.BertTokenizerFast(str(path))
    return BertTokenizer.from_file(path), slow, fast


def _texts():
    texts = []
    for name in ("dev-v1.1.json",):
        data = json.loads(shared_path("squad", name).read_text(encoding="utf-8"))
        for article in data["data"][:12]:
            for para in article["paragraphs"]:
                texts.append(para["context"])
                texts += [qa["question"] for qa in para["qas"]]
    lines = shared_path("glue", "SST-2", "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    texts += [line.split("\t")[0] for line in lines]
    texts += ["I don't know, he's here. They've gone! We're fine? I'm ' quoted ' ok",
              "[CLS] unwanted , running [SEP] x", "##ing starts with a continuation"]
    return texts


def test_decode_matches_hugging_face_on_real_text(setup):
    ours, slow, fast = setup
    texts = _texts()
    assert len(texts) > 2000
    raw = decoders.WordPiece(prefix="##", cleanup=False)
    bad = []
    for text in texts:
        ids = ours.encode(text).input_ids
        assert ids == fast(text)["input_ids"]
        for skip in (False, True):
            got = ours.decode(ids, skip_special_tokens=skip)
            if (got != slow.decode(ids, skip_special_tokens=skip, clean_up_tokenization_spaces=True)
                    or got != fast.decode(ids, skip_special_tokens=skip,
                                          clean_up_tokenization_spaces=True)):
                bad.append(text)
        tokens = ours.convert_ids_to_tokens(ids)
        if ours.decode(ids, clean_up_tokenization_spaces=False) != raw.decode(tokens):
            bad.append(text)
    assert not bad, f"{len(bad)} decodes differ, e.g. {bad[:2]!r}"
    # The clean-up did something on this text: raw and cleaned differ on most lines.
    changed = sum(ours.decode(ours.encode(t).input_ids) !=
                  ours.decode(ours.encode(t).input_ids, clean_up_tokenization_spaces=False)
                  for t in texts)
    assert changed > len(texts) // 2
