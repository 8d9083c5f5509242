"""Inference speed by precision: bertkit fp32 / bf16 / INT8, ONNX Runtime fp32 / INT8 and
Hugging Face fp32 / INT8 (the same PyTorch dynamic-quantisation route), side by side in one run.

The model is a sequence classifier (random weights, same weights everywhere) of each preset
in ``--shapes``. Workloads: fixed length ``--seq-len`` at each of ``--batch-sizes`` (random
ids), and SST-2 dev sentences (``../shared/data``; skipped when absent) in batches of
``--text-batch``: bertkit and ONNX Runtime get bertkit's length-sorted batches, Hugging Face
the usual file-order batches padded to their longest sentence. Figures are sequences/s,
best of ``--rounds`` interleaved rounds of at least ``--min-time`` s each; ratios are against
Hugging Face fp32. Every row's logits are checked against bertkit fp32 before timing
(fp32 rows within 1e-3, the others within 10% of the logits' range).

This is the precision axis of ``bench/inference.py`` (which compares bare encoders), kept in
its own script::

    python bench/precision.py                                  # base and mini, minutes
    python bench/precision.py --shapes mini --rounds 1 --min-time 0.5   # a quick look
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

from bertkit.checkpoint import save_pretrained
from bertkit.config import BertConfig
from bertkit.inference_tasks import token_batches
from bertkit.model import BertForSequenceClassification
from bertkit.precision import autocast, quantize_int8

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
ROWS = ("bertkit fp32", "bertkit bf16", "bertkit int8", "ort fp32", "ort int8", "hf fp32", "hf int8")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="base,mini")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch-sizes", default="8,32")
    p.add_argument("--text-batch", type=int, default=32)
    p.add_argument("--text-limit", type=int, default=0, help="SST-2 dev sentences (0 = all 872)")
    p.add_argument("--base-text-batches", type=int, default=4,
                   help="for hidden >= 768 time only this many text batches, evenly spread (0 = all)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--min-time", type=float, default=1.5)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--rows", default=",".join(ROWS), help="comma-separated rows to run")
    p.add_argument("--json")
    return p.parse_args(argv)


class Runner:
    """``run(batch)`` for one row: a callable over (ids, types, mask) returning logits."""

    def __init__(self, name, fn, hf=False):
        self.name, self.fn, self.hf = name, fn, hf


def make_runners(model, directory, names, tmp):
    runners = {}

    def bertkit(m, precision):
        def run(ids, types, mask):
            with torch.inference_mode(), autocast(precision):
                return m(ids, types, mask).logits.float()
        return run

    if "bertkit fp32" in names:
        runners["bertkit fp32"] = bertkit(model, "fp32")
    if "bertkit bf16" in names:
        runners["bertkit bf16"] = bertkit(model, "bf16")
    if "bertkit int8" in names:
        runners["bertkit int8"] = bertkit(quantize_int8(copy.deepcopy(model)), "fp32")
    for precision in ("fp32", "int8"):
        if f"ort {precision}" in names:
            from bertkit.onnx_export import OrtModel, export_onnx

            ort = OrtModel(export_onnx(directory, Path(tmp) / f"{precision}.onnx", int8=precision == "int8"),
                           threads=torch.get_num_threads())
            runners[f"ort {precision}"] = lambda ids, types, mask, o=ort: o(ids, types, mask).logits
    if "hf fp32" in names or "hf int8" in names:
        import transformers

        hf = transformers.BertForSequenceClassification.from_pretrained(
            directory, attn_implementation="sdpa", local_files_only=True).eval()

        def hf_run(m):
            def run(ids, types, mask):
                with torch.inference_mode():
                    return m(input_ids=ids, token_type_ids=types, attention_mask=mask).logits
            return run

        if "hf fp32" in names:
            runners["hf fp32"] = hf_run(hf)
        if "hf int8" in names:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                q = torch.ao.quantization.quantize_dynamic(copy.deepcopy(hf), {torch.nn.Linear},
                                                           dtype=torch.qint8)
            runners["hf int8"] = hf_run(q)
    return runners


def pad(rows):
    width = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = 1
    return ids, torch.zeros_like(ids), mask


def measure(run, batches, min_time):
    sequences = sum(b[0].shape[0] for b in batches)
    done, start = 0, time.perf_counter()
    while True:
        for b in batches:
            run(*b)
        done += sequences
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return done / elapsed


def check(runners, batch):
    ref = runners["bertkit fp32"](*batch) if "bertkit fp32" in runners else None
    if ref is None:
        return
    scale = float(ref.max() - ref.min()) or 1.0
    for name, run in runners.items():
        diff = float((run(*batch) - ref).abs().max())
        limit = 1e-3 if name.endswith("fp32") else 0.1 * scale
        if diff > limit:
            raise SystemExit(f"{name} differs from bertkit fp32 by {diff:.3g} (limit {limit:.3g})")


def compare(label, workloads, runners, args, results):
    best = dict.fromkeys(workloads, 0.0)
    for round_ in range(args.rounds):
        order = list(workloads) if round_ % 2 == 0 else list(reversed(list(workloads)))
        for name in order:
            best[name] = max(best[name], measure(runners[name], workloads[name], args.min_time))
    base = best.get("hf fp32")
    cells = [f"{n} {v:7.1f}" + (f" (x{v / base:.2f})" if base else "") for n, v in best.items()]
    print(f"  {label:<24} seq/s vs hf fp32: " + " | ".join(cells), flush=True)
    results.append({"workload": label, "seq_per_s": best})


def sst2_ids(limit):
    dev, vocab = DATA / "glue" / "SST-2" / "dev.tsv", DATA / "vocab" / "bert-base-uncased-vocab.txt"
    if not dev.exists() or not vocab.exists():
        return None
    from bertkit.tokenizer import BertTokenizer

    tok = BertTokenizer.from_file(vocab, lowercase=True)
    with open(dev, encoding="utf-8") as f:
        sentences = [r["sentence"] for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
    return [e.input_ids for e in tok.encode_batch(sentences[: limit or None], max_length=128)]


def spread(batches, count):
    if not count or count >= len(batches):
        return batches
    step = len(batches) / count
    return [batches[int(i * step + step / 2)] for i in range(count)]


def bench_shape(shape, args, results, text):
    config = BertConfig.preset(shape)
    torch.manual_seed(0)
    model = BertForSequenceClassification(config, 2).eval()
    names = [r for r in args.rows.split(",") if r]
    with tempfile.TemporaryDirectory() as tmp:
        save_pretrained(model, Path(tmp) / "m")
        runners = make_runners(model, Path(tmp) / "m", names, tmp)
        print(f"{shape}: {config.num_hidden_layers} layers, hidden {config.hidden_size} "
              f"(rows: {', '.join(runners)})", flush=True)
        g = torch.Generator().manual_seed(1)
        for size in [int(b) for b in args.batch_sizes.split(",") if b.strip()]:
            ids = torch.randint(1000, config.vocab_size, (size, args.seq_len), generator=g)
            batch = (ids, torch.zeros_like(ids), torch.ones_like(ids))
            check(runners, batch)
            compare(f"fixed {args.seq_len} x {size}", {n: [batch] for n in runners}, runners, args, results)
        if text is None:
            print("  (SST-2 dev not found: variable length skipped)")
            return
        file_order = [pad(text[i: i + args.text_batch]) for i in range(0, len(text), args.text_batch)]
        order = sorted(range(len(text)), key=lambda i: -len(text[i]))
        by_length = [pad([text[i] for i in b]) for b in token_batches(order, lambda i: len(text[i]),
                                                                    10 ** 9, args.text_batch)]
        if config.hidden_size >= 768:
            file_order, by_length = spread(file_order, args.base_text_batches), spread(by_length, args.base_text_batches)
        check(runners, by_length[0])
        workloads = {n: (file_order if n.startswith("hf") else by_length) for n in runners}
        compare(f"SST-2 dev x {args.text_batch}", workloads, runners, args, results)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)
    text = sst2_ids(args.text_limit)
    results = []
    for shape in args.shapes.split(","):
        bench_shape(shape, args, results, text)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
