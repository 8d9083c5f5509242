"""The network: shapes, initialisation, padding and causal masks, optional outputs."""

from __future__ import annotations

import pytest
import torch

from bertkit.config import BertConfig
from bertkit.model import BertModel


def small_config(**overrides):
    values = dict(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=24)
    values.update(overrides)
    return BertConfig(**values)


@pytest.fixture
def model():
    torch.manual_seed(0)
    return BertModel(small_config()).eval()


def test_output_shapes(model):
    ids = torch.randint(0, 50, (3, 7))
    out = model(ids, output_hidden_states=True, output_attentions=True)
    assert out.last_hidden_state.shape == (3, 7, 32)
    assert out.pooled_output.shape == (3, 32)
    assert len(out.hidden_states) == 3 and len(out.attentions) == 2
    assert out.attentions[0].shape == (3, 4, 7, 7)
    assert torch.allclose(out.attentions[0].sum(-1), torch.ones(3, 4, 7))
    assert torch.equal(out.hidden_states[-1], out.last_hidden_state)
    plain = model(ids)
    assert plain.hidden_states is None and plain.attentions is None
    assert torch.allclose(plain.last_hidden_state, out.last_hidden_state, atol=1e-6)
    assert BertModel(small_config(), add_pooling_layer=False)(ids).pooled_output is None


def test_initialisation_is_berts():
    torch.manual_seed(0)
    cfg = small_config(vocab_size=2000, hidden_size=64, intermediate_size=256)
    model = BertModel(cfg)
    weight = model.embeddings.word_embeddings.weight
    assert abs(weight.std().item() - 0.02) < 0.002 and abs(weight.mean().item()) < 0.002
    layer = model.encoder.layer[0]
    assert torch.all(layer.attention.self.qkv.bias == 0)
    assert torch.all(layer.output.LayerNorm.weight == 1) and torch.all(layer.output.LayerNorm.bias == 0)
    assert abs(layer.intermediate.dense.weight.std().item() - 0.02) < 0.002


def test_padding_does_not_change_real_tokens(model):
    ids = torch.randint(5, 50, (1, 6))
    alone = model(ids).last_hidden_state
    padded_ids = torch.cat([ids, torch.zeros(1, 4, dtype=torch.long)], dim=1)
    mask = torch.tensor([[1] * 6 + [0] * 4])
    padded = model(padded_ids, attention_mask=mask)
    explicit = model(padded_ids, attention_mask=mask, output_attentions=True)
    assert torch.allclose(padded.last_hidden_state[:, :6], alone, atol=1e-5)
    assert torch.allclose(explicit.last_hidden_state[:, :6], alone, atol=1e-5)
    assert torch.all(explicit.attentions[0][..., 6:] == 0)  # no attention to padding


def test_causal_attention_ignores_the_future():
    torch.manual_seed(0)
    model = BertModel(small_config(attention="causal")).eval()
    ids = torch.randint(5, 50, (2, 8))
    changed = ids.clone()
    changed[:, 5:] = 7
    for kwargs in ({}, {"output_attentions": True}, {"attention_mask": torch.ones_like(ids)}):
        a = model(ids, **kwargs).last_hidden_state
        b = model(changed, **kwargs).last_hidden_state
        assert torch.allclose(a[:, :5], b[:, :5], atol=1e-5)
        assert not torch.allclose(a[:, 5:], b[:, 5:])
    probs = model(ids, output_attentions=True).attentions[0]
    assert torch.all(probs.triu(1) == 0)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    masked = model(ids, attention_mask=mask).last_hidden_state
    explicit = model(ids, attention_mask=mask, output_attentions=True).last_hidden_state
    assert torch.allclose(masked[mask.bool()], explicit[mask.bool()], atol=1e-5)


def test_segment_ids_matter_and_default_to_zero(model):
    ids = torch.randint(5, 50, (2, 6))
    zeros = model(ids, token_type_ids=torch.zeros_like(ids)).last_hidden_state
    assert torch.allclose(model(ids).last_hidden_state, zeros, atol=1e-6)
    assert not torch.allclose(model(ids, token_type_ids=torch.ones_like(ids)).last_hidden_state, zeros)


def test_too_long_sequence_is_a_clear_error(model):
    with pytest.raises(ValueError, match="max_position_embeddings 24"):
        model(torch.zeros(1, 25, dtype=torch.long))


def test_dropout_only_in_training_and_gradients_flow():
    torch.manual_seed(0)
    model = BertModel(small_config(hidden_dropout_prob=0.5, attention_probs_dropout_prob=0.5))
    ids = torch.randint(5, 50, (2, 6))
    model.train()
    out = model(ids)
    a, b = out.last_hidden_state, model(ids).last_hidden_state
    assert not torch.allclose(a, b)
    (a.sum() + out.pooled_output.sum()).backward()
    assert all(p.grad is not None for p in model.parameters())
    model.eval()
    assert torch.equal(model(ids).last_hidden_state, model(ids).last_hidden_state)


@pytest.mark.parametrize("dtype", [torch.bfloat16])
def test_low_precision_runs(model, dtype):
    out = model.to(dtype)(torch.randint(5, 50, (2, 6)), attention_mask=torch.ones(2, 6, dtype=torch.long))
    assert out.last_hidden_state.dtype == dtype


@pytest.mark.parametrize("impl", ["padded", "unpadded"])
def test_causal_model_pools_its_last_real_token(impl):
    """A left-to-right model's [CLS] sees only itself: pooling it would give every input the
    same summary (the LTR ablation then fine-tunes into a constant predictor). It pools the
    last real token instead, padding or not."""
    torch.manual_seed(0)
    model = BertModel(small_config(attention="causal", attention_impl=impl)).eval()
    ids = torch.randint(5, 50, (2, 8))
    ids[:, 0] = 2  # the same first token everywhere, as [CLS] is
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    pooled = model(ids, attention_mask=mask).pooled_output
    assert not torch.allclose(pooled[0], pooled[1], atol=1e-3)
    alone = model(ids[1:, :5]).pooled_output  # row 1 without its padding
    assert torch.allclose(pooled[1], alone[0], atol=1e-5)
    head = model.pooler
    assert torch.allclose(pooled[0], torch.tanh(head.dense(model(ids).last_hidden_state[0, -1])),
                          atol=1e-5)
    bidirectional = BertModel(small_config()).eval()
    out = bidirectional(ids)
    assert torch.allclose(out.pooled_output,
                          torch.tanh(bidirectional.pooler.dense(out.last_hidden_state[:, 0])))
