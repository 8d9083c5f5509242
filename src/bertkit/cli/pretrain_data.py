"""``bertkit pretrain-data``: create pre-training data (create_pretraining_data equivalent)."""

from __future__ import annotations

import argparse
import time

from bertkit.cli.parsing import add_progress_flag
from bertkit.options import bounded


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "pretrain-data",
        help="turn text into masked-LM + next-sentence pre-training data",
        description=(
            "Read text files (one sentence per line, a blank line between documents), pack "
            "[CLS] A [SEP] B [SEP] instances with next-sentence labels, mask them and write "
            "sharded memory-mapped numpy arrays plus meta.json into --output. The output "
            "depends only on the inputs, the vocabulary and the settings (not on --workers)."
        ),
    )
    p.add_argument("--input", nargs="+", required=True, metavar="FILE",
                   help="UTF-8 text files: one sentence per line, blank line between documents")
    p.add_argument("--vocab", required=True, metavar="VOCAB", help="WordPiece vocab.txt")
    p.add_argument("--cased", action="store_true",
                   help="keep case and accents (for a cased vocabulary); default lowercases")
    p.add_argument("--google-tokenizer", action="store_true",
                   help="tokenize exactly as Google's original tokenization.py (whole-text "
                        "lower-casing with final sigma, words up to 200 characters, special "
                        "tokens in the text split) instead of Hugging Face's tokenizer")
    p.add_argument("--output", required=True, metavar="DIR",
                   help="output directory (meta.json is written last; an old one is removed first)")
    p.add_argument("--max-seq-length", type=bounded(int, ge=5), default=128,
                   help="tokens per instance, [CLS] and [SEP]s included (128 or 512 in BERT)")
    p.add_argument("--max-predictions-per-seq", type=bounded(int, ge=0), default=20,
                   help="cap on masked positions per instance (20 for 128, 80 for 512)")
    p.add_argument("--masked-lm-prob", type=bounded(float, ge=0, le=1), default=0.15,
                   help="share of non-special tokens to predict (80%% [MASK], 10%% random, 10%% kept)")
    p.add_argument("--short-seq-prob", type=bounded(float, ge=0, le=1), default=0.1,
                   help="probability of a shorter random target length for a document")
    p.add_argument("--dupe-factor", type=bounded(int, ge=1), default=5,
                   help="passes over the corpus, each with other packings (and masks when static)")
    p.add_argument("--whole-word-mask", action="store_true",
                   help="mask whole words (a piece and its ## continuations) together")
    p.add_argument("--dynamic-masking", action="store_true",
                   help="store unmasked tokens; masks are drawn at load time per (seed, epoch, index)")
    p.add_argument("--split-sentences", action="store_true",
                   help="treat each line as a paragraph and split it into sentences (rule-based)")
    p.add_argument("--workers", type=bounded(int, ge=1), default=1,
                   help="worker processes (the output does not depend on it)")
    p.add_argument("--seed", type=bounded(int, ge=0), default=12345, help="random seed")
    p.add_argument("--shard-size", type=bounded(int, ge=1), default=100_000, help="instances per shard file")
    p.add_argument("--chunk-sentences", type=bounded(int, ge=1), default=20_000,
                   help="sentences per chunk of documents: the unit of parallel work and of the "
                        "pool NotNext documents are drawn from (changes the output)")
    p.add_argument("--shuffle-documents", action=argparse.BooleanOptionalAction, default=True,
                   help="shuffle all documents of all inputs before chunking (as BERT's script "
                        "does), so that NotNext segments come from anywhere in the corpus")
    add_progress_flag(p, "--quiet")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bertkit.errors import BertkitError
    from bertkit.pretraining.data import CreationSettings, create_pretraining_data

    if args.workers < 1 or args.shard_size < 1:
        raise BertkitError("--workers and --shard-size must be at least 1")
    try:
        settings = CreationSettings(
            max_seq_length=args.max_seq_length,
            short_seq_prob=args.short_seq_prob,
            dupe_factor=args.dupe_factor,
            masked_lm_prob=args.masked_lm_prob,
            max_predictions_per_seq=args.max_predictions_per_seq,
            whole_word_mask=args.whole_word_mask,
            dynamic_masking=args.dynamic_masking,
            split_sentences=args.split_sentences,
            lowercase=not args.cased,
            google_tokenizer=args.google_tokenizer,
            seed=args.seed,
            chunk_sentences=args.chunk_sentences,
            shuffle_documents=args.shuffle_documents,
        )
    except ValueError as e:
        raise BertkitError(str(e)) from None
    from bertkit.fileio import check_not_input, check_writable

    check_writable(args.output, "--output directory", directory=True)
    check_not_input(args.output, [*args.input, args.vocab], "--output", "--input/--vocab")
    start = time.perf_counter()
    meta = create_pretraining_data(
        args.input, args.vocab, args.output, settings,
        workers=args.workers, shard_size=args.shard_size, progress=args.progress,
    )
    elapsed = time.perf_counter() - start
    print(format_summary(meta, elapsed))
    return 0


def format_summary(meta: dict, elapsed: float) -> str:
    """The summary lines printed after a run (the same figures are in meta.json)."""
    s = meta["summary"]
    masked = "drawn at load time" if s["masked_share"] is None else f"{s['masked_share']:.2%}"
    return "\n".join([
        f"documents      {s['documents']:,} ({s['sentences']:,} sentences)",
        f"instances      {s['instances']:,} in {len(meta['shards'])} shard(s), "
        f"{s['instances'] / max(elapsed, 1e-9):,.0f}/s",
        f"tokens         {s['tokens']:,} (mean length {s['mean_length']:.1f} of {meta['max_seq_length']})",
        f"IsNext share   {s['is_next_share']:.2%}",
        f"masked share   {masked} ({meta['masking']} masking)",
        f"time           {elapsed:.1f} s",
    ])
