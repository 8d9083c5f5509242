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
* :func:`bertkit.finetuning.loop.finetune` does the training, evaluation, grid, selection,
  logging and saving exactly as for ``finetune``; only the loss differs, through the task's
  ``compute`` hook (:class:`DistillTask`): ``alpha * soft + (1 - alpha) * hard``, where ``hard`` is
  the model's own loss on the gold labels and ``soft`` is, for classification and tagging,
  ``T^2 * KL(softmax(teacher / T) || softmax(student / T))`` (per example, or per labelled token),
  and for regression the squared error to the teacher's score. Evaluation batches carry no
  ``feature_index`` and get the plain output.
* intermediate matching (TinyBERT, Jiao et al. 2020; off by default): with
  ``hidden_weight > 0`` and/or ``attention_weight > 0`` the loss gains
  ``hidden_weight * L_hidden + attention_weight * L_attention``. Student layer ``m``
  (1-based, of ``M``) is matched to teacher layer ``floor(m * N / M)`` (of ``N``; TinyBERT's
  uniform mapping, :func:`layer_map`: the last layers meet), and the embedding outputs to each
  other. ``L_hidden`` is the mean squared error between the teacher's hidden states and the
  student's passed through one learned linear projection (student width -> teacher width,
  shared by all matched layers as TinyBERT's ``W_h``; none when the widths agree), over the
  real (unpadded) tokens, averaged over the matched layers. ``L_attention`` is the mean
  squared error between the attention *probabilities* (bertkit's attention returns
  probabilities; TinyBERT matched the pre-softmax scores) of matched layers, over real query
  and key positions; it needs the same number of heads in each matched pair of layers, else
  a BertkitError naming ``--attention-weight``. The projection is a submodule of the student
  while it trains (so the optimizer and the gradient clipping see it) but is left out of its
  ``state_dict``: the saved student is an ordinary model of the task (and a resumed run starts
  a fresh projection, as the training state holds the student's ``state_dict``). Hidden states and
  attention maps are too large to cache like the logits, so **with these weights the teacher
  runs again on every training batch** (in eval mode, without gradients): an extra teacher
  forward pass per step. With both weights 0 (the default) nothing of this runs and training
  is exactly the logit distillation above. Not for the feature-based NER tagger (an error);
* the saved model is an ordinary fine-tuned model directory of the task (``evaluate``,
  ``predict``, ``prune`` read it) with a ``bertkit_distill`` entry in ``config.json``.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from bertkit.config import IGNORE_INDEX, PRESETS, BertConfig
from bertkit.errors import BertkitError, CheckpointError
from bertkit.finetuning.config import DistillConfig  # declared with the other fine-tuning jobs
from bertkit.tasks.base import FeatureSet, Task

__all__ = ["DistillConfig", "DistillTask", "distill", "layer_map", "layer_slice", "make_student"]

FEATURE_INDEX = "feature_index"
STUDENT_SCRATCH = ".student"  # the starting student, in --out while the run lasts
PROJECTION = "distill_projection"  # the student's submodule (not saved) mapping its width to the teacher's


def layer_map(student_layers: int, teacher_layers: int) -> list[int]:
    """TinyBERT's uniform mapping: the teacher layer (1-based) matched to each student layer
    ``m = 1..M``, ``floor(m * N / M)``; 0 (the embeddings) maps to 0 and is not listed."""
    if not 1 <= student_layers <= teacher_layers:
        raise BertkitError(f"intermediate matching maps each student layer to a teacher layer: the "
                           f"student has {student_layers} layers, the teacher {teacher_layers} "
                           "(use --hidden-weight 0 --attention-weight 0, or a shallower student)")
    return [m * teacher_layers // student_layers for m in range(1, student_layers + 1)]


def hidden_loss(student: Sequence[torch.Tensor], teacher: Sequence[torch.Tensor], mapping: Sequence[int],
                projection: torch.nn.Module, mask: torch.Tensor) -> torch.Tensor:
    """Mean over matched layers of the MSE between ``projection(student[m])`` and
    ``teacher[mapping[m-1]]`` (hidden states (B, T, H), index 0 = embeddings, matched to 0),
    over the positions where ``mask`` (B, T) is true."""
    weights = mask.unsqueeze(-1).float()
    pairs = [(0, 0), *((m, n) for m, n in enumerate(mapping, 1))]
    losses = []
    for m, n in pairs:
        diff = (projection(student[m].float()) - teacher[n].float()) ** 2
        losses.append((diff * weights).sum() / (weights.sum() * diff.shape[-1]).clamp_min(1))
    return torch.stack(losses).mean()


def attention_loss(student: Sequence[torch.Tensor], teacher: Sequence[torch.Tensor], mapping: Sequence[int],
                   mask: torch.Tensor) -> torch.Tensor:
    """Mean over matched layers of the MSE between attention probabilities (B, heads, T, T) of
    student layer ``m`` and teacher layer ``mapping[m-1]``, over real query and key positions."""
    real = mask.float()
    pair = (real[:, None, :, None] * real[:, None, None, :])
    losses = []
    for m, n in enumerate(mapping):
        s, t = student[m].float(), teacher[n - 1].float()
        weights = pair.expand_as(s)
        losses.append((((s - t) ** 2) * weights).sum() / weights.sum().clamp_min(1))
    return torch.stack(losses).mean()


def heads_per_layer(model) -> list[int]:
    """The attention heads of each encoder layer (pruned heads counted out)."""
    return [layer.attention.self.num_heads for layer in model.encoder_model().encoder.layer]


def attach_projection(student, teacher_width: int) -> None:
    """Give ``student`` the :data:`PROJECTION` submodule (a linear map from its width to
    ``teacher_width``; identity when they agree), trained with it, left out of its
    ``state_dict`` (so never saved, and not expected when a state is loaded back)."""
    width = student.config.hidden_size
    if width == teacher_width:
        student.add_module(PROJECTION, torch.nn.Identity())
        return
    student.add_module(PROJECTION, torch.nn.Linear(width, teacher_width))
    prefix = PROJECTION + "."

    def drop(module, state_dict, prefix_, local_metadata):
        for key in [k for k in state_dict if k.startswith(prefix_ + prefix)]:
            del state_dict[key]

    def not_missing(module, incompatible):
        incompatible.missing_keys[:] = [k for k in incompatible.missing_keys if not k.startswith(prefix)]

    student.register_state_dict_post_hook(drop)
    student.register_load_state_dict_post_hook(not_missing)


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

    def build_model(self, model_dir, config_overrides: dict[str, Any] | None = None):
        """The inner task's model; with intermediate matching also checked against the teacher
        (layers, heads) and given the width projection (:func:`attach_projection`)."""
        model = self.task.build_model(model_dir, config_overrides)
        if not self.cfg.intermediate:
            return model
        if getattr(self.task, "feature_based", False):
            raise BertkitError("--hidden-weight / --attention-weight match the student's encoder "
                               "layers: not for the feature-based tagger (-o feature_based=true)")
        student_heads, teacher_heads = heads_per_layer(model), heads_per_layer(self.teacher)
        mapping = layer_map(len(student_heads), len(teacher_heads))
        if self.cfg.attention_weight > 0:
            for m, n in enumerate(mapping, 1):
                if student_heads[m - 1] != teacher_heads[n - 1]:
                    raise BertkitError(
                        f"--attention-weight: student layer {m} has {student_heads[m - 1]} attention "
                        f"heads but the teacher layer it is matched to ({n}) has {teacher_heads[n - 1]}; "
                        "attention maps are matched head by head (use a student with the teacher's "
                        "heads per layer, or --attention-weight 0)")
        attach_projection(model, self.teacher.config.hidden_size)
        return model

    def featurize(self, examples: Sequence, tokenizer, max_seq_length: int,
                  train: bool = False) -> FeatureSet:
        feats = self.task.featurize(examples, tokenizer, max_seq_length, train=train)
        if train:
            from bertkit.inference.features import run_model

            outputs = run_model(self.task, self.teacher.to(self.device), feats, self.eval_batch,
                                self.device, "fp32", self.progress, desc="teacher")
            base = len(self.teacher_logits)
            self.teacher_logits.extend(torch.from_numpy(np.asarray(r)) for r in outputs["logits"])
            for k, feature in enumerate(feats.features):
                feature[FEATURE_INDEX] = np.int64(base + k)
            if not self.cfg.intermediate:  # else it runs again on every training batch
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
        cfg = self.cfg
        if cfg.intermediate:
            flags = {"output_hidden_states": cfg.hidden_weight > 0, "output_attentions": cfg.attention_weight > 0}
            out = self.task.compute(model, {**batch, **flags})
        else:
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
        if cfg.intermediate:
            out.loss = out.loss + self._intermediate_loss(model, batch, out, flags)
        return out

    def _intermediate_loss(self, model, batch: dict[str, torch.Tensor], out, flags: dict) -> torch.Tensor:
        """``hidden_weight * L_hidden + attention_weight * L_attention`` of one training batch,
        the teacher run on it here (module docstring)."""
        inputs = {k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask") if k in batch}
        teacher = self.teacher.to(batch["input_ids"].device).eval()
        with torch.no_grad():
            t = teacher(**inputs, **flags)
        plain = model.module if hasattr(model, "module") else model  # DDP / compile wrappers
        plain = getattr(plain, "_orig_mod", plain)
        mask = batch.get("attention_mask", torch.ones_like(batch["input_ids"])).bool()
        mapping = layer_map(plain.config.num_hidden_layers, teacher.config.num_hidden_layers)
        loss = out.logits.new_zeros((), dtype=torch.float32)
        if self.cfg.hidden_weight > 0:
            projection = getattr(plain, PROJECTION, None)
            if projection is None:  # a student not built by build_model
                if plain.config.hidden_size != teacher.config.hidden_size:
                    raise BertkitError("--hidden-weight: the student has no width projection; build "
                                       "it with DistillTask.build_model")
                projection = torch.nn.Identity()
            loss = loss + self.cfg.hidden_weight * hidden_loss(out.hidden_states, t.hidden_states, mapping,
                                                               projection, mask)
        if self.cfg.attention_weight > 0:
            loss = loss + self.cfg.attention_weight * attention_loss(out.attentions, t.attentions, mapping, mask)
        return loss

    def config_entries(self, metrics: dict[str, float] | None = None) -> dict[str, Any]:
        entries = self.task.config_entries(metrics)
        entries["bertkit_distill"] = {"teacher": self.cfg.teacher, "student": self.cfg.student,
                                      "student_layers": self.cfg.student_layers,
                                      "temperature": self.cfg.temperature, "alpha": self.cfg.alpha,
                                      "hidden_weight": self.cfg.hidden_weight,
                                      "attention_weight": self.cfg.attention_weight, **self.cfg.extra}
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
    returns :func:`~bertkit.finetuning.loop.finetune`'s ``(runs, best)``. ``out_dir`` is
    prepared first (:class:`~bertkit.finetuning.run_dir.RunDir`: never the teacher nor a
    student directory, refused when taken unless ``ft.overwrite``) and stays locked while the
    starting student is made in it and the student trains."""
    import dataclasses

    from bertkit.finetuning.config import FinetuneConfig
    from bertkit.finetuning.loop import finetune
    from bertkit.finetuning.run_dir import RunDir
    from bertkit.modeldir.marker import check_model
    from bertkit.tokenizer import BertTokenizer
    from bertkit.training.distributed import pick_device

    cfg.check()
    ft = ft or FinetuneConfig()
    out_dir = Path(out_dir)
    run_dir = RunDir(out_dir)
    scratch = out_dir / STUDENT_SCRATCH  # inside --out: a killed run's copy is found and replaced
    student = cfg.student if cfg.student is not None and cfg.student not in PRESETS else None
    if _main_rank():  # under torchrun, finetune prepares (and locks) on rank 0 alone too
        run_dir.prepare(resume=ft.resume, overwrite=ft.overwrite,
                        inputs={"--teacher": cfg.teacher, "--student": student})
    try:
        tokenizer = tokenizer or BertTokenizer.from_pretrained(cfg.teacher)
        teacher = task.build_model(cfg.teacher)
        check_model(cfg.teacher, task, option="--teacher", require_head=True)
        task.load_notes = []
        out_dir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(scratch, ignore_errors=True)
        student_dir = make_student(cfg, task, teacher, tokenizer, scratch)
        wrapped = DistillTask(task, teacher, cfg, pick_device(ft.device), ft.eval_batch, ft.progress)
        # the old run went in prepare above: finetune's own prepare must not remove the
        # starting student it reads from --out/.student
        return finetune(wrapped, student_dir, data_dir, out_dir,
                        dataclasses.replace(ft, overwrite=False), tokenizer=tokenizer)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        run_dir.release()


def _main_rank() -> bool:
    """Whether this process is rank 0 of torchrun's (or the only one)."""
    import os

    return os.environ.get("RANK", "0") == "0"
