"""``bertkit`` entry point: discovers the command modules of :mod:`bertkit.cli`."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import bertkit
import bertkit.cli
from bertkit.cli.boundary import install_warning_format, run_guarded
from bertkit.cli.parsing import accept_negative_numbers


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bertkit",
        description="BERT end to end: tokenizer, model, pre-training, fine-tuning.",
    )
    parser.add_argument("--version", action="version", version=f"bertkit {bertkit.__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="on an error, also print the Python traceback (for bug reports; "
                             "the environment variable BERTKIT_DEBUG=1 does the same)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(bertkit.cli.__path__), key=lambda m: m.name):
        if info.name == "main":
            continue
        module = importlib.import_module(f"bertkit.cli.{info.name}")
        if hasattr(module, "register"):
            module.register(subparsers)
    accept_negative_numbers(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    from bertkit.training.cpu import bound_onednn_cache

    bound_onednn_cache()  # before any matrix product of the command
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    install_warning_format()
    return run_guarded(args.func, args, debug=args.debug)


if __name__ == "__main__":
    sys.exit(main())
