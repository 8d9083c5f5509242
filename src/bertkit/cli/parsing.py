"""Argument-parsing helpers shared by the command modules (no commands here)."""

from __future__ import annotations

import argparse
import re

from bertkit.precision import CALIBRATION_HELP, COMPILE_HELP, COMPILE_MODES


def accept_negative_lists(parser: argparse.ArgumentParser) -> None:
    """Let ``--layers -1,-2,-3,-4`` and ``--lr -1e-5`` parse as values (argparse would take
    them for options, and then report ``expected one argument`` instead of the range).

    argparse treats an argument matching its negative-number pattern as a value; widen the
    pattern of this parser (which has no option that looks like a number) to comma lists and
    numbers with an exponent, and durations (``--budget -5m`` reaches the budget's own check).
    """
    if hasattr(parser, "_negative_number_matcher"):
        parser._negative_number_matcher = re.compile(
            r"^-\d+(,-?\d+)*$|^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(\d+(\.\d+)?[hmsHMS])+$")


def add_progress_flag(parser: argparse.ArgumentParser, *hidden_off: str) -> None:
    """``--progress/--no-progress`` (dest ``progress``; default None: bars only when stderr is
    a terminal), the one switch of every command; ``hidden_off`` are old names of
    ``--no-progress`` (e.g. ``--quiet``) kept working but left out of ``--help``."""
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bars on stderr (default: only on a terminal)")
    for flag in hidden_off:
        parser.add_argument(flag, dest="progress", action="store_false", help=argparse.SUPPRESS)


def add_compile_flag(parser: argparse.ArgumentParser, default: str = "off") -> None:
    """``--compile`` of an inference command (bertkit.inference.compiled; ``serve`` declares
    it in its config with the same choices and help)."""
    parser.add_argument("--compile", default=default, choices=COMPILE_MODES,
                        help=f"{COMPILE_HELP} (default: %(default)s; compiling BERT-Base takes "
                             "about 45 s)")


def add_calibration_flag(parser: argparse.ArgumentParser) -> None:
    """``--calibration FILE`` of an inference command (static INT8: bertkit.inference.
    calibration; ``serve`` declares it in its config with the same help)."""
    parser.add_argument("--calibration", metavar="FILE", default=None, help=CALIBRATION_HELP)
