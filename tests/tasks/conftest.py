"""Fixtures shared by the fine-tuning tests (tiny, made by the tests)."""

import pytest

from .finetune_helpers import make_model, write_sst2


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny random BERT directory (``make_model``), one per test module."""
    return make_model(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def toy_dir(tmp_path_factory):
    """A toy SST-2 folder (``write_sst2``), one per test module."""
    return write_sst2(tmp_path_factory.mktemp("sst2"))
