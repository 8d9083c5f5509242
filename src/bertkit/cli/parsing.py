"""Argument-parsing helpers shared by the command modules (no commands here)."""

from __future__ import annotations

import argparse
import re


def accept_negative_lists(parser: argparse.ArgumentParser) -> None:
    """Let ``--layers -1,-2,-3,-4`` parse: argparse would take ``-1,-2,...`` for an option.

    argparse treats an argument matching its negative-number pattern as a value; widen the
    pattern of this parser (which has no option that looks like a number) to comma lists.
    """
    if hasattr(parser, "_negative_number_matcher"):
        parser._negative_number_matcher = _NEGATIVE


# a negative number (``-2``, ``-.5``, ``-1e-4``) or a comma list of negative integers
_NEGATIVE = re.compile(r"^-\d+(,-?\d+)*$|^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def accept_negative_numbers(parser: argparse.ArgumentParser) -> None:
    """Let ``--lr -1e-4`` parse as a value (argparse's own pattern misses the exponent form),
    on ``parser`` and every sub-command parser below it, so a range check can name the option."""
    accept_negative_lists(parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                accept_negative_numbers(sub)


def add_progress_flag(parser: argparse.ArgumentParser, *hidden_off: str) -> None:
    """``--progress/--no-progress`` (dest ``progress``; default None: bars only when stderr is
    a terminal), the one switch of every command; ``hidden_off`` are old names of
    ``--no-progress`` (e.g. ``--quiet``) kept working but left out of ``--help``."""
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bars on stderr (default: only on a terminal)")
    for flag in hidden_off:
        parser.add_argument(flag, dest="progress", action="store_false", help=argparse.SUPPRESS)
