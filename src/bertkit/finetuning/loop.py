"""The one fine-tuning loop every task family uses (BERT paper, section 4 and appendix A.3).

Recipe (the defaults): AdamW (``bertkit.training.build_optimizer``: weight decay 0.01, none on
biases/LayerNorm), linear warm-up over the first 10% of the updates then linear decay to 0,
dropout 0.1, gradient clipping at 1.0, a dev evaluation after every epoch. The paper's grid
is :data:`PAPER_GRID` (lr 5e-5/3e-5/2e-5 x batch 16/32 x epochs 2/3/4); :func:`finetune`
runs a grid (or one point), picks the best (run, epoch) by the task's main dev metric, keeps
that model as a bertkit model directory and returns the table.

Contract of :func:`finetune` (``task``: :class:`~bertkit.tasks.base.Task`):

* the train and eval splits are read and tokenized once, shared by every grid point;
  examples that lost tokens to ``max_seq_length`` are counted and warned about;
* every grid point starts from ``model_dir`` with seed ``hyper.seed`` (python, numpy,
  torch; head initialisation and batch order are functions of it);
* training batches are bucketed by length (shuffle, sort chunks of ``bucket`` batches by
  length, shuffle the batches), evaluation batches are sorted by length, so little compute
  goes to padding; outputs come back in feature order;
* records (console ``key=value`` lines + ``out_dir/log.jsonl``): ``event=train`` every
  ``log_every`` updates, ``event=eval`` after each epoch, ``event=run`` per grid point,
  ``event=best`` at the end; whenever a (run, epoch) beats every earlier one on the main
  metric of the first eval split (``select="last"``: only final epochs compete), the model
  is written to ``out_dir`` with :func:`~bertkit.checkpoint.save_pretrained` (tokenizer, label
  names, task name and options, hyper-parameters, dev metrics), the family's own files
  (:meth:`~bertkit.tasks.base.Task.write_model_files`), ``predictions_<split>.jsonl`` and
  ``calibration.jsonl`` (300 training inputs, static INT8's calibration: ``--calibration
  saved``); ``out_dir/results.json`` holds the table.

Under ``torchrun`` (several processes; gloo on the CPU, NCCL on GPUs, the process group
started by :func:`~bertkit.training.distributed.init_distributed`) ``cfg.batch`` stays the
global batch: every process draws the same batch order, cuts each global batch into
``world_size x grad_accum`` contiguous micro-batches (sizes differ by at most one; a slot left
empty by the last batch runs a weight-0 stand-in) and takes its own ``grad_accum`` of them;
each micro-batch's loss is weighted by its share of the global batch, so the update equals
one process's over the whole batch. Evaluation batches are dealt round-robin to the
processes and every output is gathered back (each feature exactly once); every process
computes the same metrics, only rank 0 logs and writes files.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from bertkit.cpu import bound_onednn_cache
from bertkit.errors import BertkitError
from bertkit.fileio import atomic_write
from bertkit.finetuning.config import FinetuneConfig
from bertkit.finetuning.evaluate import EvalSet, evaluate_sets, load_eval_sets, write_predictions
from bertkit.finetuning.run_dir import RunDir
from bertkit.inference.features import NonFiniteOutputs, to_device
from bertkit.options import check_config
from bertkit.precision import TRAINING, resolve
from bertkit.runlog import RunLogger, bar_disabled
from bertkit.tasks.base import FeatureSet, Task, featurize
from bertkit.training import (
    TrainStep,
    build_optimizer,
    linear_warmup_decay,
)
from bertkit.training import distributed as dist
from bertkit.training.distributed import DistContext, pick_device
from bertkit.training.divergence import DivergenceError, SkipWatch
from bertkit.training.sampler import length_batches

__all__ = ["PAPER_GRID", "FinetuneConfig", "Hyper", "RunResult", "finetune", "format_table",
           "grid_points", "parse_grid"]

PAPER_GRID: dict[str, tuple] = {"lr": (5e-5, 3e-5, 2e-5), "batch": (16, 32), "epochs": (2, 3, 4)}
_GRID_TYPES: dict[str, type] = {"lr": float, "batch": int, "epochs": int, "seed": int}
_GRID_ALIASES = {"learning_rate": "lr", "batch_size": "batch", "epoch": "epochs", "seeds": "seed"}


@dataclass(frozen=True)
class Hyper:
    """One grid point."""

    lr: float
    batch: int
    epochs: int
    seed: int




@dataclass
class RunResult:
    """A finished grid point: its chosen epoch's metrics (flat, see :func:`evaluate_sets`)."""

    hyper: Hyper
    metrics: dict[str, float]
    epoch: int
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0


