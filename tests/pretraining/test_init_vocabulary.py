"""``pretrain --init-from`` a model of another vocabulary: shared tokens keep their rows, new
ones start from their pieces, and the run says how many were new."""

from __future__ import annotations

import json

import torch

from bertkit.checkpoint import save_pretrained
from bertkit.config import BertConfig
from bertkit.model import BertForMaskedLM
from bertkit.pretraining.setup import build_model, build_tokenizer
from bertkit.pretraining.train import pretrain
from bertkit.tokenizer import BertTokenizer, Vocab

from .train_helpers import MODEL_CONFIG, VOCAB, settings

# the init model's vocabulary: the data's without "cafe" and "quick", with two others
THEIRS = [t for t in VOCAB if t not in ("cafe", "quick")] + ["ca", "##fe", "qu", "##ick"]


def init_model(directory):
    tok = BertTokenizer(Vocab(THEIRS))
    torch.manual_seed(1)
    model = BertForMaskedLM(BertConfig(vocab_size=len(THEIRS), **MODEL_CONFIG))
    with torch.no_grad():
        model.mlm_head.bias.normal_()
    save_pretrained(model, directory, tokenizer=tok)
    return model


def test_shared_rows_kept_new_rows_from_pieces(files, tmp_path):
    theirs = init_model(tmp_path / "init")
    config = settings(files, tmp_path / "run", init_from=str(tmp_path / "init"), model_config=None)
    meta = json.loads((files["data"] / "meta.json").read_text(encoding="utf-8"))
    tok = build_tokenizer(config, meta)
    model = build_model(config, len(tok), 32, tok)
    assert model.vocab_remap == {"init_vocab_size": len(THEIRS), "vocab_size": len(VOCAB),
                                 "rows_kept": len(VOCAB) - 2, "new_tokens": 2}
    old = theirs.bert.embeddings.word_embeddings.weight
    new = model.bert.embeddings.word_embeddings.weight
    index = {t: i for i, t in enumerate(THEIRS)}
    for i, token in enumerate(VOCAB):
        if token == "cafe":
            assert torch.allclose(new[i], old[[index["ca"], index["##fe"]]].mean(0))
            assert torch.allclose(model.mlm_head.bias[i], theirs.mlm_head.bias[[index["ca"], index["##fe"]]].mean())
        elif token != "quick":
            assert torch.equal(new[i], old[index[token]])
            assert torch.equal(model.mlm_head.bias[i], theirs.mlm_head.bias[index[token]])
    assert model.mlm_head.decoder.weight is new


def test_the_run_says_how_many_tokens_were_new(files, tmp_path):
    init_model(tmp_path / "init")
    result = pretrain(settings(files, tmp_path / "run", init_from=str(tmp_path / "init"),
                               model_config=None, steps=2))
    assert result.step == 2
    records = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    event = next(r for r in records if r.get("event") == "vocabulary")
    assert event["rows_kept"] == len(VOCAB) - 2 and event["new_tokens"] == 2
    assert "2 new tokens start from the mean of their pieces' rows" in event["note"]
