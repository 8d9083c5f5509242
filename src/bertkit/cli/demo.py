"""Command ``bertkit demo``: the main job on its built-in default data."""

from __future__ import annotations


def register(subparsers) -> None:
    demo = subparsers.add_parser(
        "demo", help="run the whole pipeline on the built-in corpus (what `make demo` runs)",
        description="Build the built-in corpus (Python standard library docstrings), train a "
                    "vocabulary and run the rest of the pipeline on it.")
    demo.add_argument("--out", default="demo_out", help="output directory (default: demo_out)")
    demo.add_argument("--vocab-size", type=int, default=8000, help="vocabulary size (default: 8000)")
    demo.set_defaults(func=run)


def run(args) -> int:
    from bertkit.demo import run_demo

    run_demo(args.out, vocab_size=args.vocab_size)
    return 0
