"""``bertkit downstream MODEL_DIR``: fine-tune a model on GLUE tasks with a small grid and
print one table (see :mod:`bertkit.tasks.downstream`).

Every :class:`~bertkit.tasks.downstream.DownstreamConfig` field is a flag (``--lrs``,
``--random-init/--no-random-init``, ...); list fields take comma-separated values.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing

CHOICES = {"precision": ("auto", "fp32", "bf16", "fp16"), "device": ("auto", "cpu", "cuda")}


def _list_of(kind: type, name: str):
    def parse(text: str) -> tuple:
        try:
            values = tuple(kind(v.strip()) for v in text.split(",") if v.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}: comma-separated {kind.__name__} values, "
                                             f"got {text!r}") from None
        if not values:
            raise argparse.ArgumentTypeError(f"{name}: give at least one value")
        return values
    return parse


def _add_config_flags(parser: argparse.ArgumentParser) -> None:
    from bertkit.tasks.downstream import DownstreamConfig

    hints = typing.get_type_hints(DownstreamConfig)
    for f in dataclasses.fields(DownstreamConfig):
        flag = "--" + f.name.replace("_", "-")
        hint = hints[f.name]
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        default = f.default
        shown = ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in default) \
            if isinstance(default, tuple) else default
        help_text = f.metadata.get("help", "")
        if "default" not in help_text:
            help_text += f" (default: {shown})"
        kwargs = dict(dest=f.name, default=default, help=help_text)
        if typing.get_origin(hint) is tuple:
            parser.add_argument(flag, type=_list_of(args[0], flag), metavar="A,B,...", **kwargs)
        elif hint is bool or bool in args:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, **kwargs)
        else:
            kind = args[0] if args else hint
            parser.add_argument(flag, type=kind, choices=CHOICES.get(f.name),
                                metavar=None if f.name in CHOICES else "N" if kind is int else "X",
                                **kwargs)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "downstream", help="fine-tune a model on GLUE tasks (grid of lrs x seeds), one table",
        description="Fine-tune MODEL_DIR on each task for every learning rate and seed (the "
                    "finetune recipe), keep each run's best epoch and each task's best "
                    "learning rate by the dev metric (mean over seeds), print the table, write "
                    "OUT/results.json and OUT/downstream.png. Finished runs are skipped when "
                    "the command is run again.")
    p.add_argument("model_dir", metavar="MODEL_DIR", help="pre-trained model directory (with vocab)")
    _add_config_flags(p)
    p.set_defaults(func=run_downstream)


def config_from_args(args: argparse.Namespace):
    from bertkit.tasks.downstream import DownstreamConfig

    names = {f.name for f in dataclasses.fields(DownstreamConfig)}
    return DownstreamConfig(**{k: v for k, v in vars(args).items() if k in names}).validate()


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
