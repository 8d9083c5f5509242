"""Options declared once: a dataclass field carries its type, default, help, choices and range.

Contract:

* ``option(default, help, ge=, gt=, le=, lt=, choices=, flag=, metavar=, required=,
  negative=)`` is a ``dataclasses.field`` whose metadata holds the rest; ``flag`` overrides
  the command-line name (default ``--`` + the field name with dashes); ``required`` makes
  the flag compulsory on the command line; ``negative`` names the flag that turns a boolean
  off (e.g. ``--cased`` for ``lowercase``; default ``--no-<flag>``).
* ``option_of(OtherConfig, "name")`` is the same declaration (default, help, range, choices,
  flag) as ``OtherConfig``'s field ``name``: a second job taking an option of another one
  (``DownstreamConfig.epochs`` is ``FinetuneConfig.epochs``) declares nothing again.
* :func:`add_options` adds one argparse flag per ``option()`` field of a config dataclass
  (fields without an ``option()`` declaration are not flags; booleans as ``--x/--no-x``; a
  ``tuple[T, ...]`` field takes comma-separated values, at least one, each checked), typed by
  the field's annotation and checked against its range *while parsing*, so argparse reports
  ``argument --batch-size: must be >= 1 (got 0)`` before any work; the help shows the
  default, or for a field the command resolves itself (``resolved=``) the words saying how.
  :func:`options_from_args` reads the given values back.
* :func:`check_config` checks a filled config against the same ranges and choices (values
  from a YAML/TOML file never pass through argparse) and raises
  :class:`~bertkit.errors.OptionError` naming the field (or its flag, ``by_flag=True``).
* :func:`bounded` is the same check for a flag that no dataclass declares.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bertkit.errors import OptionError

_LIMITS = ("ge", "gt", "le", "lt")


def option(default: Any = None, help: str = "", *, ge: float | None = None, gt: float | None = None,
           le: float | None = None, lt: float | None = None, choices: Sequence[str] | None = None,
           flag: str | None = None, metavar: str | None = None, required: bool = False,
           negative: str | None = None) -> Any:
    """A dataclass field declaring one option (see the module docstring)."""
    meta = {"help": help, "ge": ge, "gt": gt, "le": le, "lt": lt,
            "choices": tuple(choices) if choices else None, "flag": flag, "metavar": metavar,
            "required": required, "negative": negative}
    return dataclasses.field(default=default, metadata=meta)


def option_of(cls, name: str) -> Any:
    """A new dataclass field with the declaration of ``cls``'s field ``name`` (its default,
    help, range, choices and flag): one option shared by two jobs' configs."""
    field = next((f for f in dataclasses.fields(cls) if f.name == name), None)
    if field is None or not is_option(field):
        raise TypeError(f"{cls.__name__}.{name} is not declared with option()")
    return dataclasses.field(default=field.default, default_factory=field.default_factory,
                             metadata=field.metadata)


def is_option(field: dataclasses.Field) -> bool:
    """Whether ``field`` was declared with :func:`option` (only those are flags)."""
    return "help" in field.metadata


def range_text(ge=None, gt=None, le=None, lt=None) -> str:
    """``>= 1``, ``> 0`` or ``in [0, 1)``: the allowed range in words."""
    low = f"[{ge:g}" if ge is not None else f"({gt:g}" if gt is not None else None
    high = f"{le:g}]" if le is not None else f"{lt:g})" if lt is not None else None
    if low and high:
        return f"in {low}, {high}"
    if low:
        return (">= " if ge is not None else "> ") + low[1:]
    if high:
        return ("<= " if le is not None else "< ") + high[:-1]
    return ""


def range_error(value: float, ge=None, gt=None, le=None, lt=None) -> str | None:
    """``must be >= 1 (got 0)`` when ``value`` is outside the range (or NaN), else None."""
    bad = (math.isnan(value)
           or (ge is not None and value < ge) or (gt is not None and value <= gt)
           or (le is not None and value > le) or (lt is not None and value >= lt))
    return f"must be {range_text(ge, gt, le, lt)} (got {value:g})" if bad else None


def bounded(kind: type, ge=None, gt=None, le=None, lt=None) -> Callable[[str], Any]:
    """An argparse ``type=``: ``kind(text)``, refused with the range when outside it."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid {kind.__name__} value: {text!r}") from None
        error = range_error(value, ge, gt, le, lt)
        if error:
            raise argparse.ArgumentTypeError(error)
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its own messages
    return parse


def comma_list(kind: type, ge=None, gt=None, le=None, lt=None) -> Callable[[str], tuple]:
    """An argparse ``type=``: ``"a,b"`` -> ``(kind(a), kind(b))``, each within the range."""
    one = bounded(kind, ge, gt, le, lt) if kind in (int, float) else kind

    def parse(text: str) -> tuple:
        values = tuple(one(v.strip()) for v in text.split(",") if v.strip())
        if not values:
            raise argparse.ArgumentTypeError(f"give at least one value (got {text!r})")
        return values

    parse.__name__ = f"comma-separated {kind.__name__}"
    return parse


def _shown(value: Any) -> str:
    """A default as the user would type it: tuples comma-separated, floats short."""
    if isinstance(value, tuple):
        return ",".join(_shown(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def element_type(hint: Any) -> type | None:
    """``tuple[float, ...]`` -> ``float``; None for a hint that is not such a tuple."""
    if typing.get_origin(hint) is tuple:
        return typing.get_args(hint)[0]
    return None


def field_type(hint: Any) -> type:
    """``int | None`` -> ``int``: the type a field's value has when it is set."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    return hint


