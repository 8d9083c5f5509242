"""Commands ``bertkit tokenize`` and ``bertkit tokenizer train``."""

from __future__ import annotations

import argparse
import json

from bertkit.cli.parsing import add_progress_flag
from bertkit.options import bounded
from bertkit.tokenizer.settings import add_tokenizer_flags


def register(subparsers) -> None:
    tok = subparsers.add_parser(
        "tokenize", help="tokenize a text (or pair) and print tokens, ids and segment ids",
        description="Tokenize TEXT (and --pair) with a WordPiece vocabulary; more than a few "
                    "percent of [UNK] tokens is warned about, with the likely cause.")
    tok.add_argument("text", help="the text to tokenize")
    tok.add_argument("--vocab", required=True,
                     help="a vocab.txt (its settings read from the tokenizer.json beside it), or "
                          "a model directory holding vocab.txt/tokenizer.json")
    tok.add_argument("--pair", help="second segment of a sentence pair")
    add_tokenizer_flags(tok)
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
                    "likelihood criterion and write it as a Google-format vocab.txt, with its "
                    "normaliser settings beside it in tokenizer.json and tokenizer_config.json "
                    "(read by every bertkit command, tokenizers and transformers).")
    train.add_argument("--corpus", nargs="+", required=True, metavar="FILE", help="UTF-8 text files")
    train.add_argument("--vocab-size", type=bounded(int, ge=1), required=True, help="number of tokens to learn")
    train.add_argument("--output", default="vocab.txt",
                       help="a .txt file (the settings files are written beside it), or a "
                            "directory (vocab.txt and the settings files in it)")
    add_tokenizer_flags(train)
    train.add_argument("--min-frequency", type=bounded(int, ge=1), default=2,
                       help="never merge a pair seen fewer times")
    train.add_argument("--limit-alphabet", type=bounded(int, ge=1), default=None, metavar="N",
                       help="keep only the N most frequent characters; words with another "
                            "character become [UNK] (default: every character of the corpus, "
                            "so no language loses characters; tokenizers' default is 1000)")
    add_progress_flag(train)
    train.set_defaults(func=run_train)
    group.set_defaults(func=lambda args: group.print_help() or 2)


def _load_tokenizer(args: argparse.Namespace):
    """``--vocab`` (a model directory or a vocab.txt) with its saved settings and the flags."""
    from pathlib import Path

    from bertkit.tokenizer import BertTokenizer

    if Path(args.vocab).is_dir():
        return BertTokenizer.from_pretrained(args.vocab, args.lowercase, args.strip_accents)
    return BertTokenizer.from_file(args.vocab, lowercase=args.lowercase,
                                   strip_accents=args.strip_accents)


def run_tokenize(args: argparse.Namespace) -> int:
    from bertkit.tokenizer.unknown import unknown_report, warn_unknown

    tok = _load_tokenizer(args)
    enc = tok.encode(args.text, args.pair, max_length=args.max_length, return_offsets=True)
    texts = [args.text] if args.pair is None else [args.text, args.pair]
    warn_unknown(unknown_report(tok, texts), "the text")
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
    from pathlib import Path

    from bertkit.errors import BertkitError
    from bertkit.fileio import check_not_input, check_writable, read_lines
    from bertkit.tokenizer import BertTokenizer
    from bertkit.tokenizer.settings import resolve_settings
    from bertkit.tokenizer.train import (
        choose_alphabet,
        count_words,
        tokens_per_word,
        train_wordpiece,
    )

    def lines():
        for path in args.corpus:
            for _, line in read_lines(path):
                yield line

    output = Path(args.output)
    vocab_file = output if output.suffix == ".txt" and not output.is_dir() else output / "vocab.txt"
    check_writable(vocab_file, "--output vocabulary")
    check_not_input(vocab_file, args.corpus, "--output", "--corpus")
    settings = resolve_settings({}, {"lowercase": args.lowercase, "strip_accents": args.strip_accents})
    counts = count_words(lines(), settings["lowercase"], settings["strip_accents"],
                         progress=args.progress)
    if not counts:
        raise BertkitError(f"{', '.join(args.corpus)}: the corpus holds no words; "
                           "cannot train a vocabulary on it")
    vocab = train_wordpiece(counts, args.vocab_size, min_frequency=args.min_frequency,
                            max_alphabet=args.limit_alphabet, progress=args.progress)
    vocab_file.parent.mkdir(parents=True, exist_ok=True)
    BertTokenizer(vocab, **settings).save_vocabulary(vocab_file)
    print(f"wrote {vocab_file} (+ tokenizer.json, tokenizer_config.json: lowercase="
          f"{settings['lowercase']}, strip_accents={settings['strip_accents']}): "
          f"{len(vocab)} tokens; {tokens_per_word(vocab, counts):.3f} tokens per corpus word")
    print(choose_alphabet(counts, args.limit_alphabet).summary())
    return 0
