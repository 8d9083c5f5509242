"""PyTorch 2's static INT8 route against bertkit's dynamic INT8, side by side (issue 24).

Export (``torch.export``), ``X86InductorQuantizer`` (static per-channel weights, activations
calibrated on 4 random batches), ``prepare_pt2e`` / ``convert_pt2e`` from ``torchao``, then
``torch.compile`` (inductor, ``freezing=True``); against bertkit fp32 (eager and compiled)
and ``bertkit.modeldir.int8`` in eager mode. A randomly initialised sequence classifier of
the preset; no attention mask is passed (bertkit's key-padding branch does not export), so
use fixed-length batches. Needs ``pip install torchao`` (bench-only); prints the time per
batch of each route (best of ``--rounds`` interleaved rounds) and the logits' distance to fp32.

    python bench/pt2e_int8.py --shape base --batch 8x128
"""

from __future__ import annotations

import argparse
import copy
import time
import warnings

import torch


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, types):
        return self.model(ids, types, None)["logits"]


def best_ms(f, inputs, seconds: float) -> float:
    with torch.no_grad():
        for _ in range(2):
            f(*inputs)
        start, n = time.perf_counter(), 0
        while time.perf_counter() - start < seconds:
            f(*inputs)
            n += 1
    return (time.perf_counter() - start) / n * 1000


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="base", help="model preset (default base)")
    parser.add_argument("--batch", default="8x128", help="BATCHxTOKENS (default 8x128)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=1.5, help="timing per route per round")
    args = parser.parse_args(argv)
    try:
        import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    except ImportError as e:
        raise SystemExit(f"needs torchao (pip install torchao): {e}") from None
    import torch._inductor.config as inductor

    from bertkit.config import BertConfig
    from bertkit.model import BertForSequenceClassification
    from bertkit.modeldir.int8 import quantize_int8

    warnings.filterwarnings("ignore")
    inductor.freezing = True
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    batch, tokens = (int(x) for x in args.batch.split("x"))
    model = Logits(BertForSequenceClassification(BertConfig.preset(args.shape), num_labels=2).eval()).eval()

    def inputs():
        ids = torch.randint(1000, 20000, (batch, tokens))
        return ids, torch.zeros_like(ids)

    x = inputs()
    with torch.no_grad():
        reference = model(*x)
        dynamic = Logits(quantize_int8(copy.deepcopy(model.model))).eval()
        start = time.perf_counter()
        prepared = prepare_pt2e(torch.export.export(model, x).module(), _quantizer(xiq))
        for _ in range(4):
            prepared(*inputs())
        static = torch.compile(convert_pt2e(prepared))
        static(*x)
        compile_s = time.perf_counter() - start
        compiled = torch.compile(copy.deepcopy(model))
        compiled(*x)
        routes = {"fp32 eager": model, "fp32 compiled": compiled, "bertkit int8 eager": dynamic,
                  "pt2e static int8 compiled": static}
        for name, f in routes.items():
            print(f"{name}: max |logit - fp32| {(f(*x) - reference).abs().max().item():.4f}")
    print(f"pt2e export + calibration + compile: {compile_s:.0f} s")
    best = dict.fromkeys(routes, float("inf"))
    for _ in range(args.rounds):
        for name, f in routes.items():
            best[name] = min(best[name], best_ms(f, x, args.seconds))
    for name, ms in best.items():
        print(f"{args.shape} {args.batch} {name:>26}: {ms:8.1f} ms/batch")
    print(f"pt2e static / bertkit int8: x{best['bertkit int8 eager'] / best['pt2e static int8 compiled']:.2f}")
    return 0


def _quantizer(xiq):
    quantizer = xiq.X86InductorQuantizer()
    quantizer.set_global(xiq.get_default_x86_inductor_quantization_config())
    return quantizer


if __name__ == "__main__":
    raise SystemExit(main())
