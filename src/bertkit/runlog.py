"""Run logging: one plain line per record on the console, the same record as JSONL on disk."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tqdm.auto import tqdm

from bertkit.errors import DataFormatError

ECHO_CHARS = 300  # console echo of a record; log.jsonl keeps it whole


def bar_disabled(progress: bool | None) -> bool | None:
    """tqdm's ``disable`` for a ``progress`` setting: True shows bars, False hides them, None
    (the default everywhere) shows them only when stderr is a terminal, so redirected logs
    stay free of bar updates."""
    return None if progress is None else not progress


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


class RunLogger:
    """Append metric records to ``path`` (JSONL) and echo them as ``key=value`` lines."""

    def __init__(self, path: str | Path | None, echo: bool = True):
        self.path = Path(path) if path else None
        self.echo = echo
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def log(self, **record) -> None:
        record.setdefault("time", round(time.time(), 3))
        if self.path:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
        if self.echo:
            # tqdm.write keeps an active progress bar intact.
            line = " ".join(f"{k}={_fmt(v)}" for k, v in record.items() if k != "time")
            if len(line) > ECHO_CHARS:  # the full record is in the log file
                line = line[:ECHO_CHARS] + f"... (full record in {self.path or 'the log'})"
            tqdm.write(line)


def read_log(path: str | Path) -> list[dict]:
    """Read back the records of a JSONL log (blank lines ignored).

    A torn last line (the process was killed while appending it) is dropped; a bad line
    anywhere else raises :class:`DataFormatError` naming the file and line."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [(number, line) for number, line in enumerate(f, start=1) if line.strip()]
    records = []
    for i, (number, line) in enumerate(lines):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            if i == len(lines) - 1:
                break  # torn by a kill mid-write: the record was never complete
            raise DataFormatError(path, f"not a JSON record ({e.msg})", number) from None
    return records
