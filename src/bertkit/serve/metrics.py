"""``/metrics``: Prometheus metrics as text-embeddings-inference exposes them.

The ``te_*`` families are TEI's (``router/src/http/server.rs``, ``router/src/lib.rs``,
``core/src/infer.rs``, ``core/src/queue.rs``, ``core/src/tokenization.rs``): the same names,
types, labels and label values, counted at the same points (docs/serving.md, "Metrics", has
the table). TEI's exporter (the Rust ``metrics-exporter-prometheus``) writes counters without
``_total`` (``# TYPE te_request_count counter``, ``te_request_count{method="single"} 3``) and
histograms with TEI's buckets. ``prometheus_client`` cannot: its ``Counter`` adds ``_total``
(and ``_created`` series), and its ``generate_latest`` adds ``_total`` to every counter
family's ``# TYPE`` line even when a custom collector's samples lack it (the samples would
then belong to no declared family). So the families are kept here, collected as
``prometheus_client`` metric families (:meth:`Metrics.collect`), and written by
:meth:`Metrics.render` in the Prometheus text format with each family's own name.
``bertkit_*`` families are bertkit's own. Each application has its own :class:`Metrics`.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable

from prometheus_client.metrics_core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from bertkit.serve.errors import TEI_ERR_BY_KIND

__all__ = ["CONTENT_TYPE", "Metrics", "method_of", "tei_err"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # the format :meth:`Metrics.render` writes


def _durations() -> tuple[float, ...]:
    """TEI's buckets of every ``*_duration``: 35 steps of x1.5 from 15 microseconds (14 s)."""
    out, value = [], 0.00001
    for _ in range(35):
        value *= 1.5
        out.append(value)
    return tuple(out)


SECONDS = _durations()
BATCH_SIZES = tuple(float(2 ** i) for i in range(13))  # te_batch_next_size: 1 .. 4096
BATCH_TOKENS = tuple(float(2 ** i) for i in range(21))  # te_batch_next_tokens: 1 .. 1048576

# TEI's ``err`` label values of ``te_request_failure``
VALIDATION, BATCH_SIZE, TOKENIZATION, OVERLOADED, MODEL_TYPE, INFERENCE = (
    "validation", "batch_size", "tokenization", "overloaded", "model_type", "inference")
# bertkit's error kinds (``error_type``) as TEI's ``err``; other kinds (404, 405, 401, 503,
# an unparseable or ill-typed body: TEI's router answers them before its handler) count none
_ERR_OF_KIND = {"Empty": VALIDATION, "Overloaded": OVERLOADED, "Backend": MODEL_TYPE, "Tokenizer": TOKENIZATION}


def tei_err(error) -> str | None:
    """TEI's ``err`` label for an :class:`~bertkit.serve.errors.ApiError` (``None``: TEI
    counts no failure for it). An error may carry its own (``error.tei_err``: ``batch_size``
    for a batch over ``--max-items``, ``overloaded`` for one the queue can never hold);
    else ``Validation`` 413 (a text over the limit, caught when it is tokenised) is
    ``tokenization``, another ``Validation`` ``validation``."""
    err = getattr(error, "tei_err", TEI_ERR_BY_KIND)
    if err is not TEI_ERR_BY_KIND:
        return err
    if error.error_type == "Validation":
        return TOKENIZATION if error.status == 413 else VALIDATION
    return _ERR_OF_KIND.get(error.error_type)


def method_of(inputs, pairs: bool = False) -> str | None:
    """TEI's ``method`` label, ``single`` or ``batch``, as TEI's ``Input`` (``pairs``:
    ``PredictInput``) reads the body: a text or token ids (``pairs``: a text, ``[a]`` or a
    pair ``[a, b]``; bertkit's structured inputs, an object) is single, a list of those (of
    ``[a]`` / ``[a, b]``; of objects) a batch; ``None`` for a shape TEI's JSON types refuse
    (its router answers it before the handler counts anything)."""
    if isinstance(inputs, str | dict) and (pairs or isinstance(inputs, str)):
        return "single"
    if not isinstance(inputs, list):
        return None
    if pairs:
        if inputs and all(isinstance(x, str) for x in inputs):
            return "single" if len(inputs) <= 2 else None
        if inputs and (all(isinstance(x, dict) for x in inputs) or all(
                isinstance(x, list) and 1 <= len(x) <= 2 and all(isinstance(y, str) for y in x) for x in inputs)):
            return "batch"
        return None
    if _ids(inputs):
        return "single"
    return "batch" if all(isinstance(x, str) or (isinstance(x, list) and _ids(x)) for x in inputs) else None


