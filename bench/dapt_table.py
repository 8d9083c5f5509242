#!/usr/bin/env python3
"""The table of a ``bench/dapt.sh`` folder: domain task scores per row, the pre-training each
row had, the machine and the precision.

    python bench/dapt_table.py runs/dapt [--precision fp32] [--lrs 3e-4,1e-3] [--seeds 1,2]

Rows: ``checkpoint`` (the model as released), ``domain`` (after domain pre-training),
``scratch`` (the same size pre-trained from scratch for the same budget), each from
``OUT/ft/<row>/lr-<lr>_seed-<seed>/`` (``results.json`` of ``bertkit finetune``: the best
epoch on dev; ``test.json`` of ``bertkit evaluate`` on the test split). Per row the learning
rate with the best mean dev accuracy over the seeds is chosen (on dev, as ``bertkit
downstream`` does) and that rate's dev and test accuracy and macro-F1 are reported as mean ±
sample sd over the seeds (x 100). A row with fewer finished runs than the grid (lrs x
seeds) is marked partial. The GLUE check (``OUT/glue/<row>/results.json`` of ``bertkit downstream``) is
listed as it is. Writes ``OUT/results.md``, ``OUT/results.json`` and the chart
``OUT/results.png``.

**The gain with the choice of learning rate in its spread** (issue 37): the rate chosen on
two seeds can flip from one set of seeds to another, and with it the row's figure. For every
subset of K fine-tuning seeds both rows have (every K from 1 to all of them), each row's rate
is chosen on that subset's mean dev accuracy and the gain (domain - checkpoint) is taken on
test accuracy and macro-F1 at the rates chosen; reported per K: the mean, sd, lowest and
highest gain over the subsets, the share of subsets with a positive gain and how often each
row chose each rate. K = 1 is a user with one seed, who picks the rate on its dev figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine  # noqa: E402  (bench/machine.py)
from table5_table import machines, pretrain_summary, write_atomic  # noqa: E402

ROWS = {"checkpoint": "the checkpoint as it is", "domain": "after domain pre-training",
        "scratch": "tiny from scratch, same budget"}


def run_scores(run: Path) -> dict | None:
    """Dev (best epoch) and test accuracy / macro-F1 of one fine-tuning run, or None."""
    try:
        best = json.loads((run / "results.json").read_text(encoding="utf-8"))["best"]
    except (OSError, ValueError, KeyError):
        return None
    out = {"lr": best["lr"], "seed": best["seed"], "epoch": best["epoch"],
           "dev_accuracy": 100 * best["metrics"]["accuracy"],
           "dev_macro_f1": 100 * best["metrics"]["macro_f1"]}
    try:
        test = json.loads((run / "test.json").read_text(encoding="utf-8"))["metrics"]
        test = next(iter(test.values()))  # evaluate names the split it read "dev"
        out["test_accuracy"], out["test_macro_f1"] = 100 * test["accuracy"], 100 * test["macro_f1"]
    except (OSError, ValueError, KeyError, StopIteration):
        pass
    return out


def mean_sd(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def row_summary(runs: list[dict], grid: int) -> dict:
    """The chosen learning rate (best mean dev accuracy) and its scores over seeds; partial
    when fewer than ``grid`` (lrs x seeds) runs are finished."""
    by_lr: dict[float, list[dict]] = {}
    for r in runs:
        by_lr.setdefault(r["lr"], []).append(r)
    lr = max(by_lr, key=lambda k: statistics.fmean(r["dev_accuracy"] for r in by_lr[k]))
    chosen = by_lr[lr]
    out = {"lr": lr, "seeds": [r["seed"] for r in chosen], "partial": len(runs) < grid,
           "per_lr_dev_accuracy": {str(k): statistics.fmean(r["dev_accuracy"] for r in v)
                                   for k, v in sorted(by_lr.items())}}
    for key in ("dev_accuracy", "dev_macro_f1", "test_accuracy", "test_macro_f1"):
        out[key] = mean_sd([r[key] for r in chosen if key in r])
    return out


def choose(runs: list[dict], seeds: set[int]) -> list[dict]:
    """The runs of ``seeds`` at the rate with the best mean dev accuracy over those seeds
    (the lowest rate on a tie, so the choice does not depend on the order runs were read)."""
    by_lr: dict[float, list[dict]] = {}
    for r in runs:
        if r["seed"] in seeds:
            by_lr.setdefault(r["lr"], []).append(r)
    full = {lr: rs for lr, rs in by_lr.items() if len(rs) == len(seeds)}
    lr = max(sorted(full), key=lambda k: statistics.fmean(r["dev_accuracy"] for r in full[k]))
    return full[lr]


def gain_over_seed_subsets(base: list[dict], adapted: list[dict]) -> list[dict]:
    """The gain of ``adapted`` over ``base`` on test accuracy and macro-F1, with each row's
    rate chosen on dev within every subset of K seeds both rows finished at every rate (see
    the module docstring), one summary per K."""
    from itertools import combinations

    def complete(runs):
        rates = {r["lr"] for r in runs}
        return {s for s in {r["seed"] for r in runs}
                if {r["lr"] for r in runs if r["seed"] == s} == rates}

    seeds = sorted(complete(base) & complete(adapted))
    out = []
    for k in range(1, len(seeds) + 1):
        gains: dict[str, list[float]] = {"test_accuracy": [], "test_macro_f1": []}
        picked: dict[str, dict[str, int]] = {"checkpoint": {}, "domain": {}}
        for subset in combinations(seeds, k):
            chosen = {"checkpoint": choose(base, set(subset)), "domain": choose(adapted, set(subset))}
            for row, runs in chosen.items():
                picked[row][f"{runs[0]['lr']:g}"] = picked[row].get(f"{runs[0]['lr']:g}", 0) + 1
            for key in gains:
                gains[key].append(statistics.fmean(r[key] for r in chosen["domain"])
                                  - statistics.fmean(r[key] for r in chosen["checkpoint"]))
        summary = {"k": k, "subsets": len(gains["test_accuracy"]), "chosen": picked}
        for key, values in gains.items():
            summary[key] = {"mean": statistics.fmean(values),
                            "sd": statistics.stdev(values) if len(values) > 1 else None,
                            "low": min(values), "high": max(values),
                            "positive": sum(v > 0 for v in values) / len(values)}
        out.append(summary)
    return out


def gain_lines(gains: list[dict]) -> list[str]:
    """The markdown table of :func:`gain_over_seed_subsets`."""
    def fig(g):
        sd = "" if g["sd"] is None else f" ± {g['sd']:.1f}"
        return f"{g['mean']:+.1f}{sd} ({g['low']:+.1f} to {g['high']:+.1f}; > 0 in {100 * g['positive']:.0f}%)"

    def rates(counts):
        return ", ".join(f"{lr} x{n}" for lr, n in sorted(counts.items()))

    lines = ["", "The gain (domain - checkpoint, test x 100) with each row's rate chosen on dev within every "
             "subset of K fine-tuning seeds: mean ± sd over the subsets (lowest to highest; share above 0), "
             "and the rates chosen:", "",
             "| K seeds | subsets | test accuracy gain | test macro-F1 gain | checkpoint's rate | domain's rate |",
             "|---|---|---|---|---|---|"]
    for g in gains:
        lines.append(f"| {g['k']} | {g['subsets']} | {fig(g['test_accuracy'])} | {fig(g['test_macro_f1'])} | "
                     f"{rates(g['chosen']['checkpoint'])} | {rates(g['chosen']['domain'])} |")
    return lines


def cell(pair) -> str:
    mean, sd = pair
    if mean is None:
        return "—"
    return f"{mean:.1f}" + ("" if sd is None else f" ± {sd:.1f}")


def render(out: Path, precision: str, lrs: str, seeds: str) -> tuple[str, dict]:
    grid = len([s for s in seeds.split(",") if s]) * len([x for x in lrs.split(",") if x])
    data: dict = {"folder": str(out), "precision": precision, "lrs": lrs, "seeds": seeds,
                  "machines": machines(out) or [machine.describe()], "rows": {}, "pretraining": {}}
    for name in ROWS:
        runs = sorted((s for d in (out / "ft" / name).glob("lr-*_seed-*") if (s := run_scores(d))),
                      key=lambda r: (r["lr"], r["seed"]))  # seed 10 after 9, not after 1
        if runs:
            data["rows"][name] = dict(row_summary(runs, grid), runs=runs)
    for name in ("domain", "scratch"):
        summary = pretrain_summary(out / f"pt-{name}")
        if summary:
            data["pretraining"][name] = summary
    for name in ROWS:
        glue = out / "glue" / name / "results.json"
        if glue.is_file():
            results = json.loads(glue.read_text(encoding="utf-8"))
            data.setdefault("glue", {})[name] = {
                t: {"metric": v["metric"], "lr": v["lr"], "mean": 100 * v["mean"],
                    "std": 100 * v["std"], "scores": [100 * x for x in v["scores"]]}
                for t, v in results["tasks"].items()}
    stats_path = out / "data" / "task" / "stats.json"
    if stats_path.is_file():
        data["task"] = json.loads(stats_path.read_text(encoding="utf-8"))
    lines = [f"# Domain-adaptive pre-training (`bench/dapt.sh`): {out}", ""]
    for m in data["machines"]:
        lines += [machine.markdown(m), ""]
    lines += [f"Precision: {precision} (pre-training and fine-tuning). Fine-tuning grid: lr "
              f"{lrs} x seeds {seeds}; the lr is chosen on dev (best mean accuracy over seeds).",
              "", "| row | lr | dev accuracy | dev macro-F1 | test accuracy | test macro-F1 | seeds |",
              "|---|---|---|---|---|---|---|"]
    for name, r in data["rows"].items():
        seeds_cell = ",".join(map(str, r["seeds"])) + (
            f" (partial: {len(r['runs'])} of the grid's runs)" if r["partial"] else "")
        lines.append(f"| {ROWS[name]} | {r['lr']:g} | {cell(r['dev_accuracy'])} | "
                     f"{cell(r['dev_macro_f1'])} | {cell(r['test_accuracy'])} | "
                     f"{cell(r['test_macro_f1'])} | {seeds_cell} |")
    rows = data["rows"]
    if "checkpoint" in rows and "domain" in rows and all("test_accuracy" in r for name in ("checkpoint", "domain")
                                                          for r in rows[name]["runs"]):
        data["gain_over_seed_subsets"] = gain_over_seed_subsets(rows["checkpoint"]["runs"], rows["domain"]["runs"])
        if data["gain_over_seed_subsets"]:
            lines += gain_lines(data["gain_over_seed_subsets"])
    lines += ["", "Pre-training (masked LM on the domain text, batch 32):", "",
              "| run | steps done / planned | budget stop | held-out MLM % | precision | wall s | exported |",
              "|---|---|---|---|---|---|---|"]
    for name, p in data["pretraining"].items():
        mlm = p.get("eval", {}).get("eval_mlm_acc")
        mlm = "—" if mlm is None else f"{100 * mlm:.1f} (step {p.get('eval_step')})"
        lines.append(f"| {name} | {p['steps_done']:,} / {p.get('planned_steps', '—')} | "
                     f"{'yes' if p.get('budget_stop') else 'no'} | "
                     f"{mlm} | "
                     f"{p.get('precision', '?')} | {p.get('wall_s', '—')} | "
                     f"{'yes' if p['exported'] else 'no (running or killed)'} |")
    if data.get("glue"):
        lines += ["", "GLUE check (`bertkit downstream`, same lrs and seeds, dev x 100, lr chosen on dev):", "",
                  "| row | task | metric | mean ± sd | lr | scores |", "|---|---|---|---|---|---|"]
        for name, tasks in data["glue"].items():
            for t, v in tasks.items():
                scores = ", ".join(f"{x:.1f}" for x in v["scores"])
                lines.append(f"| {ROWS[name]} | {t} | {v['metric']} | {v['mean']:.1f} ± "
                             f"{v['std']:.1f} | {v['lr']:g} | {scores} |")
    lines += ["", "Every run (dev = best epoch):", "",
              "| row | lr | seed | epoch | dev acc | dev F1 | test acc | test F1 |",
              "|---|---|---|---|---|---|---|---|"]
    for name, r in data["rows"].items():
        for x in r["runs"]:
            lines.append(f"| {name} | {x['lr']:g} | {x['seed']} | {x['epoch']} | "
                         f"{x['dev_accuracy']:.1f} | {x['dev_macro_f1']:.1f} | "
                         f"{x.get('test_accuracy', float('nan')):.1f} | "
                         f"{x.get('test_macro_f1', float('nan')):.1f} |")
    return "\n".join(lines) + "\n", data


def chart(data: dict, path: Path) -> Path:
    """Grouped bars: each row's dev and test accuracy and macro-F1 (mean, sd over seeds)."""
    from bertkit.plot import pyplot, save_figure

    plt = pyplot()
    names = list(data["rows"])
    keys = ("dev_accuracy", "test_accuracy", "dev_macro_f1", "test_macro_f1")
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(keys)
    for i, key in enumerate(keys):
        means = [data["rows"][n][key][0] or 0.0 for n in names]
        sds = [data["rows"][n][key][1] or 0.0 for n in names]
        ax.bar([x + i * width for x in range(len(names))], means, width, yerr=sds, capsize=3,
               label=key.replace("_", " "))
    ax.set_xticks([x + 1.5 * width for x in range(len(names))], [ROWS[n] for n in names])
    ax.set_ylabel("x 100 (mean, sd over seeds)")
    ax.set_title(f"python-docs-part task; {data['precision']}, lr chosen on dev")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path, help="bench/dapt.sh output folder")
    p.add_argument("--precision", default="fp32", help="the precision the runs used (recorded)")
    p.add_argument("--lrs", default="3e-4,1e-3", help="the grid's learning rates (recorded)")
    p.add_argument("--seeds", default="1,2", help="the grid's seeds (a row with fewer is partial)")
    args = p.parse_args(argv)
    if not args.folder.is_dir():
        p.error(f"no such folder: {args.folder}")
    text, data = render(args.folder, args.precision, args.lrs, args.seeds)
    write_atomic(args.folder / "results.md", text)
    write_atomic(args.folder / "results.json", json.dumps(data, indent=2) + "\n")
    if data["rows"]:
        chart(data, args.folder / "results.png")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
