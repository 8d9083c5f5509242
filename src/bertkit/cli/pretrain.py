"""``bertkit pretrain`` (train BERT from pre-training data) and ``bertkit plot`` (curves).

Every :class:`~bertkit.pretraining.train_config.PretrainConfig` field is a flag
(``--batch-size``, ``--compile/--no-compile``, ...); ``--config FILE`` reads a YAML/TOML run
configuration first (flags override it) or, given a ``.json``, a model ``config.json``.
"""

from __future__ import annotations

import argparse
import sys

from bertkit.errors import BertkitError
from bertkit.options import add_options
from bertkit.pretraining.train_config import PretrainConfig
from bertkit.tokenizer.settings import add_tokenizer_flags


def register(subparsers) -> None:
    p = subparsers.add_parser("pretrain", help="pre-train BERT (MLM + NSP, MLM or left-to-right)",
                              description="Pre-train a BERT model; torchrun for several processes.")
    p.add_argument("--config", dest="config_file", default=None,
                   help="run configuration (.yaml/.yml/.toml; flags override it) or model config.json")
    add_options(p, PretrainConfig, suppress_defaults=True, skip=("lowercase", "strip_accents"))
    add_tokenizer_flags(p, suppress_defaults=True)
    p.set_defaults(func=run_pretrain)

    q = subparsers.add_parser(
        "plot", help="plot loss, accuracy and learning-rate curves of a run, or compare runs",
        description="One run: its curves in RUN_DIR/curves.png. Several runs: one panel per "
                    "metric, one line per run (--out required).")
    q.add_argument("run_dir", nargs="+", help="run directory (or its log.jsonl); several to compare")
    q.add_argument("--out", default=None,
                   help="PNG file (default: RUN_DIR/curves.png; required with several runs)")
    q.add_argument("--metrics", default=None, metavar="A,B,...",
                   help="with several runs: the logged metrics to draw, e.g. loss,eval_mlm_acc "
                        "(default: every loss and accuracy logged)")
    q.set_defaults(func=run_plot)


def config_from_args(args: argparse.Namespace):
    from bertkit.pretraining.train_config import load_config_file

    flags = {k: v for k, v in vars(args).items() if k in PretrainConfig.field_names()}
    config = PretrainConfig()
    if args.config_file:
        if args.config_file.endswith(".json"):
            flags.setdefault("model_config", args.config_file)
        else:
            config = PretrainConfig.from_dict(load_config_file(args.config_file), args.config_file)
    return config.merged(flags, "command line").validate()


def run_pretrain(args: argparse.Namespace) -> int:
    from bertkit.fileio import check_writable
    from bertkit.pretraining.train import pretrain

    config = config_from_args(args)
    if config.out:
        check_writable(config.out, "--out run directory", directory=True)
    result = pretrain(config)
    if result.stopped_by:
        print(f"bertkit: stopped by {result.stopped_by} at step {result.step}; "
              f"continue with --resume", file=sys.stderr)
        return 130 if result.stopped_by == "SIGINT" else 143
    return 0


def run_plot(args: argparse.Namespace) -> int:
    from bertkit.plot import plot_run, plot_runs

    if len(args.run_dir) == 1 and args.metrics is None:
        print(plot_run(args.run_dir[0], args.out))
        return 0
    if not args.out:
        raise BertkitError("plot: --out PNG is required when comparing runs")
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else None
    print(plot_runs(args.run_dir, args.out, metrics))
    return 0
