"""Argument-parsing helpers shared by the command modules (no commands here)."""

from __future__ import annotations

import argparse
import re


def accept_negative_lists(parser: argparse.ArgumentParser) -> None:
    """Let ``--layers -1,-2,-3,-4`` and ``--lr -1e-5`` parse as values (argparse would take
    them for options, and then report ``expected one argument`` instead of the range).

    argparse treats an argument matching its negative-number pattern as a value; widen the
    pattern of this parser (which has no option that looks like a number) to comma lists and
    numbers with an exponent.
    """
    if hasattr(parser, "_negative_number_matcher"):
        parser._negative_number_matcher = re.compile(
            r"^-\d+(,-?\d+)*$|^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
