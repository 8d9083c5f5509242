"""The one pooling (``bertkit.model.pooling``): padding never counts, whatever the mode."""

from __future__ import annotations

import pytest
import torch

from bertkit.model.pooling import pool_features, splade_pool


def test_each_mode_reads_the_tokens_and_never_the_padding():
    features = torch.tensor([[[1.0, -4.0], [3.0, 2.0], [99.0, 99.0]],
                             [[-1.0, -2.0], [-5.0, -6.0], [-3.0, 0.5]]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    assert pool_features(features, mask, "cls").tolist() == [[1.0, -4.0], [-1.0, -2.0]]
    assert pool_features(features, mask, "mean").tolist() == [[2.0, -1.0], [-3.0, pytest.approx(-2.5)]]
    assert pool_features(features, mask, "max").tolist() == [[3.0, 2.0], [-1.0, 0.5]]
    all_negative = torch.tensor([[[-2.0], [-7.0], [5.0]]])  # the padded row's 5 must not win
    assert pool_features(all_negative, torch.tensor([[1, 1, 0]]), "max").tolist() == [[-2.0]]
    with pytest.raises(ValueError, match="pooling must be one of cls, mean, max"):
        pool_features(features, mask, "sum")


def test_splade_pool_is_the_max_over_tokens_of_log_1_plus_relu_padding_never_counting():
    """Taking the max over tokens before ``log(1 + relu)`` (the pooling's shortcut) gives the
    vector of the formula applied token by token; a padded token's large logit never counts."""
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 11, generator=generator) * 3
    logits[1, 3:] = 50.0  # padding
    logits[2] = -abs(logits[2])  # every logit negative: a vector of zeros
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])
    want = (torch.log1p(torch.relu(logits)) * mask.unsqueeze(-1)).max(1).values
    got = splade_pool(logits, mask)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=0)
    assert got[2].eq(0).all() and got[1].max() < 50
    torch.testing.assert_close(splade_pool(logits[:1].bfloat16(), mask[:1]), want[:1], rtol=1e-2, atol=1e-2)
