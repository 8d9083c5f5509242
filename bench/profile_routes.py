"""Where an inference route spends its time: ``torch.profiler`` over the engine's routes.

A randomly initialised sequence classifier of the preset, run as the engine runs it
(:func:`bertkit.modeldir.int8.prepare`, autocast; ``compiled``: the engine's
``compile="on"`` route, compiled before profiling) on real-length-free fixed batches; prints,
for each route, the time per batch and the operators taking the most self CPU time (the
profile behind docs/serving-results.md, "The compiled route").

    python bench/profile_routes.py --shape base --batch 8x128 --routes bf16,bf16-compiled --threads 1
"""

from __future__ import annotations

import argparse
import copy
import time

import torch

ROUTES = ("fp32", "bf16", "int8", "fp32-compiled", "bf16-compiled")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="base", help="model preset (default base)")
    p.add_argument("--batch", default="8x128", help="BATCHxTOKENS (default 8x128)")
    p.add_argument("--routes", default="bf16,bf16-compiled", help=f"comma-separated, of {', '.join(ROUTES)}")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--iterations", type=int, default=5, help="batches profiled per route (default 5)")
    p.add_argument("--top", type=int, default=12, help="operators listed per route (default 12)")
    args = p.parse_args(argv)
    for route in args.routes.split(","):
        if route not in ROUTES:
            p.error(f"--routes: unknown route {route!r} (choose from {', '.join(ROUTES)})")
    return args


def build(model, route: str):
    """``run(ids, types, mask)`` for ``route``, compiled (and warmed up) where asked."""
    from bertkit.inference import compiled
    from bertkit.modeldir.int8 import prepare
    from bertkit.precision import autocast

    precision = route.removesuffix("-compiled")
    prepared = prepare(copy.deepcopy(model), precision)
    if route.endswith("-compiled"):
        compiled.compile_encoder(prepared)
        compiled.warm_up(prepared, precision)

    def run(ids, types, mask):
        with torch.inference_mode(), autocast(precision):
            return prepared(ids, types, mask).logits
    return run


def main(argv=None) -> int:
    args = parse_args(argv)
    from bertkit.config import BertConfig
    from bertkit.model import BertForSequenceClassification

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    batch, tokens = (int(x) for x in args.batch.split("x"))
    model = BertForSequenceClassification(BertConfig.preset(args.shape), 2).eval()
    ids = torch.randint(1000, model.config.vocab_size, (batch, tokens))
    inputs = (ids, torch.zeros_like(ids), torch.ones_like(ids))
    print(f"{args.shape} {args.batch}, {args.threads} thread(s), torch {torch.__version__}")
    for route in args.routes.split(","):
        run = build(model, route)
        run(*inputs)
        start = time.perf_counter()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for _ in range(args.iterations):
                run(*inputs)
        ms = (time.perf_counter() - start) / args.iterations * 1000
        print(f"\n## {route}: {ms:.1f} ms per batch (profiled)\n")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.top,
                                        max_name_column_width=48))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
