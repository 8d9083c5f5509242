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
:func:`bertkit.precision.resolve` and saved resolved. ``on_step(step)`` is
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

from bertkit.cpu import bound_onednn_cache, keep_freed_memory
from bertkit.errors import BertkitError
from bertkit.fileio import atomic_write, remove_temp_files
from bertkit.precision import TRAINING, autocast, resolve
from bertkit.pretraining import objectives
from bertkit.pretraining.budget import Budget, budget_over, budget_replan, start_budget
from bertkit.pretraining.dataset import PretrainingDataset
from bertkit.pretraining.setup import build_model, build_tokenizer, open_datasets
from bertkit.pretraining.train_config import PretrainConfig
from bertkit.runlog import RunLogger, bar_disabled, read_log
from bertkit.tokenizer import BertTokenizer
from bertkit.training import (
    CheckpointManager,
    EpochBatches,
    GracefulStop,
    MetricSums,
    TrainStep,
    build_optimizer,
    capture_rng_state,
    capture_training_state,
    default_warmup,
    linear_warmup_decay,
    restore_training_state,
)
from bertkit.training import distributed as dist
from bertkit.training.divergence import SkipWatch
from bertkit.training.prefetch import prefetch


@dataclass
class PretrainResult:
    run_dir: Path
    step: int
    model_dir: Path | None
    stopped_by: str | None = None


@dataclass
class _Run:
    """What set-up fixes for the whole run (also read by the budget's step-time probe)."""

    config: PretrainConfig  # precision resolved; steps planned when there is a budget
    ctx: dist.DistContext
    out: Path
    checkpoints: CheckpointManager
    train_data: PretrainingDataset
    eval_data: PretrainingDataset | None
    tokenizer: BertTokenizer
    model: torch.nn.Module  # the bare model (DDP / compile wrap it only for the steps)
    precision: str
    precision_note: dict
    batches: EpochBatches
    budget: Budget | None = None


@dataclass
class _Progress:
    """What changes every step and a checkpoint keeps: step, data position, metric sums."""

    step: int
    position: dict
    sums: MetricSums


class _Records:
    """log.jsonl and the console (rank 0), plus TensorBoard scalars when asked for."""

    def __init__(self, run: _Run):
        self.main = run.ctx.is_main
        self.logger = RunLogger(run.out / "log.jsonl" if self.main else None, echo=self.main)
        self.tb = None

    def log(self, **record) -> None:
        if self.main:
            self.logger.log(**record)

    def scalars(self, record: dict) -> None:
        if self.tb is not None:
            for name, value in record.items():
                if name not in ("step", "event") and isinstance(value, int | float):
                    self.tb.add_scalar(name, value, record["step"])


def pretrain(config: PretrainConfig, on_step: Callable[[int], None] | None = None) -> PretrainResult:
    config.validate()
    ctx = dist.init_distributed(config.device)
    try:
        return _train(config, ctx, on_step)
    finally:
        dist.shutdown()


def _train(config: PretrainConfig, ctx: dist.DistContext,
           on_step: Callable[[int], None] | None) -> PretrainResult:
    """Set up, then one loop (batch, step, log, evaluate, checkpoint, stop checks), then finish."""
    # ---- set up
    run = _set_up(config, ctx)
    cfg = run.config
    trainer = _trainer(run)
    records = _Records(run)
    progress = _resume_or_start(run, trainer, records)
    _record_settings(run, records, progress.step)
    trainer.model = _model_for_steps(run)
    saved_at = progress.step if run.checkpoints.latest() else None
    stopped_by, skips = None, None
    bar = tqdm(total=cfg.steps, initial=progress.step, unit="step", desc="pretrain",
               disable=True if not ctx.is_main else bar_disabled(cfg.progress), dynamic_ncols=True)
    last_log = time.perf_counter()
    # ranks agree on stopping through a collective: every step on the CPU, every log
    # interval on GPUs (reading its result waits for the device)
    stop_every = cfg.log_every if ctx.distributed and ctx.device.type == "cuda" else 1

    # ---- the loop; closing() joins the prefetch thread on every way out of it
    with closing(prefetch(_cpu_batches(run, progress.position), depth=2)) as data, \
            GracefulStop() as stop, bar:
        while progress.step < cfg.steps:
            position, cpu_batches = next(data)
            batches = [objectives.to_device(b, ctx.device) for b in cpu_batches]
            result = trainer(batches, objectives.compute)
            objectives.add_step_metrics(progress.sums, result.outputs, batches)
            progress.sums.add(grad_norm=result.grad_norm, steps=1)
            progress.step, progress.position = progress.step + 1, position
            step = progress.step
            bar.update(1)
            if step % cfg.log_every == 0 or step == cfg.steps:
                now = time.perf_counter()
                record = _log_interval(run, progress, trainer, result.lr, now - last_log, records, bar)
                skips = _watch_skips(skips, trainer, step, record["skipped_steps"], cfg.lr)
                last_log = now
            if cfg.eval_every and step % cfg.eval_every == 0:
                _evaluate(run, step, records)
            if step % cfg.save_every == 0:
                _save(run, progress, trainer)
                saved_at = step
            if on_step is not None:
                on_step(step)
            if step < cfg.steps and step % stop_every == 0 and dist.any_rank(stop.requested, ctx.device):
                stopped_by = stop.signal_name or "signal"
                break
            replanned = budget_replan(run.budget, step, ctx.device)
            if replanned is not None:  # once: the run's own pace, not the probe's
                run, cfg = _replan(run, trainer, replanned, records, step)
                bar.total = cfg.steps
                if saved_at == step:  # this step's checkpoint must hold the new plan
                    _save(run, progress, trainer)
            if step < cfg.steps and budget_over(run.budget, ctx.device):
                # slower than measured: finish (save, export) on time
                records.log(step=step, event="budget_stop", **run.budget.describe())
                break

    # ---- finish: the last checkpoint, then (unless stopped) the last evaluation and the model
    if saved_at != progress.step:
        _save(run, progress, trainer)
    if stopped_by:
        records.log(step=progress.step, event="stopped", signal=stopped_by,
                    checkpoint=run.checkpoints.path_for(progress.step).name)
        return PretrainResult(run.out, progress.step, None, stopped_by)
    if cfg.eval_data and not (cfg.eval_every and progress.step % cfg.eval_every == 0):
        _evaluate(run, progress.step, records)
    model_dir = _export(run, progress.step, records)
    dist.barrier()
    return PretrainResult(run.out, progress.step, model_dir)


