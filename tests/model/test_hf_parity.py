"""Parity with Hugging Face ``transformers`` (test-only): both directions, every output."""

from __future__ import annotations

import warnings

import pytest
import torch

from bertkit.checkpoint import load_pretrained, save_pretrained
from bertkit.config import BertConfig
from bertkit.model import (
    BertForMaskedLM,
    BertForMultipleChoice,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)

transformers = pytest.importorskip("transformers")

TOL = 1e-5
# (layers, hidden, heads, intermediate, vocab): two presets and an odd shape
SHAPES = [(2, 128, 2, 512, 120), (4, 256, 4, 1024, 200), (3, 96, 3, 200, 99)]


def hf_config(layers, hidden, heads, intermediate, vocab, **extra):
    return transformers.BertConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate,
        max_position_embeddings=64,
        **extra,
    )


def hf_load(cls, directory, **kwargs):
    model, info = cls.from_pretrained(
        directory, attn_implementation="eager", local_files_only=True, output_loading_info=True, **kwargs
    )
    return model.eval(), info


def inputs(vocab, batch=3, length=11, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (batch, length), generator=g)
    types = torch.zeros_like(ids)
    types[:, length // 2 :] = 1
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0  # padded rows
    mask[2, 4:] = 0
    return ids, types, mask


def assert_close(name, ours, theirs):
    diff = (ours.float() - theirs.float()).abs().max().item()
    assert diff <= TOL, f"{name}: max abs diff {diff:.3g}"
    return diff


def hf_random(cls, config, tmp_path, seed=0):
    torch.manual_seed(seed)
    model = cls(config).eval()
    with torch.no_grad():  # non-trivial LayerNorm and biases, so every tensor matters
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(tmp_path)
    return model


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:3])))
def test_pretraining_model_matches_transformers_both_ways(shape, tmp_path):
    hf_dir, ours_dir = tmp_path / "hf", tmp_path / "ours"
    hf = hf_random(transformers.BertForPreTraining, hf_config(*shape), hf_dir)
    hf, _ = hf_load(transformers.BertForPreTraining, hf_dir)
    ours = load_pretrained(hf_dir, BertForPreTraining)
    ids, types, mask = inputs(shape[4])
    with torch.no_grad():
        ref = hf(ids, token_type_ids=types, attention_mask=mask, output_hidden_states=True, output_attentions=True)
        ref_base = hf.bert(ids, token_type_ids=types, attention_mask=mask)
        got = ours(ids, types, mask, output_hidden_states=True, output_attentions=True)
        fast = ours(ids, types, mask)  # scaled_dot_product_attention path
    assert_close("mlm_logits", got.mlm_logits, ref.prediction_logits)
    assert_close("nsp_logits", got.nsp_logits, ref.seq_relationship_logits)
    assert_close("sdpa mlm_logits", fast.mlm_logits, ref.prediction_logits)
    assert_close("last_hidden_state", got.last_hidden_state, ref_base.last_hidden_state)
    assert_close("sdpa last_hidden_state", fast.last_hidden_state, ref_base.last_hidden_state)
    assert_close("pooled_output", got.pooled_output, ref_base.pooler_output)
    assert len(got.hidden_states) == len(ref.hidden_states) == shape[0] + 1
    for i, (a, b) in enumerate(zip(got.hidden_states, ref.hidden_states)):
        assert_close(f"hidden_states[{i}]", a, b)
    assert len(got.attentions) == shape[0]
    for i, (a, b) in enumerate(zip(got.attentions, ref.attentions)):
        assert_close(f"attentions[{i}]", a, b)

    # reverse: bertkit saves, transformers loads with nothing missing or unexpected
    save_pretrained(ours, ours_dir)
    back, info = hf_load(transformers.BertForPreTraining, ours_dir)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    with torch.no_grad():
        again = back(ids, token_type_ids=types, attention_mask=mask)
    assert_close("reverse mlm_logits", again.prediction_logits, got.mlm_logits)
    assert_close("reverse nsp_logits", again.seq_relationship_logits, got.nsp_logits)


