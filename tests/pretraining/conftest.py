"""Fixtures of the pre-training loop tests."""

import pytest
import torch

from .train_helpers import make_data


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models on one torch thread: on a shared CPU extra threads only wait for each other."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def pt_files(tmp_path_factory):
    """A tiny vocabulary, corpus, pre-training data and model config (``make_data``)."""
    return make_data(tmp_path_factory.mktemp("pt"))


@pytest.fixture(scope="module")
def files(pt_files):
    return pt_files