def _ids(value: list) -> bool:
    return all((isinstance(x, int) and not isinstance(x, bool)) or (isinstance(x, float) and x.is_integer())
               for x in value)


class _Counter:
    def __init__(self, name: str, doc: str, labels: tuple[str, ...] = ()):
        self.name, self.doc, self.labels = name, doc, labels
        self.values: dict[tuple[str, ...], float] = {}
        self.lock = threading.Lock()

    def inc(self, *values: str, by: float = 1) -> None:
        with self.lock:
            self.values[values] = self.values.get(values, 0) + by

    def value(self, *values: str) -> float:
        return self.values.get(values, 0)

    def family(self) -> Metric:
        """A counter family whose samples are named as the family (no ``_total``, as TEI)."""
        family = Metric(self.name, self.doc, "counter")
        with self.lock:
            for values, value in sorted(self.values.items()):
                family.add_sample(self.name, dict(zip(self.labels, values)), value)
        return family


class _Histogram:
    def __init__(self, name: str, doc: str, buckets: tuple[float, ...]):
        self.name, self.doc, self.buckets = name, doc, tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)  # the last: above every bound (+Inf)
        self.sum = 0.0
        self.lock = threading.Lock()

    def observe(self, value: float) -> None:
        with self.lock:
            self.counts[bisect_left(self.buckets, value)] += 1
            self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def family(self) -> HistogramMetricFamily:
        with self.lock:
            cumulative, total = [], 0
            for bound, n in zip((*map(floatToGoString, self.buckets), "+Inf"), self.counts):
                total += n
                cumulative.append((bound, total))
            s = self.sum
        return HistogramMetricFamily(self.name, self.doc, buckets=cumulative, sum_value=s)


