"""Training curves from a run's ``log.jsonl`` to a PNG (matplotlib, Agg backend).

Contract: ``plot_run(run_dir_or_log, out=None) -> Path`` draws one panel per group that the
log has data for - losses (train and eval), accuracies (train and eval), learning rate,
tokens/s - against the step and writes ``RUN_DIR/curves.png`` (or ``out``).
``plot_runs(runs, out, metrics=None) -> Path`` compares runs: one panel per metric (every
loss and accuracy any of the runs logged, or ``metrics``), one line per run.
"""

from __future__ import annotations

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


def _records(run: Path) -> tuple[Path, list[dict]]:
    log = run if run.is_file() else run / "log.jsonl"
    if not log.is_file():
        raise FileNotFoundError(f"{log}: no such log (is {run} a run directory?)")
    return log, [r for r in read_log(log) if "step" in r]


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


def plot_run(run: str | Path, out: str | Path | None = None) -> Path:
    run = Path(run)
    log, records = _records(run)
    panels = {title: [k for k in keys if any(k in r for r in records)] for title, keys in PANELS.items()}
    panels = {title: keys for title, keys in panels.items() if keys}
    if not panels:
        raise BertkitError(f"{log}: no metrics to plot yet")
    plt = pyplot()
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.6 * len(panels)), sharex=True, squeeze=False)
    for ax, (title, keys) in zip(axes[:, 0], panels.items()):
        for key in keys:
            points = [(r["step"], r[key]) for r in records if r.get(key) is not None]
            ax.plot(*zip(*points), label=key, marker="." if len(points) < 30 else None)
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
            points = [(r["step"], r[key]) for r in records if r.get(key) is not None]
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
