"""``bertkit prune MODEL_DIR --data DIR --task TASK --heads FRACTION|COUNT --out DIR``.

Every :class:`~bertkit.finetuning.config.PruneConfig` field is a flag
(:func:`bertkit.options.add_options`); ``--max-seq-length`` defaults to the fine-tuned model's.
"""

from __future__ import annotations

import argparse
import json

from bertkit.cli.parsing import add_progress_flag
from bertkit.finetuning.config import PruneConfig
from bertkit.options import add_options, bounded, options_from_args


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "prune", help="remove the least important attention heads of a fine-tuned model",
        description="Score every attention head on training data (Michel et al. 2019: the "
                    "gradient of the loss w.r.t. a gate on the head), draw the task metric "
                    "against the fraction of heads pruned (pruning_curve.png), remove the "
                    "least important heads from the weight matrices and save a smaller model "
                    "directory (config.json pruned_heads), optionally fine-tuned again.")
    p.add_argument("model", metavar="MODEL_DIR", help="a model fine-tuned for TASK")
    p.add_argument("--task", required=True, help="task the model is fine-tuned for (e.g. sst2)")
    p.add_argument("--data", required=True, metavar="DIR", help="the task's data folder")
    p.add_argument("--out", required=True, metavar="DIR", help="output model directory")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the model already in --out (default: refuse)")
    add_options(p, PruneConfig, resolved={"max_seq_length": "the fine-tuned model's, else the task's: 128, SQuAD 384"})
    p.add_argument("--threads", type=bounded(int, ge=1), default=None, metavar="N", help="CPU threads for torch")
    add_progress_flag(p)
    p.set_defaults(func=run_prune)


def run_prune(args: argparse.Namespace) -> int:
    from bertkit.checkpoint import load_tokenizer
    from bertkit.cli.finetune import _max_len, _plain_warnings
    from bertkit.finetuning.prune import prune
    from bertkit.modeldir.entry import finetune_entry
    from bertkit.tasks import canonical_name, get_task

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    with _plain_warnings():
        name = canonical_name(args.task)
        entry = finetune_entry(args.model)
        options = entry.get("options") if entry.get("task") == name else {}
        task = get_task(name, **(options or {}))
        cfg = PruneConfig(**{
            **options_from_args(PruneConfig, args),  # every flag PruneConfig declares, --progress
            "max_seq_length": _max_len(args, entry, task)})
        record = prune(task, args.model, args.data, args.out, cfg,
                       tokenizer=load_tokenizer(args.model), overwrite=args.overwrite)
    main = task.main_metric
    for point in record["curve"]:
        print(f"pruned {point['fraction']:.2f} ({point['heads_removed']} heads) {main}={point[main]:.4f}")
    after = record.get("metrics_after_finetune", record["metrics_after_pruning"])
    print(json.dumps({"heads_removed": record["heads_removed"], "heads_total": record["heads_total"],
                      "parameters_before": record["parameters_before"],
                      "parameters_after": record["parameters_after"],
                      f"{main}_before": record["metrics_before"][main], f"{main}_after": after[main]}))
    print(f"pruned model -> {args.out} (curve: {args.out}/pruning_curve.png)")
    return 0