class Metrics:
    """The server's metrics (one registry; :meth:`collect` writes them).

    Where each is counted (:class:`~bertkit.serve.app.Service` and the error handlers of
    :mod:`bertkit.serve.routes` call these): :meth:`request` when a model route's body has
    been read, before it is validated; :meth:`inputs` when its inputs go to tokenisation;
    :meth:`failed` for an error answer; :meth:`answered` for a request answered;
    :meth:`on_batch` after each forward pass."""

    def __init__(self, queue_size: Callable[[], int] = lambda: 0, max_input_length: int | None = None):
        self.queue_size = queue_size
        lengths = tuple(float(2 ** i) for i in range(20) if max_input_length is None or 2 ** i <= max_input_length)
        C, H = _Counter, _Histogram
        self.requests = C("te_request_count", "requests read by a model route, before validation, by method",
                          ("method",))
        self.success = C("te_request_success", "requests answered, by method", ("method",))
        self.failure = C("te_request_failure", "failures, by TEI's err (validation, batch_size, tokenization, "
                         "overloaded, model_type, inference)", ("err",))
        self.duration = H("te_request_duration", "seconds per request answered", SECONDS)
        self.tokenization = H("te_request_tokenization_duration", "tokenisation seconds per input (mean over "
                              "the request's inputs), per request answered", SECONDS)
        self.queue = H("te_request_queue_duration", "queue seconds per input (mean), per request answered",
                       SECONDS)
        self.inference = H("te_request_inference_duration", "forward-pass seconds per input (mean), per "
                           "request answered", SECONDS)
        self.input_length = H("te_request_input_length", "tokens per input", lengths)
        self.batch_size = H("te_batch_next_size", "inputs (model rows) per forward pass", BATCH_SIZES)
        self.batch_tokens = H("te_batch_next_tokens", "tokens per forward pass (not padded)", BATCH_TOKENS)
        self.family: dict[str, tuple[_Counter, _Counter, _Histogram, _Histogram, _Histogram, _Histogram]] = {}
        for kind, doc in (("embed", "embedding"), ("predict", "prediction (/predict, /rerank)")):
            self.family[kind] = (
                C(f"te_{kind}_count", f"{doc} inputs sent to tokenisation"),
                C(f"te_{kind}_success", f"{doc} inputs answered"),
                H(f"te_{kind}_duration", f"seconds per {doc} input answered", SECONDS),
                H(f"te_{kind}_tokenization_duration", f"tokenisation seconds per {doc} input answered", SECONDS),
                H(f"te_{kind}_queue_duration", f"queue seconds per {doc} input answered", SECONDS),
                H(f"te_{kind}_inference_duration", f"forward-pass seconds per {doc} input answered", SECONDS))
        # bertkit's own
        self.errors = C("bertkit_request_failure", "every error answer, by bertkit's error_type", ("error_type",))
        self.batch_seconds = H("bertkit_batch_inference_duration", "seconds per forward pass", SECONDS)

    # ------------------------------------------------------------------ counting
    def request(self, method: str | None) -> None:
        """A model route read its body (``method``: :func:`method_of`; ``None``, a body TEI
        would not have read: not counted), before validating it."""
        if method is not None:
            self.requests.inc(method)

    def inputs(self, kind: str | None, n: int) -> None:
        """``n`` inputs go to tokenisation (``kind``: ``embed``, ``predict`` or None)."""
        if kind is not None:
            self.family[kind][0].inc(by=n)

    def failed(self, error, counted: bool = True) -> None:
        """An error answer: ``te_request_failure`` with TEI's ``err`` (:func:`tei_err`; none
        when not ``counted`` or TEI counts none), and ``bertkit_request_failure``."""
        self.errors.inc(error.error_type)
        err = tei_err(error) if counted else None
        if err is not None:
            self.failure.inc(err)

    def answered(self, method: str, kind: str | None, total: float, tokenizing: float, queue: float,
                 inference: float, per_input: list[tuple[float, float, float, float, int]]) -> None:
        """A request answered: ``total`` seconds, the means per input of the others;
        ``per_input``: each input's (seconds, tokenisation, queue, inference seconds, tokens)."""
        self.success.inc(method)
        self.duration.observe(total)
        self.tokenization.observe(tokenizing)
        self.queue.observe(queue)
        self.inference.observe(inference)
        for *_, tokens in per_input:
            self.input_length.observe(tokens)
        if kind is not None:
            _, success, seconds, tok, waited, ran = self.family[kind]
            for t, a, b, c, _ in per_input:
                success.inc()
                seconds.observe(t)
                tok.observe(a)
                waited.observe(b)
                ran.observe(c)

    def on_batch(self, rows: int, tokens: int, seconds: float) -> None:
        """A forward pass ran ``rows`` rows of ``tokens`` tokens (called from the batcher's thread)."""
        self.batch_size.observe(rows)
        self.batch_tokens.observe(tokens)
        self.batch_seconds.observe(seconds)

    # ------------------------------------------------------------------ writing
    def collect(self):
        yield self.requests.family()
        yield self.success.family()
        yield self.failure.family()
        for h in (self.duration, self.tokenization, self.queue, self.inference, self.input_length,
                  self.batch_size, self.batch_tokens):
            yield h.family()
        queue = GaugeMetricFamily("te_queue_size", "model rows waiting in the queue")
        queue.add_metric([], float(self.queue_size()))
        yield queue
        for kind in ("embed", "predict"):
            count, success, *histograms = self.family[kind]
            yield count.family()
            yield success.family()
            for h in histograms:
                yield h.family()
        yield self.errors.family()
        yield self.batch_seconds.family()

    def render(self) -> bytes:
        """The Prometheus text format (0.0.4), every family under its own name (TEI's)."""
        out = []
        for family in self.collect():
            doc = family.documentation.replace("\\", r"\\").replace("\n", r"\n")
            out += [f"# HELP {family.name} {doc}\n", f"# TYPE {family.name} {family.type}\n"]
            for sample in family.samples:
                labels = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(sample.labels.items()))
                out.append(f"{sample.name}{{{labels}}} {floatToGoString(sample.value)}\n" if labels
                           else f"{sample.name} {floatToGoString(sample.value)}\n")
        return "".join(out).encode("utf-8")


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')
