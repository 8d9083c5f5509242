"""Multi-head self-attention (paper section 3; Vaswani et al. 2017, section 3.2).

One fused projection computes queries, keys and values (``qkv``: H -> 3H, rows ordered
query | key | value, so the Hugging Face ``query``/``key``/``value`` tensors are its three
row blocks). Scores use ``torch.nn.functional.scaled_dot_product_attention`` (fused kernels
where the device has them); when attention probabilities are requested the explicit
softmax(QK^T / sqrt(d)) V path runs instead and returns them.

Masks: ``key_mask`` is a (B, T) bool tensor, True for real tokens, or ``None`` when no
token is padding. ``causal=True`` also forbids attending to later positions.

``query_hidden`` (B, Q, H), the hidden states at some positions of each sequence (see
``gather_positions``), restricts the queries to those positions (keys and values still cover
every position): the context is then (B, Q, H), equal to the rows of the full context at those
positions. Pre-training uses it in the last layer, whose output is only read at the masked
positions and ``[CLS]``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.config import BertConfig


def build_attention_mask(
    key_mask: torch.Tensor | None,
    length: int,
    causal: bool,
    query_positions: torch.Tensor | None = None,
) -> torch.Tensor | None:
    """Boolean mask broadcastable to (B, heads, T, T), True where attention is allowed.

    ``None`` when nothing is masked, or when only the causal triangle is (the kernels then
    take ``is_causal=True``). With ``query_positions`` (B, Q) the mask is for those queries
    only, broadcastable to (B, heads, Q, T) (explicit when causal: the triangle depends on the
    positions).
    """
    if query_positions is not None and causal:
        keys = torch.arange(length, device=query_positions.device)
        mask = (keys <= query_positions[:, :, None])[:, None]  # (B, 1, Q, T)
        return mask if key_mask is None else mask & key_mask[:, None, None, :]
    if key_mask is None:
        return None
    mask = key_mask[:, None, None, :]
    if causal:
        device = key_mask.device
        triangle = torch.ones(length, length, dtype=torch.bool, device=device).tril()
        mask = mask & triangle
    return mask


def gather_positions(hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """``hidden[b, positions[b, i]]`` for every ``b, i``: (B, T, H), (B, Q) -> (B, Q, H)."""
    batch, length, width = hidden.shape
    offsets = torch.arange(0, batch * length, length, device=positions.device)
    flat = (positions + offsets[:, None]).reshape(-1)
    return hidden.reshape(batch * length, width).index_select(0, flat).view(batch, -1, width)


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
        query_hidden: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        batch, length, _ = hidden.shape
        width = self.num_heads * self.head_size  # the hidden size, less any pruned heads
        if query_hidden is None:
            qkv = self.qkv(hidden).view(batch, length, 3, self.num_heads, self.head_size)
            query, key, value = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, heads, T, d)
            queries = length
        else:
            # keys and values everywhere, queries only at the selected positions: the row
            # blocks of the fused weight are contiguous views, so no copy of the weights
            weight, bias = self.qkv.weight, self.qkv.bias
            kv = F.linear(hidden, weight[width:], bias[width:])
            key, value = kv.view(batch, length, 2, self.num_heads, self.head_size).permute(2, 0, 3, 1, 4).unbind(0)
            queries = query_hidden.shape[1]
            query = F.linear(query_hidden, weight[:width], bias[:width])
            query = query.view(batch, queries, self.num_heads, self.head_size).transpose(1, 2)
        if output_attentions:
            context, probs = self._explicit(query, key, value, mask)
        else:
            context = F.scaled_dot_product_attention(
                query,
                key,
                value,
                attn_mask=mask,
                dropout_p=self.dropout_prob if self.training else 0.0,
                is_causal=self.causal and mask is None and query_hidden is None,
            )
            probs = None
        return context.transpose(1, 2).reshape(batch, queries, width), probs

    def _explicit(self, query, key, value, mask):
        scores = (query @ key.transpose(-1, -2)) * (1.0 / math.sqrt(self.head_size))
        if mask is None and self.causal:
            length = query.shape[-2]
            mask = torch.ones(length, length, dtype=torch.bool, device=query.device).tril()
        if mask is not None:
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        probs = scores.softmax(dim=-1)
        return self.probs_dropout(probs) @ value, probs
