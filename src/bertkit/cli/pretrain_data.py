"""``bertkit pretrain-data``: create pre-training data (create_pretraining_data equivalent).

Every :class:`~bertkit.pretraining.data_config.CreationSettings` field is a flag
(:func:`bertkit.options.add_options`; the normaliser flags are the shared
:func:`~bertkit.tokenizer.settings.add_tokenizer_flags`, by default the settings saved with the
vocabulary); ``--workers`` and
``--shard-size`` only say how the work is done, not what is written.
"""

from __future__ import annotations

import argparse
import time

from bertkit.cli.parsing import add_progress_flag
from bertkit.options import add_options, bounded, options_from_args
from bertkit.pretraining.data_config import CreationSettings
from bertkit.tokenizer.settings import add_tokenizer_flags
from bertkit.tokenizer.unknown import REFUSE_RATE


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
    p.add_argument("--vocab", required=True, metavar="VOCAB",
                   help="WordPiece vocab.txt (its tokenizer settings are read from the "
                        "tokenizer.json/tokenizer_config.json saved beside it)")
    p.add_argument("--output", required=True, metavar="DIR",
                   help="output directory (meta.json is written last; an old one is removed first)")
    add_options(p, CreationSettings, skip=("lowercase", "strip_accents"))
    add_tokenizer_flags(p)
    p.add_argument("--workers", type=bounded(int, ge=1), default=1,
                   help="worker processes (the output does not depend on it)")
    p.add_argument("--shard-size", type=bounded(int, ge=1), default=100_000, help="instances per shard file")
    p.add_argument("--allow-unknown", action="store_true",
                   help=f"go on when more than {REFUSE_RATE:.0%}% of the first lines' tokens are "
                        "[UNK] (a vocabulary that does not fit the text: the run stops by default)")
    add_progress_flag(p, "--quiet")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bertkit.fileio import check_not_input, check_writable
    from bertkit.pretraining.data import create_pretraining_data

    settings = CreationSettings(**options_from_args(CreationSettings, args))
    check_writable(args.output, "--output directory", directory=True)
    check_not_input(args.output, [*args.input, args.vocab], "--output", "--input/--vocab")
    start = time.perf_counter()
    meta = create_pretraining_data(
        args.input, args.vocab, args.output, settings,
        workers=args.workers, shard_size=args.shard_size, progress=args.progress,
        allow_unknown=args.allow_unknown,
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
        f"unknown        {s.get('unknown_share', 0):.2%} of the text's tokens are [UNK]",
        f"time           {elapsed:.1f} s",
    ])
