"""Task distillation (Hinton et al. 2015; DistilBERT's student initialisation): a small student
trained on a fine-tuned teacher's soft targets and the gold labels, in the ordinary
fine-tuning loop.

Contract of :func:`distill` (one :class:`DistillConfig`):

* the teacher is a directory fine-tuned for the task (a trained head; otherwise a
  :class:`~bertkit.errors.CheckpointError` naming ``--teacher``); the student is a model
  directory, a preset name (``tiny``, ``mini``, ... : freshly initialised, the teacher's vocabulary
  and position count), or ``student_layers=N``: the teacher with ``N`` of its layers kept,
  evenly spaced (layer ``floor(i * L / N)`` for ``i < N``, so 12 -> 6 keeps every other layer, as
  DistilBERT), embeddings, pooler and head copied. A student directory whose vocabulary
  differs from the teacher's is a CheckpointError naming both;
* the teacher runs once, over the training features, before any training: its logits are
  kept with the features (``feature_index`` in each training feature points at them), so no
  grid point and no epoch runs the teacher again;
* :func:`bertkit.tasks.finetune.finetune` does the training, evaluation, grid, selection,
  logging and saving exactly as for ``finetune``; only the loss differs, through the task's
  ``compute`` hook (:class:`DistillTask`): ``alpha * soft + (1 - alpha) * hard``, where ``hard`` is
  the model's own loss on the gold labels and ``soft`` is, for classification and tagging,
  ``T^2 * KL(softmax(teacher / T) || softmax(student / T))`` (per example, or per labelled token),
  and for regression the squared error to the teacher's score. Evaluation batches carry no
  ``feature_index`` and get the plain output.
* the saved model is an ordinary fine-tuned model directory of the task (``evaluate``,
  ``predict``, ``prune`` read it) with a ``bertkit_distill`` entry in ``config.json``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from bertkit.config import IGNORE_INDEX, PRESETS, BertConfig
from bertkit.errors import BertkitError, CheckpointError
from bertkit.tasks.base import FeatureSet, Task

__all__ = ["DistillConfig", "DistillTask", "distill", "layer_slice", "make_student"]

FEATURE_INDEX = "feature_index"


@dataclass
class DistillConfig:
    """The teacher, the student and the loss mix; fine-tuning settings are a
    :class:`~bertkit.tasks.finetune.FinetuneConfig` passed beside it."""

    teacher: str = ""
    student: str | None = None
    student_layers: int | None = None
    temperature: float = 2.0
    alpha: float = 0.5
    extra: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        if not self.teacher:
            raise BertkitError("--teacher is required (a model fine-tuned for the task)")
        if (self.student is None) == (self.student_layers is None):
            raise BertkitError("give exactly one of --student (a model directory or a preset: "
                               f"{', '.join(PRESETS)}) and --student-layers N")
        if not self.temperature > 0:
            raise BertkitError(f"--temperature must be positive, got {self.temperature}")
        if not 0 <= self.alpha <= 1:
            raise BertkitError(f"--alpha must lie in [0, 1], got {self.alpha}")


def soft_loss(student: torch.Tensor, teacher: torch.Tensor, temperature: float,
              mask: torch.Tensor | None = None) -> torch.Tensor:
    """``T^2 * KL(softmax(teacher/T) || softmax(student/T))`` averaged over rows (the rows
    where ``mask`` is True, when given); logits (..., C)."""
    t = temperature
    log_p = F.log_softmax(student.float() / t, dim=-1)
    q = F.softmax(teacher.float() / t, dim=-1)
    kl = (q * (torch.log(q.clamp_min(1e-12)) - log_p)).sum(-1)
    if mask is not None:
        kl = kl[mask]
    return kl.mean() * t * t if kl.numel() else student.sum() * 0.0


class DistillTask:
    """``task`` with the distillation loss in :meth:`compute` and teacher logits attached to
    the training features in :meth:`featurize`; every other attribute is ``task``'s."""

    def __init__(self, task: Task, teacher, cfg: DistillConfig, device, eval_batch: int = 64,
                 progress: bool | None = None):
        self.task, self.teacher, self.cfg = task, teacher, cfg
        self.device, self.eval_batch, self.progress = device, eval_batch, progress
        self.teacher_logits: list[torch.Tensor] = []

    def __getattr__(self, name: str):
        if name == "task":  # not set yet (e.g. while copying): no recursion
            raise AttributeError(name)
        return getattr(self.task, name)

    def for_data(self, data_dir):
        """The inner task's :meth:`for_data`, still wrapped (the loop calls it first)."""
        inner = self.task.for_data(data_dir)
        if inner is self.task:
            return self
        wrapped = DistillTask(inner, self.teacher, self.cfg, self.device, self.eval_batch, self.progress)
        wrapped.teacher_logits = self.teacher_logits
        return wrapped

    def featurize(self, examples: Sequence, tokenizer, max_seq_length: int,
                  train: bool = False) -> FeatureSet:
        feats = self.task.featurize(examples, tokenizer, max_seq_length, train=train)
        if train:
            from bertkit.tasks.finetune import run_model

            outputs = run_model(self.task, self.teacher.to(self.device), feats, self.eval_batch,
                                self.device, "fp32", self.progress, desc="teacher")
            base = len(self.teacher_logits)
            self.teacher_logits.extend(torch.from_numpy(np.asarray(r)) for r in outputs["logits"])
            for k, feature in enumerate(feats.features):
                feature[FEATURE_INDEX] = np.int64(base + k)
            self.teacher.cpu()
        return feats

    def _teacher_batch(self, index: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        rows = [self.teacher_logits[int(i)] for i in index.tolist()]
        if like.dim() == 3:  # token logits (B, T, C): pad each (len_i, C) to T
            out = torch.zeros(like.shape, dtype=torch.float32)
            for b, row in enumerate(rows):
                out[b, : row.shape[0]] = row
        else:
            out = torch.stack(rows).float()
        return out.to(like.device)

    def compute(self, model, batch: dict[str, torch.Tensor]):
        """The task's output; on a training batch its loss is the distillation mix."""
        if FEATURE_INDEX not in batch:
            return self.task.compute(model, batch)
        batch = dict(batch)
        index = batch.pop(FEATURE_INDEX)
        out = self.task.compute(model, batch)
        teacher = self._teacher_batch(index, out.logits)
        if self.task.num_labels == 1 and out.logits.dim() == 2:  # regression: match the score
            soft = F.mse_loss(out.logits.float().squeeze(-1), teacher.squeeze(-1))
        elif out.logits.dim() == 3:
            labels = batch.get("labels")
            mask = labels != IGNORE_INDEX if labels is not None else batch["attention_mask"].bool()
            soft = soft_loss(out.logits, teacher, self.cfg.temperature, mask)
        else:
            soft = soft_loss(out.logits, teacher, self.cfg.temperature)
        alpha = self.cfg.alpha
        out.loss = alpha * soft + (1 - alpha) * out.loss if out.loss is not None else soft
        return out

    def config_entries(self, metrics: dict[str, float] | None = None) -> dict[str, Any]:
        entries = self.task.config_entries(metrics)
        entries["bertkit_distill"] = {"teacher": self.cfg.teacher, "student": self.cfg.student,
                                      "student_layers": self.cfg.student_layers,
                                      "temperature": self.cfg.temperature, "alpha": self.cfg.alpha,
                                      **self.cfg.extra}
        return entries


def layer_slice(num_layers: int, keep: int) -> list[int]:
    """``keep`` of ``num_layers`` layer indices, evenly spaced from the first (DistilBERT)."""
    if not 1 <= keep <= num_layers:
        raise BertkitError(f"--student-layers {keep}: the teacher has {num_layers} layers; keep "
                           f"between 1 and {num_layers}")
    return [i * num_layers // keep for i in range(keep)]


def _vocab(tokenizer) -> list[str]:
    return tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))


