"""Torch's intra-op thread count, for a stretch of work."""

from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def torch_threads(count: int):
    """Run the enclosed torch work on ``count`` intra-op threads, then restore the count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
