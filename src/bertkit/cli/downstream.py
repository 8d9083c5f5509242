"""``bertkit downstream MODEL_DIR``: fine-tune a model on GLUE tasks with a small grid and
print one table (see :mod:`bertkit.tasks.downstream`).

Every :class:`~bertkit.tasks.downstream.DownstreamConfig` field is a flag (``--lrs``,
``--random-init/--no-random-init``, ...); list fields take comma-separated values
(:mod:`bertkit.options`).
"""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    from bertkit.options import add_options
    from bertkit.tasks.downstream import DownstreamConfig

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


def config_from_args(args: argparse.Namespace):
    from bertkit.options import options_from_args
    from bertkit.tasks.downstream import DownstreamConfig

    return DownstreamConfig(**options_from_args(DownstreamConfig, args)).validate()


def run_downstream(args: argparse.Namespace) -> int:
    from bertkit.cli.finetune import _plain_warnings
    from bertkit.tasks.downstream import CHART_FILE, RESULTS_FILE, downstream, format_results

    cfg = config_from_args(args)
    with _plain_warnings():  # truncation notes as one line each
        results = downstream(args.model_dir, cfg)
    print(format_results(results))
    print(f"results: {cfg.out}/{RESULTS_FILE}, chart: {cfg.out}/{CHART_FILE} "
          f"(selection on dev; scores x 100)")
    return 0
