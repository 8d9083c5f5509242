"""``bertkit downstream MODEL_DIR``: fine-tune a model on GLUE tasks with a small grid and
print one table (see :mod:`bertkit.finetuning.downstream`).

Every :class:`~bertkit.finetuning.downstream.DownstreamConfig` field is a flag (``--lrs``,
``--random-init/--no-random-init``, ...); list fields take comma-separated values
(:mod:`bertkit.options`).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers) -> None:
    from bertkit.finetuning.downstream import DownstreamConfig
    from bertkit.options import add_options, comma_list

    p = subparsers.add_parser(
        "downstream", help="fine-tune a model on GLUE tasks (grid of lrs x seeds), one table",
        description="Fine-tune MODEL_DIR on each task for every learning rate and seed (the "
                    "finetune recipe), keep each run's best epoch and each task's best "
                    "learning rate by the dev metric (mean over seeds), print the table, write "
                    "OUT/results.json and OUT/downstream.png. Finished runs are skipped when "
                    "the command is run again.")
    p.add_argument("model_dir", metavar="MODEL_DIR", help="pre-trained model directory (with vocab)")
    add_options(p, DownstreamConfig)
    p.set_defaults(func=run_downstream)

    c = subparsers.add_parser(
        "compare-downstream", help="one table (and chart) of several `downstream` results",
        description="Read the results.json of several `bertkit downstream` output folders and "
                    "print the paper's Table 5 layout: one row per model, one column per task "
                    "(mean over seeds +- spread, x 100), the average and, with --baseline, "
                    "each average's difference from that row.")
    c.add_argument("runs", metavar="OUT", nargs="+", help="downstream output folders")
    c.add_argument("--names", type=comma_list(str), default=None,
                   help="row names, comma-separated (default: the folder names)")
    c.add_argument("--baseline", default=None, help="row name to compare every average with")
    c.add_argument("--chart", default=None, help="write a grouped bar chart (PNG) here")
    c.set_defaults(func=run_compare)


def config_from_args(args: argparse.Namespace):
    from bertkit.finetuning.downstream import DownstreamConfig
    from bertkit.options import options_from_args

    return DownstreamConfig(**options_from_args(DownstreamConfig, args)).validate()


def run_downstream(args: argparse.Namespace) -> int:
    from bertkit.cli.finetune import _plain_warnings
    from bertkit.finetuning.downstream import CHART_FILE, RESULTS_FILE, downstream, format_results

    cfg = config_from_args(args)
    with _plain_warnings():  # truncation notes as one line each
        results = downstream(args.model_dir, cfg)
    print(format_results(results))
    print(f"results: {cfg.out}/{RESULTS_FILE}, chart: {cfg.out}/{CHART_FILE} "
          f"(selection on dev; scores x 100)")
    return 0


def run_compare(args: argparse.Namespace) -> int:
    from bertkit.errors import BertkitError
    from bertkit.finetuning.downstream import format_comparison, load_results, plot_comparison

    folders = [Path(r).resolve() for r in args.runs]
    twice = sorted({r for r, f in zip(args.runs, folders) if folders.count(f) > 1})
    if twice:
        raise BertkitError(f"{', '.join(twice)}: given more than once; compare different OUT folders")
    names = list(args.names or [Path(r).name for r in args.runs])
    if args.names is None and len(set(names)) != len(names):
        names = [str(r) for r in args.runs]  # folders of the same name: the paths tell them apart
    if len(names) != len(args.runs) or len(set(names)) != len(names):
        raise BertkitError(f"--names: {len(args.runs)} distinct names needed, one per OUT "
                           f"folder; got {','.join(names)}")
    rows = {n: load_results(r) for n, r in zip(names, args.runs)}
    print(format_comparison(rows, baseline=args.baseline))
    if args.chart:
        print(f"chart: {plot_comparison(rows, args.chart)}")
    return 0
