"""``make demo``: the main job end to end on the built-in corpus, with visible progress.

Stages: built-in corpus -> WordPiece vocabulary -> tokenized samples. Each stage prints
what it did; everything lands under ``out_dir``.
"""

from __future__ import annotations

from pathlib import Path

from bertkit.corpus import stdlib_documents, write_corpus
from bertkit.tokenizer import BertTokenizer
from bertkit.tokenizer.train import count_words, tokens_per_word, train_wordpiece

SAMPLES = [
    "Return a new sorted list from the items in iterable.",
    "The socket must be bound to an address and listening for connections.",
]


def stage(title: str) -> None:
    print(f"\n=== {title} ===", flush=True)


def build_vocab(out_dir: Path, vocab_size: int) -> tuple[Path, BertTokenizer]:
    stage("1. built-in corpus: Python standard library docstrings")
    documents = stdlib_documents()
    corpus = write_corpus(documents, out_dir / "corpus.txt")
    n_sentences = sum(len(d) for d in documents)
    print(f"{len(documents)} documents, {n_sentences} sentences -> {corpus}")

    stage(f"2. WordPiece vocabulary ({vocab_size} tokens)")
    counts = count_words(s for d in documents for s in d)
    vocab = train_wordpiece(counts, vocab_size)
    vocab.save(out_dir / "vocab.txt")
    print(f"{len(vocab)} tokens -> {out_dir / 'vocab.txt'}; "
          f"{tokens_per_word(vocab, counts):.3f} tokens per corpus word")
    tokenizer = BertTokenizer(vocab)

    stage("3. tokenize sample text")
    for text in SAMPLES:
        enc = tokenizer.encode(text)
        print(text)
        print("  ", " ".join(tokenizer.convert_ids_to_tokens(enc.input_ids)))
    return corpus, tokenizer


def run_demo(out_dir: str | Path = "demo_out", vocab_size: int = 8000) -> None:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    build_vocab(out_dir, vocab_size)
    print(f"\ndemo finished: outputs in {out_dir}/")
