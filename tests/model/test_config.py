"""BertConfig: presets, parameter counts, Hugging Face config.json round trip."""

from __future__ import annotations

import json

import pytest

from bertkit.config import PRESETS, BertConfig
from bertkit.errors import CheckpointError


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_have_paper_shapes(name):
    layers, hidden, heads = PRESETS[name]
    cfg = BertConfig.preset(name)
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads) == (layers, hidden, heads)
    assert cfg.intermediate_size == 4 * hidden


def test_parameter_counts_match_the_paper():
    assert round(BertConfig.preset("base").num_parameters() / 1e6) == 109  # "110M"
    assert round(BertConfig.preset("large").num_parameters() / 1e6) == 335  # "340M"


def test_preset_overrides_and_unknown_preset():
    assert BertConfig.preset("tiny", vocab_size=99).vocab_size == 99
    with pytest.raises(ValueError, match="unknown preset"):
        BertConfig.preset("huge")


def test_invalid_shapes_are_rejected():
    with pytest.raises(ValueError, match="multiple"):
        BertConfig(hidden_size=100, num_attention_heads=3)
    with pytest.raises(ValueError, match="attention"):
        BertConfig(attention="sideways")


def test_json_round_trip_keeps_unknown_fields(tmp_path):
    path = tmp_path / "config.json"
    values = BertConfig.preset("tiny").to_dict()
    values.update({"architectures": ["BertForMaskedLM"], "some_future_field": {"a": 1}, "gradient_checkpointing": False})
    path.write_text(json.dumps(values))
    cfg = BertConfig.from_json(path)
    assert cfg.extra["some_future_field"] == {"a": 1}
    cfg.to_json(tmp_path / "again.json")
    again = json.loads((tmp_path / "again.json").read_text())
    assert again["some_future_field"] == {"a": 1}
    assert again["model_type"] == "bert" and again["hidden_size"] == 128
    assert BertConfig.from_json(tmp_path / "again.json") == cfg


def test_missing_fields_take_defaults_and_bad_files_are_clear(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"hidden_size": 64, "num_attention_heads": 4}))
    cfg = BertConfig.from_json(path)
    assert cfg.hidden_size == 64 and cfg.num_hidden_layers == 12
    path.write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(CheckpointError, match="not a BERT"):
        BertConfig.from_json(path)
    path.write_text("{not json")
    with pytest.raises(CheckpointError, match="JSON"):
        BertConfig.from_json(path)
