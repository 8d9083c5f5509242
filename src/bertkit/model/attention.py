"""Multi-head self-attention (paper section 3; Vaswani et al. 2017, section 3.2).

One fused projection computes queries, keys and values (``qkv``: H -> 3H, rows ordered
query | key | value, so the Hugging Face ``query``/``key``/``value`` tensors are its three
row blocks). Scores use ``torch.nn.functional.scaled_dot_product_attention`` (fused kernels
where the device has them); when attention probabilities are requested the explicit
softmax(QK^T / sqrt(d)) V path runs instead and returns them. bf16 inference on the CPU
classes where torch's fused kernel is the slower one (:func:`bertkit.cpu.bf16_products_attention`)
runs :func:`products_attention` instead: the same attention as two batched products.

Masks: ``key_mask`` is a (B, T) bool tensor, True for real tokens, or ``None`` when no
token is padding. ``causal=True`` also forbids attending to later positions.

Pre-training runs the last layer's queries at a few positions only: that lives in
:mod:`bertkit.model.sparse_last_layer`, not here.
"""

from __future__ import annotations

import contextlib
import math
import threading

import torch
import torch.nn.functional as F
from torch import nn

from bertkit import cpu
from bertkit.config import BertConfig

# products_attention runs for a score matrix (B x heads, T, T) of at least this many elements:
# below it its eight operator calls cost more than the fused kernel's one (avx512_bf16 EPYC,
# heads of 64: 4 heads at 1 x 64 and 4 x 32, 16,384 scores, 1.36x and 1.12x the kernel's time;
# 12 heads at 1 x 64, 49,152, 0.72x; bench/attention_products.py) ...
PRODUCTS_ATTENTION_MIN_SCORES = 1 << 15
# ... and of at most this many (128 MiB of bf16): the fused kernel never holds it whole
PRODUCTS_ATTENTION_MAX_SCORES = 1 << 26


def build_attention_mask(key_mask: torch.Tensor | None, length: int, causal: bool) -> torch.Tensor | None:
    """Boolean mask broadcastable to (B, heads, T, T), True where attention is allowed.

    ``None`` when nothing is masked, or when only the causal triangle is (the kernels then
    take ``is_causal=True``).
    """
    if key_mask is None:
        return None
    mask = key_mask[:, None, None, :]
    if causal:
        device = key_mask.device
        triangle = torch.ones(length, length, dtype=torch.bool, device=device).tril()
        mask = mask & triangle
    return mask


class ThreadSwitch:
    """A switch that is on within :meth:`within`'s block, in the thread that entered it
    (nestable): how a tracer asks the model for another form of a pass it traces."""

    def __init__(self):
        self._local = threading.local()

    @property
    def on(self) -> bool:
        return getattr(self._local, "on", False)

    @contextlib.contextmanager
    def within(self):
        before = self.on
        self._local.on = True
        try:
            yield
        finally:
            self._local.on = before


_TRACED = ThreadSwitch()


def products_attention_traced():
    """Within it (in this thread), every inference pass that may take :func:`products_attention`
    takes it, whatever its dtype and shape: for a graph traced once (``torch.export``, dynamic
    batch and length) to run in bf16 on a class of
    :data:`bertkit.cpu.BF16_PRODUCTS_ATTENTION_CLASSES` (the shape rules would otherwise become
    guards on the graph's dynamic sizes). Static INT8 traces its graph so."""
    return _TRACED.within()


def products_attention_pays(qkv: torch.Tensor, mask: torch.Tensor | None, heads: int, training: bool,
                            causal: bool) -> bool:
    """Whether :func:`products_attention` runs this pass (``qkv``: (B, T, 3H) projections;
    ``mask``: :func:`build_attention_mask`'s): inference, not causal, a key-padding mask or
    none; and either within :func:`products_attention_traced`, or, outside ``torch.compile``
    (whose graphs keep the kernel: not measured the other way, and the CPU's class is read
    from a file), bf16 on the CPU, on a class measured faster that way
    (:func:`bertkit.cpu.bf16_products_attention`), for a batch of
    :data:`PRODUCTS_ATTENTION_MIN_SCORES` to :data:`PRODUCTS_ATTENTION_MAX_SCORES` scores."""
    if training or causal or (mask is not None and mask.shape[-2] != 1):
        return False
    if _TRACED.on:
        return True
    if torch.compiler.is_compiling():
        return False
    batch, length = qkv.shape[0], qkv.shape[1]
    return (qkv.dtype is torch.bfloat16 and qkv.device.type == "cpu"
            and PRODUCTS_ATTENTION_MIN_SCORES <= batch * heads * length * length <= PRODUCTS_ATTENTION_MAX_SCORES
            and cpu.bf16_products_attention())


