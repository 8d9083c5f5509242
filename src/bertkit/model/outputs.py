"""``ModelOutput``: what every bertkit model returns (fields left ``None`` when not computed)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class ModelOutput:
    """Outputs of a forward pass.

    ``hidden_states`` holds the embedding output followed by every layer's output
    (``num_hidden_layers + 1`` tensors of shape (B, T, H)); ``attentions`` one (B, heads, T, T)
    probability tensor per layer. Heads fill ``logits`` (and their own named fields) and, when
    labels are given, ``loss``.
    """

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    mlm_loss: torch.Tensor | None = None
    nsp_loss: torch.Tensor | None = None
    mlm_logits: torch.Tensor | None = None
    nsp_logits: torch.Tensor | None = None
    start_logits: torch.Tensor | None = None
    end_logits: torch.Tensor | None = None
    last_hidden_state: torch.Tensor | None = None
    pooled_output: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None

    def __getitem__(self, name: str) -> torch.Tensor | tuple | None:
        return getattr(self, name)
