"""The configuration of one ``bertkit serve`` process (every CLI flag is a field)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from bertkit.options import check_config, option
from bertkit.precision import HELP as PRECISION_HELP
from bertkit.precision import INFERENCE as INFERENCE_PRECISIONS

ENV_VAR = "BERTKIT_SERVE_CONFIG"  # how --workers hands the config to each worker process


@dataclass
class ServeConfig:
    """Everything ``bertkit serve`` needs; each field declares its flag (``bertkit.options``)."""

    model: str = ""
    precision: str = option("fp32", f"fp32, bf16/fp16 autocast, int8 dynamic quantisation (CPU), or "
                                    f"{PRECISION_HELP}", choices=INFERENCE_PRECISIONS)
    device: str = option("cpu", "cpu or cuda")
    host: str = option("127.0.0.1", "address to bind (127.0.0.1: this machine only)")
    port: int = option(8000, "port", ge=0, le=65535)
    workers: int = option(1, "worker processes, each with its own model copy and batcher", ge=1)
    threads: int | None = option(None, "torch CPU threads per worker (default: torch's)", ge=1)
    max_batch_tokens: int = option(8192, "padded tokens (rows x longest row) per forward pass",
                                   ge=1, metavar="N")
    max_batch_size: int = option(64, "inputs per forward pass", ge=1, metavar="N")
    max_queue: int = option(1024, "model rows queued at most (TEI's max_concurrent_requests); "
                                  "beyond, 429 Overloaded; a request that needs more, 413",
                            ge=1, metavar="N")
    max_items: int = option(64, "inputs per request at most (TEI's max_client_batch_size); "
                                "beyond, 413", ge=1, metavar="N")
    truncate: bool = option(True, "over-long inputs: truncate and name them in the "
                                  "X-Bertkit-Truncated header (--no-truncate: answer 413); a "
                                  "request's own \"truncate\" field wins (TEI's --auto-truncate)")
    api_key: str | None = option(None, "require the header 'Authorization: Bearer KEY' on the "
                                       "model routes (/health, /metrics, /docs and the page stay open)",
                                 metavar="KEY")
    cors_allow_origin: str | None = option(None, "origins allowed to call the API from a browser, "
                                                 "comma-separated (default: any, as TEI)",
                                           metavar="ORIGINS")
    payload_limit: int = option(2_000_000, "request bodies larger than this many bytes: 413",
                                ge=1, metavar="BYTES")
    # --long-text / --stride / --pool-windows (declared in bertkit.cli.long_text, not here):
    # the task options they set; the model's saved choice fills what is absent
    long_text: dict = field(default_factory=dict)

    def check(self) -> ServeConfig:
        """``self``, or a :class:`BertkitError` naming the first bad option."""
        check_config(self, "serve")
        return self

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeConfig:
        return cls(**json.loads(text))
