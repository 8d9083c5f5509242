"""Run logging: one plain line per record on the console, the same record as JSONL on disk."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tqdm.auto import tqdm


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
            tqdm.write(" ".join(f"{k}={_fmt(v)}" for k, v in record.items() if k != "time"))


def read_log(path: str | Path) -> list[dict]:
    """Read back the records of a JSONL log (blank lines ignored)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
