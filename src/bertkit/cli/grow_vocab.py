"""``bertkit grow-vocab MODEL_DIR --out DIR (--add A,B | --tokens FILE | --corpus FILE... --top N)``:
add tokens to a trained model (:mod:`bertkit.model.vocab_growth`)."""

from __future__ import annotations

import argparse

from bertkit.cli.parsing import add_progress_flag
from bertkit.options import bounded, comma_list


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "grow-vocab", help="add tokens (a list, or a corpus's most frequent new words) to a trained model",
        description="Append tokens to a model's vocabulary: the word embeddings, the tied "
                    "masked-LM decoder and its bias grow by one row per token, initialised "
                    "from the mean of the rows of the pieces the old vocabulary splits the "
                    "token into. Old ids keep their rows, so the model's outputs on old "
                    "tokens are unchanged; the new directory loads in bertkit and transformers.")
    p.add_argument("model", metavar="MODEL_DIR", help="a model directory (with its tokenizer)")
    p.add_argument("--out", required=True, metavar="DIR", help="the grown model directory")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--add", type=comma_list(str), metavar="A,B,...", help="tokens to add")
    source.add_argument("--tokens", metavar="FILE", help="tokens to add, one per line")
    source.add_argument("--corpus", nargs="+", metavar="FILE",
                        help="text files: add their --top most frequent words that are not one "
                             "token yet")
    p.add_argument("--top", type=bounded(int, ge=1), default=1000, metavar="N",
                   help="with --corpus: how many new words to add")
    p.add_argument("--min-count", type=bounded(int, ge=1), default=2, metavar="N",
                   help="with --corpus: only words seen at least N times")
    add_progress_flag(p)
    p.set_defaults(func=run)


def _tokens(args: argparse.Namespace, tokenizer) -> list[str]:
    """The tokens to add, from --add, --tokens or --corpus."""
    from bertkit.fileio import read_lines
    from bertkit.model.vocab_growth import top_new_words

    if args.add:
        return list(args.add)
    if args.tokens:
        return [line.strip() for _, line in read_lines(args.tokens) if line.strip()]
    lines = (line for path in args.corpus for _, line in read_lines(path))
    return top_new_words(tokenizer, lines, args.top, args.min_count, progress=args.progress)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bertkit.checkpoint import load_pretrained, load_tokenizer, save_pretrained
    from bertkit.errors import BertkitError
    from bertkit.fileio import check_writable
    from bertkit.model.vocab_growth import grow_vocabulary

    if Path(args.out).resolve() == Path(args.model).resolve():
        raise BertkitError("--out: give a new directory; the model directory is read, not changed")
    check_writable(args.out, "--out model directory", directory=True)
    tokenizer = load_tokenizer(args.model)
    model = load_pretrained(args.model)
    before = len(tokenizer)
    grown, added = grow_vocabulary(model, tokenizer, _tokens(args, tokenizer))
    if not added:
        raise BertkitError("no new token to add: every one is in the vocabulary already")
    save_pretrained(model, args.out, tokenizer=grown)
    shown = " ".join(added[:10]) + (" ..." if len(added) > 10 else "")
    print(f"wrote {args.out}: vocabulary {before:,} -> {len(grown):,} tokens "
          f"({len(added):,} added: {shown})")
    return 0
