"""Training curves from a run's ``log.jsonl`` to a PNG (matplotlib, Agg backend).

Contract: ``plot_run(run_dir_or_log, out=None) -> Path`` draws one panel per group that the
log has data for - losses (train and eval), accuracies (train and eval), learning rate,
tokens/s - against the step and writes ``RUN_DIR/curves.png`` (or ``out``).
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


def plot_run(run: str | Path, out: str | Path | None = None) -> Path:
    run = Path(run)
    log = run if run.is_file() else run / "log.jsonl"
    if not log.is_file():
        raise FileNotFoundError(f"{log}: no such log (is {run} a run directory?)")
    records = [r for r in read_log(log) if "step" in r]
    panels = {title: [k for k in keys if any(k in r for r in records)] for title, keys in PANELS.items()}
    panels = {title: keys for title, keys in panels.items() if keys}
    if not panels:
        raise BertkitError(f"{log}: no metrics to plot yet")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.6 * len(panels)), sharex=True, squeeze=False)
    for ax, (title, keys) in zip(axes[:, 0], panels.items()):
        for key in keys:
            points = [(r["step"], r[key]) for r in records if r.get(key) is not None]
            ax.plot(*zip(*points), label=key, marker="." if len(points) < 30 else None)
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    axes[-1, 0].set_xlabel("step")
    fig.suptitle(run.name if run.is_dir() else run.parent.name)
    fig.tight_layout()
    out = Path(out) if out else log.parent / "curves.png"
    check_writable(out, "plot")
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return out
