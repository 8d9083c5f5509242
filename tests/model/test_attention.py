"""Attention as two batched products (``products_attention``) against torch's fused kernel, and
where it runs (``products_attention_pays``: bf16 CPU inference on the classes measured faster
that way, tested as each of the four classes through ``BERTKIT_CPU_CLASS``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bertkit.config import BertConfig
from bertkit.model import BertModel
from bertkit.model import attention as A

CLASSES = ("avx2", "avx512-vnni", "avx512-bf16", "amx")


def kernel_attention(qkv, mask, heads, size):
    batch, length, _ = qkv.shape
    query, key, value = qkv.view(batch, length, 3, heads, size).permute(2, 0, 3, 1, 4).unbind(0)
    context = F.scaled_dot_product_attention(query, key, value, attn_mask=mask)
    return context.transpose(1, 2).reshape(batch, length, heads * size)


@pytest.mark.parametrize("padded", [False, True])
def test_products_attention_is_the_fused_kernels_attention(padded):
    torch.manual_seed(0)
    heads, size = 4, 8
    qkv = torch.randn(3, 9, 3 * heads * size)
    key_mask = torch.ones(3, 9, dtype=torch.bool)
    if padded:
        key_mask[1, 6:] = False
        key_mask[2, 2:] = False
    mask = A.build_attention_mask(key_mask if padded else None, 9, causal=False)
    expected = kernel_attention(qkv, mask, heads, size)
    assert torch.allclose(A.products_attention(qkv, mask, heads, size), expected, atol=1e-5)
    half = A.products_attention(qkv.bfloat16(), mask, heads, size)
    assert half.dtype is torch.bfloat16
    assert torch.allclose(half.float(), kernel_attention(qkv.bfloat16(), mask, heads, size).float(), atol=6e-2)
    if padded:  # a padded key changes nothing: the same rows alone, unpadded
        alone = A.products_attention(qkv[2:, :2], None, heads, size)
        assert torch.allclose(A.products_attention(qkv, mask, heads, size)[2, :2], alone[0], atol=1e-5)


@pytest.mark.parametrize("cpu_class", CLASSES)
def test_products_attention_runs_for_bf16_inference_only_on_the_classes_measured_faster(monkeypatch, cpu_class):
    monkeypatch.setenv("BERTKIT_CPU_CLASS", cpu_class)
    mask = torch.ones(2, 1, 1, 64, dtype=torch.bool)
    half = torch.zeros(2, 64, 3 * 32, dtype=torch.bfloat16)
    assert A.products_attention_pays(half, mask, 4, training=False, causal=False) == (cpu_class == "avx512-bf16")
    assert A.products_attention_pays(half, None, 4, training=False, causal=False) == (cpu_class == "avx512-bf16")
    # never: fp32, training, causal, a causal mask, too few scores, too many
    assert not A.products_attention_pays(half.float(), mask, 4, training=False, causal=False)
    assert not A.products_attention_pays(half, mask, 4, training=True, causal=False)
    assert not A.products_attention_pays(half, mask, 4, training=False, causal=True)
    assert not A.products_attention_pays(half, torch.ones(2, 1, 64, 64, dtype=torch.bool), 4, False, False)
    assert 2 * 4 * 64 * 64 >= A.PRODUCTS_ATTENTION_MIN_SCORES > 4 * 64 * 64
    assert not A.products_attention_pays(half[:1], None, 4, training=False, causal=False)  # a lone 64: 16,384
    monkeypatch.setattr(A, "PRODUCTS_ATTENTION_MAX_SCORES", 2 * 4 * 64 * 64 - 1)
    assert not A.products_attention_pays(half, mask, 4, training=False, causal=False)
    with A.products_attention_traced():  # a traced graph takes them at every shape, of any dtype
        assert A.products_attention_pays(half[:1, :2].float(), None, 4, training=False, causal=False)
        assert not A.products_attention_pays(half, mask, 4, training=True, causal=False)
    assert not A.products_attention_pays(half[:1, :2], None, 4, training=False, causal=False)


def test_a_bf16_model_answers_alike_through_either_attention(monkeypatch):
    """BERT under bf16 autocast with the products (the avx512_bf16 class) and with the fused
    kernel (the AMX class): the same hidden states within bf16's rounding, padding masked."""
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=64, max_position_embeddings=64)).eval()
    ids = torch.randint(5, 60, (4, 48))  # 4 x 4 heads x 48 x 48 scores: above PRODUCTS_ATTENTION_MIN_SCORES
    key_mask = torch.ones_like(ids)
    key_mask[2:, 36:] = 0
    calls = []
    real = A.products_attention
    monkeypatch.setattr(A, "products_attention", lambda *a: calls.append(1) or real(*a))
    outputs = {}
    for cpu_class in ("avx512-bf16", "amx"):
        monkeypatch.setenv("BERTKIT_CPU_CLASS", cpu_class)
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
            outputs[cpu_class] = model(ids, None, key_mask).last_hidden_state.float()
    assert len(calls) == 2  # one per layer, on the avx512_bf16 class only
    real_tokens = key_mask.bool()
    assert torch.allclose(outputs["avx512-bf16"][real_tokens], outputs["amx"][real_tokens], atol=0.1)


def test_a_compiled_bf16_model_keeps_the_kernel_and_one_graph(monkeypatch):
    """Under ``torch.compile`` the choice is not made (the class is read from a file, a graph
    break at every layer): the compiled bf16 graph is one graph, with the fused kernel."""
    monkeypatch.setenv("BERTKIT_CPU_CLASS", "avx512-bf16")
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=64, max_position_embeddings=64)).eval()
    ids = torch.randint(5, 60, (8, 64))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        explained = torch._dynamo.explain(model)(ids, None, torch.ones_like(ids))
    assert explained.graph_count == 1 and explained.graph_break_count == 0
    nodes = [str(node.target) for graph in explained.graphs for node in graph.graph.nodes]
    assert any("scaled_dot_product_attention" in n for n in nodes) and not any("bmm" in n for n in nodes)
