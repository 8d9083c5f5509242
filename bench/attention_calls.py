"""Attention over a batch of sequences of different lengths on the CPU: one call padded to
the longest, against one call per sequence on its own tokens (``bertkit.model.unpadded.
one_by_one`` chooses). Fits the two call costs the choice reads (``ATTENTION_COST_BY_CLASS``)
on this CPU and prints them, then (with ``--model``) times a model's passes over random
batches of SST-2 dev sentences both ways.

    python bench/attention_calls.py                                  # fit on this CPU
    python bench/attention_calls.py --model runs/base/sst2 --data ../shared/data/glue/SST-2

The fit: per call, ``call + rows * (row + heads * (head + length * token + length**2 * pair))``
microseconds, least squares on the relative error over 2-32 sequences of 8-256 tokens
(``padded``: gathered from the packed tokens, masked, packed again) and one sequence of
2-512 tokens (``single``: its own packed tokens), 2-16 heads of 64; in ``--precision`` (fp32,
or bf16: the inputs a bf16 model's attention gets), ``--threads`` threads (one: what the
servers' benchmarks run). It prints each fit's spread (predicted over measured time) and the
line to put in ``ATTENTION_COST_BY_CLASS`` for this CPU's class and that precision.

    python bench/attention_calls.py --precision bf16 --model runs/base/sst2
"""

from __future__ import annotations

import argparse
import functools
import random
import time

import numpy as np
import torch

HEADS = (2, 4, 12, 16)
SIZE = 64


def _us(f, seconds: float) -> float:
    """Median of 3 timings of ``f`` (each repeated for about ``seconds``), microseconds."""
    f()
    times = []
    for _ in range(3):
        start, n = time.perf_counter(), 0
        while n == 0 or time.perf_counter() - start < seconds:
            f()
            n += 1
        times.append((time.perf_counter() - start) / n * 1e6)
    return float(np.median(times))


def padded_grid(seconds: float, heads_counts=HEADS, dtype=torch.float32) -> list[tuple[int, int, int, float]]:
    """(rows, length, heads, us) of one padded call as ``_attention_padded`` makes it (one
    sequence a token short, so that the mask is on)."""
    from bertkit.model.attention import build_attention_mask
    from bertkit.model.unpadded import Packing, _attention_padded

    grid = []
    for heads in heads_counts:
        for rows in (2, 4, 8, 16, 32):
            for length in (8, 16, 32, 64, 128, 256):
                if rows * length > 4096:
                    continue
                lengths = torch.tensor([length] * (rows - 1) + [length - 1])
                key_mask = torch.arange(length)[None, :] < lengths[:, None]
                mask = build_attention_mask(key_mask, length, False)
                qkv = torch.randn(int(lengths.sum()), 3 * heads * SIZE).to(dtype)
                packing = Packing.from_mask(key_mask)  # made once per pass in a model, as is its gather:
                packing.spread(qkv[:, :1])  # neither is what a call costs
                with torch.inference_mode():
                    grid.append((rows, length, heads,
                                 _us(functools.partial(_attention_padded, qkv, packing, mask, heads, SIZE), seconds)))
    return grid


def single_grid(seconds: float, heads_counts=HEADS, dtype=torch.float32) -> list[tuple[int, int, int, float]]:
    """(1, length, heads, us) of one sequence's call on its own packed tokens."""
    from bertkit.model.unpadded import Packing, _attention_one_by_one

    grid = []
    for heads in heads_counts:
        for length in (2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512):
            qkv = torch.randn(length, 3 * heads * SIZE).to(dtype)
            packing = Packing.from_mask(torch.ones(1, length, dtype=torch.bool))
            packing.offsets  # noqa: B018 (made once per pass in a model, not what a call costs)
            with torch.inference_mode():
                grid.append((1, length, heads, _us(functools.partial(_attention_one_by_one, qkv, packing, heads, SIZE), seconds)))
    return grid


