"""The downstream check of a pre-trained model: GLUE tasks x a small fixed grid, one table.

``downstream(model_dir, DownstreamConfig(...)) -> dict`` (the ``results.json`` contents)
fine-tunes ``model_dir`` on every task of ``cfg.tasks`` for every learning rate of
``cfg.lrs`` and every seed of ``cfg.seeds``, each point one call of
:func:`bertkit.finetuning.loop.finetune` (the one fine-tuning loop; nothing here trains).

Selection happens on the dev set, as the BERT paper does for GLUE: each run keeps its best
epoch by the task's main dev metric, and per task the learning rate with the best mean over
the seeds is chosen; the table reports that learning rate's mean and spread (sample
standard deviation) over the seeds. The figures are therefore dev figures after selection
on dev (optimistic by the selection, like the paper's dev tables), not test figures.

Layout of ``cfg.out``::

    <task>/lr-<lr>_seed-<seed>/   one fine-tuning run (its log.jsonl, results.json)
    random-init/seed-<seed>/      with ``random_init``: the untrained network per seed
    results.json                  every run's dev score, the chosen rows, the average
    downstream.png                bar chart of the chosen rows (mean, spread over seeds)

A run whose ``results.json`` exists is finished and is skipped on a restart (an unfinished
run's folder is cleared and run again). Fine-tuned weights are deleted once a run is scored
unless ``keep_models``: 45 runs of BERT-base would fill a disk.

``random_init`` fine-tunes the same architecture (``model_dir``'s ``config.json`` and
vocabulary) from random weights: the "no pre-training" row; each seed draws its own
initialisation. Errors (:class:`~bertkit.errors.BertkitError`, before any training): an
unknown or non-GLUE task name, a task folder or split file missing under ``cfg.data``, a
model directory without a vocabulary, an empty grid.
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bertkit.errors import BertkitError, CheckpointError
from bertkit.fileio import atomic_write
from bertkit.finetuning.config import FinetuneConfig
from bertkit.options import check_config, option, option_of

__all__ = ["DEFAULT_TASKS", "DownstreamConfig", "downstream", "format_comparison", "format_results",
           "load_results", "plot_comparison", "plot_results"]

DEFAULT_TASKS = ("sst2", "mrpc", "stsb", "rte", "cola")
GLUE_TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")
RESULTS_FILE, CHART_FILE = "results.json", "downstream.png"


@dataclass
class DownstreamConfig:
    """Settings of ``bertkit downstream`` (each field declares its flag); the fine-tuning
    settings every run shares are :class:`~bertkit.finetuning.config.FinetuneConfig`'s
    declarations (``batch_size`` is its ``batch``, flag ``--batch-size``)."""

    out: str = option("downstream", "output folder: runs, results.json, chart")
    tasks: tuple[str, ...] = option(DEFAULT_TASKS, "GLUE tasks, comma-separated")
    data: str = option("../shared/data/glue",
                       "GLUE root holding the task folders (SST-2, MRPC, STS-B, RTE, CoLA, ...)")
    lrs: tuple[float, ...] = option(
        (3e-4, 1e-4, 5e-5), "learning rates of the grid (Google's small-BERT grid: 3e-4, 1e-4, "
        "5e-5, 3e-5)", gt=0)
    seeds: tuple[int, ...] = option((1, 2, 3), "seeds of the grid")
    epochs: int = option_of(FinetuneConfig, "epochs")
    batch_size: int = option_of(FinetuneConfig, "batch")
    max_seq_length: int = option_of(FinetuneConfig, "max_seq_length")
    max_train_examples: int | None = option_of(FinetuneConfig, "max_train_examples")
    precision: str = option_of(FinetuneConfig, "precision")
    device: str = option_of(FinetuneConfig, "device")
    random_init: bool = option(False, "fine-tune the same architecture from random weights "
                                      "(no pre-training)")
    keep_models: bool = option(False, "keep every run's fine-tuned weights (default: delete once "
                                      "scored)")
    progress: bool | None = option(None, "progress bars (default: on a terminal)")

    def validate(self) -> DownstreamConfig:
        """The config, once every value is in its declared range, the grid is not empty and
        the device exists."""
        if not self.tasks:
            raise BertkitError("no task given (--tasks sst2,mrpc,...)")
        if not self.lrs or not self.seeds:
            raise BertkitError("the grid needs at least one learning rate and one seed")
        check_config(self, "downstream")
        from bertkit.training.distributed import pick_device

        pick_device(self.device)  # an unknown device, or cuda without CUDA: before any run
        return self


# ------------------------------------------------------------------ checks
def check_tasks(names, data: str | Path) -> list[str]:
    """Canonical GLUE task names, each with its train and dev file under ``data``."""
    from bertkit.tasks import canonical_name
    from bertkit.tasks.formats import find_glue_file, get_glue_task

    tasks = []
    for name in names:  # every name first, then the files
        try:
            key = canonical_name(name.strip())
        except BertkitError:
            key = None
        if key not in GLUE_TASKS:
            raise BertkitError(f"unknown task {name!r} for downstream; known: {', '.join(GLUE_TASKS)}")
        tasks.append(key)
    for key in tasks:
        spec = get_glue_task(key)
        for split in ("train", "dev"):
            try:
                find_glue_file(spec, data, split)
            except FileNotFoundError:
                raise BertkitError(
                    f"{Path(data) / spec.directory}: no {key} {split} file "
                    f"({' or '.join(spec.files[split])}); is --data the GLUE root?") from None
    return tasks


def check_starting_model(model_dir: str | Path, random_init: bool):
    """The starting (pre-trained) model's tokenizer; the directory must hold a config, a vocabulary and (unless
    ``random_init``) weights."""
    from bertkit.checkpoint import is_model_dir, load_config, load_tokenizer

    config = load_config(model_dir)  # names a missing directory or config.json
    if not random_init and not is_model_dir(model_dir):
        raise CheckpointError(f"{model_dir}: no model weights (model.safetensors); "
                              "pass --random-init to fine-tune the architecture untrained")
    try:
        tokenizer = load_tokenizer(model_dir)
    except CheckpointError:
        raise CheckpointError(f"{model_dir}: the model has no vocabulary (vocab.txt or "
                              "tokenizer.json): downstream fine-tuning needs the one it was "
                              "pre-trained with") from None
    if len(tokenizer) != config.vocab_size:
        raise CheckpointError(f"{model_dir}: the vocabulary has {len(tokenizer)} tokens but the "
                              f"model's vocab_size is {config.vocab_size}")
    return tokenizer


# ------------------------------------------------------------------ runs
def random_model_dir(model_dir: str | Path, out: Path, seed: int, tokenizer) -> Path:
    """``out/random-init/seed-<seed>``: ``model_dir``'s architecture, weights drawn with ``seed``."""
    import torch

    from bertkit.checkpoint import is_model_dir, load_config, save_pretrained
    from bertkit.model import BertModel

    target = out / "random-init" / f"seed-{seed}"
    if is_model_dir(target):
        return target
    config = load_config(model_dir)
    torch.manual_seed(seed)
    save_pretrained(BertModel(config), target, tokenizer=tokenizer,
                    extra_config={"bertkit_random_init": {"source": str(model_dir), "seed": seed}})
    return target