# ------------------------------------------------------------------ set-up
def _set_up(config: PretrainConfig, ctx: dist.DistContext) -> _Run:
    """Data, tokenizer, model (seeded), precision, batch order and budget of the run."""
    out = Path(config.out)
    if ctx.device.type == "cpu":
        bound_onednn_cache()
        if config.objective != "ltr":
            # ltr's logits change size every step (every token is labelled): with freed
            # memory kept, the heap fragments and grows; mmap'd blocks avoid that.
            keep_freed_memory()
    checkpoints = CheckpointManager(out / "checkpoints", keep=config.keep)
    train_data, eval_data = open_datasets(config)
    tokenizer = build_tokenizer(config, train_data.meta)
    torch.manual_seed(config.seed)
    model = build_model(config, len(tokenizer), train_data.max_seq_length, tokenizer)
    model.to(ctx.device).train()
    torch.manual_seed(config.seed + ctx.rank)  # dropout differs between ranks
    # --precision auto: bf16 on CPUs with native bf16 for a model wide enough to gain from
    # it (bertkit/precision.py); the resolved choice is what config.yaml and the checkpoints keep
    precision, why = resolve(config.precision, ctx.device, TRAINING,
                             hidden_size=model.config.hidden_size, training=True,
                             seq_length=train_data.max_seq_length)
    note = {"precision": precision, "requested": config.precision, "reason": why}
    config = dataclasses.replace(config, precision=precision)
    batches = EpochBatches(len(train_data), config.batch_size, config.grad_accum,
                           ctx.world_size, ctx.rank, seed=config.seed)
    run = _Run(config, ctx, out, checkpoints, train_data, eval_data, tokenizer, model,
               precision, note, batches)
    # --budget (pretraining/budget.py): measure the step time, fix the steps to fit
    budget = start_budget(run)
    if budget is None:
        return run
    return dataclasses.replace(run, budget=budget,
                               config=dataclasses.replace(config, steps=budget.steps))


def _replan(run: _Run, trainer: TrainStep, steps: int, records: _Records, step: int):
    """The run (and its config) with the budget's re-planned step count; the schedule laid
    over it from this step on (the warm-up scales with it unless --warmup-steps is set)."""
    cfg = dataclasses.replace(run.config, steps=steps)
    trainer.scheduler.lr_lambdas[0].relay(min(_warmup(cfg), steps), steps)  # a WarmupLinearDecay
    run = dataclasses.replace(run, config=cfg)
    if run.ctx.is_main:
        _write_config(run)
    records.log(step=step, event="budget_replan", **run.budget.describe())
    return run, cfg


def _warmup(cfg: PretrainConfig) -> int:
    """Warm-up updates: ``--warmup-steps``, else ``--warmup-fraction`` of the steps."""
    if cfg.warmup_steps is not None:
        return cfg.warmup_steps
    return default_warmup(cfg.steps, cfg.warmup_fraction)