def _limits(field: dataclasses.Field) -> dict[str, Any]:
    return {k: field.metadata.get(k) for k in _LIMITS}


def flag_name(field: dataclasses.Field) -> str:
    return field.metadata.get("flag") or "--" + field.name.replace("_", "-")


def _help(field: dataclasses.Field, resolved: str | None = None) -> str:
    """The field's help (``%`` escaped for argparse), its range, then its default (or
    ``resolved``, the words for a default the command works out itself)."""
    text = field.metadata.get("help", "").replace("%", "%%")
    limits = range_text(**_limits(field))
    if limits:
        text += f"; {limits}"
    default = field.default
    if resolved is not None:
        text += f" (default: {resolved.replace('%', '%%')})"
    elif (default is not None and default is not False and default != ""
          and default is not dataclasses.MISSING and not field.metadata.get("required")):
        shown = "on" if default is True else _shown(default).replace("%", "%%")
        text += f" (default: {shown})"
    return text


def add_options(parser, cls, *, only: Sequence[str] | None = None, skip: Sequence[str] = (),
                suppress_defaults: bool = False, resolved: Mapping[str, str] | None = None) -> None:
    """One flag per ``option()`` field of dataclass ``cls`` (or of the fields ``only`` names,
    less ``skip``). With ``suppress_defaults`` an absent flag leaves no attribute (to lay flags
    over a file). ``resolved`` maps a field to the words for its default when the command
    works the value out itself: its flag then defaults to None."""
    hints = typing.get_type_hints(cls)
    resolved = resolved or {}
    for field in dataclasses.fields(cls):
        if (not is_option(field) or field.name in skip
                or (only is not None and field.name not in only)):
            continue
        kind = field_type(hints[field.name])
        default = (argparse.SUPPRESS if suppress_defaults
                   else None if field.name in resolved else field.default)
        kwargs: dict[str, Any] = {"dest": field.name, "help": _help(field, resolved.get(field.name)),
                                  "default": default}
        if field.metadata.get("required"):  # no default to show: the flag must be given
            kwargs.update(required=True, default=None)
        if kind is bool:
            _add_switch(parser, field, kwargs)
            continue
        choices = field.metadata.get("choices")
        element = element_type(kind)
        if element is not None:
            parser.add_argument(flag_name(field), type=comma_list(element, **_limits(field)),
                                metavar=field.metadata.get("metavar") or "A,B,...", **kwargs)
            continue
        parse = bounded(kind, **_limits(field)) if kind in (int, float) else kind
        metavar = field.metadata.get("metavar") or (
            None if choices else flag_name(field).lstrip("-").upper().replace("-", "_"))
        parser.add_argument(flag_name(field), type=parse, choices=choices, metavar=metavar, **kwargs)


def _add_switch(parser, field: dataclasses.Field, kwargs: dict[str, Any]) -> None:
    """``--x/--no-x`` for a boolean field, or ``--x`` and its declared ``negative`` flag."""
    negative = field.metadata.get("negative")
    if not negative:
        parser.add_argument(flag_name(field), action=argparse.BooleanOptionalAction, **kwargs)
        return
    pair = parser.add_mutually_exclusive_group()
    pair.add_argument(flag_name(field), action="store_true", **kwargs)
    pair.add_argument(negative, action="store_false", dest=field.name, default=kwargs["default"],
                      help=f"the opposite of {flag_name(field)}")


def options_from_args(cls, args: argparse.Namespace) -> dict[str, Any]:
    """The values of ``cls``'s fields present in ``args`` (absent ones left out)."""
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)}


def check_config(config, source: str = "config", by_flag: bool = False) -> None:
    """Every set numeric field of ``config`` within its range, every choice allowed; else an
    :class:`~bertkit.errors.OptionError` naming ``source`` and the field (its flag with
    ``by_flag``, for a config filled from the command line)."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if value is None or isinstance(value, bool):
            continue
        name = flag_name(field) if by_flag else field.name
        choices = field.metadata.get("choices")
        if choices and value not in choices:
            raise OptionError(f"{source}: {name} must be one of {', '.join(choices)} "
                              f"(got {value!r})")
        for one in value if isinstance(value, tuple | list) else (value,):
            if isinstance(one, int | float) and not isinstance(one, bool):
                error = range_error(one, **_limits(field))
                if error:
                    raise OptionError(f"{source}: {name} {error}")
