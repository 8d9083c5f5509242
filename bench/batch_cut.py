"""What cutting a server's padded batches saves: the engine's forward passes over random groups
of SST-2 dev sentences (as rows of concurrent requests gather: any order of length), each group
run whole (padded to its longest row) or cut by :func:`bertkit.inference.heads.cheapest_cuts`
at several fixed costs of a pass (in padded tokens), interleaved; CPU milliseconds per row.

The server measures the cost of a pass itself (``bertkit.serve.batcher.PassCost``); this shows
which costs pay on a model and route, and how much.

    python bench/batch_cut.py --model runs/base/sst2 --precision int8 --calibration 300
    python bench/batch_cut.py --model runs/sst2 --precision int8 --pass-tokens 32,128,512
"""

from __future__ import annotations

import argparse
import csv
import random
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="a fine-tuned SST-2 model directory")
    p.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "glue" / "SST-2"),
                   help="the SST-2 folder (dev.tsv; train.tsv for --calibration)")
    p.add_argument("--precision", default="auto")
    p.add_argument("--calibration", type=int, default=0, metavar="N",
                   help="static INT8 calibrated on the first N train sentences (0: none)")
    p.add_argument("--rows", type=int, default=16, help="rows per group (default 16: concurrency 32's batches)")
    p.add_argument("--groups", type=int, default=24)
    p.add_argument("--pass-tokens", default="8,32,128", help="costs of a pass to cut at, comma-separated")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    if args.rows < 2 or args.groups < 1 or args.rounds < 1 or args.threads < 1:
        p.error("--rows must be at least 2; --groups, --rounds and --threads at least 1")
    return args


def sentences(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [row[0] for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)][1:]


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    from bertkit.inference import load
    from bertkit.inference.heads import cheapest_cuts

    torch.set_num_threads(args.threads)
    options = {}
    if args.calibration:
        options["calibration"] = sentences(Path(args.data) / "train.tsv")[: args.calibration]
    bert = load(args.model, precision=args.precision, **options)
    bert.unpad("padded")  # as a server's padded routes run (fp32's eager route would run unpadded)
    plans = [bert.plan_predict(text, "truncate", None) for text in sentences(Path(args.data) / "dev.tsv")]
    key, rows = plans[0].key, [p.rows[0] for p in plans]
    rng = random.Random(0)
    groups = [sorted(rng.sample(rows, args.rows), key=lambda r: -len(r.input_ids)) for _ in range(args.groups)]
    for group in groups[:3]:
        bert.run_rows(key, group)
    costs = [None] + [float(x) for x in args.pass_tokens.split(",")]
    per_row = {c: [] for c in costs}
    passes = {}
    print(f"{args.model}: precision {bert.served_precision} ({bert.precision_reason}), {args.threads} thread(s), "
          f"{args.groups} groups of {args.rows} rows, torch {torch.__version__}", flush=True)
    for r in range(args.rounds):
        for cost in costs[r % len(costs):] + costs[: r % len(costs)]:
            started, count = time.process_time(), 0
            for group in groups:
                cuts = [(0, len(group))] if cost is None else cheapest_cuts([len(x.input_ids) for x in group], cost)
                for i, j in cuts:
                    bert.run_rows(key, group[i:j])
                count += len(cuts)
            per_row[cost].append((time.process_time() - started) / (args.rows * args.groups) * 1000)
            passes[cost] = count / args.groups
            print(f"round {r + 1} {'whole' if cost is None else f'cut at {cost:g}':>12}: "
                  f"{per_row[cost][-1]:.2f} ms of CPU a row, {passes[cost]:.2f} passes a group", flush=True)
    whole = statistics.median(per_row[None])
    print("\n| batches | passes a group | CPU ms a row (median) | whole / this |\n|---|---|---|---|")
    for cost in costs:
        ms = statistics.median(per_row[cost])
        print(f"| {'whole' if cost is None else f'cut, a pass = {cost:g} tokens'} | {passes[cost]:.2f} | {ms:.2f} "
              f"| {whole / ms:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
