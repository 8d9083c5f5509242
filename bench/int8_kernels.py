"""One dynamic INT8 linear layer packed for PyTorch's ``onednn`` and ``x86`` (fbgemm)
engines, timed side by side at a range of input rows: the measurement behind
``bertkit.modeldir.int8.small_rows`` (docs/serving-results.md, "The INT8 kernels").

    python bench/int8_kernels.py                       # Tiny, Mini and Base layer shapes
    python bench/int8_kernels.py --rows 1,24,256,1024 --threads 2

Prints, per layer shape and row count, the best time of each engine over ``--rounds``
interleaved rounds and the ratio x86 / onednn (below 1: x86 is faster).
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch

SHAPES = ((128, 512), (256, 1024), (768, 768), (768, 3072))


def packed(engine: str, layer: torch.nn.Linear):
    """``layer`` quantised as bertkit does (per-channel int8 weights), packed for ``engine``."""
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = engine
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.ao.quantization.quantize_dynamic(
                torch.nn.Sequential(layer), {torch.nn.Linear: torch.ao.quantization.per_channel_dynamic_qconfig},
                dtype=torch.qint8)
    finally:
        torch.backends.quantized.engine = previous


def best_us(module, x, seconds: float) -> float:
    with torch.inference_mode():
        for _ in range(3):
            module(x)
        start, n = time.perf_counter(), 0
        while time.perf_counter() - start < seconds:
            module(x)
            n += 1
        return (time.perf_counter() - start) / n * 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="1,8,24,64,128,256,1024,4096", help="input rows (batch x tokens)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--seconds", type=float, default=0.15, help="timing per engine per round")
    args = parser.parse_args(argv)
    engines = [e for e in ("onednn", "x86") if e in torch.backends.quantized.supported_engines]
    if len(engines) < 2:
        raise SystemExit(f"this PyTorch lacks an engine: has {torch.backends.quantized.supported_engines}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    from bertkit.cpu import cpu_bf16_support, cpu_has_vnni

    print(f"threads {args.threads}; VNNI: {cpu_has_vnni()}; native bf16: {cpu_bf16_support()}")
    print(f"{'layer':>12} {'rows':>6} {'onednn us':>10} {'x86 us':>10} {'x86/onednn':>10}")
    for n_in, n_out in SHAPES:
        layer = torch.nn.Linear(n_in, n_out)
        modules = {e: packed(e, layer) for e in engines}
        for rows in (int(r) for r in args.rows.split(",")):
            x = torch.randn(rows, n_in)
            best = dict.fromkeys(engines, float("inf"))
            for _ in range(args.rounds):
                for e in engines:
                    best[e] = min(best[e], best_us(modules[e], x, args.seconds))
            print(f"{n_in:>5} x {n_out:<4} {rows:>6} {best['onednn']:>10.1f} {best['x86']:>10.1f} "
                  f"{best['x86'] / best['onednn']:>10.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
