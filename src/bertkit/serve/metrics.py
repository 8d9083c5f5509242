"""``/metrics``: Prometheus metrics through ``prometheus_client``, named as text-embeddings-inference
names them (``te_*``; ``prometheus_client`` adds ``_total`` to counters and ``_bucket`` /
``_sum`` / ``_count`` to histograms). Each application has its own registry.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST as CONTENT_TYPE  # noqa: N811
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
TOKENS = (16, 64, 256, 1024, 4096, 16384, 65536)

__all__ = ["CONTENT_TYPE", "Metrics"]


class Metrics:
    """The server's counters, histograms and gauges (one registry)."""

    def __init__(self, queue_size=lambda: 0):
        r = self.registry = CollectorRegistry()
        self.requests = Counter("te_request_count", "requests by route and method (single/batch)",
                                ["route", "method"], registry=r)
        self.success = Counter("te_request_success", "requests answered 2xx", ["route"], registry=r)
        self.failure = Counter("te_request_failure", "requests answered 4xx/5xx, by error_type",
                               ["err"], registry=r)
        self.duration = Histogram("te_request_duration", "request seconds (total)", buckets=SECONDS, registry=r)
        self.tokenization = Histogram("te_request_tokenization_duration", "tokenisation seconds",
                                      buckets=SECONDS, registry=r)
        self.queue = Histogram("te_request_queue_duration", "seconds rows waited in the queue",
                               buckets=SECONDS, registry=r)
        self.inference = Histogram("te_request_inference_duration", "forward-pass seconds",
                                   buckets=SECONDS, registry=r)
        self.input_length = Histogram("te_request_input_length", "tokens per request", buckets=TOKENS,
                                      registry=r)
        self.batch_size = Histogram("te_batch_next_size", "rows per forward pass", buckets=SIZES, registry=r)
        self.batch_tokens = Histogram("te_batch_next_tokens", "padded tokens per forward pass",
                                      buckets=TOKENS, registry=r)
        self.batch_seconds = Histogram("te_batch_inference_duration", "seconds per forward pass",
                                       buckets=SECONDS, registry=r)
        self.queue_size = Gauge("te_queue_size", "model rows waiting", registry=r)
        self.queue_size.set_function(queue_size)

    def on_batch(self, rows: int, tokens: int, seconds: float) -> None:
        """A forward pass ran (called from the batcher's thread)."""
        self.batch_size.observe(rows)
        self.batch_tokens.observe(tokens)
        self.batch_seconds.observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
