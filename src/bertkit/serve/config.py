"""The configuration of one ``bertkit serve`` process (every CLI flag is a field)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from bertkit.errors import BertkitError

ENV_VAR = "BERTKIT_SERVE_CONFIG"  # how --workers hands the config to each worker process


@dataclass
class ServeConfig:
    """Everything ``bertkit serve`` needs; defaults are the CLI's defaults."""

    model: str = ""
    precision: str = "fp32"
    device: str = "cpu"
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1
    threads: int | None = None  # torch CPU threads per worker (None: torch's default)
    max_batch_tokens: int = 8192  # padded tokens (rows x longest row) per forward pass
    max_batch_size: int = 64  # rows per forward pass
    max_wait_ms: float = 5.0  # how long the first row of a batch waits for company
    max_queue: int = 1024  # rows waiting; more -> 503
    max_items: int = 64  # inputs per request; more -> 413
    truncate: bool = True  # over-long inputs: truncate (and say so) or 413

    def check(self) -> ServeConfig:
        """``self``, or a :class:`BertkitError` naming the first bad option."""
        from bertkit.precision import check_precision

        check_precision(self.precision)
        for name in ("workers", "max_batch_tokens", "max_batch_size", "max_queue", "max_items"):
            if getattr(self, name) < 1:
                raise BertkitError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if not 0 <= self.port <= 65535:
            raise BertkitError(f"--port must be 0..65535, got {self.port}")
        if self.max_wait_ms < 0:
            raise BertkitError(f"--max-wait-ms must be >= 0, got {self.max_wait_ms}")
        return self

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeConfig:
        return cls(**json.loads(text))
