"""CPU run-time settings: glibc malloc that keeps freed memory, a bounded oneDNN cache,
torch's thread count for a stretch of work.

By default glibc returns every large block (>= 128 KiB-32 MiB, adaptive) to the kernel on
``free`` and page-faults it back in on the next ``malloc``. A training step frees and
re-allocates the same activations and gradients each time, and so does every inference
batch: a CPU run can spend a third of its time in the kernel zeroing pages (BERT-Base INT8
inference at fixed length: up to 1.45x faster without it; docs/serving.md). ``keep_freed_memory()`` tunes glibc
with ``mallopt`` (no mmap'd blocks, no heap trimming) so those pages are reused: resident
memory stays at the peak instead of shrinking between steps. Returns False (and changes
nothing) where glibc's ``mallopt`` is not available. It is process-wide: pre-training and,
through :func:`loading_for_inference`, :func:`bertkit.inference.load` and the CLI's
``evaluate``/``predict`` call it on the CPU.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import sys

import torch

_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4


def keep_freed_memory() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    # no mmap'd blocks (glibc caps the mmap threshold at 32 MiB, below a batch's logits),
    # and no trimming of the heap top: freed pages stay mapped for the next step
    return mallopt(_M_MMAP_MAX, 0) == 1 and mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(2**31 - 1)) == 1


def bound_onednn_cache(capacity: int = 64) -> None:
    """Bound oneDNN's primitive cache (unless the user set ``ONEDNN_PRIMITIVE_CACHE_CAPACITY``).

    oneDNN keeps one compiled primitive per distinct matrix shape, 1,024 by default, with
    its buffers. Training batches of varying length (fine-tuning buckets, the ltr
    objective's labelled-token count) give a new shape almost every step, so resident memory
    grew by megabytes per step until the cache filled (a 300-step ``mini`` ltr run reached
    7 GB). 64 entries keep the reuse of steady shapes at no measured cost in speed. Takes
    effect when called before the process's first oneDNN matrix product.
    """
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(capacity))


@contextlib.contextmanager
def loading_for_inference(on_cpu: bool = True):
    """Load a model for CPU inference inside this block: the process-wide settings every
    inference entry point applies (none when ``on_cpu`` is false).

    Before loading, oneDNN's primitive cache is bounded: texts of every length make a new
    matrix shape per batch, and 400 variable-length ``predict`` calls on BERT-Base INT8
    grew resident memory from 552 to 1,197 MB unbounded, flat at 800-880 MB bounded (the
    bound takes effect only if no matrix product ran in the process before; INT8 packing may
    be one). After loading, glibc keeps freed memory, since each batch re-allocates its
    activations; not before, so the float weights that INT8 packing frees go back to the
    system (set during loading, they stayed resident: 862 MB instead of 552 at the start)."""
    if on_cpu:
        bound_onednn_cache()
    yield
    if on_cpu:
        keep_freed_memory()


@contextlib.contextmanager
def torch_threads(count: int):
    """Run the enclosed torch work on ``count`` intra-op threads, then restore the count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