def _trainer(run: _Run) -> TrainStep:
    """AdamW with linear warm-up and decay over ``config.steps``, in one optimizer step."""
    cfg = run.config
    optimizer = build_optimizer(run.model, cfg.lr, cfg.weight_decay, eps=cfg.adam_eps,
                                implementation=cfg.optimizer)
    scheduler = linear_warmup_decay(optimizer, _warmup(cfg), cfg.steps)
    return TrainStep(run.model, optimizer, scheduler, device=run.ctx.device,
                     precision=run.precision, max_grad_norm=cfg.max_grad_norm)


def _resume_or_start(run: _Run, trainer: TrainStep, records: _Records) -> _Progress:
    """Step 0, or the newest checkpoint's state put back (``--resume``, same steps and batch)."""
    progress = _Progress(0, {"epoch": 0, "batch": 0}, MetricSums(run.ctx.device))
    latest = run.checkpoints.latest()
    if latest is not None and not run.config.resume:
        raise BertkitError(f"{run.out} already holds checkpoints ({latest.name}): pass "
                           "--resume to continue that run or choose another --out")
    if run.ctx.is_main:  # temp files of a run killed mid-write: never read, only space
        for folder in (run.checkpoints.directory, run.out / "model"):
            remove_temp_files(folder)
    if latest is None:
        if run.config.resume:
            records.log(step=0, event="resume", note="no checkpoint yet: starting fresh")
        return progress
    state = run.checkpoints.load(latest)
    restore_training_state(state, model=run.model, optimizer=trainer.optimizer,
                           scheduler=trainer.scheduler, scaler=trainer.scaler,
                           source=str(latest), rank=run.ctx.rank)
    extra = state["extra"]
    if state["config"].get("steps") != run.config.steps:
        raise BertkitError(
            f"{latest}: written by a run of {state['config'].get('steps')} steps, this run "
            f"has --steps {run.config.steps}; the schedule depends on it: resume with the same steps"
        )
    if extra.get("global_batch") != run.batches.global_batch_size:
        raise BertkitError(
            f"{latest}: written with a global batch of {extra.get('global_batch')}, this run "
            f"has {run.batches.global_batch_size}; resume with the same batch settings"
        )
    progress.step, progress.position = int(state["step"]), dict(state["data_position"])
    sums = extra.get("metric_sums") or []
    if run.ctx.rank < len(sums):
        progress.sums.load_state_dict(sums[run.ctx.rank])
    trainer.skipped_steps.fill_(int(extra.get("skipped_steps", 0)))
    if run.ctx.is_main:
        _truncate_log(run.out / "log.jsonl", progress.step)
        records.log(step=progress.step, event="resume", checkpoint=latest.name)
    return progress


def _truncate_log(path: Path, step: int) -> None:
    """Drop records a killed run logged after the checkpoint being resumed."""
    if path.exists():
        import json

        kept = [r for r in read_log(path) if r.get("step", 0) <= step]
        with atomic_write(path) as f:
            f.writelines(json.dumps(r) + "\n" for r in kept)


def _write_config(run: _Run) -> None:
    import yaml

    with atomic_write(run.out / "config.yaml") as f:
        yaml.safe_dump(run.config.to_dict(), f, sort_keys=False)


def _record_settings(run: _Run, records: _Records, step: int) -> None:
    """config.yaml, the precision and budget events, and TensorBoard's writer (rank 0)."""
    if not run.ctx.is_main:
        return
    _write_config(run)
    if run.config.tensorboard:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            records.log(step=step, event="note", note="tensorboard not installed: skipped")
        else:
            records.tb = SummaryWriter(str(run.out / "tensorboard"))
    records.log(step=step, event="precision", **run.precision_note)
    remap = getattr(run.model, "vocab_remap", None)
    if remap:  # --init-from a model of another vocabulary (pretraining/setup.py)
        records.log(step=step, event="vocabulary", note=(
            f"--init-from vocabulary {remap['init_vocab_size']:,} -> {remap['vocab_size']:,} tokens: "
            f"{remap['rows_kept']:,} shared tokens keep their rows, {remap['new_tokens']:,} new "
            "tokens start from the mean of their pieces' rows"), **remap)
    if run.budget is not None:
        records.log(step=step, event="budget", **run.budget.describe())


def _model_for_steps(run: _Run) -> torch.nn.Module:
    """The model the steps run: DDP-wrapped under torchrun, compiled with ``--compile``."""
    model = run.model
    if run.ctx.distributed:
        from torch.nn.parallel import DistributedDataParallel

        ids = [run.ctx.device.index] if run.ctx.device.type == "cuda" else None
        model = DistributedDataParallel(model, device_ids=ids)
    if run.config.compile:
        model = torch.compile(model)
    return model


