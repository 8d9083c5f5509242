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
  names, task name and options, hyper-parameters, dev metrics) along with
  ``predictions_<split>.jsonl``; ``out_dir/results.json`` holds the table.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from bertkit.errors import BertkitError, CheckpointError
from bertkit.fileio import atomic_write
from bertkit.runlog import RunLogger, bar_disabled
from bertkit.tasks.base import FeatureSet, Task
from bertkit.tasks.run_dir import RunDir
from bertkit.training import (
    TrainStep,
    autocast,
    build_optimizer,
    linear_warmup_decay,
    resolve_precision,
)
from bertkit.training.cpu import bound_onednn_cache
from bertkit.training.distributed import pick_device

__all__ = [
    "PAPER_GRID",
    "EvalSet",
    "FinetuneConfig",
    "Hyper",
    "RunResult",
    "evaluate_sets",
    "finetune",
    "format_table",
    "grid_points",
    "length_batches",
    "load_eval_sets",
    "parse_grid",
    "run_model",
]

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
class FinetuneConfig:
    """Everything but the task and the paths. ``grid``: key -> values for lr/batch/epochs/seed
    (missing keys take the single values); ``None`` runs the single point. ``warmup`` is the
    warm-up fraction of all updates. ``progress``: None = bars only on a terminal."""

    lr: float = 2e-5
    batch: int = 32
    epochs: int = 3
    seed: int = 42
    grid: dict[str, Sequence] | None = None
    max_seq_length: int = 128
    warmup: float = 0.1
    weight_decay: float = 0.01
    dropout: float = 0.1
    max_grad_norm: float = 1.0
    eval_batch: int = 64
    device: str = "auto"
    precision: str = "auto"
    log_every: int = 100
    progress: bool | None = None
    select: str = "best"
    max_train_examples: int | None = None
    bucket: int = 50
    resume: bool = False  # go on after the last finished epoch of the run in out_dir
    overwrite: bool = False  # replace a finished (or unfinished) run in out_dir


@dataclass
class EvalSet:
    """An evaluation split: its examples and their features."""

    split: str
    examples: list
    features: FeatureSet


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
    return grid


def grid_points(cfg: FinetuneConfig) -> list[Hyper]:
    """Every combination of the grid (single values fill missing keys), in grid order."""
    grid = cfg.grid or {}
    axes = [list(grid.get(k, [getattr(cfg, k)])) for k in ("lr", "batch", "epochs", "seed")]
    return [Hyper(float(lr), int(b), int(e), int(s)) for lr, b, e, s in itertools.product(*axes)]


# ------------------------------------------------------------------ batching
def length_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator | None = None,
                   bucket: int = 50) -> list[np.ndarray]:
    """Index batches over ``lengths``. Without ``rng``: sorted by length (evaluation).
    With ``rng``: shuffled, then each chunk of ``bucket`` batches sorted by length and cut
    into batches, and the batch order shuffled (training: random yet little padding)."""
    n = len(lengths)
    if rng is None:
        order = np.argsort(lengths, kind="stable")
        return [order[i: i + batch_size] for i in range(0, n, batch_size)]
    order = rng.permutation(n)
    chunk = batch_size * max(1, bucket)
    batches = []
    for start in range(0, n, chunk):
        part = order[start: start + chunk]
        part = part[np.argsort(lengths[part], kind="stable")]
        batches.extend(part[i: i + batch_size] for i in range(0, len(part), batch_size))
    return [batches[i] for i in rng.permutation(len(batches))]


