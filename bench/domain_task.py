#!/usr/bin/env python3
"""A labelled task from one domain of the shared corpus, and that domain's pre-training text
without the task's documents (domain-adaptive pre-training, issue 26).

The task, ``python-docs-part``: which part of the Python 3.11 documentation does a sentence
come from: c-api, extending, faq, howto, library, reference, tutorial, using or whatsnew
(9 labels). ``corpus/python-docs.txt`` holds one document per reST section, in the order of
the documentation's source files (``c-api/*.rst`` first, ``whatsnew/*.rst`` last), with no
file names. Each part begins at a document whose opening sentence is fixed in ``PARTS``
and runs until the next part; the documents of parts not in the task (about, bugs,
copyright, distributing, distutils, install, installing, license) are pre-training text
only. A corpus in which an opening sentence is missing, repeated or out of order is refused.

Held-out documents: every ``--every``-th document of the file (1-based, as
``awk 'NR % 5 == 0'``) is held out of the pre-training text. Of those in a task part, the
k-th held-out document of a label goes to train (k % 5 < 3), dev (k % 5 == 3) or test (k % 5 == 4):
documents, not sentences, are split, so no dev or test sentence shares a section with a
training one. The corpus repeats some sentences in several sections (about 4% of the task's
sentences were also in the pre-training text): those are left out of the task, and so are
dev and test sentences equal to a training one, so no task sentence was seen in
pre-training and no dev or test sentence in training.

Writes under OUT::

    pretrain.txt     every document not held out (the domain pre-training text)
    heldout.txt      every held-out document (held-out MLM data for ``pretrain --eval-data``)
    task/train.jsonl task/dev.jsonl task/test.jsonl   {"text": ..., "label": ...}
    task/stats.json  sentences per split and label, documents, settings

Sentences shorter than ``--min-words`` words are left out of the task. The library and
what's-new parts hold most sentences (the library alone 57% of the held-out ones), so each
split is capped per label (a seeded sample): train at ``--max-train-per-label`` (500), dev
and test at ``--max-eval-per-label`` (150). Dev and test are then close to balanced, and
accuracy, the metric fine-tuning selects by, is not won by predicting "library"; report
macro-F1 beside it.

    python bench/domain_task.py --corpus ../shared/data/corpus/python-docs.txt --out runs/dapt/data
    bertkit finetune text-classification --model MODEL --data runs/dapt/data/task --out RUN ...
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path

from bertkit.fileio import atomic_write

# (label or None, the opening sentence of the part's first document). None: not in the task.
PARTS = (
    ("c-api", "The functions in this chapter interact with Python objects regardless of their type"),
    (None, "Python and this documentation is:"),  # copyright, distributing, distutils
    ("extending", "A C extension for CPython is a shared library"),
    ("faq", "Guido van Rossum believes that using indentation for grouping is extremely elegant"),
    ("howto", "This document is designed to encapsulate the best practices for working with "
              "annotations dicts."),
    (None, "In Python 2.0, the distutils API was first added to the standard library."),  # install
    ("library", "Each statement in __future__.py is of the form:"),
    (None, "Python was created in the early 1990s by Guido van Rossum"),  # license
    ("reference", "Compound statements contain (groups of) other statements"),
    ("tutorial", "If you do much work on computers, eventually you find that there's some task"),
    ("using", "When invoking Python, you may specify any of these options:"),
    ("whatsnew", "A new release of Python, version 2.0, was released on October 16, 2000."),
)
SPLITS = ("train", "train", "train", "dev", "test")  # by k % 5 of the k-th held-out document


class TaskError(Exception):
    """A corpus this script cannot label, or a bad option."""


def read_documents(path: Path) -> list[list[str]]:
    """The documents of a one-sentence-per-line corpus (blank lines between documents), each
    a list of its non-empty lines; runs of blank lines count as one separator."""
    docs, current = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                current.append(line)
            elif current:
                docs.append(current)
                current = []
    if current:
        docs.append(current)
    return docs


def part_labels(docs: list[list[str]], parts=PARTS) -> list[str | None]:
    """One label per document (None before the first part and in parts outside the task).
    Each part starts at the one document whose first line starts with its opening sentence;
    a missing, repeated or out-of-order opening is a :class:`TaskError`."""
    starts = []
    for label, opening in parts:
        found = [i for i, doc in enumerate(docs) if doc[0].startswith(opening)]
        if len(found) != 1:
            raise TaskError(f"part {label or '(not in the task)'}: the opening sentence "
                            f"{opening!r} begins {len(found)} documents, expected exactly 1; "
                            "is this python-docs.txt of the shared corpus?")
        if starts and found[0] <= starts[-1]:
            raise TaskError(f"part {label}: starts at document {found[0] + 1}, before the "
                            f"previous part (document {starts[-1] + 1})")
        starts.append(found[0])
    labels: list[str | None] = [None] * len(docs)
    bounds = [*starts, len(docs)]
    for (label, _), begin, end in zip(parts, bounds, bounds[1:]):
        labels[begin:end] = [label] * (end - begin)
    return labels


def split_documents(labels: list[str | None], every: int) -> tuple[list[bool], list[str | None]]:
    """``held[i]`` (document i is held out of pre-training: (i + 1) % every == 0) and
    ``split[i]`` (train/dev/test for held-out task documents, else None)."""
    held = [(i + 1) % every == 0 for i in range(len(labels))]
    split: list[str | None] = [None] * len(labels)
    k: Counter = Counter()  # held-out documents seen so far, per label
    for i, label in enumerate(labels):
        if held[i] and label is not None:
            split[i] = SPLITS[k[label] % len(SPLITS)]
            k[label] += 1
    return held, split


def task_rows(docs, labels, split, min_words: int, caps: dict[str, int], seed: int,
              exclude: set[str] = frozenset()) -> dict[str, list[dict]]:
    """``{split: [{"text", "label"}, ...]}``. A sentence in ``exclude`` (the pre-training
    text: the corpus repeats some sentences across sections) is left out, and so is a dev or
    test sentence that is also a training one; each split is then capped at ``caps[split]``
    sentences per label (a sample drawn with ``seed``, kept in corpus order), and train is
    shuffled."""
    rows: dict[str, list[dict]] = {"train": [], "dev": [], "test": []}
    for doc, label, name in zip(docs, labels, split):
        if name is None:
            continue
        rows[name] += [{"text": s, "label": label} for s in doc
                       if len(s.split()) >= min_words and s not in exclude]
    train = {r["text"] for r in rows["train"]}
    for name in ("dev", "test"):
        rows[name] = [r for r in rows[name] if r["text"] not in train]
    rng = random.Random(seed)
    for name, items in rows.items():
        keep = set()
        for label in sorted({r["label"] for r in items}):
            mine = [i for i, r in enumerate(items) if r["label"] == label]
            keep.update(rng.sample(mine, caps[name]) if len(mine) > caps[name] else mine)
        rows[name] = [r for i, r in enumerate(items) if i in keep]
    rng.shuffle(rows["train"])
    return rows


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (``bertkit.fileio.atomic_write``)."""
    with atomic_write(path) as f:
        f.write(text)


