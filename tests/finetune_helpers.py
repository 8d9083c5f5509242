"""Shared by the fine-tuning tests: a tiny pre-trained model directory and toy data.

The toy task is separable by one word: a sentence with ``good`` is label 1, with ``bad``
label 0, the other words are noise; a fine-tuned tiny model must learn it in seconds.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "the", "man", "went", "to", "store", "a", "he", "she", "is", "was", "good", "bad",
    "day", "night", "cafe", "hello", "world", "quick", ",", ".", "?",
]
NOISE = ["the", "man", "went", "to", "store", "a", "he", "she", "is", "was", "day", "night",
         "cafe", "hello", "world", "quick"]
FAST = {"lr": 5e-3, "batch": 16, "epochs": 4, "max_seq_length": 32, "progress": False,
        "eval_batch": 32, "log_every": 1000}


def make_model(directory: Path, seed: int = 0, hidden: int = 32, layers: int = 2) -> Path:
    """A randomly initialised tiny BERT (hidden 32, 2 layers) saved as a model directory."""
    import torch

    from bertkit.checkpoint import save_pretrained
    from bertkit.config import BertConfig
    from bertkit.model import BertForMaskedLM
    from bertkit.tokenizer import BertTokenizer

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    tokenizer = BertTokenizer.from_file(directory / "vocab.txt")
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=2, intermediate_size=2 * hidden, max_position_embeddings=64)
    save_pretrained(BertForMaskedLM(config), directory, tokenizer=tokenizer)
    return directory


def sentence(rng: random.Random, key: str) -> str:
    """A few noise words with ``key`` at a random place."""
    words = [rng.choice(NOISE) for _ in range(rng.randint(2, 6))]
    words.insert(rng.randint(0, len(words)), key)
    return " ".join(words)


def toy_rows(n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` (sentence, label) rows, labels balanced: "1" with good, "0" with bad."""
    rng = random.Random(seed)
    return [(sentence(rng, "good" if i % 2 else "bad"), str(i % 2)) for i in range(n)]


def write_sst2(directory: Path, train: int = 128, dev: int = 48) -> Path:
    """The toy task in GLUE SST-2's layout (``sentence<TAB>label`` with a header)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, n, seed in (("train.tsv", train, 1), ("dev.tsv", dev, 2)):
        lines = ["sentence\tlabel"] + [f"{s}\t{y}" for s, y in toy_rows(n, seed)]
        (directory / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One torch thread: tiny models on a shared CPU run several times faster than with many."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def write_swag(path: Path, n: int, seed: int, labelled: bool = True) -> Path:
    """SWAG's official CSV layout; the right ending is the one with ``good`` (others ``bad``)."""
    import csv

    rng = random.Random(seed)
    header = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
              "ending0", "ending1", "ending2", "ending3"] + (["label"] if labelled else [])
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for i in range(n):
            label = rng.randrange(4)
            sent1, sent2 = sentence(rng, "the"), "he, \"quick\""
            endings = [sentence(rng, "good" if k == label else "bad") for k in range(4)]
            row = [i, f"v{i}", 1000 + i, f"{sent1} {sent2}", sent1, sent2, "gold", *endings]
            writer.writerow(row + ([label] if labelled else []))
    return path


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny random BERT directory (``make_model``), one per test module."""
    return make_model(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def toy_dir(tmp_path_factory):
    """A toy SST-2 folder (``write_sst2``), one per test module."""
    return write_sst2(tmp_path_factory.mktemp("sst2"))
