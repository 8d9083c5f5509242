"""bertkit.threads: a stretch of torch work on a given number of threads."""

from __future__ import annotations

import pytest
import torch

from bertkit.threads import torch_threads


def test_torch_threads_sets_and_restores_the_count_even_on_error():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), torch_threads(1):
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before
