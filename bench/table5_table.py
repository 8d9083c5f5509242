#!/usr/bin/env python3
"""The table of one or more ``bench/table5.sh`` run folders, with the machine and the precision.

    python bench/table5_table.py runs/t5-s1 [runs/t5-s2 ...] --output runs/t5-s1/table5.md

For every folder (one pre-training seed each) and every row it holds - BERT (``pt-mlm_nsp``,
``pt2-mlm_nsp``), No NSP (``pt-mlm``...), LTR, none (``random-init``), BERT-Tiny - it reads
what the runs wrote: the pre-training logs (precision actually used and why, steps done,
whether the budget stopped it, held-out NSP / MLM accuracy at the last evaluation, wall
time), the downstream ``results.json`` (each task's chosen learning rate, mean and spread
over fine-tuning seeds, dev, x 100) and the linear probes (``probe.jsonl``). With several
folders a second table gives each row's mean and sample standard deviation over them.
Writes the markdown to ``--output`` (default: stdout) and the same data as JSON beside it.
The machine is read from each folder's ``machine.jsonl`` (written by table5.sh at every
start: a resumed run may have moved) and, failing that, described as the table is written.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from bertkit.fileio import atomic_write
from bertkit.precision import HELP as AUTO_RULE

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine  # noqa: E402  (bench/machine.py)

ROWS = (("BERT", "mlm_nsp"), ("No NSP", "mlm"), ("LTR & No NSP", "ltr"))


def read_jsonl(path: Path) -> list[dict]:
    """The JSON objects of a JSON Lines file ([] when it is absent); a torn last line (a run
    killed while writing) is skipped."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


def pretrain_summary(run: Path) -> dict | None:
    """What a pre-training run directory's log says: precision, steps, evals, wall time."""
    log = read_jsonl(run / "log.jsonl")
    if not log:
        return None
    out: dict = {"dir": str(run), "exported": (run / "model" / "config.json").is_file(),
                 "steps_done": max(r.get("step", 0) for r in log)}
    for r in log:
        event = r.get("event")
        if event == "precision":
            out["precision"], out["precision_reason"] = r.get("precision"), r.get("reason")
        elif event in ("budget", "budget_replan"):
            out["planned_steps"] = r.get("steps")
        elif event == "budget_stop":
            out["budget_stop"] = True
        evals = {k: v for k, v in r.items() if k.startswith("eval_")}
        if evals:
            out["eval"], out["eval_step"] = evals, r.get("step")
    times = [r["time"] for r in log if "time" in r]
    if times:
        out["wall_s"] = round(times[-1] - times[0], 1)
    return out


def downstream_summary(glue: Path) -> dict | None:
    """The chosen rows of a ``bertkit downstream`` results.json (x 100), or None."""
    path = glue / "results.json"
    if not path.is_file():
        return None
    results = json.loads(path.read_text(encoding="utf-8"))
    tasks = {t: {"metric": s["metric"], "lr": s["lr"], "mean": 100 * s["mean"],
                 "std": 100 * s["std"], "scores": [100 * x for x in s["scores"]]}
             for t, s in results["tasks"].items()}
    return {"tasks": tasks, "average": 100 * results["average"],
            "precision": results.get("settings", {}).get("precision"),
            "used": sorted({r["precision"] for log in glue.glob("*/*/log.jsonl")
                            for r in read_jsonl(log) if r.get("event") == "start" and "precision" in r})}


def probe_summary(path: Path) -> dict:
    """``{"<task> <pool>": probe x 100}`` from a linear_probe.py output."""
    return {f"{r['task']} {r['pool']}": 100 * r["probe"] for r in read_jsonl(path)}


def folder_rows(out: Path) -> list[dict]:
    """Every row a table5.sh folder holds, in the paper's order."""
    rows = []
    for name, key in ROWS:
        stages = [s for s in (pretrain_summary(out / f"pt-{key}"), pretrain_summary(out / f"pt2-{key}")) if s]
        if not stages:
            continue
        final = Path(stages[-1]["dir"])
        rows.append({"row": name, "stages": stages, "downstream": downstream_summary(final / "glue"),
                     "probe": probe_summary(final / "probe.jsonl"),
                     "probe_stage1": probe_summary(out / f"pt-{key}" / "probe.jsonl")})
    for name, sub in (("none", "random-init"), ("BERT-Tiny", "bert-tiny")):
        down = downstream_summary(out / sub / "glue")
        if down:
            rows.append({"row": name, "stages": [], "downstream": down, "probe": {}, "probe_stage1": {}})
    return rows


def fmt(x, digits=1) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def pm(values: list[float]) -> str:
    """Mean ± sample sd (or the one value)."""
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.fmean(values):.1f} ± {statistics.stdev(values):.1f}"


def stage_cell(stage: dict) -> str:
    ev = stage.get("eval", {})
    nsp, mlm = ev.get("eval_nsp_acc"), ev.get("eval_mlm_acc")
    acc = " / ".join(f"{100 * v:.1f}" for v in (nsp, mlm) if v is not None)
    stop = ", budget stop" if stage.get("budget_stop") else ""
    done = "" if stage["exported"] else " (running or killed)"
    return f"{stage['steps_done']:,} steps, {stage.get('precision', '?')}{stop}{done}; {acc or '—'}"


