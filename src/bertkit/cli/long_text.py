"""The ``--long-text`` / ``--stride`` / ``--pool-windows`` flags shared by ``finetune``,
``evaluate``, ``predict``, ``distill``, ``embed`` and ``serve`` (no command here; see :mod:`bertkit.tasks.windows`)."""

from __future__ import annotations

import argparse

from bertkit.options import bounded


def add_long_text_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the three flags (defaults ``None``: a fine-tuned model's saved choice, else truncate)."""
    group = parser.add_argument_group("texts longer than the length limit")
    group.add_argument("--long-text", choices=["truncate", "window"], default=None,
                       help="truncate (default) or cut into overlapping windows of the length "
                            "limit whose outputs are pooled (tags: from the window with the most "
                            "context)")
    group.add_argument("--stride", type=bounded(int, ge=1), default=None, metavar="N",
                       help="with --long-text window: windows start N tokens apart (default: half "
                            "the window); must be smaller than the window")
    group.add_argument("--pool-windows", choices=["mean", "max"], default=None,
                       help="how window logits/vectors are pooled (default mean)")


def long_text_options(args: argparse.Namespace) -> dict:
    """The task options the flags set (only those given)."""
    names = {"long_text": "long_text", "stride": "stride", "pool_windows": "pool_windows"}
    return {option: getattr(args, dest) for dest, option in names.items()
            if getattr(args, dest, None) is not None}


def check_window_flags(args: argparse.Namespace, options: dict) -> None:
    """``--stride`` and ``--pool-windows`` act only on windows: a BertkitError naming them when
    ``options`` (the resolved task options: the flags over a fine-tuned model's saved choice)
    truncate long texts, instead of ignoring them without a word."""
    from bertkit.errors import BertkitError
    from bertkit.tasks.windows import LongText

    if LongText.from_options(options).windowed:
        return
    given = [f"--{name.replace('_', '-')} {getattr(args, name)}" for name in ("stride", "pool_windows")
             if getattr(args, name, None) is not None]
    if given:
        raise BertkitError(f"{' and '.join(given)} only apply with --long-text window, and long texts "
                           "are truncated here; add --long-text window (or leave the flag out)")
