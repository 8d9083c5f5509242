"""Training machinery shared by pre-training and fine-tuning (see docs/pretraining.md).

* :func:`build_optimizer` - AdamW, no weight decay on biases and LayerNorm weights.
* :func:`linear_warmup_decay` - linear warm-up then linear decay to 0.
* :class:`CheckpointManager`, :func:`capture_training_state`, :func:`restore_training_state`
  - atomic, keep-last-K, exactly resumable checkpoints.
* :class:`GracefulStop` - SIGINT/SIGTERM -> checkpoint, then exit.
* :func:`init_distributed` and friends - torchrun data parallelism.
* :class:`EpochBatches` - deterministic, rank-sharded, resumable batch order.
* :class:`TrainStep`, :class:`MetricSums` - one optimizer step (accumulation, autocast,
  clipping, non-finite guard) and sync-free metric sums.
* :func:`keep_freed_memory` - glibc malloc setting that spares CPU runs page faults.
* :func:`prefetch` - produce the next batches on a background thread.
"""

from bertkit.cpu import keep_freed_memory
from bertkit.training.distributed import DistContext, init_distributed
from bertkit.training.optim import build_optimizer, param_groups
from bertkit.training.prefetch import prefetch
from bertkit.training.sampler import EpochBatches
from bertkit.training.schedule import default_warmup, linear_warmup_decay
from bertkit.training.signals import GracefulStop
from bertkit.training.state import (
    CheckpointManager,
    capture_rng_state,
    capture_training_state,
    check_model_shape,
    restore_rng_state,
    restore_training_state,
)
from bertkit.training.step import MetricSums, StepResult, TrainStep

__all__ = [
    "CheckpointManager",
    "DistContext",
    "EpochBatches",
    "GracefulStop",
    "MetricSums",
    "StepResult",
    "TrainStep",
    "build_optimizer",
    "capture_rng_state",
    "capture_training_state",
    "check_model_shape",
    "default_warmup",
    "init_distributed",
    "keep_freed_memory",
    "linear_warmup_decay",
    "param_groups",
    "prefetch",
    "restore_rng_state",
    "restore_training_state",
]
