"""``bertkit`` entry point: discovers the command modules of :mod:`bertkit.cli`."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import bertkit
import bertkit.cli
from bertkit.cli.boundary import install_warning_format, run_guarded
from bertkit.cli.parsing import accept_negative_lists


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, plus ``(default: X)`` after every option that has a default
    and does not already say it (switches, ``None`` and empty defaults are left alone)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if isinstance(action, argparse.BooleanOptionalAction) and default is True and "default" not in text:
            return f"{text} (default: on)"
        if (not action.option_strings or action.nargs == 0 or "default" in text or default is None
                or default is argparse.SUPPRESS or default == []):
            return text
        return f"{text} (default: %(default)s)"


def _finish(parser: argparse.ArgumentParser) -> None:
    """``HelpFormatter`` and negative numbers as values (``--lr -1e-5`` reaches the range
    check) for ``parser`` and every sub-command parser below it."""
    parser.formatter_class = HelpFormatter
    accept_negative_lists(parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _finish(sub)


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
    _finish(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    from bertkit.cpu import bound_onednn_cache

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