def products_attention(qkv: torch.Tensor, mask: torch.Tensor | None, heads: int, size: int) -> torch.Tensor:
    """The context (B, T, heads * size) of ``qkv`` (B, T, 3 * heads * size, rows ordered query |
    key | value) under a key-padding ``mask`` ((B, 1, 1, T) bool, True for real tokens, or
    None): softmax(Q K^T / sqrt(d) + masked) V as two batched products over the B x heads
    matrices (``torch.baddbmm``, ``torch.bmm``), the scores held whole (inference; no dropout).
    The same attention as ``scaled_dot_product_attention`` within the rounding of its dtype:
    its scores are rounded to it before the softmax (as Hugging Face's eager attention's)."""
    batch, length, _ = qkv.shape
    # one copy into head-major order: each head's matrix contiguous, as the batched products read it
    query, key, value = qkv.view(batch, length, 3, heads, size).permute(2, 0, 3, 1, 4).reshape(
        3, batch * heads, length, size).unbind(0)
    scale = 1.0 / math.sqrt(size)
    if mask is None:
        scores = torch.bmm(query, key.transpose(1, 2)).mul_(scale)
    else:
        bias = torch.zeros(batch, 1, length, dtype=qkv.dtype, device=qkv.device)
        bias.masked_fill_(~mask.reshape(batch, 1, length), torch.finfo(qkv.dtype).min)
        bias = bias.repeat_interleave(heads, dim=0)  # (B x heads, 1, T), broadcast over the queries
        scores = torch.baddbmm(bias, query, key.transpose(1, 2), alpha=scale)
    context = torch.bmm(scores.softmax(dim=-1), value)
    return context.view(batch, heads, length, size).transpose(1, 2).reshape(batch, length, heads * size)


def attend(qkv: torch.Tensor, mask: torch.Tensor | None, heads: int, size: int, dropout: float = 0.0,
           training: bool = False, causal: bool = False) -> torch.Tensor:
    """The context (B, T, heads * size) of ``qkv`` (B, T, 3 * heads * size, rows ordered query |
    key | value) under :func:`build_attention_mask`'s ``mask``: :func:`products_attention` where
    :func:`products_attention_pays`, else ``scaled_dot_product_attention`` (causal through the
    kernel's own flag when ``mask`` is None)."""
    if products_attention_pays(qkv, mask, heads, training, causal):
        return products_attention(qkv, mask, heads, size)
    batch, length, _ = qkv.shape
    query, key, value = qkv.view(batch, length, 3, heads, size).permute(2, 0, 3, 1, 4).unbind(0)  # (B, heads, T, d)
    context = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout,
                                             is_causal=causal and mask is None)
    return context.transpose(1, 2).reshape(batch, length, heads * size)


class MultiHeadSelfAttention(nn.Module):
    """Self-attention over (B, T, H) hidden states.

    Returns the context (B, T, H), the heads concatenated (the output projection, residual and
    LayerNorm follow in the encoder block), and, when asked, the attention probabilities
    (B, heads, T, T); otherwise ``None``.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_size = config.head_size
        self.causal = config.attention == "causal"
        self.dropout_prob = config.attention_probs_dropout_prob
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.probs_dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def forward(
        self,
        hidden: torch.Tensor,
        mask: torch.Tensor | None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        batch, length, _ = hidden.shape
        width = self.num_heads * self.head_size  # the hidden size, less any pruned heads
        projected = self.qkv(hidden)
        if not output_attentions:
            dropout = self.dropout_prob if self.training else 0.0
            return attend(projected, mask, self.num_heads, self.head_size, dropout, self.training, self.causal), None
        qkv = projected.view(batch, length, 3, self.num_heads, self.head_size)
        query, key, value = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, heads, T, d)
        context, probs = self._explicit(query, key, value, mask)
        return context.transpose(1, 2).reshape(batch, length, width), probs

    def _explicit(self, query, key, value, mask):
        scores = (query @ key.transpose(-1, -2)) * (1.0 / math.sqrt(self.head_size))
        if mask is None and self.causal:
            length = query.shape[-2]
            mask = torch.ones(length, length, dtype=torch.bool, device=query.device).tril()
        if mask is not None:
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        probs = scores.softmax(dim=-1)
        return self.probs_dropout(probs) @ value, probs