def run_dir(out: Path, task: str, lr: float, seed: int) -> Path:
    return out / task / f"lr-{lr:g}_seed-{seed}"


def _finished(path: Path) -> dict | None:
    try:
        return json.loads((path / RESULTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _one_run(task_name: str, source: Path, path: Path, lr: float, seed: int,
             cfg: DownstreamConfig, tokenizer) -> dict:
    """One grid point through :func:`~bertkit.finetuning.loop.finetune`; its results.json."""
    from bertkit.finetuning.config import FinetuneConfig
    from bertkit.finetuning.loop import finetune
    from bertkit.runlog import RunLogger
    from bertkit.tasks import get_task

    if path.exists():
        shutil.rmtree(path)  # an unfinished run: start it again from a clean folder
    ft = FinetuneConfig(lr=lr, batch=cfg.batch_size, epochs=cfg.epochs, seed=seed,
                        max_seq_length=cfg.max_seq_length, device=cfg.device,
                        precision=cfg.precision, progress=cfg.progress,
                        max_train_examples=cfg.max_train_examples)
    path.mkdir(parents=True)
    finetune(get_task(task_name), source, cfg.data, path, ft, tokenizer=tokenizer,
             logger=RunLogger(path / "log.jsonl", echo=False))
    if not cfg.keep_models:
        for name in ("model.safetensors", "pytorch_model.bin"):
            (path / name).unlink(missing_ok=True)
    return _finished(path)


def _spread(scores: list[float]) -> float:
    """Sample standard deviation; NaN when a score is NaN (a correlation of constant
    predictions), where :func:`statistics.stdev` raises instead."""
    if len(scores) < 2:
        return 0.0
    return math.nan if any(math.isnan(x) for x in scores) else statistics.stdev(scores)


def _summary(task_name: str, runs: dict[float, dict[int, dict]]) -> dict[str, Any]:
    """Per learning rate the seeds' dev scores; the chosen rate (best mean) and its spread."""
    from bertkit.tasks.formats import get_glue_task

    metric = get_glue_task(task_name).main_metric
    grid = {lr: {seed: r["best"]["metrics"][metric] for seed, r in seeds.items()}
            for lr, seeds in runs.items()}
    means = {lr: statistics.fmean(s.values()) for lr, s in grid.items()}
    chosen = max(means, key=lambda lr: -math.inf if math.isnan(means[lr]) else means[lr])
    scores = list(grid[chosen].values())
    seconds = {lr: sum(r["best"]["seconds"] for r in seeds.values()) for lr, seeds in runs.items()}
    return {"metric": metric, "lr": chosen, "mean": means[chosen],
            "std": _spread(scores),
            "scores": scores, "seconds": sum(seconds.values()), "chosen_seconds": seconds[chosen],
            "grid": {f"{lr:g}": {str(s): v for s, v in g.items()} for lr, g in grid.items()}}


def downstream(model_dir: str | Path, cfg: DownstreamConfig, echo=print) -> dict[str, Any]:
    """Run (or finish) the grid on every task; write and return ``results.json``'s contents."""
    cfg.validate()
    tasks = check_tasks(cfg.tasks, cfg.data)
    tokenizer = check_starting_model(model_dir, cfg.random_init)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    total = len(tasks) * len(cfg.lrs) * len(cfg.seeds)
    summaries, n = {}, 0
    for task_name in tasks:
        runs: dict[float, dict[int, dict]] = {}
        for lr in cfg.lrs:
            for seed in cfg.seeds:
                n += 1
                path = run_dir(out, task_name, lr, seed)
                result = _finished(path)
                label = f"[{n}/{total}] {task_name} lr={lr:g} seed={seed}"
                if result is None:
                    started = time.perf_counter()
                    source = (random_model_dir(model_dir, out, seed, tokenizer)
                              if cfg.random_init else Path(model_dir))
                    result = _one_run(task_name, source, path, lr, seed, cfg, tokenizer)
                    status = f"{time.perf_counter() - started:.0f} s"
                else:
                    status = "done before: skipped"
                metric = result["main_metric"]
                echo(f"{label}: {metric}={result['best']['metrics'][metric]:.4f} ({status})")
                runs.setdefault(lr, {})[seed] = result
        summaries[task_name] = _summary(task_name, runs)
    results = {"model": str(model_dir), "random_init": cfg.random_init,
               "selection": "dev: best epoch per run, then the learning rate with the best mean over seeds",
               "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(cfg).items()},
               "tasks": summaries,
               "average": statistics.fmean(s["mean"] for s in summaries.values())}
    with atomic_write(out / RESULTS_FILE) as f:
        json.dump(results, f, indent=2)
    plot_results(results, out / CHART_FILE)
    return results


# ------------------------------------------------------------------ reporting
def format_results(results: dict[str, Any]) -> str:
    """One row per task (scores x 100): metric, mean, spread over seeds, chosen lr, time."""
    header = ["task", "metric", "mean", "std", "seeds", "lr", "time_s"]
    rows = [[task, s["metric"], f"{100 * s['mean']:.1f}", f"{100 * s['std']:.1f}",
             str(len(s["scores"])), f"{s['lr']:g}", f"{s['seconds']:.0f}"]
            for task, s in results["tasks"].items()]
    rows.append(["average", "", f"{100 * results['average']:.1f}", "", "", "",
                 f"{sum(s['seconds'] for s in results['tasks'].values()):.0f}"])
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    return "\n".join("  ".join(x.ljust(w) if i < 2 else x.rjust(w) for i, (x, w) in
                               enumerate(zip(line, widths))) for line in [header, *rows])


def plot_results(results: dict[str, Any], path: str | Path) -> Path:
    """Bar chart of every task's chosen mean (x 100) with its spread over seeds."""
    from bertkit.plot import pyplot, save_figure

    plt = pyplot()

    names = list(results["tasks"])
    means = [100 * results["tasks"][t]["mean"] for t in names]
    stds = [100 * results["tasks"][t]["std"] for t in names]
    labels = [f"{t}\n({results['tasks'][t]['metric']})" for t in names] + ["average"]
    fig, ax = plt.subplots(figsize=(1.4 * len(labels) + 2, 4))
    ax.bar(range(len(labels)), means + [100 * results["average"]], yerr=stds + [0], capsize=4,
           color=["tab:blue"] * len(names) + ["tab:gray"])
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylabel("dev score x 100")
    ax.axhline(0, color="black", linewidth=0.5)
    title = Path(results["model"]).name + (" (random init)" if results["random_init"] else "")
    ax.set_title(f"downstream: {title}")
    fig.tight_layout()
    return save_figure(fig, path)


# ------------------------------------------------------------------ comparing models
def load_results(out: str | Path) -> dict[str, Any]:
    """The ``results.json`` of a finished ``downstream`` run folder (or the file itself)."""
    path = Path(out)
    path = path / RESULTS_FILE if path.is_dir() else path
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise BertkitError(f"{path}: cannot read downstream results ({e.strerror}); run "
                           "`bertkit downstream` to the end first") from None
    except ValueError as e:
        raise BertkitError(f"{path}: not a downstream results file ({e})") from None
    if not isinstance(results, dict) or not isinstance(results.get("tasks"), dict):
        raise BertkitError(f"{path}: not a downstream results file (no 'tasks')")
    return results


def common_tasks(rows: dict[str, dict[str, Any]]) -> tuple[list[str], str | None]:
    """The tasks every row has (in the first row's order) and, when some row has tasks the
    others lack, a note naming each left-out task and the rows it is missing from. No task in
    common is a BertkitError."""
    tasks = [t for t in next(iter(rows.values()))["tasks"]
             if all(t in r["tasks"] for r in rows.values())]
    every = list(dict.fromkeys(t for r in rows.values() for t in r["tasks"]))
    left = [f"{t} (missing from {', '.join(n for n, r in rows.items() if t not in r['tasks'])})"
            for t in every if t not in tasks]
    if not tasks:
        raise BertkitError(f"the folders have no task in common ({'; '.join(left)}): nothing to "
                           "compare")
    note = (f"left out: {'; '.join(left)}; every average is over the {len(tasks)} task(s) all rows "
            f"have ({', '.join(tasks)}), so it can differ from a folder's own results.json") if left else None
    return tasks, note


def format_comparison(rows: dict[str, dict[str, Any]], baseline: str | None = None) -> str:
    """The paper's Table 5 layout: one row per model (name -> results), one column per task
    (the chosen mean x 100, +- the spread over seeds), the average over the tasks every row
    has, and with ``baseline`` (a row name) each average's difference from that row; tasks
    not common to every row are named in a last ``note:`` line (:func:`common_tasks`)."""
    if baseline is not None and baseline not in rows:
        raise BertkitError(f"--baseline {baseline!r} is not one of the rows: {', '.join(rows)}")
    tasks, note = common_tasks(rows)
    metric = {t: next(iter(rows.values()))["tasks"][t]["metric"] for t in tasks}

    def average(r):
        return 100 * statistics.fmean(r["tasks"][t]["mean"] for t in tasks)

    header = ["model", *(f"{t} ({metric[t]})" for t in tasks), "average"]
    if baseline is not None:
        header.append(f"vs {baseline}")
    lines = []
    for name, r in rows.items():
        cells = [name, *(f"{100 * r['tasks'][t]['mean']:.1f} ± {100 * r['tasks'][t]['std']:.1f}"
                         for t in tasks), f"{average(r):.1f}"]
        if baseline is not None:
            cells.append(f"{average(r) - average(rows[baseline]):+.1f}")
        lines.append(cells)
    widths = [max(len(x) for x in col) for col in zip(header, *lines)]
    table = "\n".join("  ".join(x.ljust(w) if i == 0 else x.rjust(w)
                                for i, (x, w) in enumerate(zip(line, widths)))
                      for line in [header, *lines])
    return f"{table}\nnote: {note}" if note else table


def plot_comparison(rows: dict[str, dict[str, Any]], path: str | Path) -> Path:
    """Grouped bar chart: per task (and the average), one bar per model with its spread."""
    import numpy as np

    from bertkit.plot import pyplot, save_figure

    plt = pyplot()
    tasks, _ = common_tasks(rows)
    x = np.arange(len(tasks) + 1)
    width = 0.8 / len(rows)
    fig, ax = plt.subplots(figsize=(1.6 * len(x) + 2, 4.5))
    for i, (name, r) in enumerate(rows.items()):
        means = [100 * r["tasks"][t]["mean"] for t in tasks]
        stds = [100 * r["tasks"][t]["std"] for t in tasks]
        ax.bar(x + (i - (len(rows) - 1) / 2) * width, means + [statistics.fmean(means)],
               width, yerr=stds + [0], capsize=3, label=name)
    ax.set_xticks(x, [*tasks, "average"])
    ax.set_ylabel("dev score x 100")
    ax.axhline(0, color="black", linewidth=0.5)
    ax.legend(fontsize="small")
    ax.set_title("downstream: " + " vs ".join(rows))
    fig.tight_layout()
    return save_figure(fig, path)
