#!/usr/bin/env python3
"""Model FLOPs utilisation of a ``bertkit pretrain`` run, from its log.

    python bench/mfu.py RUN_DIR [RUN_DIR ...] --peak-tflops 989

``tokens_per_s`` in the log counts real tokens (padding left out), over the steps since the
previous log line; the steady rate is the median of the lines after the first (which holds
start-up). Model FLOPs per real token, training = 3 x forward (Kaplan et al.'s 6N rule with
attention and the sparse masked-LM head written out):

* encoder products: 2 x L x (4 h^2 + 2 h I) per token;
* attention scores and mixing: 2 x 2 x s x h x L per token, s the padded sequence length;
* masked-LM head on the predicted positions only (bertkit computes it there): 2 x (h^2 + h V)
  x predictions per token (``--predictions-per-token``, 20 of 128 by default);
* NSP and the pooler: per sequence, left out (under 0.1%).

The padded positions cost the encoder the same as real ones: ``--mean-length`` (the data's
``summary.mean_length`` in meta.json) turns model FLOPs into the hardware's rate as well.
``--peak-tflops``: the chip's dense bf16 peak (H100/H200 SXM: 989; the 8192^3 product
measured on the lent H200 ran at about 790).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from table5_table import read_jsonl  # noqa: E402  (bench/table5_table.py: torn lines skipped)


def flops_per_token(size: str, seq: int, predictions_per_token: float, vocab: int = 30522) -> dict:
    """Training FLOPs per real token of a BERT preset: encoder, attention, MLM head, total."""
    from bertkit.config import BertConfig

    c = BertConfig.preset(size, vocab_size=vocab)
    h, i, n = c.hidden_size, c.intermediate_size, c.num_hidden_layers
    encoder = 3 * 2 * n * (4 * h * h + 2 * h * i)
    attention = 3 * 2 * 2 * seq * h * n
    head = 3 * 2 * (h * h + h * c.vocab_size) * predictions_per_token
    return {"encoder": encoder, "attention": attention, "head": head, "total": encoder + attention + head}


def steady_rate(log: Path) -> tuple[float, int]:
    """(median tokens/s of the log lines after the first, the last step)."""
    rows = read_jsonl(log)
    rates = [r["tokens_per_s"] for r in rows if "tokens_per_s" in r]
    if len(rates) < 2:
        raise SystemExit(f"{log}: fewer than two lines with tokens_per_s")
    return statistics.median(rates[1:]), max(r.get("step", 0) for r in rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Model FLOPs utilisation of bertkit pretrain runs.")
    p.add_argument("runs", nargs="+", type=Path, help="pretrain --out directories (log.jsonl, config.yaml)")
    p.add_argument("--peak-tflops", type=float, required=True, help="the chip's dense bf16 peak")
    p.add_argument("--seq", type=int, default=128, help="padded sequence length (default 128)")
    p.add_argument("--mean-length", type=float, help="real tokens per sequence (meta.json's mean_length)")
    p.add_argument("--predictions-per-token", type=float, default=20 / 128,
                   help="masked positions per real token (default 20/128)")
    args = p.parse_args(argv)
    print("| run | size | batch | steps | tokens/s | model TFLOP/s | MFU | hardware TFLOP/s (with padding) |")
    print("|---|---|---|---|---|---|---|---|")
    for run in args.runs:
        config = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))
        rate, steps = steady_rate(run / "log.jsonl")
        f = flops_per_token(config["model_size"], args.seq, args.predictions_per_token)
        model = rate * f["total"] / 1e12
        hw = "—"
        if args.mean_length:
            padded = rate * (args.seq / args.mean_length) * (f["encoder"] + f["attention"]) + rate * f["head"]
            hw = f"{padded / 1e12:.0f} ({100 * padded / 1e12 / args.peak_tflops:.1f}%)"
        print(f"| {run.name} | {config['model_size']} | {config['batch_size']} | {steps} | {rate:,.0f} | "
              f"{model:.0f} | {100 * model / args.peak_tflops:.1f}% | {hw} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
