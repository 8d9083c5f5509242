"""Sentence-embedding fine-tuning, bertkit against sentence-transformers' own trainer, side by
side in one run on the same recipe (issue 34): STS-B train, mean pooling, cosine-similarity
loss (gold score / 5), batch 16, lr 1e-4, 2 epochs, linear warm-up over 10% of the updates then
decay, AdamW with weight decay 0.01 (none on biases and LayerNorm, in both), gradient clipping
at 1.0, max length 64, fp32, one thread.

For each seed, both contenders start from the same checkpoint and read the same pairs (bertkit's
reader of the data directory); the order alternates with the seed so that neither always runs
on the busier half of a shared machine. Reported per run:

* dev Spearman (x100) of the cosine: bertkit's as ``bertkit finetune`` scores it (the last
  epoch, ``select="last"``), sentence-transformers' by its ``EmbeddingSimilarityEvaluator``;
  bertkit's saved directory is also loaded with ``SentenceTransformer`` and scored by that same
  evaluator (the two must agree: the directory is a sentence-transformers model);
* wall seconds from the checkpoint on disk to the trained model: reading, tokenising, training
  and, for bertkit, its dev evaluation after every epoch and the saving of the model (the
  evaluator's final scoring is outside both); and the CPU seconds of the process over the same
  span (with one thread, less moved than the wall time by other jobs on a shared machine).

    python bench/embedding_train.py --out runs/embedding-bench                 # seeds 1, 2, 3
    python bench/embedding_train.py --out runs/embedding-bench --seeds 1 --limit 500

Needs ``sentence-transformers`` with ``datasets`` and ``accelerate`` (its trainer).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
RECIPE = {"lr": 1e-4, "batch": 16, "epochs": 2, "warmup": 0.1, "max_seq_length": 64, "weight_decay": 0.01,
          "max_grad_norm": 1.0}
SCALE = 5.0  # STS-B's largest score: the cosine loss's targets are score / 5


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, default=DATA / "models" / "bert-tiny-splade")
    p.add_argument("--data", type=Path, default=DATA / "glue" / "STS-B", help="train.* and dev.* scored pairs")
    p.add_argument("--out", type=Path, required=True, help="scratch folder for the trained models")
    p.add_argument("--seeds", default="1,2,3", help="comma-separated seeds")
    p.add_argument("--epochs", type=int, default=RECIPE["epochs"])
    p.add_argument("--limit", type=int, help="the first N train and dev pairs only (a quick run)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--only", choices=["bertkit", "sentence-transformers"], help="one contender")
    return p.parse_args(argv)


def read_split(data: Path, split: str, limit: int | None) -> list:
    """The scored pairs of ``data``'s split, as bertkit's embedding task reads them."""
    from bertkit.tasks import get_task

    return get_task("embedding").read(data, split)[:limit]


def write_jsonl(examples: list, path: Path) -> None:
    """``examples`` as a ``text_a, text_b, score`` JSON Lines file (a cut of the data)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for ex in examples:
            f.write(json.dumps({"text_a": ex.texts[0], "text_b": ex.texts[1], "score": ex.score}) + "\n")


def st_evaluator(dev: list):
    """sentence-transformers' STS evaluator of the dev pairs (Spearman of the cosine)."""
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    return EmbeddingSimilarityEvaluator([ex.texts[0] for ex in dev], [ex.texts[1] for ex in dev],
                                        [ex.score / SCALE for ex in dev], main_similarity="cosine",
                                        name="dev", show_progress_bar=False)


def st_spearman(evaluator, model) -> float:
    """The evaluator's Spearman (x100) of ``model``'s cosine on the dev pairs."""
    return 100 * evaluator(model)["dev_spearman_cosine"]


def run_bertkit(model: Path, data: Path, out: Path, seed: int, epochs: int) -> dict:
    """``bertkit finetune embedding`` (library call) on the recipe: dev Spearman and seconds."""
    from bertkit.finetuning.config import FinetuneConfig
    from bertkit.finetuning.loop import finetune
    from bertkit.tasks import get_task

    cfg = FinetuneConfig(**{**RECIPE, "epochs": epochs}, seed=seed, select="last", precision="fp32",
                         device="cpu", progress=False, overwrite=True, log_every=10_000)
    started, cpu = time.perf_counter(), time.process_time()
    _, best = finetune(get_task("embedding", pooling="mean", loss="cosine"), model, data, out, cfg)
    return {"spearman": 100 * best.metrics["spearman"], "seconds": time.perf_counter() - started,
            "cpu_seconds": time.process_time() - cpu}