# ------------------------------------------------------------------ grid
def parse_grid(specs: Sequence[str]) -> dict[str, list]:
    """``["lr=5e-5,3e-5", "batch=32"]`` -> ``{"lr": [5e-5, 3e-5], "batch": [32]}``;
    no specs -> :data:`PAPER_GRID`. Keys: lr, batch, epochs, seed (and long aliases)."""
    if not specs:
        return {k: list(v) for k, v in PAPER_GRID.items()}
    grid: dict[str, list] = {}
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = _GRID_ALIASES.get(key.strip(), key.strip())
        if not sep or key not in _GRID_TYPES or not values.strip():
            raise BertkitError(f"bad grid entry {spec!r}; expected KEY=V1,V2,... with KEY one of "
                               f"{', '.join(_GRID_TYPES)}")
        try:
            grid[key] = [_GRID_TYPES[key](float(v)) if key != "lr" else float(v)
                         for v in values.split(",") if v.strip()]
        except ValueError:
            raise BertkitError(f"bad grid entry {spec!r}: {key} values must be numbers") from None
        for value in grid[key]:
            check_config(replace(FinetuneConfig(), **{key: value}), f"grid entry {spec!r}")
    return grid


def grid_points(cfg: FinetuneConfig) -> list[Hyper]:
    """Every combination of the grid (single values fill missing keys), in grid order."""
    grid = cfg.grid or {}
    axes = [list(grid.get(k, [getattr(cfg, k)])) for k in ("lr", "batch", "epochs", "seed")]
    return [Hyper(float(lr), int(b), int(e), int(s)) for lr, b, e, s in itertools.product(*axes)]


# ------------------------------------------------------------------ batching








# ------------------------------------------------------------------ evaluation








def _score(metrics: dict[str, float], name: str) -> float:
    value = metrics.get(name, float("nan"))
    return -math.inf if value is None or math.isnan(value) else value


# ------------------------------------------------------------------ training
UNKNOWN_PROBE = 2000  # training examples whose texts the [UNK] check reads


def _check_unknown(task: Task, examples, tokenizer, logger: RunLogger) -> None:
    """Warn (and log ``event=unknown``) when the vocabulary does not know the training data:
    the ``[UNK]`` rate of the first examples and its likely cause (casing, accents, another
    language's vocabulary: :mod:`bertkit.tokenizer.unknown`)."""
    from bertkit.tokenizer.unknown import unknown_report, warn_unknown

    report = unknown_report(tokenizer, (t for ex in examples[:UNKNOWN_PROBE] for t in task.texts(ex)))
    message = warn_unknown(report, "the training data")
    if message:
        logger.log(event="unknown", rate=round(report.rate, 4), unknown=report.unknown,
                   tokens=report.tokens, cause=report.cause)


def training_precision(cfg: FinetuneConfig, device, model_dir) -> tuple[str, str]:
    """``(precision, why)`` fine-tuning from ``model_dir`` runs at: ``cfg.precision`` resolved
    for the model's width (:func:`bertkit.precision.resolve`)."""
    from bertkit.checkpoint import load_config

    return resolve(cfg.precision, device, TRAINING, hidden_size=load_config(model_dir).hidden_size,
                   training=True, seq_length=cfg.max_seq_length)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rank_micro_batches(idx: np.ndarray, ctx: DistContext, accum: int
                       ) -> tuple[list[np.ndarray], list[float]]:
    """This rank's ``accum`` micro-batches of global batch ``idx`` and their loss weights.

    ``idx`` is cut into ``world_size * accum`` contiguous slots (sizes differ by at most one);
    rank ``r`` takes slots ``r*accum .. r*accum+accum-1``. A slot's weight is its share of the
    global batch times ``world_size`` (DDP averages gradients over ranks), so the summed
    update is the gradient of the batch's per-example mean loss. An empty slot (a last batch
    smaller than the slots) runs ``idx[:1]`` with weight 0: every rank still takes part."""
    slots = np.array_split(idx, ctx.world_size * accum)[ctx.rank * accum:(ctx.rank + 1) * accum]
    weights = [len(part) / len(idx) * ctx.world_size for part in slots]
    return [part if len(part) else idx[:1] for part in slots], weights


