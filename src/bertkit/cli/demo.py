"""Command ``bertkit demo``: the main job on its built-in default data."""

from __future__ import annotations


def register(subparsers) -> None:
    demo = subparsers.add_parser(
        "demo", help="run the whole pipeline on the built-in corpus (what `make demo` runs)",
        description="Build the built-in corpus (Python standard library docstrings), train a "
                    "vocabulary, pre-train a tiny BERT, show fill-mask and the training curves, "
                    "then fine-tune it on a built-in labelled task and print the dev metric.")
    demo.add_argument("--out", default="demo_out", help="output directory (default: demo_out)")
    demo.add_argument("--vocab-size", type=int, default=8000, help="vocabulary size (default: 8000)")
    demo.add_argument("--steps", type=int, default=1000, help="pre-training steps (default: 1000)")
    demo.add_argument("--model-size", default="tiny", help="model preset (default: tiny)")
    demo.add_argument("--finetune-epochs", type=int, default=3, help="fine-tuning epochs (default: 3)")
    demo.set_defaults(func=run)


def run(args) -> int:
    from bertkit.demo import run_demo

    run_demo(args.out, vocab_size=args.vocab_size, steps=args.steps, model_size=args.model_size,
             finetune_epochs=args.finetune_epochs)
    return 0
