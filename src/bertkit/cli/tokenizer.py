"""Commands ``bertkit tokenize`` and ``bertkit tokenizer train``."""

from __future__ import annotations

import argparse
import json

from bertkit.cli.parsing import add_progress_flag
from bertkit.options import bounded


def register(subparsers) -> None:
    tok = subparsers.add_parser(
        "tokenize", help="tokenize a text (or pair) and print tokens, ids and segment ids",
        description="Tokenize TEXT (and --pair) with a WordPiece vocabulary.")
    tok.add_argument("text", help="the text to tokenize")
    tok.add_argument("--vocab", required=True,
                     help="a vocab.txt, or a model directory holding vocab.txt/tokenizer.json")
    tok.add_argument("--pair", help="second segment of a sentence pair")
    tok.add_argument("--cased", action="store_true", help="keep case and accents (cased vocabulary)")
    tok.add_argument("--max-length", type=bounded(int, ge=2), help="truncate to this many tokens (specials included)")
    tok.add_argument("--offsets", action="store_true", help="also print character offsets")
    tok.add_argument("--json", action="store_true", help="print one JSON object instead of columns")
    tok.set_defaults(func=run_tokenize)

    group = subparsers.add_parser("tokenizer", help="tokenizer tools (train a vocabulary)",
                                  description="Tokenizer tools.")
    sub = group.add_subparsers(dest="tokenizer_command", metavar="COMMAND")
    train = sub.add_parser(
        "train", help="train a WordPiece vocab.txt from text files",
        description="Train a WordPiece vocabulary (special tokens first) with the WordPiece "
                    "likelihood criterion and write it as a Google-format vocab.txt.")
    train.add_argument("--corpus", nargs="+", required=True, metavar="FILE", help="UTF-8 text files")
    train.add_argument("--vocab-size", type=bounded(int, ge=1), required=True, help="number of tokens to learn")
    train.add_argument("--output", default="vocab.txt", help="where to write")
    train.add_argument("--cased", action="store_true", help="keep case and accents")
    train.add_argument("--min-frequency", type=bounded(int, ge=1), default=2,
                       help="never merge a pair seen fewer times")
    add_progress_flag(train)
    train.set_defaults(func=run_train)
    group.set_defaults(func=lambda args: group.print_help() or 2)


def _load_tokenizer(path: str, cased: bool):
    from pathlib import Path

    from bertkit.tokenizer import BertTokenizer

    if Path(path).is_dir():
        return BertTokenizer.from_pretrained(path)
    return BertTokenizer.from_file(path, lowercase=not cased)


def run_tokenize(args: argparse.Namespace) -> int:
    tok = _load_tokenizer(args.vocab, args.cased)
    enc = tok.encode(args.text, args.pair, max_length=args.max_length, return_offsets=True)
    tokens = tok.convert_ids_to_tokens(enc.input_ids)
    if args.json:
        record = {"tokens": tokens, "input_ids": enc.input_ids, "token_type_ids": enc.token_type_ids}
        if args.offsets:
            record["offsets"] = enc.offsets
        print(json.dumps(record, ensure_ascii=False))
        return 0
    width = max(len(t) for t in tokens)
    header = f"{'token':<{width}}  {'id':>6}  seg" + ("  offsets" if args.offsets else "")
    print(header)
    for token, index, segment, span in zip(tokens, enc.input_ids, enc.token_type_ids, enc.offsets):
        print(f"{token:<{width}}  {index:>6}  {segment:>3}" + (f"  {span[0]}-{span[1]}" if args.offsets else ""))
    if enc.num_truncated:
        print(f"({enc.num_truncated} tokens truncated)")
    return 0


def run_train(args: argparse.Namespace) -> int:
    from bertkit.errors import BertkitError
    from bertkit.fileio import check_not_input, check_writable, read_lines
    from bertkit.tokenizer.train import count_words, tokens_per_word, train_wordpiece

    def lines():
        for path in args.corpus:
            for _, line in read_lines(path):
                yield line

    check_writable(args.output, "--output vocabulary")
    check_not_input(args.output, args.corpus, "--output", "--corpus")
    counts = count_words(lines(), lowercase=not args.cased, progress=args.progress)
    if not counts:
        raise BertkitError(f"{', '.join(args.corpus)}: the corpus holds no words; "
                           "cannot train a vocabulary on it")
    vocab = train_wordpiece(counts, args.vocab_size, min_frequency=args.min_frequency,
                            progress=args.progress)
    vocab.save(args.output)
    print(f"wrote {args.output}: {len(vocab)} tokens; "
          f"{tokens_per_word(vocab, counts):.3f} tokens per corpus word")
    return 0
