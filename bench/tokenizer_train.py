"""WordPiece vocabulary training: bertkit's trainer vs Hugging Face ``tokenizers``', side by side.

Two corpora, each trained by both in turns, ``--repeat`` rounds, best wall time kept:

* ``shared``: ``corpus/kjv.txt`` + ``python-docs.txt`` + ``linux-docs.txt`` (3.3 M words),
  uncased, 30,000 tokens (BERT-Base's size);
* ``korean``: ``corpus/ko/kolaw-kobill.txt``, cased (Hangul syllables kept), 8,000 tokens.

Each time is the whole job from the text files to the vocabulary: reading and counting the
words, then learning the pieces (``tokenizers`` counts on every core, bertkit on one).
``tokenizers`` gets ``limit_alphabet`` = the number of distinct characters, so neither drops
a character. Quality columns: vocabulary size, tokens per corpus word and the ``[UNK]``
share of the corpus's tokens, each measured with bertkit's tokenizer over that vocabulary
and the same settings. Ratios are bertkit / ``tokenizers``.

    python bench/tokenizer_train.py [--repeat 3] [--only shared|korean]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "corpus"
CORPORA = {
    "shared": ([DATA / "kjv.txt", DATA / "python-docs.txt", DATA / "linux-docs.txt"], True, 30000),
    "korean": ([DATA / "ko" / "kolaw-kobill.txt"], False, 8000),
}


def lines_of(files):
    from bertkit.fileio import read_lines

    for path in files:
        for _, line in read_lines(path):
            yield line


def train_bertkit(files, lowercase: bool, size: int):
    from bertkit.tokenizer.train import count_words, train_wordpiece

    counts = count_words(lines_of(files), lowercase, progress=False)
    return train_wordpiece(counts, size, progress=False).tokens


def train_tokenizers(files, lowercase: bool, size: int, alphabet: int):
    from tokenizers import BertWordPieceTokenizer

    tok = BertWordPieceTokenizer(lowercase=lowercase, strip_accents=lowercase)
    tok.train([str(f) for f in files], vocab_size=size, min_frequency=2, limit_alphabet=alphabet,
              show_progress=False)
    vocab = tok.get_vocab()
    return sorted(vocab, key=vocab.__getitem__)


def quality(tokens: list[str], files, lowercase: bool) -> tuple[int, float, float]:
    """Vocabulary size, tokens per corpus word, [UNK] share of the corpus's tokens."""
    from bertkit.tokenizer import BertTokenizer, Vocab

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = Vocab(specials + [t for t in tokens if t not in specials])
    tok = BertTokenizer(vocab, lowercase=lowercase)
    words = pieces = unknown = 0
    for line in lines_of(files):
        ids = tok.text_to_ids(line)
        words += len(tok.basic.words(line))
        pieces += len(ids)
        unknown += ids.count(tok.unk_token_id)
    return len(vocab), pieces / max(1, words), unknown / max(1, pieces)


def distinct_characters(files, lowercase: bool) -> int:
    from bertkit.tokenizer import BasicTokenizer

    basic = BasicTokenizer(lowercase)
    return len({c for line in lines_of(files) for w in basic.words(line) for c in w})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=tuple(CORPORA))
    args = parser.parse_args()
    import tokenizers

    print(f"tokenizers {tokenizers.__version__}; {os.cpu_count()} CPUs; load "
          f"{os.getloadavg()[0]:.1f}; best of {args.repeat} rounds taking turns")
    header = f"{'corpus':<8} {'trainer':<11} {'wall s':>7} {'vocab':>6} {'tok/word':>9} {'[UNK]':>7}"
    print(header)
    for name, (files, lowercase, size) in CORPORA.items():
        if args.only and name != args.only:
            continue
        alphabet = distinct_characters(files, lowercase)
        best = {"bertkit": float("inf"), "tokenizers": float("inf")}
        out = {}
        for _ in range(args.repeat):
            for trainer in best:
                start = time.perf_counter()
                if trainer == "bertkit":
                    out[trainer] = train_bertkit(files, lowercase, size)
                else:
                    out[trainer] = train_tokenizers(files, lowercase, size, alphabet)
                best[trainer] = min(best[trainer], time.perf_counter() - start)
        for trainer, seconds in best.items():
            n, per_word, unk = quality(out[trainer], files, lowercase)
            print(f"{name:<8} {trainer:<11} {seconds:>7.2f} {n:>6} {per_word:>9.3f} {unk:>7.3%}")
        print(f"{name:<8} {'ratio':<11} {best['bertkit'] / best['tokenizers']:>7.2f}x  "
              f"(bertkit / tokenizers; {alphabet} distinct characters)")


if __name__ == "__main__":
    main()
