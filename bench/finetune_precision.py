"""fp32 against bf16 fine-tuning: the same recipe, seeds and data at both precisions, on the
shared data, side by side in one run (issue 31: does ``auto``'s bf16 fine-tune as well as
fp32, and is it faster for the model at hand?).

Each (task, precision, seed) is one ``bertkit finetune`` run (``--threads 1``) in
``OUT/runs/<task>-<precision>-s<seed>``; ``--lanes`` of them run at once (one core each),
interleaved so fp32 and bf16 share the machine alike. A finished run (``results.json``) is
skipped on a restart, so the same command resumes. The table (mean +- sample standard
deviation over the seeds, main metric and wall seconds per run) goes to ``OUT/table.md``
with the machine it ran on::

    python bench/finetune_precision.py --out runs/ftprec                 # everything
    python bench/finetune_precision.py --out runs/ftprec --tasks sst2 --seeds 1

SQuAD has no train split in the shared data: v1.1 and v2.0 are split by article
(:func:`bertkit.tasks.squad.split_articles`: first 2/3 of the articles train, the rest is dev).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
MODEL = DATA / "models" / "bert-tiny-splade"
COMMON = ("--batch-size", "32", "--threads", "1", "--no-progress", "--overwrite")
# task -> (data folder or SQuAD split name, main metric, extra flags): BERT-Tiny recipes of
# docs/results.md (SQuAD: runs D and F; NER: run A), SST-2 on a fixed 8,000-example sample
RECIPES = {
    "sst2": ("glue/SST-2", "accuracy", ("--lr", "5e-4", "--epochs", "2", "--max-seq-length", "64",
                                         "--max-train-examples", "8000")),
    "stsb": ("glue/STS-B", "spearman", ("--lr", "5e-4", "--epochs", "3")),
    "ner": ("conll2003", "f1", ("--lr", "5e-4", "--epochs", "3")),
    "squad": ("squad11", "f1", ("--lr", "5e-4", "--epochs", "2", "--max-seq-length", "384",
                                "--max-train-examples", "4000")),
    "squad2": ("squad20", "best_f1", ("--lr", "5e-4", "--epochs", "2", "--max-seq-length", "384",
                                      "--max-train-examples", "3000")),
}
SQUAD_FILES = {"squad11": "dev-v1.1.json", "squad20": "dev-v2.0.json"}


def data_dir(task: str, out: Path) -> Path:
    name = RECIPES[task][0]
    if name in SQUAD_FILES:
        from bertkit.tasks.squad import split_articles

        target = out / "data" / name
        if not target.is_dir():
            split_articles(DATA / "squad" / SQUAD_FILES[name], target)
        return target
    return DATA / name


def run_one(bertkit: str, task: str, precision: str, seed: int, out: Path) -> dict:
    """One fine-tuning run (skipped when its results.json exists): its record."""
    run = out / "runs" / f"{task}-{precision}-s{seed}"
    record_file = run / "bench.json"
    if record_file.is_file():
        return json.loads(record_file.read_text())
    cmd = [bertkit, "finetune", task, "--model", str(MODEL), "--data", str(data_dir(task, out)),
           "--out", str(run), "--precision", precision, "--seed", str(seed), *COMMON,
           *RECIPES[task][2]]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    results = json.loads((run / "results.json").read_text())
    record = {"task": task, "precision": precision, "seed": seed, "wall_s": round(wall, 1),
              "results": results}
    record_file.write_text(json.dumps(record, indent=1))
    print(f"{task} {precision} seed {seed}: {wall:.0f} s", flush=True)
    return record


def best_metrics(record: dict) -> dict:
    """The dev metrics of the kept (best) run of a finetune results.json."""
    results = record["results"]
    best = results.get("best", results)
    return best.get("metrics", best)


def table(records: list[dict], tasks: list[str], precisions: list[str]) -> str:
    def stat(values):
        if not values:
            return "-"
        mean = statistics.fmean(values)
        spread = statistics.stdev(values) if len(values) > 1 else 0.0
        return f"{mean:.2f} +- {spread:.2f}"

    lines = ["| task | metric | " + " | ".join(f"{p} (dev)" for p in precisions) + " | "
             + " | ".join(f"{p} s/run" for p in precisions) + " | seeds |",
             "|---" * (3 + 2 * len(precisions)) + "|"]
    for task in tasks:
        metric = RECIPES[task][1]
        rows = {p: [r for r in records if r["task"] == task and r["precision"] == p] for p in precisions}
        scores = [stat([100 * best_metrics(r)[metric] if abs(best_metrics(r)[metric]) <= 1
                        else best_metrics(r)[metric] for r in rows[p]]) for p in precisions]
        times = [stat([r["wall_s"] for r in rows[p]]) for p in precisions]
        seeds = sorted({r["seed"] for p in precisions for r in rows[p]})
        lines.append(f"| {task} | {metric} | " + " | ".join(scores) + " | " + " | ".join(times)
                     + f" | {','.join(map(str, seeds))} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("runs/finetune-precision"))
    parser.add_argument("--tasks", default=",".join(RECIPES))
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--lanes", type=int, default=2, help="runs at once (one thread each)")
    parser.add_argument("--bertkit", default=str(ROOT / ".venv" / "bin" / "bertkit"))
    args = parser.parse_args(argv)
    if not MODEL.is_dir():
        print(f"finetune_precision.py: {MODEL} is missing (the shared data)", file=sys.stderr)
        return 2
    tasks, precisions = args.tasks.split(","), args.precisions.split(",")
    unknown = [t for t in tasks if t not in RECIPES]
    if unknown:
        parser.error(f"unknown task(s) {', '.join(unknown)}; known: {', '.join(RECIPES)}")
    seeds = [int(s) for s in args.seeds.split(",")]
    for task in tasks:
        data_dir(task, args.out)  # split SQuAD once, before the lanes start
    jobs = [(t, p, s) for s in seeds for t in tasks for p in precisions]
    with ThreadPoolExecutor(args.lanes) as pool:
        records = list(pool.map(lambda job: run_one(args.bertkit, *job, args.out), jobs))
    sys.path.insert(0, str(ROOT / "bench"))
    from machine import describe, markdown

    text = (f"{markdown(describe())}\n\n{table(records, tasks, precisions)}\n\n"
            f"Command: `python bench/finetune_precision.py {' '.join(argv or sys.argv[1:])}`\n")
    (args.out / "table.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