HEADS = [
    ("BertForSequenceClassification", BertForSequenceClassification, {"num_labels": 3}, "logits"),
    ("BertForSequenceClassification", BertForSequenceClassification, {"num_labels": 1}, "logits"),
    ("BertForTokenClassification", BertForTokenClassification, {"num_labels": 5}, "logits"),
    ("BertForQuestionAnswering", BertForQuestionAnswering, {}, "start_logits"),
    ("BertForMaskedLM", BertForMaskedLM, {}, "logits"),
    ("BertModel", BertModel, {}, "last_hidden_state"),
    ("BertForMultipleChoice", BertForMultipleChoice, {}, "logits"),
]


@pytest.mark.parametrize("hf_name,ours_cls,kwargs,field", HEADS, ids=lambda x: str(x) if isinstance(x, str) else "")
def test_task_heads_match_transformers_both_ways(hf_name, ours_cls, kwargs, field, tmp_path):
    shape = SHAPES[2]
    hf_cls = getattr(transformers, hf_name)
    hf_random(hf_cls, hf_config(*shape, **kwargs), tmp_path / "hf")
    hf, _ = hf_load(hf_cls, tmp_path / "hf")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing missing, nothing unexpected
        ours = load_pretrained(tmp_path / "hf", ours_cls, **kwargs)
    ids, types, mask = inputs(shape[4])
    if ours_cls is BertForMultipleChoice:
        ids, types, mask = (t.view(1, 3, -1).expand(2, 3, -1).contiguous() for t in (ids, types, mask))
    with torch.no_grad():
        ref = hf(ids, token_type_ids=types, attention_mask=mask)
        got = ours(ids, types, mask)
    fields = ["start_logits", "end_logits"] if field == "start_logits" else [field]
    if ours_cls is BertModel:
        fields.append("pooled_output")
    ref_names = {"pooled_output": "pooler_output"}
    for name in fields:
        assert_close(name, got[name], getattr(ref, ref_names.get(name, name)))

    save_pretrained(ours, tmp_path / "ours")
    back, info = hf_load(hf_cls, tmp_path / "ours")
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    with torch.no_grad():
        again = back(ids, token_type_ids=types, attention_mask=mask)
    for name in fields:
        assert_close("reverse " + name, getattr(again, ref_names.get(name, name)), got[name])


def test_causal_attention_matches_transformers_decoder(tmp_path):
    """``attention="causal"`` equals HF's ``is_decoder=True`` self-attention (no cache)."""
    shape = SHAPES[0]
    hf_random(transformers.BertModel, hf_config(*shape, is_decoder=True), tmp_path)
    hf, _ = hf_load(transformers.BertModel, tmp_path)
    ours = load_pretrained(tmp_path, BertModel, config_overrides={"attention": "causal"})
    assert ours.config.attention == "causal"
    ids, types, mask = inputs(shape[4])
    with torch.no_grad():
        ref = hf(ids, token_type_ids=types, attention_mask=mask, use_cache=False, output_attentions=True)
        got = ours(ids, types, mask, output_attentions=True)
        fast = ours(ids, types, mask)
        full = ours(ids, types)  # no padding mask: is_causal kernel path
        ref_full = hf(ids, token_type_ids=types, use_cache=False)
    real = mask.bool()
    assert_close("causal hidden", got.last_hidden_state[real], ref.last_hidden_state[real])
    assert_close("causal sdpa hidden", fast.last_hidden_state[real], ref.last_hidden_state[real])
    assert_close("causal unmasked", full.last_hidden_state, ref_full.last_hidden_state)
    assert torch.all(got.attentions[0].triu(1) == 0)


def test_config_json_reads_transformers_config(tmp_path):
    cfg = hf_config(*SHAPES[2])
    cfg.save_pretrained(tmp_path)
    ours = BertConfig.from_json(tmp_path / "config.json")
    assert (ours.num_hidden_layers, ours.hidden_size, ours.intermediate_size) == (3, 96, 200)
    assert ours.extra["model_type"] if "model_type" in ours.extra else True