def _wrap_ddp(model, ctx: DistContext):
    """``model`` in DistributedDataParallel when ``ctx`` is distributed. Every trainable
    parameter must receive a gradient each step (the task models leave out the pooler where
    their head does not read it)."""
    if not ctx.distributed:
        return model
    from torch.nn.parallel import DistributedDataParallel

    ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids)


def train_epochs(task: Task, model_dir, train: FeatureSet, sets: Sequence[EvalSet], hyper: Hyper,
                 cfg: FinetuneConfig, logger: RunLogger, resume: dict | None = None,
                 on_epoch_end: Callable[[dict], None] | None = None,
                 ctx: DistContext | None = None) -> Iterator[tuple[Any, int, dict, list]]:
    """Fine-tune one grid point from ``model_dir``, yielding ``(model, epoch, metrics, raw
    outputs)`` after every epoch's evaluation (the caller keeps the best model). With a
    distributed ``ctx`` every rank runs it (see the module docstring); the model yielded is
    the plain module, identical on every rank."""
    # ``on_epoch_end(state)`` receives the training state (model, optimizer, scheduler, RNG,
    # step) once the caller has handled an epoch; a ``resume`` state goes on after its epoch,
    # to the weights an uninterrupted run reaches.
    ctx = ctx or DistContext(device=pick_device(cfg.device))
    device = ctx.device
    precision, _ = training_precision(cfg, device, model_dir)
    seed_everything(hyper.seed)
    overrides = {"hidden_dropout_prob": cfg.dropout, "attention_probs_dropout_prob": cfg.dropout}
    if cfg.attention_impl is not None:
        overrides["attention_impl"] = cfg.attention_impl
    model = task.build_model(model_dir, config_overrides=overrides).to(device)
    if ctx.distributed:
        torch.manual_seed(hyper.seed + 7919 * ctx.rank)  # same weights, dropout differs by rank
    train_model = _wrap_ddp(model, ctx)
    if cfg.compile:  # batch shapes vary (length buckets): one graph with symbolic sizes
        train_model = torch.compile(train_model, dynamic=True)
    steps_per_epoch = math.ceil(len(train) / hyper.batch)
    total = steps_per_epoch * hyper.epochs
    # the fused kernel wherever torch has it, as pre-training does: on the AMX Xeon with torch
    # 2.13 an AdamW step took 11 ms fused against 34 ms foreach (tiny), 0.27 s against 1.1-2.0 s (base)
    optimizer = build_optimizer(model, hyper.lr, cfg.weight_decay, implementation="auto")
    scheduler = linear_warmup_decay(optimizer, int(cfg.warmup * total), total)
    step_fn = TrainStep(train_model, optimizer, scheduler, device=device, precision=precision,
                        max_grad_norm=cfg.max_grad_norm)
    run = asdict(hyper)
    step, first_epoch = 0, 1
    watch = SkipWatch(loss_scaling=step_fn.scaler.is_enabled())
    if resume is not None:
        from bertkit.training.state import restore_training_state

        restore_training_state(resume, model=model, optimizer=optimizer, scheduler=scheduler,
                               scaler=step_fn.scaler, source="fine-tuning resume state")
        step, first_epoch = int(resume["step"]), int(resume["extra"]["epoch"]) + 1
        watch = SkipWatch(step, 0, step_fn.scaler.is_enabled())
    for epoch in range(first_epoch, hyper.epochs + 1):
        model.train()
        rng = np.random.default_rng([hyper.seed, epoch])
        loss_sum, loss_n = torch.zeros((), dtype=torch.float64, device=device), 0
        bar = tqdm(length_batches(train.lengths, hyper.batch, rng, cfg.bucket),
                   desc=f"epoch {epoch}/{hyper.epochs}", leave=False,
                   disable=bar_disabled(cfg.progress) if ctx.is_main else True)
        for idx in bar:
            micro, weights = rank_micro_batches(idx, ctx, cfg.grad_accum)
            result = step_fn([to_device(train.collate(m), device) for m in micro], task.compute, weights)
            for out, w in zip(result.outputs, weights):  # the batch's mean loss, over ranks
                loss_sum += out.loss.detach().double() * (w / ctx.world_size)
            loss_n += 1
            step += 1
            if step % cfg.log_every == 0 or step == total:
                mean = float(dist.all_reduce_sum(loss_sum)) / loss_n
                logger.log(event="train", **run, epoch=epoch, step=step, steps=total,
                           loss=mean, lr_now=result.lr)
                loss_sum.zero_()
                loss_n = 0
                _check_finite(watch, step_fn, step, hyper, logger)
        _check_finite(watch, step_fn, step, hyper, logger)  # never evaluate or keep a diverged epoch
        try:
            metrics, raw = evaluate_sets(task, model, sets, cfg.eval_batch, device, precision,
                                         cfg.progress if ctx.is_main else False, ctx)
        except NonFiniteOutputs as e:  # finite steps, but weights that overflow in evaluation
            logger.log(event="diverged", step=step, skipped=int(step_fn.skipped_steps), lr=hyper.lr)
            raise DivergenceError(
                f"training diverged at step {step} (epoch {epoch}): {e.detail}; the epoch was not "
                f"saved and --out keeps its unfinished marker (no finished model). Lower the "
                f"learning rate (--lr {hyper.lr:g}) or check the data and the loss settings, then "
                "start a new run") from None
        logger.log(event="eval", **run, epoch=epoch, step=step, **metrics)
        yield model, epoch, metrics, raw
        if on_epoch_end is not None:  # after the caller kept (or not) this epoch's model
            from bertkit.training.state import capture_training_state

            on_epoch_end(capture_training_state(
                model=model, optimizer=optimizer, scheduler=scheduler, scaler=step_fn.scaler,
                step=step, data_position={}, config={}, extra={"epoch": epoch}))


