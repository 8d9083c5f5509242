"""The one pooling (``bertkit.model.pooling``): padding never counts, whatever the mode."""

from __future__ import annotations

import pytest
import torch

from bertkit.model.pooling import pool_features


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
