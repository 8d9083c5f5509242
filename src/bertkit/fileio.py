"""Small file helpers shared by every writer: atomic writes and line reading."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bertkit.errors import BertkitError, DataFormatError


def default_file_mode() -> int:
    """The mode ``open()`` would give a new file (0o666 less the umask, usually 0o644).

    ``tempfile.mkstemp`` creates files readable by their owner only; the files bertkit writes
    (models, data, results) are meant to be shared like any other output."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str | None = "utf-8"):
    """Open a temporary file beside ``path``; on success fsync it and rename it over ``path``.

    An exception (or a kill) inside the block leaves any previous ``path`` untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _temp_beside(path)
    try:
        os.fchmod(fd, default_file_mode())
        try:
            with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            if e.filename is not None:
                raise
            if e.errno is None and not is_disk_full(e):
                raise
            # name the file (numpy's "N requested and M written" has no errno: a full disk)
            raise OSError(e.errno or errno.ENOSPC, e.strerror or "No space left on device",
                          str(path)) from None
        _replace(tmp, path)
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
        fd, tmp = _temp_beside(self.path)
        os.fchmod(fd, default_file_mode())
        os.close(fd)
        self.tmp = Path(tmp)
        return self.tmp

    def __exit__(self, exc_type, exc, tb):
        renamed = False
        try:
            if exc_type is None:
                with open(self.tmp, "rb") as f:
                    os.fsync(f.fileno())
                _replace(self.tmp, self.path)
                renamed = True
        finally:
            if not renamed:  # the block or the rename failed: the temporary file goes
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.tmp)
        if exc is not None and is_disk_full(exc) and not (isinstance(exc, OSError) and exc.filename):
            # torch's "unexpected pos", safetensors' "I/O error", numpy's "N requested and M
            # written" name no file: say which one the disk had no room for, as atomic_write does
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path)) from None
        return False


def _temp_beside(path: Path) -> tuple[int, str]:
    """``mkstemp`` beside ``path``; an OSError names ``path`` (what the user gave), never the
    temporary name (e.g. ``/proc/x.onnx``: nothing can be created there)."""
    try:
        return tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from None


def _replace(tmp: str | Path, path: Path) -> None:
    """``os.replace(tmp, path)``; an OSError names ``path`` (an existing directory there gives
    \"is a directory, a file was expected\")."""
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    try:
        os.replace(tmp, path)
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from None


def check_writable(path: str | Path, what: str = "output", directory: bool = False) -> Path:
    """Make sure ``path`` (a file, or a directory when ``directory``) could be written, before
    any work is done; raise :class:`BertkitError` naming ``path`` otherwise. Creates nothing:
    the nearest existing ancestor must be a writable directory."""
    path = Path(path)
    if not directory and path.is_dir():
        raise BertkitError(f"{path}: the {what} is a directory; give a file name")
    if directory and path.exists() and not path.is_dir():
        raise BertkitError(f"{path}: the {what} directory is a file")
    folder = path if directory else path.parent
    ancestor = folder
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise BertkitError(f"{path}: cannot create the {what}: {ancestor} is a file, not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise BertkitError(f"{path}: cannot write the {what}: {ancestor} is not writable")
    return path


def check_not_input(output: str | Path, inputs, option: str = "--output",
                    input_option: str = "--input", overwrite: bool = False) -> None:
    """The one rule for outputs, run by every command before any work: an output never names
    (or, through a link, is) one of its inputs (``tokenizer train --output CORPUS`` would
    replace the corpus by the vocabulary), never lies inside an input directory (``export-onnx
    D --out D/model.safetensors``, ``quantize D --out D``: the model read would be changed or
    torn), and, when ``overwrite`` (the old contents of ``output`` are removed), never holds an
    input (``finetune --model runs/base --out runs --overwrite``). A one-line BertkitError
    names both options and both paths, as given."""
    out = Path(output).resolve()
    for item in [inputs] if isinstance(inputs, (str, Path)) else inputs:
        source = Path(item).resolve()
        same = out == source or (out.exists() and source.exists() and os.path.samefile(out, source))
        if same:
            raise BertkitError(f"{option} {output} would overwrite the {input_option} {item}: "
                               f"choose another {option}")
        if source.is_dir() and out.is_relative_to(source):
            raise BertkitError(f"{option} {output} lies inside the {input_option} {item}: "
                               f"choose another {option}")
        if overwrite and source.is_relative_to(out):
            raise BertkitError(f"{option} {output} holds the {input_option} {item}: "
                               f"--overwrite would delete it; choose another {option}")


def remove_temp_files(directory: str | Path) -> list[Path]:
    """Remove the dot-temp files (``.NAME.XXXX.tmp``) that :func:`atomic_write` and
    :func:`atomic_path` leave behind when the process is killed mid-write; return them."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    removed = [p for p in directory.glob(".*.tmp") if p.is_file()]
    for path in removed:
        path.unlink(missing_ok=True)
    return removed


def is_disk_full(e: BaseException) -> bool:
    """Whether ``e`` is (or wraps) a full disk: ENOSPC/EDQUOT, or the texts torch's zip writer
    (``unexpected pos``), safetensors and numpy (``N requested and M written``) give."""
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(e)
    return ("No space left on device" in text or "Disk quota exceeded" in text
            or ("unexpected pos" in text and "inline_container" in text)
            or ("requested and" in text and "written" in text))


def safe_torch_load(path: str | Path, what: str = "file"):
    """``torch.load(path, weights_only=True)`` on the CPU, with errors a user can act on.

    A pickle holding anything but tensors and plain values is refused (its code never runs)
    with :class:`CheckpointError` saying so and how to convert a trusted file to safetensors;
    any other failure names the file."""
    import pickle
    import warnings

    import torch

    from bertkit.errors import CheckpointError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's own advice (weights_only=False) is not ours
            return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as e:  # pickle and zip errors have no common base
        text = str(e)
        if isinstance(e, pickle.UnpicklingError) or "Weights only load failed" in text:
            raise CheckpointError(
                f"{path}: not loaded, for safety: this {what} holds Python objects other than "
                "tensors, which could run code when loaded. If you trust its source, convert it "
                "once to safetensors in Python: load it with torch.load and weights_only=False, "
                "then safetensors.torch.save_file(state_dict, 'model.safetensors')") from None
        first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
        raise CheckpointError(f"{path}: unreadable {what} ({first})") from None


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
        raise DataFormatError(path, f"not valid UTF-8 ({e.reason} at byte {e.start + 1} "
                                          "of the line)", number) from None