def _check_finite(watch: SkipWatch, step_fn: TrainStep, step: int, hyper: Hyper,
                  logger: RunLogger) -> None:
    """The run's non-finite guard (the one pre-training uses, :class:`SkipWatch`): a
    ``diverged`` record and a :class:`~bertkit.training.divergence.DivergenceError` naming the
    step when the steps keep being skipped for NaN/inf losses or gradients."""
    try:
        watch.check(step, int(step_fn.skipped_steps), hyper.lr, int(step_fn.skipped_in_a_row),
                    outcome="this epoch was neither evaluated nor saved, and --out keeps its "
                            "unfinished marker (no finished model)")
    except DivergenceError:
        logger.log(event="diverged", step=step, skipped=int(step_fn.skipped_steps), lr=hyper.lr)
        raise


def _chosen_epoch(history: list[dict], main: str, select: str) -> int:
    """Index of the epoch a run reports: its best on ``main``, or its last (``select="last"``)."""
    if select == "last":
        return len(history) - 1
    return max(range(len(history)), key=lambda i: _score(history[i], main))


def finetune(task: Task, model_dir, data_dir, out_dir, cfg: FinetuneConfig | None = None,
             tokenizer=None, logger: RunLogger | None = None) -> tuple[list[RunResult], RunResult]:
    """Run the grid (see the module docstring); returns every run and the best one (on every
    rank under ``torchrun``; the process group is started here unless the caller did)."""
    cfg = cfg or FinetuneConfig()
    check_config(cfg, "finetune")
    owned = not (torch.distributed.is_available() and torch.distributed.is_initialized())
    ctx = dist.init_distributed(cfg.device)
    run_dir = RunDir(out_dir)  # rank 0 locks it in prepare; released however the run ends
    try:
        with warnings.catch_warnings():
            if not ctx.is_main:  # warnings and records once, from rank 0
                warnings.simplefilter("ignore")
                logger = RunLogger(None, echo=False)
            result = _finetune(task, model_dir, data_dir, run_dir, cfg, tokenizer, logger, ctx)
        dist.barrier()  # rank 0's files are complete when any rank returns
        return result
    finally:
        run_dir.release()
        if owned:
            dist.shutdown()


