"""``bertkit distill TASK --teacher DIR --student DIR|PRESET --data DIR --out DIR``.

The fine-tuning flags are generated from :class:`~bertkit.tasks.finetune.FinetuneConfig`'s
fields (``--batch-size``/``--eval-batch-size`` spelled as in ``finetune``), so every setting of
``finetune`` exists here with the same default.
"""

from __future__ import annotations

import argparse
import dataclasses

from bertkit.cli.long_text import add_long_text_arguments, long_text_options
from bertkit.errors import BertkitError

_SKIP = {"grid", "progress"}
_FLAGS = {"batch": "--batch-size", "eval_batch": "--eval-batch-size"}


def _finetune_fields():
    from bertkit.tasks.finetune import FinetuneConfig

    return [f for f in dataclasses.fields(FinetuneConfig) if f.name not in _SKIP]


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "distill", help="train a small student on a fine-tuned teacher's soft targets",
        description="Task distillation: the student (a model directory, a preset, or "
                    "--student-layers N of the teacher's layers) is fine-tuned on "
                    "alpha * T^2 * KL(teacher/T || student/T) + (1 - alpha) * gold-label loss, "
                    "with the teacher's logits computed once; grid, selection, logs and "
                    "outputs as in finetune.")
    p.add_argument("task", metavar="TASK", help="task (as for finetune: sst2, mrpc, stsb, ner, ...)")
    p.add_argument("--teacher", required=True, metavar="DIR", help="a model fine-tuned for TASK")
    p.add_argument("--student", metavar="DIR|PRESET",
                   help="student model directory (same vocabulary) or preset (tiny, mini, small, ...)")
    p.add_argument("--student-layers", type=int, metavar="N",
                   help="student = N of the teacher's layers, evenly spaced (instead of --student)")
    p.add_argument("--data", required=True, metavar="DIR", help="the task's data folder")
    p.add_argument("--out", required=True, metavar="DIR", help="output model directory")
    p.add_argument("--temperature", type=float, default=2.0, help="softmax temperature T (default 2.0)")
    p.add_argument("--alpha", type=float, default=0.5,
                   help="weight of the teacher (soft) loss; 1 - alpha goes to the gold labels (0.5)")
    p.add_argument("--grid", nargs="*", default=None, metavar="KEY=V1,V2",
                   help="grid search as in finetune (bare --grid: the paper's grid)")
    p.add_argument("--threads", type=int, default=None, metavar="N", help="CPU threads for torch")
    p.add_argument("--no-progress", dest="progress", action="store_false", default=None,
                   help="no progress bars")
    p.add_argument("-o", "--task-option", action="append", default=[], metavar="KEY=VALUE",
                   help="task option (value parsed as JSON when it can be), repeatable")
    add_long_text_arguments(p)
    group = p.add_argument_group("fine-tuning (as finetune)")
    for f in _finetune_fields():
        flag = _FLAGS.get(f.name, "--" + f.name.replace("_", "-"))
        kind = type(f.default) if f.default is not None else int
        group.add_argument(flag, dest=f.name, type=kind, default=f.default,
                           help=f"default {f.default}")
    p.set_defaults(func=run_distill)


def run_distill(args: argparse.Namespace) -> int:
    from bertkit.cli.finetune import _option_value, _plain_warnings
    from bertkit.tasks import canonical_name, get_task
    from bertkit.tasks.distill import DistillConfig, distill
    from bertkit.tasks.finetune import FinetuneConfig, format_table, parse_grid

    options = long_text_options(args)
    for item in args.task_option:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BertkitError(f"bad task option {item!r}; expected KEY=VALUE")
        options[key.strip().replace("-", "_")] = _option_value(value)
    cfg = DistillConfig(teacher=args.teacher, student=args.student,
                        student_layers=args.student_layers, temperature=args.temperature,
                        alpha=args.alpha)
    ft = FinetuneConfig(**{f.name: getattr(args, f.name) for f in _finetune_fields()},
                        grid=parse_grid(args.grid) if args.grid is not None else None,
                        progress=args.progress)
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
