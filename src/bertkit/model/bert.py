"""``BertModel``: embeddings + Transformer encoder + pooler, and the base class of every head.

``BertPreTrainedModel`` holds the config and the BERT initialisation (normal(0,
``initializer_range``) weights, zero biases, LayerNorm weight 1 / bias 0). Every model with
a head keeps its encoder under the attribute ``bert``; checkpoint names follow from that.
"""

from __future__ import annotations

import torch
from torch import nn

from bertkit.config import BertConfig
from bertkit.model.embeddings import BertEmbeddings
from bertkit.model.encoder import BertEncoder
from bertkit.model.outputs import ModelOutput
from bertkit.model.unpadded import forward_unpadded, uses_unpadded


def key_padding_mask(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """(B, T) bool, True for real tokens; ``None`` when no token is padding (the attention
    kernels then skip the mask). Under ``torch.compile`` the mask is kept even when it is all
    True: testing it would read a tensor's value and break the graph in two."""
    if attention_mask is None:
        return None
    key_mask = attention_mask.bool()
    if torch.compiler.is_compiling():
        return key_mask
    return None if bool(key_mask.all()) else key_mask


class BertPreTrainedModel(nn.Module):
    """Base of every bertkit network: ``config`` plus BERT's weight initialisation.
    ``pipeline``: the Hugging Face pipeline its head answers (each head class sets its own;
    the bare encoder's features otherwise)."""

    pipeline = "feature-extraction"

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config

    def init_weights(self) -> None:
        """Initialise every sub-module as BERT does (call at the end of ``__init__``)."""
        self.apply(self._init_module)

    def _init_module(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def encoder_model(self) -> BertModel:
        """The ``BertModel`` inside (``self`` for a bare ``BertModel``)."""
        return self if isinstance(self, BertModel) else self.bert

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype

    def num_parameters(self) -> int:
        """Distinct parameters (a tied tensor counts once)."""
        return sum(p.numel() for p in self.parameters())


class BertPooler(nn.Module):
    """``tanh(W h + b)`` at ``[CLS]``: the fixed-size summary used by sentence-level heads.

    A left-to-right model (``config.attention == "causal"``, the paper's LTR ablation) reads
    the *last real token* instead: its ``[CLS]`` sees only itself, so pooling it would give
    every input the same summary. ``key_mask`` ((B, T) bool, True for real tokens; ``None``
    when nothing is padding) finds that token."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.causal = config.attention == "causal"

    def forward(self, hidden: torch.Tensor, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        if not self.causal:
            return torch.tanh(self.dense(hidden[:, 0]))
        if key_mask is None:
            return torch.tanh(self.dense(hidden[:, -1]))
        last = key_mask.long().sum(dim=1).clamp(min=1) - 1
        return torch.tanh(self.dense(hidden[torch.arange(hidden.shape[0]), last]))


class BertModel(BertPreTrainedModel):
    """The bare encoder.

    ``forward(input_ids (B, T), token_type_ids (B, T) | None, attention_mask (B, T) | None,
    output_hidden_states, output_attentions)`` -> :class:`ModelOutput` with
    ``last_hidden_state`` (B, T, H), ``pooled_output`` (B, H) when the pooler exists,
    ``hidden_states`` (embedding output + every layer) and ``attentions`` when asked.
    ``attention_mask`` is 1 for real tokens, 0 for padding. (The output at a few positions
    only, for pre-training: :func:`bertkit.model.sparse_last_layer.encode_at_positions`.)
    ``config.attention_impl == "unpadded"``: computed on the real tokens only
    (:mod:`bertkit.model.unpadded`), zeros at padding positions.
    """

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__(config)
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> ModelOutput:
        key_mask = key_padding_mask(attention_mask)
        if uses_unpadded(self, key_mask, output_attentions):
            return forward_unpadded(self, input_ids, token_type_ids, key_mask, output_hidden_states)
        embedded = self.embeddings(input_ids, token_type_ids)
        last, all_hidden, all_attentions = self.encoder(
            embedded, key_mask, output_hidden_states, output_attentions
        )
        return ModelOutput(
            last_hidden_state=last,
            pooled_output=self.pooler(last, key_mask) if self.pooler is not None else None,
            hidden_states=all_hidden,
            attentions=all_attentions,
        )