def build(corpus: Path, out: Path, every: int = 5, min_words: int = 6,
          cap: int = 500, eval_cap: int = 150, seed: int = 1, parts=PARTS) -> dict:
    """Write the pre-training text, the held-out text and the task under ``out``; return
    the stats (also written to ``out/task/stats.json``)."""
    docs = read_documents(corpus)
    labels = part_labels(docs, parts)
    held, split = split_documents(labels, every)
    seen = {s for doc, h in zip(docs, held) if not h for s in doc}
    rows = task_rows(docs, labels, split, min_words,
                     {"train": cap, "dev": eval_cap, "test": eval_cap}, seed, exclude=seen)
    text = lambda keep: "".join("\n".join(d) + "\n\n" for d, k in zip(docs, keep) if k)  # noqa: E731
    write_atomic(out / "pretrain.txt", text([not h for h in held]))
    write_atomic(out / "heldout.txt", text(held))
    for name, items in rows.items():
        write_atomic(out / "task" / f"{name}.jsonl",
                     "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in items))
    stats = {
        "corpus": str(corpus), "documents": len(docs), "held_out_every": every,
        "pretrain_documents": held.count(False), "held_out_documents": held.count(True),
        "task_documents": dict(Counter(s for s in split if s)),
        "min_words": min_words, "max_train_per_label": cap,
        "max_eval_per_label": eval_cap, "seed": seed,
        "labels": sorted({label for label in labels if label}),
        "documents_per_label": dict(Counter(label for label in labels if label)),
        "sentences": {name: dict(sorted(Counter(r["label"] for r in items).items()))
                      for name, items in rows.items()},
    }
    write_atomic(out / "task" / "stats.json", json.dumps(stats, indent=2) + "\n")
    return stats


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", type=Path, default=Path("../shared/data/corpus/python-docs.txt"),
                   help="the shared corpus's python-docs.txt (default: %(default)s)")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--every", type=int, default=5,
                   help="hold out every N-th document (default: %(default)s)")
    p.add_argument("--min-words", type=int, default=6,
                   help="shortest task sentence, in words (default: %(default)s)")
    p.add_argument("--max-train-per-label", type=int, default=500,
                   help="training sentences kept per label (default: %(default)s)")
    p.add_argument("--max-eval-per-label", type=int, default=150,
                   help="dev and test sentences kept per label (default: %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="seed of the training sample")
    args = p.parse_args(argv)
    for name in ("every", "min_words", "max_train_per_label", "max_eval_per_label"):
        if getattr(args, name) < 1 or (name == "every" and args.every < 2):
            p.error(f"--{name.replace('_', '-')} must be >= {2 if name == 'every' else 1}")
    if not args.corpus.is_file():
        p.error(f"--corpus {args.corpus}: no such file")
    try:
        stats = build(args.corpus, args.out, args.every, args.min_words,
                      args.max_train_per_label, args.max_eval_per_label, args.seed)
    except TaskError as e:
        print(f"error: {args.corpus}: {e}", file=sys.stderr)
        return 2
    print(json.dumps(stats["sentences"], indent=1))
    print(f"pre-training text: {args.out / 'pretrain.txt'} ({stats['pretrain_documents']} "
          f"documents); held out: {stats['held_out_documents']}; task: {args.out / 'task'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
