"""Command ``bertkit demo``: the main job on its built-in default data."""

from __future__ import annotations

from bertkit.config import PRESETS
from bertkit.options import bounded


def register(subparsers) -> None:
    demo = subparsers.add_parser(
        "demo", help="run the whole pipeline on the built-in corpus (what `make demo` runs)",
        description="Build the built-in corpus (Python standard library docstrings), train a "
                    "vocabulary, pre-train a tiny BERT, show fill-mask and the training curves, "
                    "then fine-tune it on a built-in labelled task and print the dev metric.")
    demo.add_argument("--out", default="demo_out", help="output directory")
    demo.add_argument("--vocab-size", type=bounded(int, ge=6), default=8000, help="vocabulary size")
    demo.add_argument("--steps", type=bounded(int, ge=1), default=1000, help="pre-training steps")
    demo.add_argument("--model-size", default="tiny", choices=tuple(PRESETS), help="model preset")
    demo.add_argument("--finetune-epochs", type=bounded(int, ge=1), default=3, help="fine-tuning epochs")
    demo.set_defaults(func=run)


def run(args) -> int:
    from bertkit.demo import run_demo

    run_demo(args.out, vocab_size=args.vocab_size, steps=args.steps, model_size=args.model_size,
             finetune_epochs=args.finetune_epochs)
    return 0