# ------------------------------------------------------------------ one step's parts
def _cpu_batches(run: _Run, start: dict):
    """``(position_after, [micro-batch on the CPU])`` from ``start`` on (runs on the
    prefetch thread; only it touches ``train_data``)."""
    pin = run.ctx.device.type == "cuda"
    for position, micro in run.batches.iterate(dict(start)):
        run.train_data.set_epoch(position["epoch"])
        yield position, [objectives.prepare_batch([run.train_data[int(i)] for i in idx],
                                                  run.config.objective, pin_memory=pin)
                         for idx in micro]


def _log_interval(run: _Run, progress: _Progress, trainer: TrainStep, lr: float,
                  elapsed: float, records: _Records, bar) -> dict:
    """The interval's mean losses, lr, gradient norm and speed, logged and returned (metric
    sums reset)."""
    totals = progress.sums.reduce()
    epoch = progress.position["epoch"] + progress.position["batch"] / run.batches.batches_per_epoch
    record = {"step": progress.step, "epoch": round(epoch, 4)}
    mlm_nsp = objectives.summarize(totals)
    if "nsp_loss" in mlm_nsp:
        mlm_nsp = {"loss": mlm_nsp["mlm_loss"] + mlm_nsp["nsp_loss"], **mlm_nsp}
    record.update(mlm_nsp)
    record.update(lr=lr, grad_norm=totals["grad_norm"] / max(1.0, totals["steps"]),
                  tokens_per_s=round(totals["tokens"] / max(elapsed, 1e-9), 1),
                  skipped_steps=int(trainer.skipped_steps))
    if run.ctx.is_main:
        records.log(**record)
        bar.set_postfix(loss=f"{record.get('loss', record['mlm_loss']):.3f}",
                        **(run.budget.postfix() if run.budget else {}))
        records.scalars(record)
    return record


def _watch_skips(skips: SkipWatch | None, trainer: TrainStep, step: int, skipped: int,
                 lr: float) -> SkipWatch:
    """Stop with a clear error when every step of a log interval was skipped (NaN/inf); the
    watch starts at this process's first log point."""
    if skips is None:
        return SkipWatch(step, skipped, trainer.scaler.is_enabled())
    skips.check(step, skipped, lr)
    return skips


def _evaluate(run: _Run, step: int, records: _Records) -> None:
    """Mean held-out losses over ``eval_batches`` batches (every rank takes part)."""
    if run.eval_data is None:
        return
    model = run.model
    model.eval()
    sums = MetricSums(run.ctx.device)
    batches = EpochBatches(len(run.eval_data), run.config.batch_size, 1,
                           run.ctx.world_size, run.ctx.rank, shuffle=False)
    count = min(run.config.eval_batches, batches.batches_per_epoch)
    order = batches.epoch_order(0)
    with torch.no_grad():
        for b in range(count):
            (idx,) = batches.micro_batches(order, b)
            batch = objectives.prepare_batch([run.eval_data[int(i)] for i in idx],
                                             run.config.objective, run.ctx.device)
            with autocast(run.precision, run.ctx.device):
                out = objectives.compute(model, batch)
            objectives.add_step_metrics(sums, [out], [batch])
    model.train()
    record = objectives.summarize(sums.reduce(), prefix="eval_")
    records.log(step=step, **record)
    records.scalars({"step": step, **record})


def _save(run: _Run, progress: _Progress, trainer: TrainStep) -> None:
    """A resumable checkpoint of the whole state (every rank's RNG and sums; rank 0 writes)."""
    rng = dist.all_gather_objects(capture_rng_state())
    sums = dist.all_gather_objects(progress.sums.state_dict())
    if not run.ctx.is_main:
        return
    state = capture_training_state(
        model=run.model, optimizer=trainer.optimizer, scheduler=trainer.scheduler,
        scaler=trainer.scaler, step=progress.step, data_position=progress.position,
        config=run.config.to_dict(), rng=rng,
        extra={"metric_sums": sums, "skipped_steps": int(trainer.skipped_steps),
               "global_batch": run.batches.global_batch_size,
               "world_size": run.ctx.world_size, "model_config": run.model.config.to_dict(),
               **({"budget": run.budget.state()} if run.budget else {})},
    )
    run.checkpoints.save(state, progress.step)


# ------------------------------------------------------------------ finish
def _export(run: _Run, step: int, records: _Records) -> Path | None:
    """The final model directory (rank 0; with the vocabulary), TensorBoard closed."""
    if not run.ctx.is_main:
        return None
    from bertkit.checkpoint import save_pretrained

    model_dir = save_pretrained(run.model, run.out / "model", tokenizer=run.tokenizer,
                                extra_config={"bertkit_pretraining": {
                                    "objective": run.config.objective, "steps": step}})
    records.log(step=step, event="export", model_dir=str(model_dir))
    if records.tb is not None:
        records.tb.close()
    return model_dir
