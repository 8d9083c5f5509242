"""Where a pass's time goes in OpenVINO and in bertkit, side by side, at one shape (issue 33).

One randomly initialised BERT sequence classifier of the preset, exported for OpenVINO as
``bench/inference.py --precision`` does (INT8: NNCF static quantisation on 300 SST-2 train
sentences), run on packed SST-2 dev text: OpenVINO's own per-node counters (``PERF_COUNT``,
summed by node type and kernel, averaged over the passes) and ``torch.profiler`` over
bertkit's route at the same precision (bf16: the engine's prepared model; fp32; INT8: static
INT8, its AOTInductor package built for this run with inductor's kernel profiling, in a
temporary cache, so that the profiler sees its kernels and oneDNN calls). That build is not
max-autotuned: with kernel profiling, inductor's C++ INT8 GEMM templates fail to compile at a
dynamic length (their profiler label holds the symbolic size, ``ms18*s41``), so on the classes
that autotune (``static_int8.AUTOTUNED_CLASSES``) the autotuned package could not be profiled
anyway and fell back to oneDNN; the profiled package runs every product on oneDNN, which the
shipped autotuned package was measured level with from 1 x 40 to 8 x 128 tokens and within 5% at
32 x 128 (avx512_bf16 EPYC, docs/serving-results.md, seventh session).
Each line gives milliseconds a pass and the share of the counted time, CPU clock.

    python bench/openvino_counters.py --batch 1x128 --routes ov:bf16,bertkit:bf16 --threads 1
"""

from __future__ import annotations

import argparse
import collections
import copy
import os
import tempfile
import time
from pathlib import Path
from unittest import mock

import torch

ROUTES = ("ov:fp32", "ov:bf16", "ov:int8", "bertkit:fp32", "bertkit:bf16", "bertkit:int8")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="base", help="model preset (default base)")
    p.add_argument("--batch", default="1x128", help="ROWSxTOKENS (default 1x128)")
    p.add_argument("--routes", default="ov:bf16,bertkit:bf16", help=f"comma-separated, of {', '.join(ROUTES)}")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--passes", type=int, default=8, help="passes counted per route (default 8)")
    p.add_argument("--top", type=int, default=12, help="lines listed per route (default 12)")
    args = p.parse_args(argv)
    for route in args.routes.split(","):
        if route not in ROUTES:
            p.error(f"--routes: unknown route {route!r} (choose from {', '.join(ROUTES)})")
    try:
        rows, tokens = (int(n) for n in args.batch.split("x"))
    except ValueError:
        p.error(f"--batch: ROWSxTOKENS, e.g. 8x128, got {args.batch!r}")
    args.rows, args.tokens = rows, tokens
    return args


def openvino_counters(directory: Path, precision: str, batch, calibration, args) -> None:
    import openvino as ov

    from bertkit.inference import openvino as bov

    int8 = precision == "int8"
    xml = bov.convert(directory, directory.parent / f"ov-{precision}", int8=int8,
                      calibration=bov.calibration_batches(calibration) if int8 else None)
    hint = {"fp32": "f32", "bf16": "bf16", "int8": "bf16" if bov.native_bf16() else "f32"}[precision]
    compiled = ov.Core().compile_model(str(xml), "CPU", {
        "INFERENCE_PRECISION_HINT": hint, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_NUM_THREADS": args.threads, "PERF_COUNT": True})
    request = compiled.create_infer_request()
    ids, types, mask = batch
    feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "token_type_ids": types.numpy()}
    for _ in range(3):
        request.infer(feeds)
    by_node: collections.Counter = collections.Counter()
    start = time.process_time()
    for _ in range(args.passes):
        request.infer(feeds)
        for node in request.profiling_info:
            by_node[node.node_type, node.exec_type] += node.real_time.total_seconds() * 1e3 / args.passes
    counted = sum(by_node.values())
    print(f"OpenVINO {precision} {args.batch}: {(time.process_time() - start) / args.passes * 1e3:.1f} ms a pass, "
          f"its counters {counted:.1f} ms")
    for (node, kernel), ms in by_node.most_common(args.top):
        print(f"  {node:30s} {kernel:26s} {ms:8.2f} ms {100 * ms / counted:5.1f}%")


def bertkit_profile(model, precision: str, batch, calibration, args) -> None:
    from bertkit.modeldir.int8 import prepare
    from bertkit.precision import autocast

    label = precision
    if precision == "int8":
        from bertkit.inference import static_int8

        prepared = copy.deepcopy(model)
        static_int8.quantize_static(prepared, static_int8.calibration_batches(calibration))
        profiled = {**_untuned(static_int8.package_inductor_configs()), "cpp.enable_kernel_profile": True}
        with (tempfile.TemporaryDirectory() as cache, mock.patch.dict(os.environ, {static_int8.CACHE_ENV: cache}),
              mock.patch.object(static_int8, "package_inductor_configs", lambda: profiled)):
            static_int8.warm_up(prepared)
        precision = "fp32"  # the float work inside the package is its own (bf16 where native)
    else:
        prepared = prepare(copy.deepcopy(model), precision)

    def run():
        with torch.inference_mode(), autocast(precision):
            return prepared.head_logits(*batch)  # as the engine's classifier rows
    for _ in range(3):
        run()
    start = time.process_time()
    for _ in range(args.passes):
        run()
    print(f"bertkit {label} {args.batch}: "
          f"{(time.process_time() - start) / args.passes * 1e3:.1f} ms a pass")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(args.passes):
            run()
    table = prof.key_averages(group_by_input_shape=True).table(
        sort_by="self_cpu_time_total", row_limit=args.top, max_name_column_width=60, max_shapes_column_width=56)
    print(table)


def _untuned(configs: dict) -> dict:
    """``configs`` without max-autotune (see the module's doc: its templates do not compile
    with kernel profiling at a dynamic length)."""
    return {k: v for k, v in configs.items() if not k.startswith("max_autotune")}


def main(argv=None) -> int:
    args = parse_args(argv)
    import inference as bench  # bench/inference.py: the same text and calibration

    from bertkit.checkpoint import save_pretrained
    from bertkit.config import BertConfig
    from bertkit.cpu import cpu_class
    from bertkit.model import BertForSequenceClassification

    torch.set_num_threads(args.threads)
    text, calibration = bench.sst2_token_ids(0), bench.sst2_token_ids(0, "train")
    if text is None:
        raise SystemExit("needs ../shared/data (SST-2 and the uncased vocabulary)")
    calibration = calibration[:bench.CALIBRATION]
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig.preset(args.shape), 2).eval()
    batch = bench.packed_batch(text, args.rows, args.tokens)
    print(f"{args.shape}, {args.threads} thread(s), CPU class {cpu_class()}, torch {torch.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "m"
        save_pretrained(model, directory)
        for route in args.routes.split(","):
            engine, precision = route.split(":")
            if engine == "ov":
                openvino_counters(directory, precision, batch, calibration, args)
            else:
                bertkit_profile(model, precision, batch, calibration, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
