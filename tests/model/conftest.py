"""Fixtures of the model tests: a tiny masked-LM model directory with the tiny vocabulary."""

from __future__ import annotations

import pytest
import torch

from bertkit.checkpoint import save_pretrained
from bertkit.config import BertConfig
from bertkit.model import BertForMaskedLM
from bertkit.tokenizer import BertTokenizer


@pytest.fixture
def make_mlm_dir(tmp_path, tiny_vocab_file):
    """``make_mlm_dir(max_position_embeddings)`` -> a saved 2-layer, width-16 MLM model dir."""

    def make(max_position_embeddings: int):
        tok = BertTokenizer.from_file(tiny_vocab_file)
        cfg = BertConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=max_position_embeddings)
        torch.manual_seed(0)
        save_pretrained(BertForMaskedLM(cfg), tmp_path / "m", tokenizer=tok)
        return tmp_path / "m"

    return make
