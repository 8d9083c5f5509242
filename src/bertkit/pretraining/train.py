"""The pre-training loop behind ``bertkit pretrain``.

Contract: ``pretrain(config, on_step=None) -> PretrainResult`` trains a BERT model on a
directory written by ``create_pretraining_data`` as described in docs/pretraining.md:
AdamW + linear warm-up/decay, gradient accumulation, clipping, autocast, a non-finite-step
guard, optional ``torch.compile``, DDP under ``torchrun``. Everything lands in the run
directory ``config.out``::

    config.yaml            the effective settings
    log.jsonl              one record per log interval / evaluation / event
    checkpoints/step-*.pt  resumable state (atomic, last ``keep`` kept; rank 0 writes)
    model/                 the final model directory (save_pretrained, with vocab)

``resume=True`` continues from the newest checkpoint exactly (model, optimizer, scheduler,
RNG states, data position, pending metric sums); log records after that step are dropped.
SIGINT/SIGTERM write a checkpoint and return with ``stopped_by`` set. ``config.budget``
plans ``steps`` from a measured step time and stops at the deadline
(:mod:`bertkit.pretraining.budget`); ``precision="auto"`` is resolved by
:func:`bertkit.training.precision.resolve_pretrain_precision` and saved resolved. ``on_step(step)`` is
called after every optimizer step (and its checkpoint), e.g. for tests or monitoring.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from bertkit.errors import BertkitError
from bertkit.fileio import atomic_write, remove_temp_files
from bertkit.pretraining import objectives
from bertkit.pretraining.budget import budget_over, start_budget
from bertkit.pretraining.setup import build_model, build_tokenizer, open_datasets
from bertkit.pretraining.train_config import PretrainConfig
from bertkit.runlog import RunLogger, bar_disabled, read_log
from bertkit.training import (
    CheckpointManager,
    EpochBatches,
    GracefulStop,
    MetricSums,
    TrainStep,
    autocast,
    build_optimizer,
    capture_rng_state,
    capture_training_state,
    default_warmup,
    linear_warmup_decay,
    restore_training_state,
)
from bertkit.training import distributed as dist
from bertkit.training.cpu import bound_onednn_cache, keep_freed_memory
from bertkit.training.divergence import SkipWatch
from bertkit.training.precision import resolve_pretrain_precision
from bertkit.training.prefetch import prefetch


@dataclass
class PretrainResult:
    run_dir: Path
    step: int
    model_dir: Path | None
    stopped_by: str | None = None


def pretrain(config: PretrainConfig, on_step: Callable[[int], None] | None = None) -> PretrainResult:
    config.validate()
    ctx = dist.init_distributed(config.device)
    try:
        return _Run(config, ctx).run(on_step)
    finally:
        dist.shutdown()


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    while hasattr(model, "module") or hasattr(model, "_orig_mod"):
        model = getattr(model, "module", None) or model._orig_mod
    return model


class _Run:
    def __init__(self, config: PretrainConfig, ctx: dist.DistContext):
        self.config, self.ctx = config, ctx
        self.out = Path(config.out)
        if ctx.device.type == "cpu":
            bound_onednn_cache()
            if config.objective != "ltr":
                # ltr's logits change size every step (every token is labelled): with freed
                # memory kept, the heap fragments and grows; mmap'd blocks avoid that.
                keep_freed_memory()
        self.checkpoints = CheckpointManager(self.out / "checkpoints", keep=config.keep)
        self.train_data, self.eval_data = open_datasets(config)
        self.tokenizer = build_tokenizer(config, self.train_data.meta)
        torch.manual_seed(config.seed)
        self.model = build_model(config, len(self.tokenizer), self.train_data.max_seq_length)
        self.model.to(ctx.device).train()
        torch.manual_seed(config.seed + ctx.rank)  # dropout differs between ranks
        # --precision auto: bf16 on CPUs with native bf16 (training/precision.py); the
        # resolved choice is what config.yaml and the checkpoints keep
        requested = config.precision
        self.precision, why = resolve_pretrain_precision(requested, ctx.device)
        self.precision_note = {"precision": self.precision, "requested": requested, "reason": why}
        config = self.config = dataclasses.replace(config, precision=self.precision)
        self.batches = EpochBatches(len(self.train_data), config.batch_size, config.grad_accum,
                                    ctx.world_size, ctx.rank, seed=config.seed)
        # --budget (pretraining/budget.py): measure the step time, fix the steps to fit
        self.budget = start_budget(self)
        if self.budget is not None:
            config = self.config = dataclasses.replace(config, steps=self.budget.steps)
        warmup = config.warmup_steps
        if warmup is None:
            warmup = default_warmup(config.steps, config.warmup_fraction)
        self.optimizer = build_optimizer(self.model, config.lr, config.weight_decay,
                                         eps=config.adam_eps, implementation=config.optimizer)
        self.scheduler = linear_warmup_decay(self.optimizer, warmup, config.steps)
        self.sums = MetricSums(ctx.device)
        self.step, self.position = 0, {"epoch": 0, "batch": 0}
        self.logger = RunLogger(self.out / "log.jsonl" if ctx.is_main else None, echo=ctx.is_main)
        self.tb = None

    # ------------------------------------------------------------------ set-up
    def _resume_or_start(self, trainer: TrainStep) -> None:
        latest = self.checkpoints.latest()
        if latest is not None and not self.config.resume:
            raise BertkitError(f"{self.out} already holds checkpoints ({latest.name}): pass "
                               "--resume to continue that run or choose another --out")
        if self.ctx.is_main:  # temp files of a run killed mid-write: never read, only space
            for folder in (self.checkpoints.directory, self.out / "model"):
                remove_temp_files(folder)
        if latest is None:
            if self.config.resume and self.ctx.is_main:
                self.logger.log(step=0, event="resume", note="no checkpoint yet: starting fresh")
            return
        state = self.checkpoints.load(latest)
        restore_training_state(state, model=self.model, optimizer=self.optimizer,
                               scheduler=self.scheduler, scaler=trainer.scaler,
                               source=str(latest), rank=self.ctx.rank)
        extra = state["extra"]
        if state["config"].get("steps") != self.config.steps:
            raise BertkitError(
                f"{latest}: written by a run of {state['config'].get('steps')} steps, this run "
                f"has --steps {self.config.steps}; the schedule depends on it: resume with the same steps"
            )
        if extra.get("global_batch") != self.batches.global_batch_size:
            raise BertkitError(
                f"{latest}: written with a global batch of {extra.get('global_batch')}, this run "
                f"has {self.batches.global_batch_size}; resume with the same batch settings"
            )
        self.step, self.position = int(state["step"]), dict(state["data_position"])
        sums = extra.get("metric_sums") or []
        if self.ctx.rank < len(sums):
            self.sums.load_state_dict(sums[self.ctx.rank])
        trainer.skipped_steps.fill_(int(extra.get("skipped_steps", 0)))
        if self.ctx.is_main:
            self._truncate_log(self.step)
            self.logger.log(step=self.step, event="resume", checkpoint=latest.name)

    def _truncate_log(self, step: int) -> None:
        """Drop records a killed run logged after the checkpoint being resumed."""
        path = self.out / "log.jsonl"
        if path.exists():
            import json

            kept = [r for r in read_log(path) if r.get("step", 0) <= step]
            with atomic_write(path) as f:
                f.writelines(json.dumps(r) + "\n" for r in kept)

    def _write_settings(self) -> None:
        import yaml

        with atomic_write(self.out / "config.yaml") as f:
            yaml.safe_dump(self.config.to_dict(), f, sort_keys=False)
        if self.config.tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                self.logger.log(step=self.step, event="note", note="tensorboard not installed: skipped")
            else:
                self.tb = SummaryWriter(str(self.out / "tensorboard"))

    # ------------------------------------------------------------------ state
    def _save(self, trainer: TrainStep) -> None:
        rng = dist.all_gather_objects(capture_rng_state())
        sums = dist.all_gather_objects(self.sums.state_dict())
        if not self.ctx.is_main:
            return
        state = capture_training_state(
            model=self.model, optimizer=self.optimizer, scheduler=self.scheduler,
            scaler=trainer.scaler, step=self.step, data_position=self.position,
            config=self.config.to_dict(), rng=rng,
            extra={"metric_sums": sums, "skipped_steps": int(trainer.skipped_steps),
                   "global_batch": self.batches.global_batch_size,
                   "world_size": self.ctx.world_size, "model_config": self.model.config.to_dict(),
                   **({"budget": self.budget.state()} if self.budget else {})},
        )
        self.checkpoints.save(state, self.step)

    def _log(self, trainer: TrainStep, lr: float, elapsed: float, bar) -> None:
        totals = self.sums.reduce()
        record = {"step": self.step,
                  "epoch": round(self.position["epoch"] + self.position["batch"] / self.batches.batches_per_epoch, 4)}
        mlm_nsp = objectives.summarize(totals)
        if "nsp_loss" in mlm_nsp:
            mlm_nsp = {"loss": mlm_nsp["mlm_loss"] + mlm_nsp["nsp_loss"], **mlm_nsp}
        record.update(mlm_nsp)
        record.update(lr=lr, grad_norm=totals["grad_norm"] / max(1.0, totals["steps"]),
                      tokens_per_s=round(totals["tokens"] / max(elapsed, 1e-9), 1),
                      skipped_steps=int(trainer.skipped_steps))
        if self.ctx.is_main:
            self.logger.log(**record)
            bar.set_postfix(loss=f"{record.get('loss', record['mlm_loss']):.3f}",
                            **(self.budget.postfix() if self.budget else {}))
            self._tensorboard(record)
        self._check_divergence(trainer, record["skipped_steps"])

    def _check_divergence(self, trainer: TrainStep, skipped: int) -> None:
        """Stop with a clear error when every step of a log interval was skipped (NaN/inf);
        the watch starts at this process's first log point."""
        if getattr(self, "_skips", None) is None:
            self._skips = SkipWatch(self.step, skipped, trainer.scaler.is_enabled())
        else:
            self._skips.check(self.step, skipped, self.config.lr)

    def _tensorboard(self, record: dict) -> None:
        if self.tb is not None:
            for name, value in record.items():
                if name not in ("step", "event") and isinstance(value, int | float):
                    self.tb.add_scalar(name, value, record["step"])

    def _evaluate(self) -> None:
        if self.eval_data is None:
            return
        model = self.model
        model.eval()
        sums = MetricSums(self.ctx.device)
        batches = EpochBatches(len(self.eval_data), self.config.batch_size, 1,
                               self.ctx.world_size, self.ctx.rank, shuffle=False)
        count = min(self.config.eval_batches, batches.batches_per_epoch)
        order = batches.epoch_order(0)
        with torch.no_grad():
            for b in range(count):
                (idx,) = batches.micro_batches(order, b)
                batch = objectives.prepare_batch([self.eval_data[int(i)] for i in idx],
                                                 self.config.objective, self.ctx.device)
                with autocast(self.ctx.device, self.precision):
                    out = objectives.compute(model, batch)
                objectives.add_step_metrics(sums, [out], [batch])
        model.train()
        record = objectives.summarize(sums.reduce(), prefix="eval_")
        if self.ctx.is_main:
            self.logger.log(step=self.step, **record)
            self._tensorboard({"step": self.step, **record})

    # ------------------------------------------------------------------ loop
    def _train_model(self) -> torch.nn.Module:
        model = self.model
        if self.ctx.distributed:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.ctx.device.index] if self.ctx.device.type == "cuda" else None
            model = DistributedDataParallel(model, device_ids=ids)
        if self.config.compile:
            model = torch.compile(model)
        return model

    def _cpu_batches(self):
        """``(position_after, [micro-batch on the CPU])`` from the current position on
        (runs on the prefetch thread; only it touches ``train_data``)."""
        pin = self.ctx.device.type == "cuda"
        for position, micro in self.batches.iterate(self.position):
            self.train_data.set_epoch(position["epoch"])
            yield position, [objectives.prepare_batch([self.train_data[int(i)] for i in idx],
                                                      self.config.objective, pin_memory=pin)
                             for idx in micro]

    def run(self, on_step: Callable[[int], None] | None) -> PretrainResult:
        cfg, ctx = self.config, self.ctx
        trainer = TrainStep(self.model, self.optimizer, self.scheduler, device=ctx.device,
                            precision=self.precision, max_grad_norm=cfg.max_grad_norm)
        self._resume_or_start(trainer)
        if ctx.is_main:
            self._write_settings()
            self.logger.log(step=self.step, event="precision", **self.precision_note)
            if self.budget is not None:
                self.logger.log(step=self.step, event="budget", **self.budget.describe())
        trainer.model = self._train_model()
        stopped_by, saved_at = None, self.step if self.checkpoints.latest() else None
        bar = tqdm(total=cfg.steps, initial=self.step, unit="step", desc="pretrain",
                   disable=True if not ctx.is_main else bar_disabled(cfg.progress), dynamic_ncols=True)
        last_log = time.perf_counter()
        # ranks agree on stopping through a collective: every step on the CPU, every log
        # interval on GPUs (reading its result waits for the device)
        stop_every = cfg.log_every if ctx.distributed and ctx.device.type == "cuda" else 1
        # closing() joins the prefetch thread on every way out of the loop
        with closing(prefetch(self._cpu_batches(), depth=2)) as data, GracefulStop() as stop, bar:
            while self.step < cfg.steps:
                position, cpu_batches = next(data)
                batches = [objectives.to_device(b, ctx.device) for b in cpu_batches]
                result = trainer(batches, objectives.compute)
                objectives.add_step_metrics(self.sums, result.outputs, batches)
                self.sums.add(grad_norm=result.grad_norm, steps=1)
                self.step, self.position = self.step + 1, position
                bar.update(1)
                if self.step % cfg.log_every == 0 or self.step == cfg.steps:
                    now = time.perf_counter()
                    self._log(trainer, result.lr, now - last_log, bar)
                    last_log = now
                if cfg.eval_every and self.step % cfg.eval_every == 0:
                    self._evaluate()
                if self.step % cfg.save_every == 0:
                    self._save(trainer)
                    saved_at = self.step
                if on_step is not None:
                    on_step(self.step)
                if (self.step % stop_every == 0 and self.step < cfg.steps
                        and dist.any_rank(stop.requested, ctx.device)):
                    stopped_by = stop.signal_name or "signal"
                    break
                if self.step < cfg.steps and budget_over(self.budget, ctx.device):
                    if ctx.is_main:  # slower than measured: finish (save, export) on time
                        self.logger.log(step=self.step, event="budget_stop", **self.budget.describe())
                    break
        if saved_at != self.step:
            self._save(trainer)
        if stopped_by:
            if ctx.is_main:
                self.logger.log(step=self.step, event="stopped", signal=stopped_by,
                                checkpoint=self.checkpoints.path_for(self.step).name)
            return PretrainResult(self.out, self.step, None, stopped_by)
        if cfg.eval_data and not (cfg.eval_every and self.step % cfg.eval_every == 0):
            self._evaluate()
        model_dir = self._export()
        dist.barrier()
        return PretrainResult(self.out, self.step, model_dir)

    def _export(self) -> Path | None:
        if not self.ctx.is_main:
            return None
        from bertkit.checkpoint import save_pretrained

        model_dir = save_pretrained(_unwrap(self.model), self.out / "model", tokenizer=self.tokenizer,
                                    extra_config={"bertkit_pretraining": {
                                        "objective": self.config.objective, "steps": self.step}})
        self.logger.log(step=self.step, event="export", model_dir=str(model_dir))
        if self.tb is not None:
            self.tb.close()
        return model_dir
