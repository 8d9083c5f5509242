"""``bertkit prune MODEL_DIR --data DIR --task TASK --heads FRACTION|COUNT --out DIR``."""

from __future__ import annotations

import argparse
import json

from bertkit.cli.parsing import add_progress_flag
from bertkit.errors import BertkitError
from bertkit.options import bounded


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
    p.add_argument("--heads", required=True, metavar="FRACTION|COUNT",
                   help="heads to remove: a fraction in (0, 1) such as 0.5, or a count such as 6")
    p.add_argument("--out", required=True, metavar="DIR", help="output model directory")
    p.add_argument("--importance-examples", type=bounded(int, ge=1), default=512, metavar="N",
                   help="training examples that score the heads (default 512)")
    p.add_argument("--curve", default="0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9", metavar="LIST",
                   help="fractions pruned for the metric curve (default 0,0.1,...,0.9)")
    p.add_argument("--finetune-epochs", type=bounded(int, ge=0), default=0, metavar="N",
                   help="fine-tune the pruned model for N epochs afterwards (default 0: no)")
    p.add_argument("--lr", type=float, default=2e-5, help="learning rate of that fine-tune (2e-5)")
    p.add_argument("--max-train-examples", type=bounded(int, ge=1), default=None, metavar="N",
                   help="fine-tune on a fixed random sample of N examples (default: all)")
    p.add_argument("--batch-size", type=bounded(int, ge=1), default=32, help="batch size (default 32)")
    p.add_argument("--max-seq-length", type=bounded(int, ge=3), default=None, metavar="N",
                   help="tokens per input (default: the fine-tuned model's, else the task's: 128, SQuAD 384)")
    p.add_argument("--seed", type=int, default=42, help="seed of the example sample (42)")
    p.add_argument("--threads", type=bounded(int, ge=1), default=None, metavar="N", help="CPU threads for torch")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda (default auto)")
    add_progress_flag(p)
    p.set_defaults(func=run_prune)


def run_prune(args: argparse.Namespace) -> int:
    from bertkit.checkpoint import load_tokenizer
    from bertkit.cli.finetune import _max_len, _plain_warnings
    from bertkit.tasks import canonical_name, get_task
    from bertkit.tasks.base import finetune_entry
    from bertkit.tasks.prune import PruneConfig, prune

    try:
        curve = [float(x) for x in args.curve.split(",") if x.strip()]
    except ValueError:
        raise BertkitError(f"--curve must be comma-separated fractions, got {args.curve!r}") from None
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    with _plain_warnings():
        name = canonical_name(args.task)
        entry = finetune_entry(args.model)
        options = entry.get("options") if entry.get("task") == name else {}
        task = get_task(name, **(options or {}))
        cfg = PruneConfig(heads=args.heads, importance_examples=args.importance_examples, curve=curve,
                          max_seq_length=_max_len(args, entry, task),
                          batch=args.batch_size, finetune_epochs=args.finetune_epochs, lr=args.lr,
                          max_train_examples=args.max_train_examples,
                          seed=args.seed, device=args.device, progress=args.progress)
        record = prune(task, args.model, args.data, args.out, cfg,
                       tokenizer=load_tokenizer(args.model))
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
