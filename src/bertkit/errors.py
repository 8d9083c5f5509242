"""Errors that name what went wrong and where."""

from __future__ import annotations

from pathlib import Path


class BertkitError(Exception):
    """Base class of every error bertkit raises on purpose."""


class DataFormatError(BertkitError, ValueError):
    """A malformed input: names the file and, when known, the 1-based line."""

    def __init__(self, path: str | Path, message: str, line: int | None = None):
        self.path = str(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class CheckpointError(BertkitError, ValueError):
    """A checkpoint that cannot be read or does not fit the model."""


class OptionError(BertkitError, ValueError):
    """A setting outside its declared range or choices (:func:`bertkit.options.check_config`);
    a ``ValueError`` too, as a bad argument to a settings dataclass is one."""


class InputError(BertkitError):
    """One input a model cannot take, by ``kind``: ``invalid`` (a bad value), ``too_long``
    (more tokens than the model's limit while truncation is off) or ``unsupported`` (this
    model cannot answer it). A door maps kinds to its own terms (the server: to statuses)."""

    KINDS = ("invalid", "too_long", "unsupported")

    def __init__(self, message: str, kind: str = "invalid"):
        if kind not in self.KINDS:
            raise ValueError(f"InputError kind must be one of {self.KINDS}, got {kind!r}")
        super().__init__(message)
        self.kind = kind
