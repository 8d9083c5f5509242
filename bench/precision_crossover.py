"""bf16 against fp32 by model size: where does ``auto``'s bf16 start to pay on this CPU?

For each preset (tiny .. base), in one process, interleaved rounds (best of ``--rounds``):
* inference: the encoder's forward pass (``torch.inference_mode``) at each ``--shapes``
  batch x tokens, fp32 weights as they are against bf16 as the engine runs it
  (:func:`bertkit.modeldir.int8.prepare`: linear weights stored in bf16, under
  :func:`bertkit.precision.autocast`; ``--autocast-only`` keeps fp32 weights cast at every
  forward, the route before issue 33);
* training: one fine-tuning step (sequence classification, forward + backward + AdamW) at
  ``--train-shape``, fp32 against bf16 autocast (the route ``finetune --precision bf16`` takes).

Prints one line per (size, workload) with both times and the ratio fp32 time / bf16 time (>1:
bf16 is faster), then bertkit's own ``auto`` choice for that size on this CPU, and writes the
rows as JSON to ``--output``::

    python bench/precision_crossover.py --threads 1 --sizes tiny,mini,small,medium,base
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import torch

from bertkit.config import BertConfig
from bertkit.cpu import bound_onednn_cache
from bertkit.model.task_models import BertForSequenceClassification
from bertkit.modeldir.int8 import prepare
from bertkit.precision import autocast


def parse_shape(text: str) -> tuple[int, int]:
    batch, _, tokens = text.partition("x")
    return int(batch), int(tokens)


def timed(fn, min_time: float) -> float:
    """Seconds per call: the mean over as many calls as fill ``min_time`` (after one warm-up)."""
    fn()
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return elapsed / calls


def inputs(shape: tuple[int, int], varlen: bool):
    """A function giving the next batch of token ids: always ``shape``, or (``varlen``) the
    batch at each of 15 lengths from 16 to ``shape[1]`` in turn, as fine-tuning's length
    buckets and a server's requests give them (a new matrix shape at almost every call)."""
    batch, tokens = shape
    lengths = [max(1, round(16 + i * (tokens - 16) / 14)) for i in range(15)] if varlen else [tokens]
    batches = [torch.randint(1000, 2000, (batch, n)) for n in lengths]
    state = {"i": 0}

    def next_ids():
        state["i"] += 1
        return batches[state["i"] % len(batches)]
    return next_ids


def inference_fn(model, precision: str, shape: tuple[int, int], varlen: bool):
    next_ids = inputs(shape, varlen)

    def run():
        ids = next_ids()
        with torch.inference_mode(), autocast(precision):
            model.bert(ids, None, torch.ones_like(ids))
    return run


def training_fn(model, precision: str, shape: tuple[int, int], varlen: bool):
    next_ids = inputs(shape, varlen)
    labels = torch.randint(0, 2, (shape[0],))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)

    def run():
        ids = next_ids()
        with autocast(precision):
            loss = model(ids, None, torch.ones_like(ids), labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return run


def measure(size: str, workload: str, shape, rounds: int, min_time: float, varlen: bool,
            autocast_only: bool = False) -> dict:
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig.preset(size, vocab_size=30522), num_labels=2)
    model.train(workload == "train")
    if workload == "train":
        fns = {p: training_fn(model, p, shape, varlen) for p in ("fp32", "bf16")}
    else:
        half = model if autocast_only else prepare(copy.deepcopy(model), "bf16")
        fns = {"fp32": inference_fn(model, "fp32", shape, varlen),
               "bf16": inference_fn(half, "bf16", shape, varlen)}
    best = {p: float("inf") for p in fns}
    for _ in range(rounds):
        for p, fn in fns.items():
            best[p] = min(best[p], timed(fn, min_time))
    return {"size": size, "workload": workload,
            "shape": f"{shape[0]}x{'16..' if varlen else ''}{shape[1]}",
            "fp32_ms": round(1e3 * best["fp32"], 2), "bf16_ms": round(1e3 * best["bf16"], 2),
            "bf16_speedup": round(best["fp32"] / best["bf16"], 3)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="tiny,mini,small,medium,base")
    parser.add_argument("--shapes", default="1x128,8x128,32x128", help="inference batch x tokens")
    parser.add_argument("--train-shape", default="16x128", help="training step batch x tokens")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--min-time", type=float, default=1.0, help="seconds per timing")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--autocast-only", action="store_true",
                        help="inference in bf16 with fp32 weights cast at every forward pass")
    parser.add_argument("--fixed", action="store_true",
                        help="one sequence length per workload (default: 15 lengths in turn)")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    bound_onednn_cache()  # as every bertkit run does, before the first matrix product
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from machine import describe, markdown

    from bertkit.precision import resolve

    print(markdown(describe()), flush=True)
    rows = []
    for size in args.sizes.split(","):
        hidden = BertConfig.preset(size).hidden_size
        work = [("inference", parse_shape(s)) for s in args.shapes.split(",")]
        work.append(("train", parse_shape(args.train_shape)))
        for workload, shape in work:
            row = measure(size, workload, shape, args.rounds, args.min_time, not args.fixed,
                          args.autocast_only)
            row["auto"] = resolve("auto", "cpu", hidden_size=hidden, training=workload == "train")[0]
            rows.append(row)
            print(f"{size:7s} {workload:9s} {row['shape']:11s} fp32 {row['fp32_ms']:9.2f} ms  "
                  f"bf16 {row['bf16_ms']:9.2f} ms  fp32/bf16 {row['bf16_speedup']:.2f}  "
                  f"auto: {row['auto']}", flush=True)
    if args.output:
        args.output.write_text(json.dumps({"machine": describe(), "threads": args.threads,
                                           "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
