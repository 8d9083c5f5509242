"""Head pruning: importance, physical removal, saving/loading in bertkit and transformers."""

from __future__ import annotations

import json

import pytest
import torch

from bertkit.checkpoint import load_pretrained, save_pretrained
from bertkit.config import BertConfig
from bertkit.errors import BertkitError
from bertkit.model import BertForSequenceClassification
from bertkit.model.pruning import (
    count_heads,
    head_importance,
    heads_to_prune,
    parse_heads,
    prune_heads,
)
from bertkit.model.sparse_last_layer import encode_at_positions


def tiny(seed=0, heads=4, layers=2):
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=64, max_position_embeddings=32)
    return BertForSequenceClassification(config, num_labels=3).eval()


def batch(seed=1, size=6, length=11):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 50, (size, length), generator=g)
    mask = torch.ones_like(ids)
    mask[0, 7:] = 0
    return {"input_ids": ids, "attention_mask": mask,
            "labels": torch.randint(0, 3, (size,), generator=g)}


def logits(model, b):
    with torch.no_grad():
        return model(b["input_ids"], attention_mask=b["attention_mask"]).logits


def test_removing_heads_equals_silencing_them():
    model, b = tiny(), batch()
    silenced = tiny()
    heads = {0: [1, 3], 1: [0, 2]}
    for layer, hs in heads.items():
        dense = silenced.bert.encoder.layer[layer].attention.output.dense
        with torch.no_grad():
            for h in hs:  # a head whose output projection is zero contributes nothing
                dense.weight[:, h * 8:(h + 1) * 8] = 0
    before = sum(p.numel() for p in model.parameters())
    prune_heads(model, heads)
    assert count_heads(model) == 4
    assert model.config.extra["pruned_heads"] == {"0": [1, 3], "1": [0, 2]}
    assert sum(p.numel() for p in model.parameters()) < before
    assert model.bert.encoder.layer[0].attention.self.qkv.weight.shape == (3 * 16, 32)
    assert model.config.num_parameters() == sum(p.numel() for p in model.bert.parameters())
    assert torch.allclose(logits(model, b), logits(silenced, b), atol=1e-6)
    # the sparse last-layer path (queries at some positions) still agrees
    out = encode_at_positions(model.bert, b["input_ids"], None, b["attention_mask"],
                              torch.tensor([[0, 3]] * 6))
    full = model.bert(b["input_ids"], attention_mask=b["attention_mask"])
    assert torch.allclose(out.last_hidden_state[:, 1], full.last_hidden_state[:, 3], atol=1e-6)


def test_pruning_again_uses_original_indices():
    model, b = tiny(), batch()
    once = tiny()
    prune_heads(model, {0: [1]})
    prune_heads(model, {0: [3, 1]})  # 1 already gone: ignored
    prune_heads(once, {0: [1, 3]})
    assert model.config.extra["pruned_heads"] == {"0": [1, 3]}
    assert torch.allclose(logits(model, b), logits(once, b), atol=1e-6)
    with pytest.raises(BertkitError, match="all of its heads"):
        prune_heads(model, {0: [0, 2]})


def test_importance_is_zero_for_a_silent_head_and_positive_otherwise():
    model = tiny()
    with torch.no_grad():
        model.bert.encoder.layer[1].attention.output.dense.weight[:, 16:24] = 0  # head 2
    table = head_importance(model, [batch(s) for s in range(3)],
                            lambda m, bt: m(**bt), normalize=False)
    assert table.shape == (2, 4)
    assert table[1, 2] == 0
    assert (table[0] > 0).all() and table[1, [0, 1, 3]].gt(0).all()
    assert all(p.grad is None for p in model.parameters())  # weights untouched
    normalized = head_importance(model, [batch(0)], lambda m, bt: m(**bt))
    assert torch.allclose(normalized.norm(dim=1), torch.ones(2, dtype=torch.float64))
    prune_heads(model, {1: [2]})
    after = head_importance(model, [batch(0)], lambda m, bt: m(**bt))
    assert torch.isnan(after[1, 2]) and not torch.isnan(after[1, 3])


