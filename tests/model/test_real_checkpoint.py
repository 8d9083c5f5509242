"""The real BERT-Tiny checkpoint (../shared/data, skipped when absent) against ``transformers``.

It is a Hugging Face directory with legacy ``gamma``/``beta`` LayerNorm names, no pooler and
no NSP head, and a ``tokenizer.json`` but no ``vocab.txt``.
"""

from __future__ import annotations

import functools
import warnings

import pytest
import torch

from bertkit.checkpoint import load_pretrained, save_pretrained
from bertkit.inference import load
from bertkit.model import BertForMaskedLM

transformers = pytest.importorskip("transformers")

SENTENCES = [
    "the man went to the [MASK] .",
    "it 's a charming and often [MASK] journey .",
    "in the beginning god created the [MASK] and the earth .",
    "paris is the [MASK] of france , and [MASK] is the capital of italy .",
    "unflinchingly bleak and [MASK]",
]


@pytest.fixture
def splade(shared):
    return shared("models", "bert-tiny-splade")


@functools.cache
def _reference(directory, implementation):
    model = transformers.BertForMaskedLM.from_pretrained(
        directory, attn_implementation=implementation, local_files_only=True
    )
    return model.eval()


@pytest.fixture
def reference(splade):
    """transformers with sdpa attention (bertkit's default path is compared with it)."""
    return _reference(splade, "sdpa")


@pytest.fixture
def eager_reference(splade):
    """transformers with eager attention (bertkit's explicit path is compared with it)."""
    return _reference(splade, "eager")


def padded(bert):
    encodings = bert.tokenizer.encode_batch(SENTENCES, padding="longest")
    ids = torch.tensor([e.input_ids for e in encodings])
    return ids, torch.tensor([e.token_type_ids for e in encodings]), torch.tensor([e.attention_mask for e in encodings])


def test_loads_without_warnings(splade):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = load_pretrained(splade)
    assert type(model) is BertForMaskedLM


def test_mlm_logits_match_transformers(splade, reference, eager_reference):
    """Logits reach |31|; transformers' own sdpa and eager paths differ by ~1.5e-5 on them,
    so each bertkit path is compared with its counterpart."""
    bert = load(splade)
    ids, types, mask = padded(bert)
    inputs = dict(input_ids=ids, token_type_ids=types, attention_mask=mask)
    with torch.no_grad():
        ours = bert.model(ids, types, mask).logits
        explicit = bert.model(ids, types, mask, output_attentions=True).logits
        ref = reference(**inputs).logits
        ref_eager = eager_reference(**inputs).logits
    real = mask.bool()
    assert (ours - ref)[real].abs().max().item() < 1e-5
    assert (explicit - ref_eager)[real].abs().max().item() < 1e-5


def test_tokenizer_ids_match_the_checkpoints_tokenizer(splade):
    tokenizers = pytest.importorskip("tokenizers")
    theirs = tokenizers.Tokenizer.from_file(str(splade / "tokenizer.json"))
    bert = load(splade)
    for text in SENTENCES:
        assert bert.tokenizer.encode(text).input_ids == theirs.encode(text).ids


def test_fill_mask_top10_matches_transformers(splade, reference):
    bert = load(splade)
    ids, types, mask = padded(bert)
    with torch.no_grad():
        ref = reference(input_ids=ids, token_type_ids=types, attention_mask=mask).logits
    results = bert.fill_mask(SENTENCES, top_k=10, batch_size=2)
    for row, masks in enumerate(results):
        positions = (ids[row] == bert.tokenizer.mask_token_id).nonzero()[:, 0]
        assert len(masks) == len(positions)
        for position, candidates in zip(positions, masks):
            expected = ref[row, position].softmax(-1).topk(10)
            assert [c["token"] for c in candidates] == expected.indices.tolist()
            assert max(abs(c["score"] - p) for c, p in zip(candidates, expected.values.tolist())) < 1e-6


def test_convert_then_transformers_loads_cleanly(splade, tmp_path):
    bert = load(splade)
    save_pretrained(bert.model, tmp_path, tokenizer=bert.tokenizer)
    assert (tmp_path / "vocab.txt").exists()
    again, info = transformers.BertForMaskedLM.from_pretrained(
        tmp_path, local_files_only=True, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    ids, types, mask = padded(bert)
    with torch.no_grad():
        diff = again(input_ids=ids, attention_mask=mask).logits - bert.model(ids, types, mask).logits
    assert diff[mask.bool()].abs().max().item() < 1e-5
    hf_tok = transformers.BertTokenizer(str(tmp_path / "vocab.txt"), do_lower_case=True)
    assert hf_tok(SENTENCES[0])["input_ids"] == bert.tokenizer.encode(SENTENCES[0]).input_ids
