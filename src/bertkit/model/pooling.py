"""Token vectors -> one vector per sequence: the one pooling of bertkit.

Used by the sentence-embedding task (:mod:`bertkit.tasks.embedding`, in training) and by the
inference engine (``embed``, ``/embed``, long-text windows; :func:`splade_pool` for
``/embed_sparse``), so a trained embedding model is
served with exactly the pooling it was trained with. The modes are sentence-transformers'
``Pooling`` modes of the same names (``cls_token``, ``mean_tokens``, ``max_tokens``).
"""

from __future__ import annotations

import torch

POOLINGS = ("cls", "mean", "max")
SPLADE = "splade"  # the masked-LM head's vocabulary-wide vector (:func:`splade_pool`), not a pooling of states
SERVED_POOLINGS = (*POOLINGS, SPLADE)  # what ``bertkit serve --pooling`` (TEI's ``--pooling``) takes


def pool_features(features: torch.Tensor, mask: torch.Tensor, pool: str) -> torch.Tensor:
    """(B, D) vectors of (B, T, D) ``features`` under the (B, T) ``mask`` (1: token, 0: padding).

    ``cls``: the first row (``[CLS]``); ``mean``: the mean over each sequence's tokens,
    specials included, padding excluded; ``max``: the element-wise maximum over the same
    tokens. Another ``pool`` is a ``ValueError``."""
    if pool == "cls":
        return features[:, 0]
    if pool == "mean":
        weights = mask.unsqueeze(-1).to(features.dtype)
        return (features * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
    if pool == "max":
        padding = ~mask.bool().unsqueeze(-1)
        return features.masked_fill(padding, torch.finfo(features.dtype).min).max(1).values
    raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {pool!r}")


def splade_pool(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """SPLADE's sparse vector of each sequence: (B, V) ``max over tokens of log(1 + relu(l))``
    of the (B, T, V) masked-LM ``logits`` under the (B, T) ``mask`` (padding never counts;
    every value is >= 0, most exactly 0). sentence-transformers' ``SpladePooling`` (max)."""
    logits = logits.float()
    if not bool(mask.all()):  # a padded token counts as a logit of 0, which log(1 + relu) maps to 0
        logits = logits.masked_fill(~mask.bool().unsqueeze(-1), 0.0)
    # log(1 + relu(l)) never decreases as l grows, so the max over tokens is taken first: one
    # (B, V) transform instead of one per token (most of a lone text's SPLADE vector's time)
    return torch.log1p(torch.relu(logits.amax(1)))
