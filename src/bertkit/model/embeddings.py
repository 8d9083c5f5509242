"""Input representation (paper section 3, figure 2): token + segment + position embeddings.

The three learned embeddings are summed, then normalised (LayerNorm) and dropped out.
Positions are absolute, ``0 .. T-1``; a sequence longer than ``max_position_embeddings`` is a
``ValueError`` (truncation is the caller's decision, see :mod:`bertkit.inference`).
"""

from __future__ import annotations

import torch
from torch import nn

from bertkit.config import BertConfig


class BertEmbeddings(nn.Module):
    """(B, T) token ids and segment ids -> (B, T, H) input vectors."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        length = input_ids.shape[1]
        max_positions = self.position_embeddings.num_embeddings
        if length > max_positions:
            raise ValueError(
                f"sequence length {length} exceeds max_position_embeddings {max_positions}; "
                "truncate the input"
            )
        if input_ids.dtype not in (torch.int32, torch.int64):
            input_ids = input_ids.long()
        if token_type_ids is None:
            segments = self.token_type_embeddings.weight[0]
        else:
            if token_type_ids.dtype not in (torch.int32, torch.int64):
                token_type_ids = token_type_ids.long()  # e.g. int8 from memory-mapped data
            segments = self.token_type_embeddings(token_type_ids)
        positions = self.position_embeddings(torch.arange(length, device=input_ids.device))
        summed = self.word_embeddings(input_ids) + segments + positions
        return self.dropout(self.LayerNorm(summed))
