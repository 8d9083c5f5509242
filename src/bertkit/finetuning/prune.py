"""``bertkit prune``: remove the least important attention heads of a fine-tuned model.

Contract of :func:`prune` (one :class:`PruneConfig`):

* the model directory must be fine-tuned for the task (its head trained); a directory whose
  head would be freshly initialised is a :class:`~bertkit.errors.CheckpointError`, an unfinished
  run is warned about (:func:`bertkit.modeldir.marker.check_model`);
* head importance (:func:`bertkit.model.pruning.head_importance`, Michel et al. 2019) is
  measured once, on a fixed random sample of ``importance_examples`` training examples;
* the curve: for every fraction of ``curve`` the model with that share of its heads removed
  (lowest importance first) is scored on the task's first evaluation split; the points go
  to ``out/pruning_curve.json`` and a PNG ``out/pruning_curve.png`` (metric vs fraction);
* the kept model has ``heads`` removed (a fraction in (0, 1) or a count) and, with
  ``finetune_epochs > 0``, is fine-tuned again briefly with the ordinary fine-tuning loop;
  it is saved to ``out`` as a model directory (``config.json`` ``pruned_heads``) that bertkit
  and Hugging Face load, with ``prune.json`` (importance table, heads removed, parameters
  and metrics before and after).
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

import numpy as np

from bertkit.fileio import atomic_write
from bertkit.finetuning.config import PruneConfig  # declared with the other fine-tuning jobs
from bertkit.model.pruning import (
    count_heads,
    head_importance,
    heads_to_prune,
    parse_heads,
    prune_heads,
)
from bertkit.modeldir.marker import check_model
from bertkit.options import check_config
from bertkit.tasks.base import Task

__all__ = ["PruneConfig", "plot_curve", "prune"]




def _importance_batches(task: Task, data_dir, tokenizer, cfg: PruneConfig):
    from bertkit.tasks.base import featurize
    from bertkit.training.sampler import length_batches

    examples = task.read(data_dir, "train")
    if len(examples) > cfg.importance_examples:
        keep = np.sort(np.random.default_rng(cfg.seed).permutation(len(examples))[: cfg.importance_examples])
        examples = [examples[i] for i in keep]
    feats = featurize(task, examples, tokenizer, cfg.max_seq_length, True, "train")
    return [feats.collate(idx) for idx in length_batches(feats.lengths, cfg.batch)]


def prune(task: Task, model_dir, data_dir, out_dir, cfg: PruneConfig | None = None,
          tokenizer=None, overwrite: bool = False) -> dict:
    """Measure importance, draw the curve, prune and save (see the module docstring);
    returns the ``prune.json`` record. ``out_dir`` is prepared before any work
    (:class:`~bertkit.finetuning.run_dir.RunDir`: never ``model_dir``; one that holds a model
    is refused unless ``overwrite``, then replaced as a whole) and locked until the end."""
    from bertkit.finetuning.run_dir import RunDir

    cfg = cfg or PruneConfig()
    check_config(cfg, "prune", by_flag=True)  # before any work: the declared ranges
    with RunDir(out_dir, resumable=False) as run_dir:
        run_dir.prepare(overwrite=overwrite, inputs={"MODEL_DIR": model_dir})
        return _prune(task, model_dir, data_dir, run_dir, cfg, tokenizer)


def _prune(task: Task, model_dir, data_dir, run_dir, cfg: PruneConfig, tokenizer) -> dict:
    """:func:`prune` once ``run_dir`` is prepared: the model goes in through its staging
    directory (or, fine-tuned again, through ``finetune`` into the same, still locked, ``out``)."""
    from bertkit.checkpoint import save_pretrained
    from bertkit.finetuning.config import FinetuneConfig
    from bertkit.finetuning.evaluate import evaluate_sets, load_eval_sets
    from bertkit.finetuning.loop import finetune
    from bertkit.modeldir.entry import FINETUNE_KEY, read_model_config
    from bertkit.tokenizer import BertTokenizer
    from bertkit.training.distributed import pick_device

    out_dir = run_dir.out
    tokenizer = tokenizer or BertTokenizer.from_pretrained(model_dir)
    check_model(model_dir, task, require_head=True)
    model = task.build_model(model_dir)
    total = count_heads(model)
    count = parse_heads(cfg.heads, total)
    device = pick_device(cfg.device)
    model.to(device)
    batches = [{k: v.to(device) for k, v in b.items()} for b in _importance_batches(task, data_dir, tokenizer, cfg)]
    importance = head_importance(model, batches, task.compute)
    sets = load_eval_sets(task, data_dir, tokenizer, cfg.max_seq_length)[:1]
    main = task.main_metric

    def score(m) -> dict:
        return evaluate_sets(task, m, sets, cfg.eval_batch, device, "fp32", cfg.progress)[0]

    params_before = sum(p.numel() for p in model.parameters())
    curve = []
    most = total - len(importance)  # every layer keeps one head
    # fractions that round (or clip) to the same number of heads are one point
    for removed in sorted({min(round(fraction * total), most) for fraction in cfg.curve}):
        pruned = copy.deepcopy(model)
        if removed:
            prune_heads(pruned, heads_to_prune(importance, removed))
        metrics = score(pruned)
        curve.append({"fraction": removed / total, "heads_removed": removed,
                      "parameters": sum(p.numel() for p in pruned.parameters()), main: metrics[main]})
    before = score(model)
    chosen = heads_to_prune(importance, count)
    prune_heads(model, chosen)
    after = score(model)
    entry = read_model_config(model_dir).get(FINETUNE_KEY) or {}
    extra = task.config_entries()
    extra[FINETUNE_KEY] = {**entry, **extra[FINETUNE_KEY], "max_seq_length": cfg.max_seq_length}
    out_dir.mkdir(parents=True, exist_ok=True)
    record = {"task": task.name, "model": str(model_dir), "heads_total": total,
              "heads_removed": count, "pruned_heads": model.config.extra["pruned_heads"],
              "importance": [[None if np.isnan(v) else round(float(v), 6) for v in row]
                             for row in importance.tolist()],
              "parameters_before": params_before,
              "parameters_after": sum(p.numel() for p in model.parameters()),
              "metrics_before": before, "metrics_after_pruning": after, "curve": curve,
              "config": asdict(cfg)}
    if cfg.finetune_epochs > 0:
        with tempfile.TemporaryDirectory(dir=out_dir.parent) as tmp:
            save_pretrained(model.cpu(), Path(tmp) / "pruned", tokenizer=tokenizer, extra_config=extra)
            ft = FinetuneConfig(lr=cfg.lr, batch=cfg.batch, epochs=cfg.finetune_epochs, seed=cfg.seed,
                                max_seq_length=cfg.max_seq_length, eval_batch=cfg.eval_batch,
                                device=cfg.device, progress=cfg.progress,
                                max_train_examples=cfg.max_train_examples)
            _, best = finetune(task, Path(tmp) / "pruned", data_dir, out_dir, ft, tokenizer=tokenizer)
            shutil.rmtree(Path(tmp) / "pruned", ignore_errors=True)
        record["metrics_after_finetune"] = best.metrics
    else:
        save_pretrained(model.cpu(), run_dir.staging(), tokenizer=tokenizer, extra_config=extra)
        run_dir.publish()
    with atomic_write(out_dir / "prune.json") as f:
        json.dump(record, f, indent=2)
    with atomic_write(out_dir / "pruning_curve.json") as f:
        json.dump({"task": task.name, "metric": main, "points": curve}, f, indent=2)
    plot_curve({Path(model_dir).name: curve}, main, out_dir / "pruning_curve.png", title=task.name)
    return record


def plot_curve(curves: dict[str, list[dict]], metric: str, out: str | Path, title: str = "") -> Path:
    """A PNG of ``metric`` against the fraction of heads pruned, one line per named curve."""
    from bertkit.plot import pyplot, save_figure

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, points in curves.items():
        ax.plot([p["fraction"] for p in points], [p[metric] for p in points], marker="o", label=name)
    ax.set_xlabel("fraction of attention heads pruned")
    ax.set_ylabel(metric)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return save_figure(fig, out)