def make_student(cfg: DistillConfig, task: Task, teacher, teacher_tokenizer, where: Path) -> Path:
    """The student's starting model directory: ``cfg.student`` itself, or a preset / layer
    slice written under ``where`` with the teacher's tokenizer."""
    from bertkit.checkpoint import is_model_dir, save_pretrained
    from bertkit.model import BertModel
    from bertkit.model.pruning import prune_heads, pruned_heads
    from bertkit.tokenizer import BertTokenizer

    if cfg.student is not None and cfg.student not in PRESETS:
        student = Path(cfg.student)
        if not is_model_dir(student):
            raise CheckpointError(f"--student {student}: neither a model directory nor a preset "
                                  f"({', '.join(PRESETS)})")
        try:
            tok = BertTokenizer.from_pretrained(student)
        except FileNotFoundError:
            tok = teacher_tokenizer  # no vocabulary of its own: the config's size is checked
        if _vocab(tok) != _vocab(teacher_tokenizer):
            raise CheckpointError(f"--student {student} and --teacher {cfg.teacher} have different "
                                  f"vocabularies ({len(tok)} vs {len(teacher_tokenizer)} tokens, or "
                                  "other tokens): a student must read the teacher's token ids")
        from bertkit.checkpoint import load_config

        if load_config(student).vocab_size != teacher.config.vocab_size:
            raise CheckpointError(f"--student {student}: vocab_size {load_config(student).vocab_size} "
                                  f"differs from the teacher's {teacher.config.vocab_size}")
        return student
    where.mkdir(parents=True, exist_ok=True)
    tc = teacher.config
    if cfg.student is not None:  # a preset, freshly initialised
        config = BertConfig.preset(cfg.student, vocab_size=tc.vocab_size,
                                   max_position_embeddings=tc.max_position_embeddings,
                                   type_vocab_size=tc.type_vocab_size, hidden_act=tc.hidden_act)
        torch.manual_seed(0)
        save_pretrained(BertModel(config), where, tokenizer=teacher_tokenizer)
        return where
    keep = layer_slice(tc.num_hidden_layers, cfg.student_layers)
    cfg.extra["student_layer_indices"] = keep
    values = tc.to_dict()
    values.pop("pruned_heads", None)
    values["num_hidden_layers"] = len(keep)
    student = type(teacher)(BertConfig.from_dict(values), **task.model_kwargs())
    state = teacher.state_dict()
    renamed = {}
    for name, tensor in state.items():
        parts = name.split(".")
        if "layer" in parts and parts[parts.index("layer") - 1] == "encoder":
            at = parts.index("layer") + 1
            old = int(parts[at])
            if old not in keep:
                continue
            parts[at] = str(keep.index(old))
        renamed[".".join(parts)] = tensor
    gone = pruned_heads(tc)
    if gone:  # a pruned teacher: prune the student's copies of those layers alike
        prune_heads(student, {keep.index(layer): heads for layer, heads in gone.items() if layer in keep})
    student.load_state_dict(renamed, strict=True)
    save_pretrained(student, where, tokenizer=teacher_tokenizer, extra_config=task.config_entries())
    return where


def distill(task: Task, data_dir, out_dir, cfg: DistillConfig, ft=None, tokenizer=None):
    """Distil ``cfg.teacher`` into the student on ``task`` (see the module docstring);
    returns :func:`~bertkit.tasks.finetune.finetune`'s ``(runs, best)``."""
    from bertkit.tasks.finetune import FinetuneConfig, finetune
    from bertkit.tasks.prune import require_trained_head
    from bertkit.tokenizer import BertTokenizer
    from bertkit.training.distributed import pick_device

    cfg.check()
    ft = ft or FinetuneConfig()
    out_dir = Path(out_dir)
    tokenizer = tokenizer or BertTokenizer.from_pretrained(cfg.teacher)
    teacher = task.build_model(cfg.teacher)
    require_trained_head(task, cfg.teacher, option="--teacher")
    task.load_notes = []
    out_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".student-", dir=out_dir.parent))
    try:
        student_dir = make_student(cfg, task, teacher, tokenizer, scratch)
        wrapped = DistillTask(task, teacher, cfg, pick_device(ft.device), ft.eval_batch, ft.progress)
        return finetune(wrapped, student_dir, data_dir, out_dir, ft, tokenizer=tokenizer)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
