"""Model configs and weights that would silently build or run a wrong model are refused."""

from __future__ import annotations

import json

import pytest
import torch

from bertkit.checkpoint import load_pretrained, save_pretrained
from bertkit.config import BertConfig
from bertkit.errors import CheckpointError
from bertkit.model import BertForMaskedLM

SMALL = dict(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
             intermediate_size=32, max_position_embeddings=32)


@pytest.mark.parametrize("change, message", [
    ({"num_hidden_layers": -1}, "num_hidden_layers must be at least 0, got -1"),
    ({"hidden_size": "16"}, "hidden_size must be an integer, got '16'"),
    ({"hidden_dropout_prob": 1.5}, r"hidden_dropout_prob must be a number in \[0, 1\)"),
    ({"hidden_act": "swishy"}, "unsupported hidden_act 'swishy'"),
])
def test_bad_config_values_are_named(tmp_path, change, message):
    (tmp_path / "config.json").write_text(json.dumps({**SMALL, **change}))
    with pytest.raises(CheckpointError, match=rf"config.json: invalid BERT config \({message}"):
        BertConfig.from_json(tmp_path / "config.json")


def test_non_finite_weights_are_refused(tmp_path):
    model = BertForMaskedLM(BertConfig(**SMALL))
    with torch.no_grad():
        model.bert.embeddings.word_embeddings.weight[3, 2] = float("nan")
    save_pretrained(model, tmp_path)
    with pytest.raises(CheckpointError, match="NaN or infinite"):
        load_pretrained(tmp_path)
