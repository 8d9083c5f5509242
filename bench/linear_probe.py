"""Linear probes of frozen features: what a pre-trained encoder already knows about a task.

For each model directory, the last layer's ``[CLS]`` vector and its mean over the tokens
(``bertkit.inference.BertInference.embed``) are computed for up to ``--train-examples``
training examples and the whole dev set of each task; a ridge regression (features
standardised on train, penalty chosen from ``--penalties`` on dev, reported as such) maps
them to the label: STS-B's score (Spearman on dev) or SST-2's label (accuracy of the
prediction thresholded at 0.5). Nothing is fine-tuned. A model whose probe is near chance
on a task has to learn it in fine-tuning from scratch; used in ``docs/budget-pretraining.md``
to explain why masked-LM-only pre-training did not transfer to STS-B.

    python bench/linear_probe.py MODEL_DIR [MODEL_DIR ...] --tasks stsb,sst2
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr

from bertkit.inference import load
from bertkit.tasks.glue import create_task

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "glue"


def features(model, examples, pool: str, max_length: int) -> np.ndarray:
    first = [e.text_a for e in examples]
    second = [e.text_b for e in examples] if examples[0].text_b is not None else None
    return model.embed(first, second, layers=[-1], pool=pool, max_length=max_length)


def ridge(train_x: np.ndarray, train_y: np.ndarray, dev_x: np.ndarray, penalty: float) -> np.ndarray:
    mean, scale = train_x.mean(0), train_x.std(0) + 1e-6
    train_x = np.hstack([(train_x - mean) / scale, np.ones((len(train_x), 1))])
    dev_x = np.hstack([(dev_x - mean) / scale, np.ones((len(dev_x), 1))])
    weights = np.linalg.solve(train_x.T @ train_x + penalty * np.eye(train_x.shape[1]), train_x.T @ train_y)
    return dev_x @ weights


def score(task: str, predicted: np.ndarray, gold: np.ndarray) -> float:
    if task == "stsb":
        return float(spearmanr(predicted, gold)[0])
    return float(np.mean((predicted > 0.5) == gold))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", help="model directories")
    parser.add_argument("--tasks", default="stsb,sst2", help="comma-separated: stsb and/or classification tasks")
    parser.add_argument("--data", type=Path, default=DATA, help="GLUE root folder (the reader finds each task's folder)")
    parser.add_argument("--train-examples", type=int, default=5000, help="training examples probed (first N)")
    parser.add_argument("--penalties", default="1,10,100,1000", help="ridge penalties tried")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", type=Path, help="also write the rows as JSON Lines here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    penalties = [float(p) for p in args.penalties.split(",")]
    rows = []
    for model_dir in args.models:
        model = load(model_dir)
        for task in args.tasks.split(","):
            reader = create_task(task)
            train = reader.read(args.data, "train")[: args.train_examples]
            dev = reader.read(args.data, "dev")
            train_y = np.array([float(e.label) for e in train])
            dev_y = np.array([float(e.label) for e in dev])
            for pool in ("cls", "mean"):
                train_x = features(model, train, pool, args.max_length)
                dev_x = features(model, dev, pool, args.max_length)
                value, penalty = max((score(task, ridge(train_x, train_y, dev_x, p), dev_y), p) for p in penalties)
                row = {"model": model_dir, "task": task, "pool": pool, "probe": round(value, 4), "penalty": penalty}
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.output:
        args.output.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


if __name__ == "__main__":
    main()
