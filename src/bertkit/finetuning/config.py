"""Settings of the fine-tuning jobs: a fine-tuning run (``bertkit finetune``), pruning
(``bertkit prune``) and distillation (``bertkit distill``). One dataclass per job, each field
declaring its flag, help, default and allowed range (:func:`bertkit.options.option`); a job
taking a fine-tuning setting takes :class:`FinetuneConfig`'s declaration
(:func:`bertkit.options.option_of`), so ``--lr`` or ``--max-seq-length`` mean and check the
same everywhere. No torch import here, so the CLI can build its parsers from it cheaply."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bertkit.errors import BertkitError
from bertkit.options import check_config, option, option_of
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
    max_seq_length: int = option(128, "tokens per input incl. [CLS]/[SEP]; longer inputs are "
                                      "truncated with a warning", ge=3, metavar="N")
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


@dataclass
class PruneConfig:
    """Settings of one pruning job (:mod:`bertkit.finetuning.prune`): what to remove and how to
    score it; the settings of the optional fine-tune afterwards are :class:`FinetuneConfig`'s."""

    heads: str = option("0.5", "heads to remove: a fraction in (0, 1) such as 0.5, or a count "
                               "such as 6", required=True, metavar="FRACTION|COUNT")
    importance_examples: int = option(512, "training examples that score the heads", ge=1,
                                      metavar="N")
    curve: tuple[float, ...] = option((0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
                                      "fractions pruned for the metric curve", ge=0, lt=1)
    max_seq_length: int = option_of(FinetuneConfig, "max_seq_length")
    batch: int = option_of(FinetuneConfig, "batch")
    eval_batch: int = option_of(FinetuneConfig, "eval_batch")
    finetune_epochs: int = option(0, "fine-tune the pruned model for N epochs afterwards (0: no)",
                                  ge=0, metavar="N")
    lr: float = option_of(FinetuneConfig, "lr")
    max_train_examples: int | None = option_of(FinetuneConfig, "max_train_examples")
    seed: int = option_of(FinetuneConfig, "seed")
    device: str = option_of(FinetuneConfig, "device")
    progress: bool | None = None


@dataclass
class DistillConfig:
    """The teacher, the student and the loss mix of :mod:`bertkit.finetuning.distill`; the
    fine-tuning settings are a :class:`FinetuneConfig` passed beside it. ``extra``: entries
    added to the saved model's ``bertkit_distill`` record (not an option)."""

    teacher: str = option("", "a model fine-tuned for TASK", required=True, metavar="DIR")
    student: str | None = option(None, "student model directory (same vocabulary) or preset "
                                       "(tiny, mini, small, ...)", metavar="DIR|PRESET")
    student_layers: int | None = option(None, "student = N of the teacher's layers, evenly "
                                              "spaced (instead of --student)", ge=1, metavar="N")
    temperature: float = option(2.0, "softmax temperature T", gt=0)
    alpha: float = option(0.5, "weight of the teacher (soft) loss; 1 - alpha goes to the gold "
                               "labels", ge=0, le=1)
    hidden_weight: float = option(
        0.0, "TinyBERT-style hidden-state matching: weight of the MSE between each student layer "
             "(projected to the teacher's width) and its uniformly mapped teacher layer (0: off; "
             "on, the teacher runs again on every training batch)", ge=0, metavar="W")
    attention_weight: float = option(
        0.0, "weight of the MSE between matched layers' attention probabilities; needs the same "
             "heads per matched layer (0: off; on, the teacher runs per batch)", ge=0, metavar="W")
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def intermediate(self) -> bool:
        """Whether hidden-state or attention matching is on (then the teacher runs per batch)."""
        return self.hidden_weight > 0 or self.attention_weight > 0

    def check(self) -> None:
        """BertkitError, naming the flag, for a missing teacher, not exactly one student, or a
        value outside its declared range."""
        if not self.teacher:
            raise BertkitError("--teacher is required (a model fine-tuned for the task)")
        if (self.student is None) == (self.student_layers is None):
            from bertkit.config import PRESETS

            raise BertkitError("give exactly one of --student (a model directory or a preset: "
                               f"{', '.join(PRESETS)}) and --student-layers N")
        check_config(self, "distill", by_flag=True)