def _to(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def run_model(task: Task, model, features: FeatureSet, batch_size: int,
              device: torch.device | str = "cpu", precision: str = "fp32",
              progress: bool | None = None, desc: str = "eval") -> dict[str, list[np.ndarray]]:
    """The model's ``task.output_names`` for every feature, in feature order (eval mode, no
    gradients, length-sorted batches); rows of token outputs cut to the feature's length."""
    device = torch.device(device)
    model.eval()
    outputs: dict[str, list] = {name: [None] * len(features) for name in task.output_names}
    batches = length_batches(features.lengths, batch_size)
    with torch.inference_mode():
        for idx in tqdm(batches, desc=desc, disable=_bar_off(progress), leave=False):
            with autocast(device, precision):
                out = task.compute(model, _to(features.collate(idx), device))
            for name in task.output_names:
                values = getattr(out, name).float().cpu().numpy()
                for row, i in zip(values, idx):
                    outputs[name][i] = row[: features.lengths[i]] if task.token_outputs else row
    return outputs


def _bar_off(progress: bool | None) -> bool | None:
    return bar_disabled(progress)


# ------------------------------------------------------------------ evaluation
def load_eval_sets(task: Task, data_dir, tokenizer, max_seq_length: int,
                   splits: Sequence[str] | None = None, logger: RunLogger | None = None) -> list[EvalSet]:
    """Read and featurize the evaluation splits (default: ``task.eval_splits()``)."""
    sets = []
    for split in splits or task.eval_splits():
        examples = task.read(data_dir, split)
        sets.append(EvalSet(split, examples, featurize(task, examples, tokenizer, max_seq_length,
                                                       False, split, logger)))
    return sets


def featurize(task: Task, examples, tokenizer, max_seq_length: int, train: bool, split: str,
              logger: RunLogger | None = None) -> FeatureSet:
    """``task.featurize`` plus the truncation warning (and a log record)."""
    if not examples:
        raise BertkitError(f"{task.name}: the {split} split has no examples")
    feats = task.featurize(examples, tokenizer, max_seq_length, train=train)
    if feats.num_truncated:
        share = feats.num_truncated / max(1, feats.num_examples)
        message = (f"{split}: {feats.num_truncated} of {feats.num_examples} examples "
                   f"({share:.1%}) were truncated to max_seq_length={max_seq_length}")
        warnings.warn(message, stacklevel=2)
        if logger:
            logger.log(event="truncation", split=split, truncated=feats.num_truncated,
                       examples=feats.num_examples, max_seq_length=max_seq_length)
    return feats


def evaluate_sets(task: Task, model, sets: Sequence[EvalSet], batch_size: int,
                  device="cpu", precision="fp32", progress: bool | None = None
                  ) -> tuple[dict[str, float], list[dict]]:
    """Metrics over every eval set, flat: the first set's names as they are, the others
    prefixed ``<split>.``; plus each set's raw outputs (for predictions)."""
    metrics: dict[str, float] = {}
    raw = []
    for k, s in enumerate(sets):
        outputs = run_model(task, model, s.features, batch_size, device, precision, progress,
                            desc=f"eval {s.split}")
        scores = task.evaluate(s.examples, s.features, outputs)
        metrics.update({(name if k == 0 else f"{s.split}.{name}"): float(v) for name, v in scores.items()})
        raw.append(outputs)
    return metrics, raw


def write_predictions(task: Task, sets: Sequence[EvalSet], raw: Sequence[dict], out_dir: Path) -> None:
    """``out_dir/predictions_<split>.jsonl`` for every eval set."""
    for s, outputs in zip(sets, raw):
        with atomic_write(out_dir / f"predictions_{s.split}.jsonl") as f:
            for record in task.predict(s.examples, s.features, outputs):
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        writer = getattr(task, "write_outputs", None)  # task-specific files (SQuAD's JSONs)
        if writer is not None:
            writer(out_dir, s.split, s.examples, s.features, outputs)


def _score(metrics: dict[str, float], name: str) -> float:
    value = metrics.get(name, float("nan"))
    return -math.inf if value is None or math.isnan(value) else value


# ------------------------------------------------------------------ training
def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def train_one(task: Task, model_dir, train: FeatureSet, sets: Sequence[EvalSet], hyper: Hyper,
              cfg: FinetuneConfig, logger: RunLogger,
              on_epoch: Callable[[Any, int, dict, list], None],
              resume: dict | None = None,
              on_epoch_end: Callable[[dict], None] | None = None) -> RunResult:
    """Fine-tune one grid point from ``model_dir``; ``on_epoch(model, epoch, metrics, raw)``
    is called after every epoch's evaluation (the caller keeps the best model).

    ``on_epoch_end(state)`` then receives the training state after that epoch (model,
    optimizer, scheduler, RNG, step, history); passing such a ``resume`` state goes on from
    it, to the same weights an uninterrupted run reaches."""
    started = time.perf_counter()
    device = pick_device(cfg.device)
    precision = resolve_precision(cfg.precision, device)
    seed_everything(hyper.seed)
    dropout = {"hidden_dropout_prob": cfg.dropout, "attention_probs_dropout_prob": cfg.dropout}
    model = task.build_model(model_dir, config_overrides=dropout).to(device)
    steps_per_epoch = math.ceil(len(train) / hyper.batch)
    total = steps_per_epoch * hyper.epochs
    # torch's fused AdamW is ~10x slower than foreach on the CPU: fused only on a GPU
    optimizer = build_optimizer(model, hyper.lr, cfg.weight_decay,
                                implementation="auto" if device.type == "cuda" else "foreach")
    scheduler = linear_warmup_decay(optimizer, int(cfg.warmup * total), total)
    step_fn = TrainStep(model, optimizer, scheduler, device=device, precision=precision,
                        max_grad_norm=cfg.max_grad_norm)
    run = asdict(hyper)
    history, step, first_epoch = [], 0, 1
    if resume is not None:
        from bertkit.training.checkpoint import restore_training_state

        restore_training_state(resume, model=model, optimizer=optimizer, scheduler=scheduler,
                               scaler=step_fn.scaler, source="fine-tuning resume state")
        history, step = list(resume["extra"]["history"]), int(resume["step"])
        first_epoch = int(resume["extra"]["epoch"]) + 1
    for epoch in range(first_epoch, hyper.epochs + 1):
        model.train()
        rng = np.random.default_rng([hyper.seed, epoch])
        loss_sum, loss_n = torch.zeros((), dtype=torch.float64), 0
        bar = tqdm(length_batches(train.lengths, hyper.batch, rng, cfg.bucket),
                   desc=f"epoch {epoch}/{hyper.epochs}", disable=_bar_off(cfg.progress), leave=False)
        for idx in bar:
            result = step_fn([_to(train.collate(idx), device)], task.compute)
            loss_sum += result.outputs[0].loss.detach().double().cpu()
            loss_n += 1
            step += 1
            if step % cfg.log_every == 0 or step == total:
                logger.log(event="train", **run, epoch=epoch, step=step, steps=total,
                           loss=float(loss_sum) / loss_n, lr_now=result.lr)
                loss_sum.zero_()
                loss_n = 0
        metrics, raw = evaluate_sets(task, model, sets, cfg.eval_batch, device, precision, cfg.progress)
        history.append(metrics)
        logger.log(event="eval", **run, epoch=epoch, **metrics)
        on_epoch(model, epoch, metrics, raw)
        if on_epoch_end is not None:
            from bertkit.training.checkpoint import capture_training_state

            on_epoch_end(capture_training_state(
                model=model, optimizer=optimizer, scheduler=scheduler, scaler=step_fn.scaler,
                step=step, data_position={}, config={},
                extra={"epoch": epoch, "history": history}))
    main = task.main_metric
    chosen = (max(range(len(history)), key=lambda i: _score(history[i], main))
              if cfg.select == "best" else len(history) - 1)
    return RunResult(hyper, history[chosen], chosen + 1, history, time.perf_counter() - started)


def check_hyper(cfg: FinetuneConfig) -> None:
    """Every grid point's values in range, before any data is read (a zero batch size used to
    fail deep in the schedule, a zero eval batch size only after the first epoch)."""
    for hyper in grid_points(cfg):
        for name, value, low in (("--batch-size", hyper.batch, 1), ("--epochs", hyper.epochs, 1)):
            if value < low:
                raise BertkitError(f"{name} must be at least {low}, got {value}")
        if not hyper.lr > 0:
            raise BertkitError(f"--lr must be positive, got {hyper.lr:g}")
    if cfg.eval_batch < 1:
        raise BertkitError(f"--eval-batch-size must be at least 1, got {cfg.eval_batch}")
    if not 0 <= cfg.warmup <= 1:
        raise BertkitError(f"--warmup is the warm-up share of the updates: it must lie in [0, 1], "
                           f"got {cfg.warmup:g}")


def finetune(task: Task, model_dir, data_dir, out_dir, cfg: FinetuneConfig | None = None,
             tokenizer=None, logger: RunLogger | None = None) -> tuple[list[RunResult], RunResult]:
    """Run the grid (see the module docstring); returns every run and the best one."""
    from bertkit.checkpoint import load_config, save_pretrained
    from bertkit.tokenizer import BertTokenizer

    bound_onednn_cache()  # batches of varying length: a new matrix shape nearly every step
    cfg = cfg or FinetuneConfig()
    if cfg.select not in ("best", "last"):
        raise BertkitError(f"select must be 'best' or 'last', got {cfg.select!r}")
    check_hyper(cfg)
    out_dir = Path(out_dir)
    run_dir = RunDir(out_dir)
    run_dir.prepare(resume=cfg.resume, overwrite=cfg.overwrite)
    saved = _resume_state(run_dir, task, cfg) if cfg.resume else None
    logger = logger or RunLogger(out_dir / "log.jsonl")
    tokenizer = tokenizer or BertTokenizer.from_pretrained(model_dir)
    model_config = load_config(model_dir)
    vocab_size = model_config.vocab_size
    if cfg.max_seq_length > model_config.max_position_embeddings:
        raise BertkitError(f"--max-seq-length {cfg.max_seq_length} exceeds the "
                           f"{model_config.max_position_embeddings} positions of {model_dir}; "
                           f"use at most {model_config.max_position_embeddings}")
    if cfg.max_train_examples is not None and cfg.max_train_examples < 1:
        raise BertkitError(f"--max-train-examples must be at least 1, got {cfg.max_train_examples} "
                           "(leave it out to train on every example)")
    if len(tokenizer) != vocab_size:
        raise CheckpointError(f"{model_dir}: the vocabulary has {len(tokenizer)} tokens but the "
                              f"model's vocab_size is {vocab_size}; use the model's own vocabulary")
    examples = task.read(data_dir, "train")
    if cfg.max_train_examples and len(examples) > cfg.max_train_examples:
        keep = np.sort(np.random.default_rng(0).permutation(len(examples))[: cfg.max_train_examples])
        examples = [examples[i] for i in keep]
    train = featurize(task, examples, tokenizer, cfg.max_seq_length, True, "train", logger)
    sets = load_eval_sets(task, data_dir, tokenizer, cfg.max_seq_length, logger=logger)
    points = grid_points(cfg)
    if saved is None:
        logger.log(event="start", task=task.name, model=str(model_dir), train_examples=len(examples),
               train_features=len(train), **{f"{s.split}_examples": len(s.examples) for s in sets},
               grid_points=len(points), max_seq_length=cfg.max_seq_length)
    best: dict[str, Any] = {"score": -math.inf}
    main = task.main_metric
    runs: list[RunResult] = []
    if saved is not None:
        best.update(saved["best"])
        runs = [_from_row(row) for row in saved["runs"]]
        logger.log(event="resume", run=saved["run"], epoch=saved["epoch"])

    def keep_if_best(model, hyper: Hyper, epoch: int, metrics: dict, raw: list, final: bool) -> None:
        score = _score(metrics, main)
        if (cfg.select == "last" and not final) or score <= best["score"]:
            return
        best.update(score=score, hyper=hyper, epoch=epoch)
        record = {"hyper": asdict(hyper), "epoch": epoch, "metrics": metrics,
                  "max_seq_length": cfg.max_seq_length, "source_model": str(model_dir)}
        extra = task.config_entries()
        extra["bertkit_finetune"] = {**extra["bertkit_finetune"], **record}
        staging = run_dir.staging()  # the whole model directory, then swapped in
        save_pretrained(model, staging, tokenizer=tokenizer, extra_config=extra)
        write_predictions(task, sets, raw, staging)
        run_dir.publish()

    def save_state(n: int, hyper: Hyper, state: dict) -> None:
        epoch = state["extra"]["epoch"]
        state["extra"].update(run=n, settings=_settings(task, cfg), runs=[_row(r) for r in runs],
                              best={k: (asdict(v) if isinstance(v, Hyper) else v)
                                    for k, v in best.items()},
                              log_lines=_count_lines(out_dir / "log.jsonl"))
        run_dir.save_state(state)
        run_dir.mark_unfinished(task=task.name, run=n, runs=len(points), epochs_done=epoch,
                                epochs=hyper.epochs)

    run_dir.mark_unfinished(task=task.name, run=saved["run"] if saved else 1, runs=len(points),
                            epochs_done=saved["epoch"] if saved else 0, epochs=points[0].epochs)
    for n, hyper in enumerate(points, 1):
        if saved is not None and n < saved["run"]:
            continue  # finished before the interruption: its result came back with the state
        resume = saved["state"] if saved is not None and n == saved["run"] else None
        if resume is None:
            logger.log(event="run_start", run=n, runs=len(points), **asdict(hyper))
        result = train_one(task, model_dir, train, sets, hyper, cfg, logger,
                           lambda m, e, met, raw, h=hyper: keep_if_best(m, h, e, met, raw, e == h.epochs),
                           resume=resume,
                           on_epoch_end=lambda state, n=n, h=hyper: save_state(n, h, state))
        if n == 1 and getattr(task, "load_notes", None):
            logger.log(event="model_notes", notes=task.load_notes)
        runs.append(result)
        logger.log(event="run", run=n, **asdict(hyper), best_epoch=result.epoch,
                   seconds=round(result.seconds, 1), **result.metrics)
    chosen = max(runs, key=lambda r: _score(r.metrics, main))
    logger.log(event="best", **asdict(chosen.hyper), epoch=chosen.epoch, out=str(out_dir), **chosen.metrics)
    with atomic_write(out_dir / "results.json") as f:
        json.dump({"task": task.name, "main_metric": main, "select": cfg.select,
                   "best": _row(chosen), "runs": [_row(r) for r in runs]}, f, indent=2)
    run_dir.finish()
    return runs, chosen


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


def _resume_state(run_dir: RunDir, task: Task, cfg: FinetuneConfig) -> dict:
    """The saved state of the run in ``run_dir``, checked against these settings; the log is
    cut back to the records written up to that state."""
    state = run_dir.load_state()
    extra = state["extra"]
    before, now = json.loads(extra["settings"]), json.loads(_settings(task, cfg))
    changed = [f"{k} was {before.get(k)!r}, now {now.get(k)!r}" for k in now if before.get(k) != now.get(k)]
    if changed:
        raise BertkitError(f"{run_dir.out}: the run was started with other settings ("
                           f"{'; '.join(changed)}); resume with the same ones, or start over "
                           "with --overwrite")
    log = run_dir.out / "log.jsonl"
    if log.is_file():
        with open(log, "rb") as f:
            lines = f.readlines()[: extra["log_lines"]]
        with atomic_write(log, "wb") as f:
            f.writelines(lines)
    best = dict(extra["best"])
    if isinstance(best.get("hyper"), dict):
        best["hyper"] = Hyper(**best["hyper"])
    return {"run": extra["run"], "epoch": extra["epoch"], "state": state, "best": best,
            "runs": extra["runs"]}


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
