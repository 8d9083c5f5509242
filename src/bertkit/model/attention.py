"""Multi-head self-attention (paper section 3; Vaswani et al. 2017, section 3.2).

One fused projection computes queries, keys and values (``qkv``: H -> 3H, rows ordered
query | key | value, so the Hugging Face ``query``/``key``/``value`` tensors are its three
row blocks). Scores use ``torch.nn.functional.scaled_dot_product_attention`` (fused kernels
where the device has them); when attention probabilities are requested the explicit
softmax(QK^T / sqrt(d)) V path runs instead and returns them.

Masks: ``key_mask`` is a (B, T) bool tensor, True for real tokens, or ``None`` when no
token is padding. ``causal=True`` also forbids attending to later positions.

Pre-training runs the last layer's queries at a few positions only: that lives in
:mod:`bertkit.model.sparse_last_layer`, not here.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.config import BertConfig


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
        batch, length, width = hidden.shape
        qkv = self.qkv(hidden).view(batch, length, 3, self.num_heads, self.head_size)
        query, key, value = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, heads, T, d)
        if output_attentions:
            context, probs = self._explicit(query, key, value, mask)
        else:
            context = F.scaled_dot_product_attention(
                query,
                key,
                value,
                attn_mask=mask,
                dropout_p=self.dropout_prob if self.training else 0.0,
                is_causal=self.causal and mask is None,
            )
            probs = None
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
