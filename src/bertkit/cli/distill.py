"""``bertkit distill TASK --teacher DIR --student DIR|PRESET --data DIR --out DIR``.

The distillation flags come from :class:`~bertkit.finetuning.config.DistillConfig`'s
fields and the fine-tuning flags from :class:`~bertkit.finetuning.config.FinetuneConfig`'s
(:func:`bertkit.options.add_options`), so every setting of ``finetune`` exists here with the
same name, default and range.
"""

from __future__ import annotations

import argparse

from bertkit.cli.long_text import add_long_text_arguments, check_window_flags
from bertkit.cli.parsing import add_progress_flag
from bertkit.finetuning.config import DistillConfig, FinetuneConfig
from bertkit.options import add_options, bounded, options_from_args

_NOT_FLAGS = ("grid", "progress")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "distill", help="train a small student on a fine-tuned teacher's soft targets",
        description="Task distillation: the student (a model directory, a preset, or "
                    "--student-layers N of the teacher's layers) is fine-tuned on "
                    "alpha * T^2 * KL(teacher/T || student/T) + (1 - alpha) * gold-label loss, "
                    "with the teacher's logits computed once (plus, optionally, TinyBERT-style "
                    "hidden-state and attention matching); grid, selection, logs and outputs as "
                    "in finetune.")
    p.add_argument("task", metavar="TASK", help="task (as for finetune: sst2, mrpc, stsb, ner, ...)")
    p.add_argument("--data", required=True, metavar="DIR", help="the task's data folder")
    p.add_argument("--out", required=True, metavar="DIR", help="output model directory")
    add_options(p, DistillConfig)
    p.add_argument("--grid", nargs="*", default=None, metavar="KEY=V1,V2",
                   help="grid search as in finetune (bare --grid: the paper's grid)")
    p.add_argument("--threads", type=bounded(int, ge=1), default=None, metavar="N", help="CPU threads for torch")
    add_progress_flag(p)
    p.add_argument("-o", "--task-option", action="append", default=[], metavar="KEY=VALUE",
                   help="task option (value parsed as JSON when it can be), repeatable")
    add_long_text_arguments(p)
    add_options(p.add_argument_group("fine-tuning (as finetune)"), FinetuneConfig, skip=_NOT_FLAGS)
    p.set_defaults(func=run_distill)


def run_distill(args: argparse.Namespace) -> int:
    from bertkit.cli.finetune import _plain_warnings
    from bertkit.finetuning.distill import distill
    from bertkit.finetuning.loop import format_table, parse_grid
    from bertkit.tasks import canonical_name, get_task
    from bertkit.tasks.task_options import task_options_from

    options = task_options_from(args)  # the long-text flags and -o KEY=VALUE
    check_window_flags(args, options)
    cfg = DistillConfig(**options_from_args(DistillConfig, args))
    ft = FinetuneConfig(**{**options_from_args(FinetuneConfig, args),
                           "grid": parse_grid(args.grid) if args.grid is not None else None})
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    with _plain_warnings():
        task = get_task(canonical_name(args.task), **options)
        runs, best = distill(task, args.data, args.out, cfg, ft)
    print(format_table(runs, task.main_metric))
    print(f"best: {task.main_metric}={best.metrics[task.main_metric]:.4f} (epoch {best.epoch}) "
          f"-> {args.out}")
    return 0
