"""A Korean vocabulary from ``corpus/ko``: Hangul words decomposed into jamo, and the [UNK]
rate on held-out lines, for each tokenizer setting.

For each split of the corpus's non-blank lines (``tail``: the last 10% held out, the first
90% trained on; ``every10``: every tenth line held out) and each setting (``--cased``,
``--no-strip-accents``, the uncased default), trains a vocabulary of 8,000 with
``bertkit tokenizer train`` (which saves the setting beside it) and reads it back with no
flag, then reports on the held-out lines: the share of Hangul words with a conjoining jamo
(U+1100-U+11FF) in their tokens, the share of tokens that are [UNK], and the characters of
the [UNK] words that the vocabulary lacks.

    python bench/korean_vocab.py [--out DIR]
"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "corpus" / "ko" / "kolaw-kobill.txt"
HANGUL = re.compile("[\uac00-\ud7a3]")
JAMO = re.compile("[\u1100-\u11ff]")
SETTINGS = {"--cased": ["--cased"], "--no-strip-accents": ["--no-strip-accents"], "default (uncased)": []}


def splits(lines: list[str]) -> dict[str, tuple[list[str], list[str]]]:
    cut = len(lines) * 9 // 10
    return {"tail": (lines[:cut], lines[cut:]),
            "every10": ([x for i, x in enumerate(lines) if i % 10 != 9],
                        [x for i, x in enumerate(lines) if i % 10 == 9])}


def measure(vocab_dir: Path, heldout: list[str]) -> tuple[float, float, int, int, str]:
    """(jamo share of Hangul words, [UNK] share of tokens, [UNK] tokens, tokens, missing chars)."""
    from bertkit.tokenizer import BertTokenizer

    tok = BertTokenizer.from_pretrained(vocab_dir)
    known = tok.vocab.token_to_id
    words = [w for line in heldout for w in line.split() if HANGUL.search(w)]
    jamo = sum(1 for w in words if any(JAMO.search(t) for t in tok.tokenize(w)))
    ids = [i for line in heldout for i in tok.text_to_ids(line)]
    unknown = ids.count(tok.unk_token_id)
    missing = sorted({c for line in heldout for w in tok.basic.words(line)
                      if tok.wordpiece[w][0] == (tok.unk_token_id,)
                      for c in w if c not in known and "##" + c not in known})
    return jamo / len(words), unknown / len(ids), unknown, len(ids), "".join(missing)


def main() -> None:
    from bertkit.cli.main import main as bertkit

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=None, help="keep the vocabularies here")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp())
    out.mkdir(parents=True, exist_ok=True)
    lines = [x for x in CORPUS.read_text(encoding="utf-8").splitlines() if x.strip()]
    print(f"{'split':<8} {'setting':<20} {'vocab':>6} {'jamo words':>10} {'[UNK]':>8}  unknown chars")
    for split, (train, heldout) in splits(lines).items():
        (out / f"{split}-train.txt").write_text("\n".join(train) + "\n", encoding="utf-8")
        for name, flags in SETTINGS.items():
            vocab = out / f"{split}-{name.split()[0].strip('-')}"
            assert bertkit(["tokenizer", "train", "--corpus", str(out / f"{split}-train.txt"),
                            "--vocab-size", "8000", "--output", str(vocab), "--no-progress",
                            *flags]) == 0
            jamo, unk, n_unk, n, missing = measure(vocab, heldout)
            size = sum(1 for _ in open(vocab / "vocab.txt", encoding="utf-8"))
            print(f"{split:<8} {name:<20} {size:>6} {jamo:>10.2%} {unk:>8.3%}  "
                  f"({n_unk} of {n} tokens) {missing}")


if __name__ == "__main__":
    main()
