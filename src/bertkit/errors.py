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
