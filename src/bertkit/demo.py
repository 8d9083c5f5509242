"""``make demo``: the main job end to end on the built-in corpus, with visible progress.

Stages: built-in corpus (Python standard library docstrings) -> WordPiece vocabulary ->
pre-training data -> a few minutes of pre-training of a tiny BERT (masked LM + next
sentence prediction) -> fill-mask with the model just trained -> a plot of the curves ->
fine-tuning on a built-in labelled task (which package a docstring sentence comes from),
with its dev metric. Everything lands under ``out_dir``.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

from bertkit.corpus import package_classification, stdlib_modules, write_corpus
from bertkit.tokenizer import BertTokenizer
from bertkit.tokenizer.train import count_words, tokens_per_word, train_wordpiece

FILL_MASK_SAMPLES = [
    "return the [MASK] of the list.",
    "raise a [MASK] if the file does not exist.",
    "the socket must be bound to an [MASK].",
]


def stage(title: str) -> None:
    print(f"\n=== {title} ===", flush=True)


def _write_jsonl(rows: list[dict], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def run_demo(out_dir: str | Path = "demo_out", vocab_size: int = 8000, steps: int = 1000,
             model_size: str = "tiny", finetune_epochs: int = 3) -> dict:
    """Run every stage; returns the fine-tuning dev metrics."""
    from bertkit.finetuning.config import FinetuneConfig
    from bertkit.finetuning.loop import finetune
    from bertkit.inference import load
    from bertkit.plot import plot_run
    from bertkit.pretraining.create import CreationSettings, create_pretraining_data
    from bertkit.pretraining.train import pretrain
    from bertkit.pretraining.train_config import PretrainConfig
    from bertkit.tasks import get_task

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    stage("1. built-in corpus: Python standard library docstrings")
    modules = stdlib_modules()
    documents = [sentences for _, sentences in modules]
    corpus = write_corpus(documents, out / "corpus.txt")
    print(f"{len(documents)} documents (modules), {sum(map(len, documents))} sentences -> {corpus}")

    stage(f"2. WordPiece vocabulary ({vocab_size} tokens)")
    counts = count_words(s for d in documents for s in d)
    vocab = train_wordpiece(counts, vocab_size)
    vocab.save(out / "vocab.txt")
    tokenizer = BertTokenizer(vocab)
    print(f"{len(vocab)} tokens -> {out / 'vocab.txt'}; "
          f"{tokens_per_word(vocab, counts):.3f} tokens per corpus word")
    sample = "Return a new sorted list from the items in iterable."
    print(f"{sample}\n  -> {' '.join(tokenizer.tokenize(sample))}")

    stage("3. pre-training data (masked LM + next sentence prediction)")
    data_dir = out / "pretrain-data"
    create_pretraining_data([corpus], out / "vocab.txt", data_dir,
                            CreationSettings(max_seq_length=128, dupe_factor=3))

    stage(f"4. pre-training a {model_size} BERT for {steps} steps")
    run_dir = out / "pretrain-run"
    shutil.rmtree(run_dir, ignore_errors=True)
    result = pretrain(PretrainConfig(
        data=str(data_dir), out=str(run_dir), vocab=str(out / "vocab.txt"), model_size=model_size,
        steps=steps, batch_size=32, lr=1e-3, warmup_fraction=0.05, log_every=25,
        save_every=max(1, steps // 3), keep=1))
    model_dir = result.model_dir
    print(f"model -> {model_dir}")

    stage("5. fill-mask with the model just trained")
    bert = load(model_dir)
    for text in FILL_MASK_SAMPLES:
        guesses = bert.fill_mask(text, top_k=5)[0]
        print(f"{text}\n  -> " + ", ".join(f"{g['token_str']} ({g['score']:.2f})" for g in guesses))

    stage("6. training curves")
    print(f"plot -> {plot_run(run_dir)}")

    stage("7. fine-tuning: which package does a docstring sentence come from?")
    train, dev, labels = package_classification(modules)
    task_dir = out / "package-task"
    task_dir.mkdir(exist_ok=True)
    _write_jsonl(train, task_dir / "train.jsonl")
    _write_jsonl(dev, task_dir / "dev.jsonl")
    majority = Counter(r["label"] for r in dev).most_common(1)[0][1] / len(dev)
    print(f"labels {labels}; {len(train)} train / {len(dev)} dev sentences; "
          f"majority-class dev accuracy {majority:.3f}")
    task = get_task("text-classification")
    _, best = finetune(task, model_dir, task_dir, out / "finetuned",
                       FinetuneConfig(lr=1e-3, batch=32, epochs=finetune_epochs, max_seq_length=64,
                                      log_every=50, overwrite=True))
    metrics = {k: round(v, 4) for k, v in best.metrics.items() if isinstance(v, float)}
    print(f"\nfine-tuned dev metrics: {metrics} (majority class: {majority:.3f})")
    print(f"fine-tuned model -> {out / 'finetuned'}")
    print(f"\ndemo finished: outputs in {out}/")
    return metrics
