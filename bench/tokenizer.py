"""Tokenizer throughput: bertkit vs Hugging Face ``tokenizers``, side by side in one run.

Encodes every line of a corpus (default: the KJV) with each way of encoding and prints
lines/s, MB/s and the CPU seconds the process spent, best of ``--repeat`` rounds in
which the ways take turns (``tokenizers``' ``encode_batch`` uses every core through its
thread pool, so its CPU time exceeds its wall time), then the ratios of bertkit's ``encode_batch`` to ``tokenizers``' ``encode_batch`` without and with
character offsets. "With offsets" means the ids and the offsets are in Python lists at
the end, as bertkit returns them: ``tokenizers`` computes offsets in every call but
converts them to Python only when ``.offsets`` is read, so its offsets row reads
``.ids`` and ``.offsets`` of every encoding (its plain row reads nothing).

    python bench/tokenizer.py [--corpus FILE] [--vocab FILE] [--repeat 3] [--limit N]

``--corpus`` takes a text file (one text per line) or a SQuAD JSON file (its contexts).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from bertkit.tokenizer import BertTokenizer

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def best_times(runs: dict, repeat: int) -> dict[str, tuple[float, float]]:
    """For each run, the best wall time of ``repeat`` calls and the CPU time of that call.

    The runs take turns (round ``r`` calls each once), so a change of the machine's load
    during the benchmark falls on every row alike instead of on the rows timed then.
    """
    best = {name: (float("inf"), 0.0) for name in runs}
    for _ in range(repeat):
        for name, fn in runs.items():
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            best[name] = min(best[name], (time.perf_counter() - wall, time.process_time() - cpu))
    return best


def read_texts(path: Path) -> list[str]:
    """Non-empty lines of a text file, or the contexts of a SQuAD JSON file."""
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))["data"]
        return [p["context"] for article in data for p in article["paragraphs"]]
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=DATA / "corpus" / "kjv.txt", type=Path)
    parser.add_argument("--vocab", default=DATA / "vocab" / "bert-base-uncased-vocab.txt", type=Path)
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions; the best is kept")
    parser.add_argument("--limit", type=int, default=None, help="encode only the first N texts")
    args = parser.parse_args()

    lines = read_texts(args.corpus)[:args.limit]
    megabytes = sum(len(line.encode("utf-8")) for line in lines) / 1e6
    print(f"corpus {args.corpus.name}: {len(lines):,} texts, {megabytes:.2f} MB; {os.cpu_count()} CPUs; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    ours = BertTokenizer.from_file(args.vocab)
    ours.encode_batch(lines[:1000], return_offsets=True)  # warm the caches the same way for both sides
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
        runs["tokenizers encode_batch +offsets"] = lambda: [(e.ids, e.offsets) for e in ref.encode_batch(lines)]

    rates = {}
    print(f"{'':38s} {'lines/s':>10s} {'MB/s':>7s} {'CPU s':>7s}")
    for name, (seconds, cpu) in best_times(runs, args.repeat).items():
        rates[name] = len(lines) / seconds
        print(f"{name:38s} {rates[name]:>10,.0f} {megabytes / seconds:7.2f} {cpu:7.2f}")
    if "tokenizers encode_batch" in rates:
        for ours_name, ref_name in (("bertkit encode_batch", "tokenizers encode_batch"),
                                    ("bertkit encode_batch +offsets", "tokenizers encode_batch +offsets"),
                                    ("bertkit encode_batch +offsets", "tokenizers encode_batch")):
            print(f"ratio {ours_name} / {ref_name}: {rates[ours_name] / rates[ref_name]:.2f}x")
    print(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