def fit(grid):
    """The :class:`CallCost` fitted to ``grid`` and its spread (10th, 50th, 90th percentile of
    predicted over measured). A grid of single sequences fits no ``row`` term (it is ``call``'s)."""
    from bertkit.model.unpadded import CallCost

    rows_vary = len({r for r, *_ in grid}) > 1
    a = np.array([[1, r, r * h, r * h * n, r * h * n * n] for r, n, h, _ in grid], dtype=float)
    if not rows_vary:
        a[:, 1] = 0.0
    y = np.array([us for *_, us in grid])
    coef, *_ = np.linalg.lstsq(a / y[:, None], np.ones_like(y), rcond=None)
    coef = np.maximum(coef, 0.0)
    cost = CallCost(*(round(float(c), 4) for c in coef))
    ratios = np.array([cost(r, n, h) / us for r, n, h, us in grid])
    return cost, np.percentile(ratios, [10, 50, 90])


def end_to_end(args, cost) -> None:
    """ms per row of the model's passes over random batches, one padded call against
    :func:`one_by_one`'s choice with ``cost``."""
    from bertkit.cpu import cpu_class
    from bertkit.model import unpadded
    from bertkit.serve.app import load_model
    from bertkit.serve.config import ServeConfig

    engine = load_model(ServeConfig(model=args.model, threads=args.threads, precision=args.precision,
                                    attention_impl="unpadded"), announce=False)
    lines = open(f"{args.data}/dev.tsv", encoding="utf-8").read().splitlines()[1:]
    plans = [engine.plan_predict(line.split("\t")[0]) for line in lines]
    key, rows = plans[0].key, [p.rows[0] for p in plans]
    rng = random.Random(0)
    for batch_size in args.batch_sizes:
        batches = [rng.sample(rows, batch_size) for _ in range(max(4, 192 // batch_size))]
        times: dict[str, list[float]] = {"one call": [], "chosen": []}
        for _ in range(args.rounds):
            for name in times:
                unpadded.ATTENTION_COST_BY_CLASS.clear()
                if name == "chosen":
                    unpadded.ATTENTION_COST_BY_CLASS[(cpu_class(), args.precision)] = cost
                engine.run_rows(key, batches[0])
                start = time.process_time()
                for batch in batches:
                    engine.run_rows(key, batch)
                times[name].append((time.process_time() - start) / (len(batches) * batch_size) * 1e3)
        one, chosen = (min(times[name]) for name in times)
        print(f"{args.model}, batches of {batch_size} random SST-2 dev sentences: one call {one:.3f} ms a row, "
              f"one_by_one's choice {chosen:.3f} (x{chosen / one:.3f}, best of {args.rounds}); rounds: "
              + "; ".join(f"{name} " + ", ".join(f"{t:.3f}" for t in ts) for name, ts in times.items()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--seconds", type=float, default=0.05, help="timing per grid point (default 0.05)")
    parser.add_argument("--heads", type=lambda s: [int(x) for x in s.split(",")], default=list(HEADS),
                        help="head counts of the grid (default 2,4,12,16)")
    parser.add_argument("--model", help="a fine-tuned model directory: time its passes both ways")
    parser.add_argument("--data", default="../shared/data/glue/SST-2", help="GLUE SST-2 folder (dev.tsv)")
    parser.add_argument("--batch-sizes", type=lambda s: [int(x) for x in s.split(",")], default=[4, 16, 32])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the model timing")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                        help="the attention inputs' dtype, and the model's precision (default fp32)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    from bertkit.cpu import cpu_class
    from bertkit.model.unpadded import AttentionCost
    from bertkit.precision import AUTOCAST_DTYPES

    costs = {}
    dtype = getattr(torch, AUTOCAST_DTYPES.get(args.precision, "float32"))
    for name, grid in (("padded", padded_grid(args.seconds, args.heads, dtype)),
                       ("single", single_grid(args.seconds, args.heads, dtype))):
        costs[name], spread = fit(grid)
        print(f"{name}: {costs[name]}; predicted / measured, 10th-50th-90th percentile: "
              + " ".join(f"{x:.2f}" for x in spread))
    cost = AttentionCost(**costs)
    print(f'\nfor ATTENTION_COST_BY_CLASS ({torch.get_num_threads()} thread(s), CPU class {cpu_class()}, '
          f'{args.precision}):\n    ("{cpu_class()}", "{args.precision}"): {cost!r},')
    if args.model:
        end_to_end(args, cost)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
