"""A toy model for the training-machinery tests (no BERT needed)."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn


class Toy(nn.Module):
    def __init__(self, width: int = 8):
        super().__init__()
        self.embed = nn.Embedding(10, width)
        self.dense = nn.Linear(width, width)
        self.LayerNorm = nn.LayerNorm(width)
        self.out = nn.Linear(width, 1)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x, y):
        h = self.dropout(self.LayerNorm(torch.tanh(self.dense(self.embed(x)))))
        return SimpleNamespace(loss=((self.out(h).squeeze(-1) - y) ** 2).mean())


def toy_batch(seed: int, n: int = 4):
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randint(0, 10, (n,), generator=g), "y": torch.randn(n, generator=g)}


def compute(model, batch):
    return model(**batch)
