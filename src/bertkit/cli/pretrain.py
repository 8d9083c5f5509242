"""``bertkit pretrain`` (train BERT from pre-training data) and ``bertkit plot`` (curves).

Every :class:`~bertkit.pretraining.train_config.PretrainConfig` field is a flag
(``--batch-size``, ``--compile/--no-compile``, ...); ``--config FILE`` reads a YAML/TOML run
configuration first (flags override it) or, given a ``.json``, a model ``config.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import types
import typing

HELP = {
    "data": "pre-training data directory (bertkit pretrain-data)",
    "out": "run directory: log.jsonl, checkpoints/, model/",
    "vocab": "vocab.txt the data was made with (exported with the model)",
    "lowercase": "tokenizer lowercasing (default: as the data was made)",
    "eval_data": "held-out pre-training data for periodic evaluation",
    "model_size": "preset model size",
    "model_config": "model config.json (instead of --model-size)",
    "init_from": "start from these weights only: a model directory or a run directory (phase 2)",
    "objective": "mlm+nsp (BERT), mlm (no NSP) or ltr (left-to-right LM, causal mask)",
    "dropout": "override hidden and attention dropout",
    "steps": "total optimizer steps (ignored with --budget, which plans them)",
    "batch_size": "micro-batch size per process",
    "grad_accum": "micro-batches per optimizer step (global batch = batch x accum x processes)",
    "lr": "peak learning rate (paper: 1e-4)",
    "warmup_steps": "warm-up steps (default: --warmup-fraction of --steps)",
    "warmup_fraction": "warm-up share of the steps when --warmup-steps is not given (paper: 1%%)",
    "weight_decay": "AdamW weight decay (not on biases and LayerNorm)",
    "adam_eps": "AdamW epsilon (BERT: 1e-6)",
    "max_grad_norm": "gradient clipping norm",
    "optimizer": "AdamW kernel: auto (fused when possible), fused, foreach, plain",
    "precision": "auto (CPU: bf16 where the CPU has native bf16 - avx512_bf16/AMX/Arm bf16 - "
                 "else fp32; GPU: bf16 or fp16; the resolved choice is logged and saved), "
                 "fp32, bf16, fp16",
    "compile": "torch.compile the model",
    "device": "auto, cpu, cuda",
    "dynamic_masking": "draw masks per epoch at load time (default: as the data was made)",
    "mask_rate": "masked-LM rate drawn at load time (dynamic masking), e.g. 0.15 (paper) or "
                 "0.3-0.4; default: the data's own masks and rate",
    "max_predictions": "most masked positions per sequence with --mask-rate (default: the "
                       "data's, raised to ceil(rate x sequence length))",
    "budget": "wall-clock budget, e.g. 1h, 90m, 3600s: measures the step time, then fixes "
              "--steps to fit and stops at the deadline (docs/pretraining.md)",
    "seed": "seed of initialisation, data order and dynamic masks",
    "log_every": "log every N steps",
    "save_every": "checkpoint every N steps (and at the end)",
    "keep": "checkpoints kept",
    "eval_every": "evaluate on --eval-data every N steps (0: at the end only)",
    "eval_batches": "batches per evaluation",
    "resume": "continue from the newest checkpoint in --out",
    "tensorboard": "also write TensorBoard scalars (if installed)",
    "progress": "progress bar on stderr (default: only on a terminal)",
}
CHOICES = {
    "objective": ("mlm+nsp", "mlm", "ltr"),
    "model_size": ("tiny", "mini", "small", "medium", "base", "large"),
    "precision": ("auto", "fp32", "bf16", "fp16"),
    "optimizer": ("auto", "fused", "foreach", "plain"),
}


def _base_type(hint) -> type:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    return hint


def _add_config_flags(parser: argparse.ArgumentParser) -> None:
    from bertkit.pretraining.train_config import PretrainConfig

    hints = typing.get_type_hints(PretrainConfig)
    for field in dataclasses.fields(PretrainConfig):
        flag = "--" + field.name.replace("_", "-")
        kind = _base_type(hints[field.name])
        kwargs = dict(dest=field.name, default=argparse.SUPPRESS, help=HELP.get(field.name))
        if kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, **kwargs)
        else:
            parser.add_argument(flag, type=kind, choices=CHOICES.get(field.name),
                                metavar=None if field.name in CHOICES else field.name.upper(),
                                **kwargs)


def register(subparsers) -> None:
    p = subparsers.add_parser("pretrain", help="pre-train BERT (MLM + NSP, MLM or left-to-right)",
                              description="Pre-train a BERT model; torchrun for several processes.")
    p.add_argument("--config", dest="config_file", default=None,
                   help="run configuration (.yaml/.yml/.toml; flags override it) or model config.json")
    _add_config_flags(p)
    p.set_defaults(func=run_pretrain)

    q = subparsers.add_parser("plot", help="plot loss, accuracy and learning-rate curves of a run")
    q.add_argument("run_dir", help="run directory (or its log.jsonl)")
    q.add_argument("--out", default=None, help="PNG file (default: RUN_DIR/curves.png)")
    q.set_defaults(func=run_plot)


def config_from_args(args: argparse.Namespace):
    from bertkit.pretraining.train_config import PretrainConfig, load_config_file

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
    from bertkit.plot import plot_run

    print(plot_run(args.run_dir, args.out))
    return 0
