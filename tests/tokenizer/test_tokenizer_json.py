"""``tokenizer.json``: the file ``save_pretrained`` writes loads in Hugging Face ``tokenizers``
(what text-embeddings-inference reads) and gives bertkit's ids."""

from __future__ import annotations

import csv

import pytest

tokenizers = pytest.importorskip("tokenizers")

from bertkit.tokenizer import BertTokenizer  # noqa: E402

from ..conftest import shared_path  # noqa: E402

TEXTS = ["Hello, WORLD! the man went", "Café unwanted running", "中国 he\x00llo\u200b the", "the [MASK] went .",
         "  spaces\tand\nnewlines ", "xxxxxxxxxxxxxxxxxxxxxxxx" * 5, "he's good ? ' s", ""]


def same_ids(tok, fast, text, pair=None):
    mine = tok.encode(text, pair)
    theirs = fast.encode(text, pair) if pair is not None else fast.encode(text)
    return mine.input_ids == theirs.ids and mine.token_type_ids == theirs.type_ids


@pytest.mark.parametrize("lowercase", [True, False])
def test_tokenizer_json_gives_the_same_ids(tmp_path, tiny_vocab_file, lowercase):
    tok = BertTokenizer.from_file(tiny_vocab_file, lowercase=lowercase)
    tok.save_pretrained(tmp_path)
    fast = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for text in TEXTS:
        assert same_ids(tok, fast, text), text
    assert same_ids(tok, fast, "the man went", "he is good")
    assert fast.decode(tok.encode("the unwanted man").input_ids) == "the unwanted man"
    assert BertTokenizer.from_pretrained(tmp_path).encode("Café").input_ids == tok.encode("Café").input_ids


def test_tokenizer_json_gives_the_same_ids_on_sst2_dev(tmp_path):
    tok = BertTokenizer.from_file(shared_path("vocab", "bert-base-uncased-vocab.txt"))
    tok.save_pretrained(tmp_path)
    fast = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    with open(shared_path("glue", "SST-2", "dev.tsv"), encoding="utf-8") as f:
        sentences = [row["sentence"] for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
    assert len(sentences) == 872
    mine = [tok.encode(s).input_ids for s in sentences]
    theirs = [e.ids for e in fast.encode_batch(sentences)]
    assert mine == theirs
