"""The Transformer encoder stack: ``num_hidden_layers`` identical blocks.

Each block (post-LayerNorm, as in BERT):
    x = LayerNorm(x + Dropout(W_o . SelfAttention(x)))
    x = LayerNorm(x + Dropout(W_2 . GELU(W_1 . x)))
Module names follow the Hugging Face layout (``attention.output.dense``, ``intermediate``,
``output``) so checkpoint conversion only has to split or join ``qkv``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.config import BertConfig
from bertkit.model.attention import MultiHeadSelfAttention, build_attention_mask


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


FUNCTIONS = {  # one per name of bertkit.config.ACTIVATIONS (a test checks both lists agree)
    "gelu": F.gelu,  # the exact erf form used by the original BERT code
    "gelu_new": _gelu_tanh,
    "gelu_pytorch_tanh": _gelu_tanh,
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
}


def activation(name: str):
    if name not in FUNCTIONS:
        raise ValueError(f"unsupported hidden_act {name!r}; choose from {', '.join(FUNCTIONS)}")
    return FUNCTIONS[name]


class ResidualOutput(nn.Module):
    """``LayerNorm(residual + Dropout(dense(x)))``: the sub-layer output of either half."""

    def __init__(self, in_size: int, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(in_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        # the projection is a fresh tensor, so the residual can be added in place
        return self.LayerNorm(self.dropout(self.dense(x)).add_(residual))


class AttentionBlock(nn.Module):
    """Self-attention sub-layer: attention, output projection, residual, LayerNorm."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.self = MultiHeadSelfAttention(config)
        self.output = ResidualOutput(config.hidden_size, config)

    def forward(self, hidden, mask, output_attentions=False):
        context, probs = self.self(hidden, mask, output_attentions)
        return self.output(context, hidden), probs


class FeedForward(nn.Module):
    """The position-wise expansion ``act(W_1 x + b_1)`` (H -> intermediate_size). A ``dense``
    layer whose ``activation`` attribute names this block's ``hidden_act`` has applied it
    itself (an inference layer fusing it into its product:
    :class:`bertkit.modeldir.int8.PackedLinear`)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.hidden_act = config.hidden_act
        self.act = activation(config.hidden_act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.dense(x)
        return out if getattr(self.dense, "activation", None) == self.hidden_act else self.act(out)


class EncoderLayer(nn.Module):
    """One Transformer block: attention sub-layer then feed-forward sub-layer."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.attention = AttentionBlock(config)
        self.intermediate = FeedForward(config)
        self.output = ResidualOutput(config.intermediate_size, config)

    def forward(self, hidden, mask, output_attentions=False):
        """(B, T, H) -> (B, T, H), and the attention probabilities when asked."""
        hidden, probs = self.attention(hidden, mask, output_attentions)
        return self.output(self.intermediate(hidden), hidden), probs


class BertEncoder(nn.Module):
    """The stack of ``EncoderLayer`` blocks.

    ``forward(hidden, key_mask)`` returns ``(last, all_hidden, all_attentions)``; the tuples
    are ``None`` unless requested. ``all_hidden`` starts with the input (embedding output).
    ``num_layers`` runs only the first layers (pre-training's sparse last layer runs the last
    one itself, at the masked positions: :mod:`bertkit.model.sparse_last_layer`).
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.causal = config.attention == "causal"
        self.layer = nn.ModuleList(EncoderLayer(config) for _ in range(config.num_hidden_layers))

    def forward(
        self,
        hidden: torch.Tensor,
        key_mask: torch.Tensor | None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        num_layers: int | None = None,
    ):
        mask = build_attention_mask(key_mask, hidden.shape[1], self.causal)
        all_hidden = [hidden] if output_hidden_states else None
        all_attentions = [] if output_attentions else None
        # (slicing a ModuleList builds a new one: only when asked, not at every forward pass)
        for layer in self.layer if num_layers is None else self.layer[:num_layers]:
            hidden, probs = layer(hidden, mask, output_attentions)
            if output_hidden_states:
                all_hidden.append(hidden)
            if output_attentions:
                all_attentions.append(probs)
        return (
            hidden,
            tuple(all_hidden) if all_hidden is not None else None,
            tuple(all_attentions) if all_attentions is not None else None,
        )
