"""What a user sees when a command fails: one clean line, never a Python traceback.

:func:`run_guarded` calls a command and turns the exceptions a user's mistake or environment
can cause (bertkit's own errors, a file that cannot be read or written, a full disk, a value
rejected deep inside a library) into ``bertkit: error: ...`` on stderr with exit status 1.
Anything else is reported as an internal error with a hint to re-run with ``--debug``.
With ``--debug`` (or ``BERTKIT_DEBUG=1``) the traceback is printed as well, for bug reports.
"""

from __future__ import annotations

import errno
import os
import sys
import traceback
import warnings

from bertkit.errors import BertkitError
from bertkit.fileio import is_disk_full

MAX_MESSAGE_CHARS = 1000  # errors that quote inputs (a 5 MB line) are cut to this


def debug_enabled(flag: bool = False) -> bool:
    """``--debug`` given, or ``BERTKIT_DEBUG`` set to a non-empty value other than 0/false/no."""
    value = os.environ.get("BERTKIT_DEBUG", "").strip().lower()
    return flag or value not in ("", "0", "false", "no")


def cut(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``message`` shortened to ``limit`` characters, saying how much was left out."""
    if len(message) <= limit:
        return message
    return f"{message[:limit]}... ({len(message) - limit:,} more characters cut)"


def describe_os_error(e: OSError) -> str:
    """One line for an OSError that names the path and says what is wrong in words."""
    path = e.filename if e.filename is not None else None
    where = f"{path}: " if path is not None else ""
    if e.errno == errno.ENOSPC:
        return f"{where}no space left on device (the disk is full); free some space and run again"
    if e.errno in (errno.ENOTDIR, errno.EEXIST) and path is not None:
        return f"{where}cannot create it: a part of the path is a file, not a directory"
    if e.errno in (errno.EACCES, errno.EPERM):
        return f"{where}permission denied"
    if e.errno == errno.EROFS:
        return f"{where}read-only file system"
    if e.errno == errno.ENOENT and path is not None:
        return f"{where}no such file or directory"
    if e.errno == errno.EISDIR:
        return f"{where}is a directory, a file was expected"
    reason = e.strerror or str(e)
    return f"{where}{reason}"


def format_warning(message, category, filename, lineno, line=None) -> str:
    """Warnings as ``bertkit: warning: ...``, without the source file and line of the caller."""
    return f"bertkit: warning: {cut(str(message))}\n"


# third-party notices about their own internals, nothing a user of bertkit can act on
THIRD_PARTY_NOISE = (
    r"torch\.quantize_per_tensor, torch\.quantize_per_channel and other quantized tensor creation",
)


def quiet_third_party() -> None:
    """Hide :data:`THIRD_PARTY_NOISE` (call again after any ``simplefilter``, which overrides it)."""
    for pattern in THIRD_PARTY_NOISE:
        warnings.filterwarnings("ignore", message=pattern)


def install_warning_format() -> None:
    """Print Python warnings to users without code lines (debug mode keeps Python's format)."""
    quiet_third_party()
    if not debug_enabled():
        warnings.formatwarning = format_warning


def run_guarded(func, args, debug: bool = False) -> int:
    """Run ``func(args)``; return its exit status, or 1 with a clean message on failure."""
    debug = debug_enabled(debug)
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        print("bertkit: interrupted", file=sys.stderr)
        return 130
    except BertkitError as e:
        return _fail(str(e), debug)
    except OSError as e:
        return _fail(describe_os_error(e), debug)
    except Exception as e:  # disk full comes in many types (torch, safetensors, numpy)
        if not is_disk_full(e):
            return _other(e, debug)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return _fail(f"no space left on device (the disk is full): {first}; free some space "
                     "and run again", debug)


def _other(e: Exception, debug: bool) -> int:
    if isinstance(e, ValueError | TypeError | RuntimeError | MemoryError):
        hint = "" if debug else "; run with --debug for the traceback"
        return _fail(f"{e} ({type(e).__name__}{hint})", debug)
    return _fail(f"internal error: {type(e).__name__}: {e}; this is a bug, please report it "
                 "with the output of the same command run with --debug", debug)


def _fail(message: str, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    print(f"bertkit: error: {cut(message)}", file=sys.stderr)
    return 1
