"""Resumable training checkpoints.

Contract:

* ``CheckpointManager(directory, keep=3)`` writes ``directory/step-00000100.pt`` files.
  ``save(state, step)`` writes atomically (temporary file beside the target, fsync, rename),
  so an interrupted write never replaces or corrupts an earlier checkpoint; afterwards only
  the newest ``keep`` checkpoints remain. ``latest()`` is the newest complete one (temporary
  files are ignored), ``load(path=None)`` reads it (``weights_only`` safe: states hold only
  tensors and plain Python values).
* ``capture_training_state(...)`` / ``restore_training_state(...)`` bundle model, optimizer,
  scheduler, grad scaler, python/numpy/torch RNG states, step, data position, the run
  config and any extra plain state. ``restore`` refuses a checkpoint written for a different
  model shape with a :class:`~bertkit.errors.CheckpointError` naming the differences.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from bertkit.errors import CheckpointError
from bertkit.fileio import atomic_path, is_disk_full, safe_torch_load

_NAME = re.compile(r"^step-(\d+)\.pt$")


class CheckpointManager:
    """Numbered checkpoints in one directory: atomic save, keep last K, find latest."""

    def __init__(self, directory: str | Path, keep: int = 3):
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        self.directory = Path(directory)
        self.keep = keep

    def path_for(self, step: int) -> Path:
        return self.directory / f"step-{step:08d}.pt"

    def checkpoints(self) -> list[tuple[int, Path]]:
        """Complete checkpoints as ``(step, path)``, oldest first."""
        if not self.directory.is_dir():
            return []
        found = []
        for path in self.directory.iterdir():
            match = _NAME.match(path.name)
            if match:
                found.append((int(match.group(1)), path))
        return sorted(found)

    def latest(self) -> Path | None:
        found = self.checkpoints()
        return found[-1][1] if found else None

    def save(self, state: dict[str, Any], step: int) -> Path:
        path = self.path_for(step)
        try:
            with atomic_path(path) as tmp:
                torch.save(state, tmp)
        except Exception as e:
            if not is_disk_full(e):
                raise
            last = self.latest()
            kept = (f"the last good checkpoint, {last}, is intact: free some space and continue "
                    "with --resume") if last else "no earlier checkpoint exists"
            raise CheckpointError(f"{path}: no space left on device (the disk is full) while "
                                  f"writing this checkpoint; nothing was replaced and {kept}") from None
        for _, old in self.checkpoints()[: -self.keep]:
            old.unlink(missing_ok=True)
        return path

    def load(self, path: str | Path | None = None) -> dict[str, Any]:
        path = Path(path) if path else self.latest()
        if path is None:
            raise CheckpointError(f"{self.directory}: no checkpoint to resume from")
        return safe_torch_load(path, "checkpoint")


def capture_rng_state() -> dict[str, Any]:
    """Python, numpy and torch (CPU and every CUDA device) generator states, plain values."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": pos,
                  "has_gauss": has_gauss, "cached_gaussian": cached},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    keys = n["keys"].numpy().astype(np.uint32)
    np.random.set_state((n["kind"], keys, n["pos"], n["has_gauss"], n["cached_gaussian"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def check_model_shape(
    model: nn.Module, state_dict: dict[str, torch.Tensor], source: str, strict: bool = True
) -> None:
    """Raise :class:`CheckpointError` unless ``state_dict`` has exactly the model's tensors
    (``strict=False``: only the shapes of the tensors both have must agree)."""
    own = model.state_dict()
    problems = [
        f"{name}: {tuple(tensor.shape)} in the checkpoint, {tuple(own[name].shape)} in the model"
        for name, tensor in state_dict.items()
        if name in own and tuple(tensor.shape) != tuple(own[name].shape)
    ]
    missing = sorted(set(own) - set(state_dict)) if strict else []
    unexpected = sorted(set(state_dict) - set(own)) if strict else []
    if missing:
        problems.append(f"missing from the checkpoint: {', '.join(missing[:5])}"
                        + (f" (+{len(missing) - 5} more)" if len(missing) > 5 else ""))
    if unexpected:
        problems.append(f"not in the model: {', '.join(unexpected[:5])}"
                        + (f" (+{len(unexpected) - 5} more)" if len(unexpected) > 5 else ""))
    if problems:
        shown = "; ".join(problems[:6])
        raise CheckpointError(f"{source} was written for a different model shape: {shown}")


def capture_training_state(
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    step: int,
    data_position: dict[str, Any],
    config: dict[str, Any],
    scaler: Any = None,
    rng: Any = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything a run needs to continue exactly. ``rng`` defaults to this process's state
    (a distributed run passes the list of every rank's state)."""
    return {
        "format": 1,
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "scaler": scaler.state_dict() if scaler is not None and scaler.is_enabled() else None,
        "rng": capture_rng_state() if rng is None else rng,
        "data_position": dict(data_position),
        "config": dict(config),
        "extra": dict(extra or {}),
    }


def restore_training_state(
    state: dict[str, Any],
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    scaler: Any = None,
    source: str = "checkpoint",
    rank: int = 0,
) -> None:
    """Load a :func:`capture_training_state` dict back (model shape checked first).

    RNG states come back too: a dict is this process's state, a list holds one per rank
    (restored only when it has an entry for ``rank``)."""
    check_model_shape(model, state["model"], source)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    if scaler is not None and state.get("scaler"):
        scaler.load_state_dict(state["scaler"])
    rng = state.get("rng")
    if isinstance(rng, dict):
        restore_rng_state(rng)
    elif isinstance(rng, list | tuple) and rank < len(rng):
        restore_rng_state(rng[rank])
