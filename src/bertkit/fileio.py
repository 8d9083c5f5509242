"""Small file helpers shared by every writer: atomic writes and line reading."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bertkit.errors import DataFormatError


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str | None = "utf-8"):
    """Open a temporary file beside ``path``; on success fsync it and rename it over ``path``.

    An exception (or a kill) inside the block leaves any previous ``path`` untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_path(path: str | Path):
    """Context manager yielding a temporary path beside ``path``, renamed over it on success.

    For writers that take a file name (safetensors, torch.save, numpy) instead of a handle.
    """
    return _AtomicPath(Path(path))


class _AtomicPath:
    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        os.close(fd)
        self.tmp = Path(tmp)
        return self.tmp

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            with open(self.tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(self.tmp, self.path)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.tmp)
        return False


def read_lines(path: str | Path, keep_ends: bool = False) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` from a UTF-8 text file, without its newline unless
    ``keep_ends``.

    Undecodable bytes raise :class:`DataFormatError` naming the file and line.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            text = decode_line(raw, path, number)
            yield number, text if keep_ends else text.rstrip("\r\n")


def decode_line(raw: bytes, path: str | Path, number: int) -> str:
    """``raw`` as UTF-8, or :class:`DataFormatError` naming the file and line."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataFormatError(path, f"not valid UTF-8 ({e.reason} at byte {e.start})", number) from None