def run_sentence_transformers(model: Path, train: list, out: Path, seed: int, epochs: int):
    """sentence-transformers' trainer on the recipe: the trained model, wall and CPU seconds."""
    import math

    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import CosineSimilarityLoss
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    started, cpu = time.perf_counter(), time.process_time()
    encoder = Transformer(str(model), max_seq_length=RECIPE["max_seq_length"])
    st = SentenceTransformer(modules=[encoder, Pooling(encoder.get_embedding_dimension(), "mean")], device="cpu")
    dataset = Dataset.from_dict({"sentence1": [ex.texts[0] for ex in train],
                                 "sentence2": [ex.texts[1] for ex in train],
                                 "score": [ex.score / SCALE for ex in train]})
    updates = math.ceil(len(train) / RECIPE["batch"]) * epochs
    args = SentenceTransformerTrainingArguments(
        output_dir=str(out), num_train_epochs=epochs, per_device_train_batch_size=RECIPE["batch"],
        learning_rate=RECIPE["lr"], warmup_steps=int(RECIPE["warmup"] * updates),
        weight_decay=RECIPE["weight_decay"], max_grad_norm=RECIPE["max_grad_norm"], seed=seed,
        save_strategy="no", eval_strategy="no", logging_strategy="no", report_to="none",
        disable_tqdm=True, use_cpu=True, dataloader_num_workers=0)
    SentenceTransformerTrainer(model=st, args=args, train_dataset=dataset, loss=CosineSimilarityLoss(st)).train()
    return st, time.perf_counter() - started, time.process_time() - cpu


def compare(args: argparse.Namespace) -> list[dict]:
    """Every (seed, contender) run; one row each."""
    data = args.data
    train, dev = read_split(data, "train", args.limit), read_split(data, "dev", args.limit)
    if args.limit:  # the cut both contenders read
        data = args.out / "data"
        write_jsonl(train, data / "train.jsonl")
        write_jsonl(dev, data / "dev.jsonl")
    evaluator = st_evaluator(dev)
    rows = []
    for n, seed in enumerate(int(s) for s in args.seeds.split(",")):
        order = ["bertkit", "sentence-transformers"][:: 1 if n % 2 == 0 else -1]
        for who in order:
            if args.only and who != args.only:
                continue
            out = args.out / f"{who}-s{seed}"
            if who == "bertkit":
                from sentence_transformers import SentenceTransformer

                row = run_bertkit(args.model, data, out, seed, args.epochs)
                row["st_evaluator"] = st_spearman(evaluator, SentenceTransformer(str(out), device="cpu"))
            else:
                model, seconds, cpu = run_sentence_transformers(args.model, train, out, seed, args.epochs)
                row = {"spearman": st_spearman(evaluator, model), "seconds": seconds, "cpu_seconds": cpu}
            rows.append({"contender": who, "seed": seed, **row})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict]) -> str:
    """Markdown: one row per run, then each contender's mean +- sample standard deviation."""
    lines = ["| contender | seed | dev Spearman | same, sentence-transformers' evaluator | wall s | CPU s |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        check = f"{r['st_evaluator']:.2f}" if "st_evaluator" in r else ""
        lines.append(f"| {r['contender']} | {r['seed']} | {r['spearman']:.2f} | {check} | {r['seconds']:.0f} "
                     f"| {r['cpu_seconds']:.0f} |")
    for who in dict.fromkeys(r["contender"] for r in rows):
        mine = [r for r in rows if r["contender"] == who]
        lines.append(f"| **{who}** | mean | {_spread([r['spearman'] for r in mine], 2)} | | "
                     f"{_spread([r['seconds'] for r in mine], 0)} | {_spread([r['cpu_seconds'] for r in mine], 0)} |")
    return "\n".join(lines)


def _spread(values: list[float], digits: int) -> str:
    mean = statistics.fmean(values)
    return f"{mean:.{digits}f} ± {statistics.stdev(values):.{digits}f}" if len(values) > 1 else f"{mean:.{digits}f}"


def main(argv=None) -> int:
    args = parse_args(argv)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(args.threads)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    import torch

    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(ROOT / "bench"))
    from machine import describe, markdown

    args.out.mkdir(parents=True, exist_ok=True)
    rows = compare(args)
    print(f"sentence embeddings, STS-B recipe, {args.threads} thread(s), epochs {args.epochs}"
          f"{f', first {args.limit} pairs' if args.limit else ''}\n")
    print(table(rows))
    print("\n" + markdown(describe()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