def metrics(row: dict) -> dict[str, float]:
    """The row's numbers by name (for averaging over folders)."""
    m = {}
    for i, stage in enumerate(row["stages"], 1):
        for k, v in stage.get("eval", {}).items():
            if k in ("eval_nsp_acc", "eval_mlm_acc"):
                m[f"stage {i} held-out {k[5:8].upper()}"] = 100 * v
    down = row["downstream"]
    if down:
        for t, s in down["tasks"].items():
            m[f"{t} ({s['metric']})"] = s["mean"]
        m["average"] = down["average"]
    for k, v in row["probe"].items():
        m[f"probe {k}"] = v
    return m


def machines(out: Path) -> list[dict]:
    """The distinct machines recorded in ``out/machine.jsonl`` (first seen first)."""
    seen, result = set(), []
    for r in read_jsonl(out / "machine.jsonl"):
        key = (r.get("cpu"), r.get("native_bf16"), r.get("cores"))
        if key not in seen:
            seen.add(key)
            result.append(r)
    return result


def render(folders: list[Path]) -> tuple[str, dict]:
    """The markdown and the JSON of the table of these folders."""
    data = {"folders": {}}
    lines = ["# Table 5 rows (`bench/table5.sh`)", ""]
    for out in folders:
        rows, seen = folder_rows(out), machines(out)
        data["folders"][str(out)] = {"rows": rows, "machines": seen}
        lines += [f"## {out}", ""]
        for m in seen or [dict(machine.describe(), note="described when the table was written")]:
            lines += [machine.markdown(m), ""]
        commands = out / "commands.txt"
        if commands.is_file():
            lines += ["Commands:", "```", commands.read_text(encoding="utf-8").rstrip(), "```", ""]
        tasks = sorted({t for r in rows if r["downstream"] for t in r["downstream"]["tasks"]})
        lines += ["| row | stage 1 (steps, precision; held-out NSP / MLM %) | stage 2 | "
                  + " | ".join(tasks) + " | average | probe |",
                  "|---" * (len(tasks) + 5) + "|"]
        for r in rows:
            st = [stage_cell(s) for s in r["stages"]] + ["—"] * (2 - len(r["stages"]))
            down = r["downstream"]
            cells = [(f"{s['mean']:.1f} ± {s['std']:.1f} (lr {s['lr']:g})" if (s := down["tasks"].get(t))
                      else "—") if down else "—" for t in tasks]
            probe = ", ".join(f"{k} {v:.1f}" for k, v in r["probe"].items()) or "—"
            lines.append(f"| {r['row']} | {st[0]} | {st[1]} | " + " | ".join(cells)
                         + f" | {fmt(down['average'] if down else None)} | {probe} |")
        if rows:
            ft = {r["downstream"]["precision"] for r in rows if r["downstream"]}
            used = sorted({u for r in rows if r["downstream"] for u in r["downstream"]["used"]})
            lines += ["", f"Fine-tuning precision setting: {', '.join(sorted(map(str, ft))) or '—'}; "
                          f"used: {', '.join(used) if used else 'not logged (runs before 2026-11-25)'}"
                          f" ({AUTO_RULE}). Scores are dev, x 100, mean ± sd over the fine-tuning "
                          "seeds at the learning rate chosen on dev.", ""]
        else:
            lines += ["", "(no finished row in this folder yet)", ""]
    if len(folders) > 1:
        by_row: dict[str, list[dict]] = {}
        for out in folders:
            for r in data["folders"][str(out)]["rows"]:
                by_row.setdefault(r["row"], []).append(metrics(r))
        names = sorted({k for ms in by_row.values() for m in ms for k in m})
        agg = {row: {k: [m[k] for m in ms if k in m] for k in names} for row, ms in by_row.items()}
        data["over_folders"] = agg
        lines += ["## Over the folders (mean ± sd over pre-training seeds)", "",
                  "| row | folders | " + " | ".join(names) + " |", "|---" * (len(names) + 2) + "|"]
        for row, vals in agg.items():
            lines.append(f"| {row} | {len(by_row[row])} | " + " | ".join(pm(vals[k]) for k in names) + " |")
        lines.append("")
    return "\n".join(lines), data


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (``bertkit.fileio.atomic_write``)."""
    with atomic_write(path) as f:
        f.write(text)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folders", nargs="+", type=Path, help="bench/table5.sh --out folders")
    p.add_argument("--output", type=Path, help="markdown file (JSON beside it, .json); default stdout")
    args = p.parse_args(argv)
    missing = [str(f) for f in args.folders if not f.is_dir()]
    if missing:
        p.error(f"no such folder: {', '.join(missing)}")
    text, data = render(args.folders)
    if args.output:
        write_atomic(args.output, text)
        write_atomic(args.output.with_suffix(".json"), json.dumps(data, indent=2) + "\n")
        print(f"table: {args.output} (and {args.output.with_suffix('.json')})")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
