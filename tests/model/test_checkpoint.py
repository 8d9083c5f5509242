"""Model directories: round trips, Hugging Face name variants, warnings and errors."""

from __future__ import annotations

import json
import os
import warnings

import pytest
import torch
from safetensors.torch import load_file, save_file

from bertkit.checkpoint import load_pretrained, save_pretrained, to_hf_state_dict
from bertkit.config import BertConfig
from bertkit.errors import CheckpointError
from bertkit.model import (
    BertForMaskedLM,
    BertForPreTraining,
    BertForSequenceClassification,
    BertModel,
)

CFG = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=32, max_position_embeddings=16)


def ids():
    return torch.randint(5, 40, (2, 7), generator=torch.Generator().manual_seed(0))


def same_outputs(a, b, field="last_hidden_state"):
    with torch.no_grad():
        return torch.allclose(getattr(a.eval()(ids()), field), getattr(b.eval()(ids()), field), atol=1e-6)


def quiet_load(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return load_pretrained(*args, **kwargs)


def test_round_trip_and_directory_layout(tmp_path):
    torch.manual_seed(0)
    model = BertForPreTraining(CFG)
    save_pretrained(model, tmp_path, extra_config={"note": "hello"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["architectures"] == ["BertForPreTraining"] and config["note"] == "hello"
    names = set(load_file(str(tmp_path / "model.safetensors")))
    assert "bert.encoder.layer.0.attention.self.query.weight" in names
    assert "cls.predictions.transform.dense.weight" in names and "cls.seq_relationship.bias" in names
    assert not any("qkv" in n or "decoder" in n for n in names)
    loaded = quiet_load(tmp_path)  # class from the config
    assert type(loaded) is BertForPreTraining
    assert same_outputs(model, loaded, "mlm_logits") and same_outputs(model, loaded, "nsp_logits")
    assert loaded.mlm_head.decoder.weight is loaded.bert.embeddings.word_embeddings.weight


def test_classifier_round_trip_keeps_labels(tmp_path):
    model = BertForSequenceClassification(CFG, num_labels=3)
    save_pretrained(model, tmp_path, extra_config={"id2label": {"0": "neg", "1": "neu", "2": "pos"}})
    loaded = quiet_load(tmp_path)
    assert loaded.num_labels == 3 and loaded.config.extra["id2label"]["2"] == "pos"
    assert same_outputs(model, loaded, "logits")


def test_legacy_names_bare_names_and_torch_bin(tmp_path):
    torch.manual_seed(0)
    model = BertModel(CFG)
    legacy = {}
    for name, tensor in to_hf_state_dict(model).items():
        name = name.removeprefix("bert.")
        name = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        legacy[name] = tensor.clone()
    legacy["embeddings.position_ids"] = torch.arange(16)[None]
    CFG.to_json(tmp_path / "config.json")
    torch.save(legacy, tmp_path / "pytorch_model.bin")
    loaded = quiet_load(tmp_path, BertModel)
    assert same_outputs(model, loaded)
    assert same_outputs(model, loaded, "pooled_output")


def test_missing_heads_are_initialised_and_named(tmp_path):
    torch.manual_seed(0)
    encoder = BertModel(CFG)
    save_pretrained(encoder, tmp_path)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model = load_pretrained(tmp_path, BertForMaskedLM)
    text = " ".join(str(w.message) for w in record)
    assert "freshly initialised: cls.predictions.bias, cls.predictions.transform" in text
    assert "not used by BertForMaskedLM: bert.pooler.dense.bias" in text
    assert torch.equal(model.bert.embeddings.word_embeddings.weight, encoder.embeddings.word_embeddings.weight)
    assert torch.all(model.mlm_head.bias == 0)


def test_unexpected_tensors_are_named(tmp_path):
    save_pretrained(BertForPreTraining(CFG), tmp_path)
    with pytest.warns(UserWarning, match="cls.seq_relationship.weight"):
        load_pretrained(tmp_path, BertForMaskedLM)


def test_wrong_shape_names_the_tensor(tmp_path):
    save_pretrained(BertModel(CFG), tmp_path)
    tensors = load_file(str(tmp_path / "model.safetensors"))
    tensors["bert.encoder.layer.1.intermediate.dense.weight"] = torch.zeros(33, 16)
    save_file(tensors, str(tmp_path / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"bert\.encoder\.layer\.1\.intermediate\.dense\.weight.*\(33, 16\)"):
        load_pretrained(tmp_path)


def test_not_a_bert_directory(tmp_path):
    with pytest.raises(CheckpointError, match="no such model directory"):
        load_pretrained(tmp_path / "absent")
    with pytest.raises(CheckpointError, match="no config.json"):
        load_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(CheckpointError, match="not a BERT"):
        load_pretrained(tmp_path)
    CFG.to_json(tmp_path / "config.json")
    with pytest.raises(CheckpointError, match="no model.safetensors or pytorch_model.bin"):
        load_pretrained(tmp_path)
    save_file({"transformer.h.0.weight": torch.zeros(2)}, str(tmp_path / "model.safetensors"))
    with pytest.raises(CheckpointError, match="no BERT tensors"):
        load_pretrained(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="unreadable"):
        load_pretrained(tmp_path)


def test_failed_write_leaves_previous_directory_intact(tmp_path, monkeypatch):
    model = BertModel(CFG)
    save_pretrained(model, tmp_path)
    before = (tmp_path / "model.safetensors").read_bytes()

    def explode(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("safetensors.torch.save_file", explode)
    with pytest.raises(OSError, match="disk full"):
        save_pretrained(BertModel(CFG), tmp_path)
    assert (tmp_path / "model.safetensors").read_bytes() == before
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_tokenizer_size_must_match(tmp_path):
    class FakeTokenizer:
        def __len__(self):
            return 41

    with pytest.raises(CheckpointError, match="41 tokens"):
        save_pretrained(BertModel(CFG), tmp_path, tokenizer=FakeTokenizer())


def test_config_overrides(tmp_path):
    save_pretrained(BertModel(CFG), tmp_path)
    model = quiet_load(tmp_path, config_overrides={"hidden_dropout_prob": 0.0, "attention": "causal"})
    assert model.config.hidden_dropout_prob == 0.0 and model.config.attention == "causal"


def test_casing_flag_must_agree_with_the_saved_setting(tmp_path):
    from bertkit.checkpoint import load_tokenizer
    from bertkit.errors import OptionError
    from bertkit.tokenizer import BertTokenizer
    from bertkit.tokenizer.vocab import Vocab

    vocab = Vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##a", "A", "##A"])
    BertTokenizer(vocab, lowercase=True, model_max_length=64, google_compat=True).save_pretrained(tmp_path)
    with pytest.raises(OptionError, match=r"--cased/--no-lowercase contradicts the setting "
                                          r"lowercase=true saved in .*tokenizer_config.json"):
        load_tokenizer(tmp_path, lowercase=False)
    with pytest.raises(OptionError, match="--no-strip-accents contradicts"):
        load_tokenizer(tmp_path, strip_accents=False)
    same = load_tokenizer(tmp_path, lowercase=True)  # restating the setting is fine
    assert same.lowercase and same.strip_accents
    assert same.google_compat and same.model_max_length == 64
    # Google's mode segments words of up to 200 characters (Hugging Face's: 100)
    assert same.tokenize("a" * 150) == ["a"] + ["##a"] * 149
    assert not load_tokenizer(tmp_path).tokenize("A")[0].isupper()