def _finetune(task: Task, model_dir, data_dir, run_dir: RunDir, cfg: FinetuneConfig, tokenizer,
              logger: RunLogger | None, ctx: DistContext) -> tuple[list[RunResult], RunResult]:
    """:func:`finetune` in one process of ``ctx``: rank 0 alone prepares (checks against the
    model, locks), marks and finishes the run directory, writes states, models and results;
    every rank reads a resume state."""
    from bertkit.checkpoint import check_vocabulary, load_config, load_tokenizer

    if ctx.device.type == "cpu":
        bound_onednn_cache()  # batches of varying length: a new matrix shape nearly every step
    out_dir = run_dir.out

    def prepare() -> dict | None:
        run_dir.prepare(resume=cfg.resume, overwrite=cfg.overwrite, inputs={"--model": model_dir})
        return _resume_state(run_dir, task, cfg) if cfg.resume else None

    # rank 0 checks and prepares the directory (and cuts the log back) before anyone reads it;
    # a refused --out stops every rank with rank 0's error
    saved = dist.on_main(prepare)
    if cfg.resume and not ctx.is_main:
        saved = _resume_state(run_dir, task, cfg, cut_log=False)
    logger = logger or RunLogger(out_dir / "log.jsonl")
    tokenizer = tokenizer or load_tokenizer(model_dir)
    check_vocabulary(tokenizer, load_config(model_dir).vocab_size, model_dir)
    task = task.for_data(data_dir)  # labels from the training data where the task has none
    examples = task.read(data_dir, "train")
    if cfg.max_train_examples and len(examples) > cfg.max_train_examples:
        keep = np.sort(np.random.default_rng(0).permutation(len(examples))[: cfg.max_train_examples])
        examples = [examples[i] for i in keep]
    _check_unknown(task, examples, tokenizer, logger)
    train = featurize(task, examples, tokenizer, cfg.max_seq_length, True, "train", logger)
    sets = load_eval_sets(task, data_dir, tokenizer, cfg.max_seq_length, logger=logger)
    points = grid_points(cfg)
    if saved is None:
        precision, why = training_precision(cfg, ctx.device, model_dir)
        logger.log(event="start", task=task.name, model=str(model_dir), train_examples=len(examples),
                   train_features=len(train), **{f"{s.split}_examples": len(s.examples) for s in sets},
                   grid_points=len(points), max_seq_length=cfg.max_seq_length,
                   precision=precision, precision_reason=why)
    main = task.main_metric
    best = {"score": -math.inf}  # read by save_state when called
    runs: list[RunResult] = []
    if saved is not None:
        best["score"], runs = saved["best_score"], [_from_row(row) for row in saved["runs"]]
        logger.log(event="resume", run=saved["run"], epoch=saved["epoch"])
    if ctx.is_main:
        run_dir.mark_unfinished(task=task.name, run=saved["run"] if saved else 1, runs=len(points),
                                epochs_done=saved["epoch"] if saved else 0, epochs=points[0].epochs)
    for n, hyper in enumerate(points, 1):
        if saved is not None and n < saved["run"]:
            continue  # finished before the interruption: its result came back with the state
        resume = saved["state"] if saved is not None and n == saved["run"] else None
        if resume is None:
            logger.log(event="run_start", run=n, runs=len(points), **asdict(hyper))
        started, history = time.perf_counter(), list(saved["history"]) if resume else []

        def save_state(state: dict, n=n, hyper=hyper, history=history) -> None:
            state["extra"].update(run=n, settings=_settings(task, cfg), history=history,
                                  runs=[_row(r) for r in runs], best_score=best["score"],
                                  log_lines=_count_lines(out_dir / "log.jsonl"))
            run_dir.save_state(state)
            run_dir.mark_unfinished(task=task.name, run=n, runs=len(points),
                                    epochs_done=state["extra"]["epoch"], epochs=hyper.epochs)

        for model, epoch, metrics, raw in train_epochs(task, model_dir, train, sets, hyper, cfg,
                                                       logger, resume,
                                                       save_state if ctx.is_main else None, ctx):
            history.append(metrics)
            competes = cfg.select == "best" or epoch == hyper.epochs
            if competes and _score(metrics, main) > best["score"]:  # the best so far: keep it
                best["score"] = _score(metrics, main)
                if ctx.is_main:
                    _save_model(task, model, hyper, epoch, metrics, raw, cfg, model_dir, run_dir,
                                tokenizer, sets, train)
        if n == 1 and getattr(task, "load_notes", None):
            logger.log(event="model_notes", notes=task.load_notes)
        chosen = _chosen_epoch(history, main, cfg.select)
        result = RunResult(hyper, history[chosen], chosen + 1, history, time.perf_counter() - started)
        runs.append(result)
        logger.log(event="run", run=n, **asdict(hyper), best_epoch=result.epoch,
                   seconds=round(result.seconds, 1), **result.metrics)
    chosen = max(runs, key=lambda r: _score(r.metrics, main))
    logger.log(event="best", **asdict(chosen.hyper), epoch=chosen.epoch, out=str(out_dir), **chosen.metrics)
    findings = task.findings(chosen.metrics)  # e.g. a SQuAD 2.0 model that never answers
    for finding in findings:
        logger.log(event="finding", message=finding)
    if ctx.is_main:
        with atomic_write(out_dir / "results.json") as f:
            json.dump({"task": task.name, "main_metric": main, "select": cfg.select,
                       "best": _row(chosen), "runs": [_row(r) for r in runs],
                       "findings": findings}, f, indent=2)
        run_dir.finish()
    return runs, chosen


