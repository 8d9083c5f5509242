"""Training curves from a run's ``log.jsonl`` to a PNG (matplotlib, Agg backend).

Contract: ``plot_run(run_dir_or_log, out=None) -> Path`` draws one panel per group that the
log has data for (:func:`curves`) against the step and writes ``RUN_DIR/curves.png`` (or
``out``). A pre-training log gives losses (train and eval), accuracies (train and eval), the
learning rate and tokens/s; a fine-tuning (or distillation) log gives the training loss, the
learning rate of the schedule (``lr_now``; its ``lr`` is the grid point's peak) and the dev
metrics of each epoch, one line per grid point when there are several.
``plot_runs(runs, out, metrics=None) -> Path`` compares runs: one panel per metric (every
loss and accuracy any of the runs logged, or ``metrics``), one line per run.
Points that are NaN or infinite are left out; a metric that is NaN or infinite at every
logged step (a diverged run) is a BertkitError, not an empty panel.
"""

from __future__ import annotations

import math
from pathlib import Path

from bertkit.errors import BertkitError
from bertkit.fileio import atomic_path, check_writable
from bertkit.runlog import read_log

PANELS = {
    "loss": ("loss", "mlm_loss", "nsp_loss", "eval_mlm_loss", "eval_nsp_loss"),
    "accuracy": ("mlm_acc", "nsp_acc", "eval_mlm_acc", "eval_nsp_acc"),
    "learning rate": ("lr",),
    "tokens/s": ("tokens_per_s",),
}


FINETUNE_RUN = ("lr", "batch", "epochs", "seed")  # a fine-tuning grid point's fields
_NOT_METRICS = {"event", "step", "steps", "epoch", "lr_now", "loss", *FINETUNE_RUN}


def _records(run: Path) -> tuple[Path, list[dict]]:
    log = run if run.is_file() else run / "log.jsonl"
    if not log.is_file():
        raise FileNotFoundError(f"{log}: no such log (is {run} a run directory?)")
    records = read_log(log)
    _step_fine_tuning_evals(records)
    return log, [r for r in records if "step" in r]


def _step_fine_tuning_evals(records: list[dict]) -> None:
    """Give the ``eval`` records of a fine-tuning log written before they carried the step
    one: the end of their epoch, from the grid point's step count (``steps`` of its train
    records over its ``epochs``)."""
    totals = {tuple(r.get(k) for k in FINETUNE_RUN): r["steps"] for r in records
              if r.get("event") == "train" and "steps" in r}
    for r in records:
        run = tuple(r.get(k) for k in FINETUNE_RUN)
        if r.get("event") == "eval" and "step" not in r and run in totals and r.get("epochs"):
            r["step"] = round(totals[run] * r["epoch"] / r["epochs"])


def _run_name(run: Path) -> str:
    return run.name if run.is_dir() else run.parent.name


def save_figure(fig, out: str | Path) -> Path:
    """Write ``fig`` as a PNG atomically (a kill never leaves half a file) and close it."""
    out = Path(out)
    import matplotlib.pyplot as plt

    check_writable(out, "plot")
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return out


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def curves(records: list[dict], where: str = "log") -> dict[str, dict[str, list[tuple[int, float]]]]:
    """Panel title -> line label -> finite ``(step, value)`` points of a run's records (those
    with a step); a BertkitError naming ``where`` when a metric is never finite."""
    fine_tuning = any("lr_now" in r for r in records)
    panels: dict[str, dict[str, list]] = {}
    if fine_tuning:
        grid = len({tuple(r.get(k) for k in FINETUNE_RUN) for r in records if r.get("event") == "train"}) > 1
        evals = [r for r in records if r.get("event") == "eval"]
        metrics = list(dict.fromkeys(k for r in evals for k, v in r.items()
                                     if k not in _NOT_METRICS and isinstance(v, int | float)))
        groups = {"loss": ("train", ["loss"]), "learning rate": ("train", ["lr_now"]),
                  "dev metrics": ("eval", metrics)}
        for title, (event, keys) in groups.items():
            for key in keys:
                for r in (r for r in records if r.get("event") == event and key in r):
                    run = f" (lr={r['lr']:g} batch={r['batch']} seed={r['seed']})" if grid else ""
                    panels.setdefault(title, {}).setdefault(key + run, []).append((r["step"], r[key]))
    else:
        for title, keys in PANELS.items():
            for key in keys:
                points = [(r["step"], r[key]) for r in records if r.get(key) is not None]
                if points:
                    panels.setdefault(title, {})[key] = points
    return {title: {label: _finite(points, label, where) for label, points in lines.items()}
            for title, lines in panels.items()}


def _finite(points: list[tuple[int, float]], key: str, where: str) -> list[tuple[int, float]]:
    """The points whose value is finite; none of them is a BertkitError (the run diverged)."""
    kept = [(step, value) for step, value in points
            if isinstance(value, int | float) and math.isfinite(value)]
    if points and not kept:
        raise BertkitError(f"{where}: {key} is NaN or infinite at every one of its {len(points)} "
                           "logged step(s): the run diverged, there is no curve to draw")
    return kept


def plot_run(run: str | Path, out: str | Path | None = None) -> Path:
    run = Path(run)
    log, records = _records(run)
    panels = curves(records, str(log))
    if not panels:
        raise BertkitError(f"{log}: no metrics to plot yet")
    plt = pyplot()
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.6 * len(panels)), sharex=True, squeeze=False)
    for ax, (title, lines) in zip(axes[:, 0], panels.items()):
        for label, points in lines.items():
            ax.plot(*zip(*points), label=label, marker="." if len(points) < 30 else None)
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    axes[-1, 0].set_xlabel("step")
    fig.suptitle(_run_name(run))
    fig.tight_layout()
    return save_figure(fig, Path(out) if out else log.parent / "curves.png")


def plot_runs(runs: list[str | Path], out: str | Path, metrics: list[str] | None = None) -> Path:
    logs = {_run_name(Path(r)): _records(Path(r))[1] for r in runs}
    if len(logs) < len(runs):
        raise BertkitError("two runs have the same directory name: their lines would not be told apart")
    known = [k for group in ("loss", "accuracy") for k in PANELS[group]]
    wanted = metrics or known
    keys = [k for k in wanted if any(k in r for records in logs.values() for r in records)]
    if not keys:
        raise BertkitError(f"none of the runs logged {', '.join(wanted)}")
    plt = pyplot()
    columns = 2 if len(keys) > 1 else 1
    rows = -(-len(keys) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(6 * columns, 2.6 * rows), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        for name, records in logs.items():
            points = _finite([(r["step"], r[key]) for r in records if r.get(key) is not None],
                             f"{key} of {name}", "plot")
            if points:
                ax.plot(*zip(*points), label=name, marker="." if len(points) < 30 else None)
        ax.set_title(key, fontsize="medium")
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(keys):]:
        ax.set_visible(False)
    fig.tight_layout()
    return save_figure(fig, Path(out))


def plot_attention(tokens: list[str], matrix, out: str | Path, title: str = "") -> Path:
    """One head's attention (rows: queries, columns: keys, both ``tokens``) as a PNG heat map."""
    plt = pyplot()
    size = min(14.0, 2.5 + 0.32 * len(tokens))
    fig, ax = plt.subplots(figsize=(size, size))
    image = ax.imshow(matrix, cmap="Blues", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=8)
    ax.set_yticks(range(len(tokens)), tokens, fontsize=8)
    ax.set_xlabel("attended to (key)")
    ax.set_ylabel("attending (query)")
    if title:
        ax.set_title(title)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    return save_figure(fig, Path(out))
