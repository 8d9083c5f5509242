#!/usr/bin/env python3
"""The model-size curve (issue 37) from ``bench/table5.sh`` BERT-row folders, one per size and seed.

    python bench/sizes_table.py runs/sizes-gpu/tokens-*-s? --output curve.md --plot curve.png

Each folder is read as ``bench/table5_table.py`` reads it (held-out MLM / NSP of the last
pre-training stage, the downstream grid's chosen scores); its size, peak rate and seed come
from the pre-training run's ``config.yaml``. Folders are grouped by (size, peak rate): each
group's cells are the mean ± sample sd over its seeds. A run still on the unigram plateau
(held-out MLM accuracy below ``PLATEAU``) is kept in the mean and counted in its own column,
since leaving the plateau is part of what a recipe does at a size. Writes the markdown to
``--output`` (default stdout) with the same data as JSON beside it, and with ``--plot`` the
five-task average against the parameter count (the groups at each size's recipe rate joined).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import table5_table  # noqa: E402  (bench/table5_table.py)

PLATEAU = 0.06  # held-out MLM accuracy of a model that predicts unigram frequencies (~5.4%)
ORDER = ("tiny", "mini", "small", "medium", "base", "large")
TASKS = ("sst2", "mrpc", "stsb", "rte", "cola")


# The paper's Table 6 (Devlin et al. 2018): layers, hidden, heads, held-out masked-LM
# perplexity, and dev accuracy on MNLI-m, MRPC and SST-2 (each size pre-trained for 1 M steps)
PAPER_TABLE6 = ((3, 768, 12, 5.84, 77.9, 79.8, 88.4), (6, 768, 3, 5.24, 80.6, 82.2, 90.7),
                (6, 768, 12, 4.68, 81.9, 84.8, 91.3), (12, 768, 12, 3.99, 84.4, 86.7, 92.9),
                (12, 1024, 16, 3.54, 85.7, 86.9, 93.3), (24, 1024, 16, 3.23, 86.6, 87.8, 93.7))


def weights(layers: int, hidden: int, intermediate: int, vocab_size: int = 30522, positions: int = 512,
            types: int = 2) -> int:
    """Weights of a BERT encoder with its embeddings and pooler, without the pre-training heads:
    the count the paper's Table 6 sizes refer to."""
    h, i = hidden, intermediate
    embeddings = (vocab_size + positions + types) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    return embeddings + layers * layer + h * h + h


def parameters(size: str, vocab_size: int = 30522) -> int:
    """:func:`weights` of a bertkit preset."""
    from bertkit.config import BertConfig

    c = BertConfig.preset(size, vocab_size=vocab_size)
    return weights(c.num_hidden_layers, c.hidden_size, c.intermediate_size, c.vocab_size,
                   c.max_position_embeddings, c.type_vocab_size)


def read_folder(folder: Path) -> dict | None:
    """One folder's size, rate, seed, held-out accuracies and downstream scores (None if the
    folder holds no finished BERT row)."""
    rows = [r for r in table5_table.folder_rows(folder) if r["row"] == "BERT"]
    if not rows or not rows[0]["stages"]:
        return None
    row, stage = rows[0], rows[0]["stages"][-1]
    # the folder may have moved since the run (a GPU machine's results copied here)
    run = folder / Path(stage["dir"]).name
    config = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))
    down = row["downstream"] or {}
    ev = stage.get("eval", {})
    return {"folder": str(folder), "size": config["model_size"], "lr": config["lr"], "seed": config["seed"],
            "steps": stage["steps_done"], "precision": stage.get("precision"),
            "mlm": 100 * ev["eval_mlm_acc"] if "eval_mlm_acc" in ev else None,
            "nsp": 100 * ev["eval_nsp_acc"] if "eval_nsp_acc" in ev else None,
            "tasks": {t: s["mean"] for t, s in down.get("tasks", {}).items()},
            "average": down.get("average")}


def finite(values) -> list[float]:
    return [v for v in values if v is not None and v == v]


def groups(runs: list[dict]) -> list[dict]:
    """The runs grouped by (size, peak rate), sizes in preset order."""
    keyed: dict[tuple, list[dict]] = {}
    for r in runs:
        keyed.setdefault((r["size"], r["lr"]), []).append(r)
    out = []
    for (size, lr), rs in sorted(keyed.items(), key=lambda kv: (ORDER.index(kv[0][0]), kv[0][1])):
        rs = sorted(rs, key=lambda r: r["seed"])
        out.append({"size": size, "lr": lr, "params": parameters(size), "seeds": [r["seed"] for r in rs],
                    "steps": [r["steps"] for r in rs], "precision": sorted({str(r["precision"]) for r in rs}),
                    "plateau": sum(1 for r in rs if r["mlm"] is not None and r["mlm"] < 100 * PLATEAU),
                    "mlm": finite(r["mlm"] for r in rs), "nsp": finite(r["nsp"] for r in rs),
                    "tasks": {t: finite(r["tasks"].get(t) for r in rs) for t in TASKS},
                    "average": finite(r["average"] for r in rs),
                    "incomplete": sum(1 for r in rs if r["average"] is None or r["average"] != r["average"])})
    return out


