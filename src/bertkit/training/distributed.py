"""Multi-process data parallelism as launched by ``torchrun``.

Contract: ``init_distributed(device="auto")`` reads torchrun's environment (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``); with more than one process it starts the process group
(NCCL on CUDA, gloo on CPU) and returns a :class:`DistContext`. Without torchrun it returns a
single-process context, so every helper below works (as a no-op) in both cases. Only the
main process (rank 0) writes files; metrics are summed across ranks with
:func:`all_reduce_sum` in one collective per log interval. Work rank 0 does alone before the
others may go on (checking and preparing an output directory) runs through :func:`on_main`, so
that its failure stops every rank with the same error.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from bertkit.errors import BertkitError

T = TypeVar("T")


@dataclass(frozen=True)
class DistContext:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def pick_device(device: str | torch.device = "auto", local_rank: int = 0) -> torch.device:
    """The one device resolution of bertkit (training, fine-tuning, inference): ``auto`` is
    this process's GPU when CUDA is available, else the CPU; ``cuda`` is this process's GPU;
    any other torch device (``cpu``, ``cuda:1``) as given. CUDA without CUDA is an error."""
    name = str(device)
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        resolved = torch.device("cuda", local_rank) if name == "cuda" else torch.device(name)
    except RuntimeError:
        raise BertkitError(f"unknown device {name!r}; use auto, cpu or cuda") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise BertkitError("--device cuda: no CUDA device is available (use cpu or auto)")
    return resolved


# Seconds a collective may wait for the other ranks before it fails (init_process_group's
# timeout). Unset: PyTorch's default (30 minutes for gloo, 10 for NCCL), long enough for rank 0
# to evaluate or save while the others wait. Usually a lost machine makes gloo fail at once
# ("Connection reset by peer"), but a CI run once saw a survivor wait more than 120 s; set
# this to bound that wait (the multi-node test sets 120).
DIST_TIMEOUT_ENV = "BERTKIT_DIST_TIMEOUT_S"
MIN_DIST_TIMEOUT_S = 1.0
MAX_DIST_TIMEOUT_S = 1e12  # ~31,700 years; timedelta (and gloo's milliseconds) overflow not far above


def dist_timeout() -> timedelta | None:
    """The collective timeout: ``BERTKIT_DIST_TIMEOUT_S`` seconds (> 0) if set, else None
    (PyTorch's default)."""
    raw = os.environ.get(DIST_TIMEOUT_ENV)
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise BertkitError(f"{DIST_TIMEOUT_ENV}={raw!r}: give a number of seconds > 0")
    if not seconds <= MAX_DIST_TIMEOUT_S:  # inf, 1e999: timedelta overflows
        raise BertkitError(f"{DIST_TIMEOUT_ENV}={raw!r}: at most {MAX_DIST_TIMEOUT_S:.0e} seconds; unset it "
                           "for PyTorch's default")
    if seconds < MIN_DIST_TIMEOUT_S:  # the ranks' own rendezvous fails first, naming no variable
        raise BertkitError(f"{DIST_TIMEOUT_ENV}={raw!r}: at least {MIN_DIST_TIMEOUT_S:g} s: the ranks take "
                           "longer than that to connect, and every collective would time out")
    return timedelta(seconds=seconds)


def init_distributed(device: str = "auto") -> DistContext:
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = pick_device(device, local_rank)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if world_size > 1 and not dist.is_initialized():
        backend = "nccl" if dev.type == "cuda" else "gloo"
        timeout = dist_timeout()
        dist.init_process_group(backend=backend, rank=rank, world_size=world_size,
                                **({"timeout": timeout} if timeout is not None else {}))
    return DistContext(rank=rank, world_size=world_size, local_rank=local_rank, device=dev)


def shutdown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _active() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """Sum ``tensor`` over ranks in place (no-op in a single process); returns it."""
    if _active():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def all_gather_objects(obj: Any) -> list[Any]:
    """Every rank's ``obj`` (picklable), in rank order; ``[obj]`` in a single process."""
    if not _active():
        return [obj]
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, obj)
    return gathered


def any_rank(flag: bool, device: torch.device) -> bool:
    """True on every rank when ``flag`` is true on any rank (e.g. a stop signal)."""
    if not _active():
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def barrier() -> None:
    if _active():
        dist.barrier()


def on_main(func: Callable[[], T]) -> T | None:
    """Run ``func`` on rank 0 alone; the other ranks wait for it. Rank 0 gets ``func``'s
    result, the others None. When ``func`` raises, every rank raises that exception (its type
    and message, or a :class:`BertkitError` with its message where it does not pickle), so all
    processes stop with the same error instead of waiting on rank 0 or failing later with a
    lost connection. One collective; in a single process just ``func()``."""
    if not _active():
        return func()
    result, error = None, None
    if dist.get_rank() == 0:
        try:
            result = func()
        except Exception as e:  # every kind: the other ranks must not go on
            error = e
    box = [_portable(error) if error is not None else None]
    dist.broadcast_object_list(box, src=0)
    if error is not None:
        raise error
    if box[0] is not None:
        raise box[0]
    return result


def _portable(error: Exception) -> Exception:
    """``error`` as it can travel to the other ranks (pickled): itself, or its message."""
    try:
        copy = pickle.loads(pickle.dumps(error))
    except Exception:
        return BertkitError(str(error))
    return copy if type(copy) is type(error) and str(copy) == str(error) else BertkitError(str(error))