def _save_model(task: Task, model, hyper: Hyper, epoch: int, metrics: dict, raw: list,
                cfg: FinetuneConfig, model_dir, run_dir: RunDir, tokenizer, sets, train: FeatureSet) -> None:
    """Write the model of (``hyper``, ``epoch``) with its predictions and its static-INT8
    calibration inputs (training inputs, :func:`bertkit.inference.calibration.save_calibration`)
    to the run directory, as a whole (staged, then published)."""
    from bertkit.checkpoint import save_pretrained
    from bertkit.inference.calibration import save_calibration

    record = {"hyper": asdict(hyper), "epoch": epoch, "metrics": metrics,
              "max_seq_length": cfg.max_seq_length, "source_model": str(model_dir),
              "trained_head": True}  # read by modeldir.marker.trained_head
    extra = task.config_entries(metrics)
    extra["bertkit_finetune"] = {**extra["bertkit_finetune"], **record}
    staging = run_dir.staging()
    save_pretrained(model, staging, tokenizer=tokenizer, extra_config=extra)
    task.write_model_files(staging, model, cfg.max_seq_length)
    write_predictions(task, sets, raw, staging)
    save_calibration(staging, train.features)
    run_dir.publish()


def _row(r: RunResult) -> dict:
    return {**asdict(r.hyper), "epoch": r.epoch, "seconds": round(r.seconds, 1),
            "metrics": r.metrics, "history": r.history}


def _from_row(row: dict) -> RunResult:
    hyper = Hyper(**{k: row[k] for k in ("lr", "batch", "epochs", "seed")})
    return RunResult(hyper, row["metrics"], row["epoch"], row["history"], row["seconds"])


def _settings(task: Task, cfg: FinetuneConfig) -> str:
    """What a resumed run must share with the interrupted one (JSON, for comparison)."""
    skip = {"progress", "resume", "overwrite", "device", "log_every"}
    values = {k: v for k, v in asdict(cfg).items() if k not in skip}
    return json.dumps({"task": task.name, **values}, sort_keys=True, default=str)


def _count_lines(path: Path) -> int:
    if not path.is_file():
        return 0
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def _resume_state(run_dir: RunDir, task: Task, cfg: FinetuneConfig, cut_log: bool = True) -> dict:
    """The saved state of the run in ``run_dir``, checked against these settings; the log is
    cut back to the records written up to that state (``cut_log``: rank 0 only)."""
    state = run_dir.load_state()
    extra = state["extra"]
    before, now = json.loads(extra["settings"]), json.loads(_settings(task, cfg))
    changed = [f"{k} was {before.get(k)!r}, now {now.get(k)!r}" for k in now if before.get(k) != now.get(k)]
    if changed:
        raise BertkitError(f"{run_dir.out}: the run was started with other settings ("
                           f"{'; '.join(changed)}); resume with the same ones, or start over "
                           "with --overwrite")
    log = run_dir.out / "log.jsonl"
    if cut_log and log.is_file():
        with open(log, "rb") as f:
            lines = f.readlines()[: extra["log_lines"]]
        with atomic_write(log, "wb") as f:
            f.writelines(lines)
    return {"run": extra["run"], "epoch": extra["epoch"], "state": state, "history": extra["history"],
            "best_score": extra["best_score"], "runs": extra["runs"]}


def format_table(runs: Sequence[RunResult], main_metric: str) -> str:
    """The grid as a text table, one row per run, the best row marked with ``*``."""
    names = list(runs[0].metrics) if runs else []
    header = ["", "lr", "batch", "epochs", "seed", "best_ep", *names, "time_s"]
    best = max(runs, key=lambda r: _score(r.metrics, main_metric)) if runs else None
    rows = [["*" if r is best else "", f"{r.hyper.lr:g}", str(r.hyper.batch), str(r.hyper.epochs),
             str(r.hyper.seed), str(r.epoch), *(f"{r.metrics.get(n, float('nan')):.4f}" for n in names),
             f"{r.seconds:.0f}"] for r in runs]
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    return "\n".join("  ".join(x.rjust(w) for x, w in zip(line, widths)) for line in [header, *rows])