def test_heads_to_prune_takes_the_lowest_and_keeps_one_per_layer():
    table = torch.tensor([[0.1, 0.9, 0.2, 0.8], [0.05, 0.01, 0.03, 0.02]], dtype=torch.float64)
    assert heads_to_prune(table, 2) == {1: [1, 3]}
    chosen = heads_to_prune(table, 5)
    assert sum(map(len, chosen.values())) == 5 and len(chosen[1]) == 3  # layer 1 keeps one
    with pytest.raises(BertkitError, match="keeps one"):
        heads_to_prune(table, 7)


@pytest.mark.parametrize("text", ["0", "1.0", "1.5", "-0.25", "abc", "8", "0.01"])
def test_bad_heads_values_name_the_option(text):
    with pytest.raises(BertkitError, match="--heads"):
        parse_heads(text, 8)


def test_heads_fraction_and_count():
    assert parse_heads("0.5", 8) == 4
    assert parse_heads("3", 8) == 3
    assert parse_heads(0.25, 12) == 3


def _transformers_pruned(directory):
    """The model as Hugging Face builds a ``pruned_heads`` config: transformers < 5 prunes on
    load (``from_pretrained``); transformers 5 dropped head pruning, so the same removal is done
    here with its ``prune_linear_layer`` before the weights are loaded strictly."""
    transformers = pytest.importorskip("transformers")
    from safetensors.torch import load_file

    config = transformers.BertConfig.from_pretrained(directory)
    model = transformers.BertForSequenceClassification(config).eval()
    pruned = {int(k): v for k, v in json.loads((directory / "config.json").read_text())["pruned_heads"].items()}
    if hasattr(model, "prune_heads"):  # transformers 4: the library's own pruning
        return transformers.BertForSequenceClassification.from_pretrained(directory).eval()
    from transformers.pytorch_utils import prune_linear_layer

    for layer, heads in pruned.items():
        attention = model.bert.encoder.layer[layer].attention
        size = attention.self.attention_head_size
        keep = [h for h in range(config.num_attention_heads) if h not in heads]
        index = torch.cat([torch.arange(h * size, (h + 1) * size) for h in keep])
        for name in ("query", "key", "value"):
            setattr(attention.self, name, prune_linear_layer(getattr(attention.self, name), index))
        attention.output.dense = prune_linear_layer(attention.output.dense, index, dim=1)
    missing, unexpected = model.load_state_dict(load_file(str(directory / "model.safetensors")), strict=False)
    assert not unexpected and all("position_ids" in k for k in missing)
    return model


def test_half_pruned_model_saves_loads_and_matches_transformers(tmp_path):
    model, b = tiny(seed=3), batch(seed=4)
    table = head_importance(model, [b], lambda m, bt: m(**bt))
    prune_heads(model, heads_to_prune(table, parse_heads("0.5", 8)))
    assert count_heads(model) == 4
    save_pretrained(model, tmp_path / "p")
    saved = json.loads((tmp_path / "p" / "config.json").read_text())
    assert sum(map(len, saved["pruned_heads"].values())) == 4
    back = load_pretrained(tmp_path / "p")
    assert isinstance(back, BertForSequenceClassification) and count_heads(back) == 4
    expected = logits(model, b)
    assert torch.equal(logits(back, b), expected)
    hf = _transformers_pruned(tmp_path / "p")
    assert sum(p.numel() for p in hf.parameters()) == sum(p.numel() for p in back.parameters())
    with torch.no_grad():
        theirs = hf(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
    assert torch.allclose(theirs, expected, atol=1e-5)
    assert sum(p.numel() for p in back.parameters()) < sum(p.numel() for p in tiny().parameters())
