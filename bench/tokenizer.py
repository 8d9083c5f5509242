"""Tokenizer throughput: bertkit vs Hugging Face ``tokenizers`` on the KJV corpus, one run.

Prints lines/s and MB/s for each way of encoding and the ratio of bertkit's best to
``tokenizers``' ``encode_batch`` (which uses every core through its thread pool).

    python bench/tokenizer.py [--corpus FILE] [--vocab FILE] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from bertkit.tokenizer import BertTokenizer

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def best_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=DATA / "corpus" / "kjv.txt", type=Path)
    parser.add_argument("--vocab", default=DATA / "vocab" / "bert-base-uncased-vocab.txt", type=Path)
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions; the best is kept")
    args = parser.parse_args()

    lines = [line for line in args.corpus.read_text(encoding="utf-8").splitlines() if line]
    megabytes = sum(len(line.encode("utf-8")) for line in lines) / 1e6
    print(f"corpus {args.corpus.name}: {len(lines):,} lines, {megabytes:.2f} MB; {os.cpu_count()} CPUs")

    ours = BertTokenizer.from_file(args.vocab)
    ours.encode_batch(lines[:1000])  # warm the word cache the same way for both sides
    runs = {
        "bertkit encode (per line)": lambda: [ours.encode(line) for line in lines],
        "bertkit encode +offsets (per line)": lambda: [ours.encode(line, return_offsets=True) for line in lines],
        "bertkit encode_batch": lambda: ours.encode_batch(lines),
        "bertkit encode_batch +offsets": lambda: ours.encode_batch(lines, return_offsets=True),
    }
    try:
        from tokenizers import BertWordPieceTokenizer
    except ImportError:
        BertWordPieceTokenizer = None
        print("tokenizers not installed: reference skipped")
    if BertWordPieceTokenizer is not None:
        ref = BertWordPieceTokenizer(str(args.vocab), lowercase=True)
        ref.encode_batch(lines[:1000])
        runs["tokenizers encode (per line)"] = lambda: [ref.encode(line) for line in lines]
        runs["tokenizers encode_batch"] = lambda: ref.encode_batch(lines)

    rates = {}
    for name, fn in runs.items():
        seconds = best_time(fn, args.repeat)
        rates[name] = len(lines) / seconds
        print(f"{name:38s} {rates[name]:>10,.0f} lines/s {megabytes / seconds:7.2f} MB/s")
    if "tokenizers encode_batch" in rates:
        ref_rate = rates["tokenizers encode_batch"]
        for name in ("bertkit encode_batch", "bertkit encode_batch +offsets"):
            print(f"ratio {name} / tokenizers encode_batch: {rates[name] / ref_rate:.2f}x")


if __name__ == "__main__":
    main()
