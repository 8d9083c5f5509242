"""Settings of a fine-tuning run (``bertkit finetune``): one dataclass, each field declaring
its flag, help, default and allowed range (:func:`bertkit.options.option`). No torch import
here, so the CLI can build its parser from it cheaply."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bertkit.options import option
from bertkit.precision import HELP as PRECISION_HELP
from bertkit.precision import TRAINING as TRAINING_PRECISIONS


@dataclass
class FinetuneConfig:
    """Everything but the task and the paths; each field declares its ``finetune`` flag
    (:func:`bertkit.options.option`). ``grid``: key -> values for lr/batch/epochs/seed
    (missing keys take the single values); ``None`` runs the single point. ``warmup`` is the
    warm-up fraction of all updates. ``progress``: None = bars only on a terminal."""

    lr: float = option(2e-5, "peak learning rate", ge=0)
    batch: int = option(32, "training batch size", ge=1, flag="--batch-size")
    grad_accum: int = option(1, "micro-batches per update (gradient accumulation): --batch-size "
                                "is the global batch, each torchrun process takes "
                                "batch / (processes x accum) examples at a time", ge=1)
    epochs: int = option(3, "epochs", ge=1)
    seed: int = option(42, "random seed", ge=0)
    grid: dict[str, Sequence] | None = None
    max_seq_length: int = option(128, "tokens per input incl. [CLS]/[SEP]", ge=3)
    warmup: float = option(0.1, "warm-up fraction of the updates", ge=0, lt=1)
    weight_decay: float = option(0.01, "AdamW weight decay", ge=0)
    dropout: float = option(0.1, "dropout", ge=0, lt=1)
    max_grad_norm: float = option(1.0, "gradient clipping", gt=0)
    eval_batch: int = option(64, "evaluation batch size", ge=1, flag="--eval-batch-size")
    device: str = option("auto", "auto, cpu or cuda")
    precision: str = option("auto", f"autocast precision ({PRECISION_HELP})", choices=TRAINING_PRECISIONS)
    log_every: int = option(100, "train-loss log interval", ge=1, metavar="STEPS")
    progress: bool | None = None
    select: str = option("best", "keep the best epoch of every run, or only final epochs",
                         choices=("best", "last"))
    max_train_examples: int | None = option(None, "train on a fixed random sample of N examples",
                                            ge=1, metavar="N")
    attention_impl: str | None = option(None, "padded, or unpadded: compute on the real tokens "
                                              "only (default: the model's, else padded)",
                                        choices=("padded", "unpadded"))
    compile: bool = option(False, "torch.compile the model for training (dynamic shapes)")
    bucket: int = option(50, "batches sorted by length together (training)", ge=1)
    resume: bool = option(False, "continue the unfinished run in --out after its last finished "
                                 "epoch (same settings; ends with the weights of an "
                                 "uninterrupted run)")
    overwrite: bool = option(False, "replace the run already in --out (default: refuse)")