def render(gs: list[dict]) -> str:
    head = ["size", "parameters", "peak lr", "seeds", "steps", "on plateau", "held-out MLM %",
            "held-out NSP %", *TASKS, "average"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for g in gs:
        cells = [g["size"], f"{g['params'] / 1e6:.1f} M", f"{g['lr']:g}", ",".join(map(str, g["seeds"])),
                 " / ".join(f"{s:,}" for s in g["steps"]), f"{g['plateau']} of {len(g['seeds'])}",
                 table5_table.pm(g["mlm"]), table5_table.pm(g["nsp"]),
                 *(table5_table.pm(g["tasks"][t]) for t in TASKS), table5_table.pm(g["average"])]
        if g["incomplete"]:
            cells[-1] += f" ({g['incomplete']} without a finite average)"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(gs: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, paper) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1.3, 1]})
    best: dict[str, dict] = {}
    for g in gs:  # each size's line point: its group with the most seeds, then the best mean
        if not g["average"]:
            continue
        mean = statistics.fmean(g["average"])
        cur = best.get(g["size"])
        if cur is None or (len(g["average"]), mean) > (len(cur["average"]), statistics.fmean(cur["average"])):
            best[g["size"]] = g
    line = [best[s] for s in ORDER if s in best]
    xs = [g["params"] / 1e6 for g in line]
    ys = [statistics.fmean(g["average"]) for g in line]
    es = [statistics.stdev(g["average"]) if len(g["average"]) > 1 else 0 for g in line]
    ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, label="five-task average (mean ± sd over seeds)")
    for g in line:
        for v in g["average"]:
            ax.plot(g["params"] / 1e6, v, "k.", alpha=0.4)
        ax.annotate(g["size"], (g["params"] / 1e6, statistics.fmean(g["average"])),
                    textcoords="offset points", xytext=(4, -12), fontsize=8)
    plain_log_axis(ax)
    ax.set_ylabel("GLUE dev, five-task average")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    paper_panel(paper)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plain_log_axis(ax) -> None:
    """A log x axis of parameter counts in millions, its ticks written as plain numbers."""
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:g}"[0] in "1235" else ""))
    ax.set_xlabel("parameters (millions, log scale)")


def paper_panel(ax) -> None:
    """The paper's Table 6 beside the curve: the mean of its three dev accuracies against the
    same parameter count (its sizes are 768 and 1024 wide, 4x feed-forward)."""
    xs = [weights(layers, hidden, 4 * hidden) / 1e6 for layers, hidden, *_ in PAPER_TABLE6]
    ys = [statistics.fmean(row[4:]) for row in PAPER_TABLE6]
    ax.plot(xs, ys, "s-", color="tab:gray", label="Devlin et al., Table 6: mean of MNLI-m, MRPC, SST-2")
    for (layers, hidden, heads, *_), x, y in zip(PAPER_TABLE6, xs, ys):
        ax.annotate(f"{layers}/{hidden}/{heads}", (x, y), textcoords="offset points", xytext=(4, -12), fontsize=8)
    plain_log_axis(ax)
    ax.set_ylabel("dev accuracy, mean of three tasks")
    ax.set_title("the paper: 1 M steps of 128k tokens each size", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="The model-size curve from table5.sh BERT-row folders.")
    p.add_argument("folders", nargs="+", type=Path, help="table5.sh --out folders, one per size and seed")
    p.add_argument("--output", type=Path, help="markdown file (default: stdout); JSON beside it")
    p.add_argument("--plot", type=Path, help="PNG of the average against the parameter count")
    p.add_argument("--title", default="Model size at an equal number of training tokens")
    args = p.parse_args(argv)
    runs = [r for r in map(read_folder, args.folders) if r]
    if not runs:
        p.error("no folder holds a finished BERT row (pt-mlm_nsp with a log)")
    gs = groups(runs)
    text = render(gs)
    if args.output:
        table5_table.write_atomic(args.output, text)
        table5_table.write_atomic(args.output.with_suffix(".json"), json.dumps({"groups": gs, "runs": runs}, indent=1))
    else:
        sys.stdout.write(text)
    if args.plot:
        plot(gs, args.plot, args.title)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
