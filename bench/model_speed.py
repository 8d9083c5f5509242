"""Inference speed of fine-tuned model directories (teacher vs student vs pruned), same inputs.

Sequences/s of the whole task model's forward pass (``torch.inference_mode``, eval, fp32,
CPU unless ``--device``) over SST-2 dev sentences (``../shared/data/glue/SST-2/dev.tsv`` or
``--text-file``, one text per line) in length-sorted batches of ``--batch``, cut to
``--max-length`` tokens. Models are timed in interleaved rounds (the CPU may be shared); each
figure is the best of ``--rounds`` rounds of at least ``--min-time`` seconds. Prints one JSON
line per model (parameters, layers, heads, sequences/s) and writes them to ``--output``.

    python bench/model_speed.py DIR1 DIR2 ... --threads 1
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from bertkit.checkpoint import load_pretrained
from bertkit.inference import length_batches
from bertkit.model.pruning import count_heads
from bertkit.tokenizer import BertTokenizer

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def texts_of(path: Path | None) -> list[str]:
    if path is not None:
        return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    lines = (DATA / "glue" / "SST-2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    return [line.split("\t")[0] for line in lines if line.strip()]


def batches_for(tokenizer, texts, max_length: int, batch: int) -> list[dict]:
    encodings = tokenizer.encode_batch(texts, max_length=max_length)
    out = []
    for group in length_batches([len(e.input_ids) for e in encodings], batch):
        width = max(len(encodings[i].input_ids) for i in group)
        ids = torch.zeros(len(group), width, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, i in enumerate(group):
            n = len(encodings[i].input_ids)
            ids[row, :n] = torch.tensor(encodings[i].input_ids)
            mask[row, :n] = 1
        out.append({"input_ids": ids, "attention_mask": mask})
    return out


def one_pass(model, batches, min_time: float) -> float:
    """Sequences/s over repeated passes lasting at least ``min_time`` seconds."""
    done, start = 0, time.perf_counter()
    with torch.inference_mode():
        while True:
            for b in batches:
                model(**b)
                done += b["input_ids"].shape[0]
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                return done / elapsed


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--text-file", type=Path)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--min-time", type=float, default=2.0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    texts = texts_of(args.text_file)
    models = [load_pretrained(m).eval() for m in args.models]
    batches = batches_for(BertTokenizer.from_pretrained(args.models[0]), texts, args.max_length, args.batch)
    best = [0.0] * len(models)
    for model in models:
        one_pass(model, batches[:2], 0.0)  # warm-up
    for _ in range(args.rounds):
        for k, model in enumerate(models):
            best[k] = max(best[k], one_pass(model, batches, args.min_time))
    rows = []
    for path, model, speed in zip(args.models, models, best):
        rows.append({"model": str(path), "parameters": sum(p.numel() for p in model.parameters()),
                     "layers": model.config.num_hidden_layers, "heads": count_heads(model),
                     "sequences_per_s": round(speed, 1), "texts": len(texts),
                     "threads": torch.get_num_threads()})
        print(json.dumps(rows[-1]))
    if args.output:
        args.output.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
