"""Static INT8's two compiled forms side by side (issue 33): one quantised encoder
(``bertkit.inference.static_int8.quantised_graph``, calibrated on SST-2 train sentences)
compiled by ``torch.compile`` (dynamic shapes, frozen weights, under bf16 autocast where the
CPU computes bf16 natively) and by AOTInductor into a package (``export_quantised``: the
autocast inside the program), timed on random 128-token rows in interleaved rounds (the best
of each kept), CPU clock (a busy machine moves the wall clock far more; ``--clock wall`` at
several threads, where CPU seconds count every thread's). This is the
measurement behind the route's choice: the package for lone inputs, ``torch.compile`` for
batches (bench/results/inference-static-int8-aot-amx-2026-11-26.md).

    python bench/static_int8_forms.py --vocab VOCAB.txt --data GLUE/SST-2 --threads 1
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="base", help="model preset, randomly initialised (default base)")
    p.add_argument("--vocab", required=True, help="vocab.txt (uncased) for the calibration sentences")
    p.add_argument("--data", required=True, help="the SST-2 folder (train.tsv: 300 calibration sentences)")
    p.add_argument("--batch-sizes", default="1,8,32")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=1.5, help="CPU seconds per measurement")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                   help="cpu: rows per CPU-second (default; a busy machine moves it least); wall: per "
                        "wall-clock second (what a caller waits on, the one to read at several threads)")
    return p.parse_args(argv)


def rate(f, inputs, seconds: float, clock=time.process_time) -> float:
    """Rows per CPU-second of ``f(*inputs)`` over at least ``seconds`` CPU-seconds."""
    count, start = 0, clock()
    while clock() - start < seconds:
        f(*inputs)
        count += 1
    return count * inputs[0].shape[0] / (clock() - start)


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    from bertkit import cpu
    from bertkit.config import BertConfig
    from bertkit.inference import static_int8
    from bertkit.model import BertModel
    from bertkit.tokenizer import BertTokenizer

    if static_int8.blocker():
        raise SystemExit(static_int8.blocker())
    torch.manual_seed(0)
    model = BertModel(BertConfig.preset(args.shape)).eval()
    lines = (Path(args.data) / "train.tsv").read_text(encoding="utf-8").splitlines()[1:301]
    tokenizer = BertTokenizer.from_file(args.vocab, lowercase=True)
    rows = tokenizer.encode_batch([line.split("\t")[0] for line in lines], max_length=args.seq_len)
    calibration = static_int8.calibration_batches(rows)
    bf16 = cpu.cpu_bf16_support().native
    start = time.perf_counter()
    graph = static_int8.quantised_graph(model, model, model.forward, calibration)
    print(f"exported and calibrated in {time.perf_counter() - start:.0f} s; bf16 elsewhere: {bf16}", flush=True)
    from torch._inductor import config as inductor

    jit = inductor.patch(freezing=True)(torch.compile(graph, dynamic=True))

    def compiled(*inputs):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            return jit(*inputs)

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as where:
        package = Path(where) / "encoder.pt2"
        static_int8._build(graph, model, calibration, bf16, package)
        forms = {"torch.compile": compiled, "package": static_int8._load(package)}
        print(f"package built in {time.perf_counter() - start:.0f} s", flush=True)
        sizes = [int(b) for b in args.batch_sizes.split(",")]

        def inputs(batch):
            ids = torch.randint(1000, model.config.vocab_size, (batch, args.seq_len))
            return ids, torch.zeros_like(ids), torch.ones_like(ids)

        best: dict[tuple[str, int], float] = {}
        with torch.inference_mode():
            for batch in sizes:  # compile and warm every form at every size first
                for form in forms.values():
                    form(*inputs(batch))
            for _ in range(args.rounds):
                for batch in sizes:
                    x = inputs(batch)
                    for name, form in forms.items():
                        timed = rate(form, x, args.seconds, CLOCKS[args.clock])
                        best[name, batch] = max(best.get((name, batch), 0.0), timed)
    print(f"\n{args.shape}, {args.threads} thread(s), rows/s ({args.clock} clock), best of {args.rounds}; "
          f"CPU class {cpu.cpu_class()}")
    for batch in sizes:
        jit_rate, aot_rate = best["torch.compile", batch], best["package", batch]
        print(f"  {batch:3d} x {args.seq_len}: torch.compile {jit_rate:6.1f} | package {aot_rate:6.1f} "
              f"(x{aot_rate / jit_rate:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
