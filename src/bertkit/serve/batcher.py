"""Continuous batching: rows of concurrent requests share forward passes, with no waiting.

A request's plans (:class:`~bertkit.inference.heads.Plan`) put their rows on one queue. A
single worker thread runs the model whenever the queue holds rows: it never waits for company
(a lone request on an idle model goes straight in). While it runs a batch, new rows gather
in the queue; the next batch is cut from them around one row: the rows sharing its key are
sorted by length and cut into batches of at most ``max_batch_tokens`` padded tokens and
``max_batch_size`` rows (:func:`~bertkit.inference.heads.token_batches`); the batch that holds
that row runs, the others stay queued for newcomers to join. The row is, by turns, the oldest
(so no row waits forever) and the next row of the request with the fewest rows still queued
(so a short request waits a batch or two, not behind every row of the 64-input requests that
other clients keep sending: one client cannot starve the rest).
Each output goes back to the future of its own row with its queue and inference times.

Where the model pads a batch to its longest row (``cut_padding``), the batch is cut further
where that saves more padded tokens than a forward pass costs (:func:`~bertkit.inference.heads.cheapest_cuts`):
the rows of concurrent requests arrive in any order of length, and a batch of 16 SST-2
sentences padded to its longest holds 1.8x their tokens. What a pass costs is measured on the
running server (:class:`PassCost`): none is cut until it is known.

With ``workers=2`` two threads do this, each with a batch in flight: for a ``run_rows`` that
runs elsewhere and takes batches concurrently (:class:`~bertkit.inference.process.EngineProcess`),
the next batch is waiting there when one ends.

The queue is bounded: :meth:`ContinuousBatcher.submit` raises :class:`NeverFits` (the server
answers 413) for a request with more rows than the queue can ever hold and :class:`QueueFull`
(429) when they do not fit now. :meth:`ContinuousBatcher.close` stops taking new rows,
finishes every queued row, then stops.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bertkit.inference.heads import cheapest_cuts, token_batches
from bertkit.tasks.base import Plan


class QueueFull(Exception):
    """The queue cannot take the rows of a request now (retry later)."""


class NeverFits(Exception):
    """A request has more rows than the queue can ever hold (retrying cannot help)."""


@dataclass
class _Row:
    key: tuple
    encoding: Any
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    arrived: float
    rank: int  # its place among its request's rows
    request: int  # which request it belongs to

    @property
    def length(self) -> int:
        return len(self.encoding.input_ids)


@dataclass
class Timings:
    """A request's times in seconds (means over its rows, as text-embeddings-inference reports
    them) and the tokens it ran."""

    queue: float = 0.0
    inference: float = 0.0
    tokens: int = 0
    # per plan: (seconds from submitting to its answer, queue, inference (means over its rows), tokens)
    plans: list[tuple[float, float, float, int]] = field(default_factory=list)


def _deliver(rows: Sequence[_Row], values: Sequence[Any] | None = None,
             error: BaseException | None = None) -> None:
    """Each row's value (or ``error`` for all) to its future, with one wake-up of each event
    loop for the whole batch: a ``call_soon_threadsafe`` per row wrote to the loop's wake-up
    pipe once per row, a system call and a loop iteration each (a tenth of the worker's
    samples on BERT-Tiny at concurrency 32, the AMX Xeon)."""
    by_loop: dict[asyncio.AbstractEventLoop, list] = {}
    for i, row in enumerate(rows):
        by_loop.setdefault(row.loop, []).append((row.future, None if values is None else values[i]))

    def set_them(pairs):
        for future, value in pairs:
            if future.done():
                continue
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)

    for loop, pairs in by_loop.items():
        loop.call_soon_threadsafe(set_them, pairs)


class PassCost:
    """The fixed cost of one forward pass in padded tokens (what a pass costs beyond its tokens,
    divided by what a token costs), measured as the server runs: a line through the last
    ``window`` passes timed, ``(padded tokens, seconds)``, fitted by Theil and Sen's rule (the
    median of the slopes between passes of at least :data:`SPREAD` times each other's tokens,
    then the median intercept), so that a pass slowed by a wait or sped by kernels another
    pass built moves it little. Every ``every`` batches, and where a batch holds
    :data:`RESCALE` times the last probe's tokens, a probe pass of the shorter half of a batch's
    rows adds a point of the size a cut makes. Passes of one row are not given to it: nothing in
    them is cut, and a quiet spell's lone passes (10-30 ms on BERT-Base) filled the window and,
    shorter than :data:`MIN_PASS_SECONDS`, left the next burst's batches uncut: a benchmark
    alternating concurrency 1 and 32 answered 56.7 requests/s at 32 where 73.0 without the
    lone rounds. :attr:`tokens` is None until the passes say
    (fewer than three pairs far enough apart), where they are too short to time
    (:data:`MIN_PASS_SECONDS`), and where the line leaves a pass no cost of its own (which read
    as 0 would cut a batch into a pass per length); once known, an estimate holds until the
    passes give another, so that the cut does not switch itself off.

    Why a line through every pass and not a probe against the batches after it: the probe, timed
    twice with the faster kept, came out of static INT8 BERT-Base's fresh passes at 0.2-15.7
    tokens or not at all (in 3 of 12 runs of 20 server-like batches, one process, avx512_bf16
    EPYC) where a line through 195 such passes put it at 9 tokens (the AOTInductor package) and
    37 (the torch.compile graph); the same fit over any 15 of them fell within 6-14 and 32-49
    (10th-90th percentile; 2026-12-07, docs/serving-results.md)."""

    MIN_ROWS = 4  # a batch this large may be cut, so worth a probe
    # A pass's wall time includes its waits for the interpreter lock (up to the 5 ms switch
    # interval each while the event loop runs Python): only passes ten times that long are timed
    # closely enough. BERT-Tiny's (5-15 ms) are not: its cost came out between 23 and 250 tokens
    # from one probe to the next, and batches cut by it ran 1.4x slower; BERT-Base's take 50-400 ms.
    MIN_PASS_SECONDS = 10 * sys.getswitchinterval()
    RESCALE = 8  # a batch of this many times the probe's tokens (4x the batch it was cut from) is probed again
    SPREAD = 1.5  # two passes give a slope where one has this many times the other's tokens
    MIN_SLOPES = 3

    def __init__(self, every: int = 256, window: int = 32):
        self.every = every
        self.probe: tuple[int, float] | None = None  # the last probe (padded tokens, seconds)
        self.recent: deque[tuple[int, float]] = deque(maxlen=window)  # passes and probes
        self.since_probe = 0
        self.asked = False  # a probe was claimed (one that failed is tried again after ``every`` batches)
        self.last: float | None = None  # the last estimate
        self.scale: int | None = None  # the last probe's tokens (None while a probe is claimed)

    def due(self, rows: int, tokens: int = 0) -> bool:
        """Should a batch of ``rows`` rows and ``tokens`` padded tokens be preceded by a probe?
        (Claimed: asking again says no.) Every ``every`` batches, and sooner where the batch
        holds :data:`RESCALE` times the last probe's tokens: the probe was taken at a lighter load
        (a server's first batches: a warm-up of 4 at a time), and the passes at the new scale
        need a smaller one beside them to give a slope."""
        grown = self.scale is not None and tokens >= self.RESCALE * self.scale
        if rows < self.MIN_ROWS or (self.asked and self.since_probe < self.every and not grown):
            return False
        self.asked, self.since_probe, self.scale = True, 0, None
        return True

    def probed(self, tokens: int, seconds: float) -> None:
        self.probe, self.asked, self.scale = (tokens, seconds), True, tokens
        self._add(tokens, seconds)

    def dropped(self) -> None:
        """The claimed probe was timed on a form of the model that later passes will not use (its
        batch graph was compiling): the next batch of :data:`MIN_ROWS` rows or more probes."""
        self.asked = False

    def ran(self, tokens: int, seconds: float) -> None:
        self.since_probe += 1
        self._add(tokens, seconds)

    def _add(self, tokens: int, seconds: float) -> None:
        self.recent.append((tokens, seconds))
        self.last = self._fit()

    @property
    def tokens(self) -> float | None:
        return self.last

    def _fit(self) -> float | None:
        """The estimate after the passes in :attr:`recent` (see the class)."""
        passes = list(self.recent)
        times = sorted(s for _, s in passes)
        if times[len(times) // 2] < self.MIN_PASS_SECONDS:
            return None
        slopes = sorted((s2 - s1) / (t2 - t1) for t1, s1 in passes for t2, s2 in passes if t2 >= self.SPREAD * t1)
        per_token = _median(slopes) if len(slopes) >= self.MIN_SLOPES else 0.0
        if per_token <= 0:
            return self.last
        fixed = _median(sorted(s - per_token * t for t, s in passes))
        return fixed / per_token if fixed > 0 else self.last


def _median(ordered: Sequence[float]) -> float:
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


class ContinuousBatcher:
    """Batches rows for ``run_rows(key, encodings) -> outputs`` on ``workers`` threads (each
    with one batch in flight: more than one only where ``run_rows`` runs elsewhere and takes
    concurrent calls).

    ``on_batch(rows, tokens, seconds)`` (optional; ``tokens`` not padded) is called after each forward pass
    (metrics); ``batches_run`` / ``rows_run`` count them, ``last_ok`` is the monotonic time of
    the last batch that succeeded. ``cut_padding``: ``run_rows`` pads a batch to its longest
    row, so batches are cut where padding costs more than a pass (:attr:`pass_cost`);
    ``compiling()``: is the model still building its batch graph? No probe is timed then, and
    one that set it compiling is dropped: static INT8 answers from its slower package until its
    graph is compiled, which under load took minutes (avx512_bf16 EPYC, before batches ran on
    the package there), and a probe timed on the package says nothing of the graph's passes.
    """

    def __init__(self, run_rows: Callable[[tuple, Sequence], list], max_batch_tokens: int = 8192,
                 max_batch_size: int = 64, max_queue: int = 1024,
                 on_batch: Callable[[int, int, float], None] | None = None, workers: int = 1,
                 cut_padding: bool = False, compiling: Callable[[], bool] = lambda: False):
        self.run_rows = run_rows
        self.pass_cost = PassCost() if cut_padding else None
        self.compiling = compiling
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_size = max_batch_size
        self.max_queue = max_queue
        self.on_batch = on_batch
        self._rows: deque[_Row] = deque()
        self._cond = threading.Condition()
        self._closing = False
        self._running = 0  # batches under way
        self._running_rows = 0  # their rows
        self.batches_run = 0
        self.rows_run = 0
        self.last_ok: float | None = None
        self._probing = False  # a worker times a probe pass: no batch is taken meanwhile
        self._last_end = 0.0  # when the last batch ended (monotonic)
        self._turns = 0  # even: the oldest row's batch; odd: the smallest queued request's
        self._requests = 0  # requests submitted, numbering them
        self._threads = [threading.Thread(target=self._work, name=f"bertkit-batcher-{i}", daemon=True)
                         for i in range(workers)]
        for thread in self._threads:
            thread.start()

    @property
    def queued(self) -> int:
        return len(self._rows)

    @property
    def running(self) -> bool:
        """Is a forward pass under way?"""
        return self._running > 0

    @property
    def alive(self) -> bool:
        return all(t.is_alive() for t in self._threads) and not self._closing

    def submit(self, plans: Sequence[Plan]) -> list[list[asyncio.Future]]:
        """Queue every row of ``plans`` (all or none); one future per row, per plan."""
        loop = asyncio.get_running_loop()
        now = time.monotonic()
        count = sum(len(p.rows) for p in plans)
        if count > self.max_queue:
            raise NeverFits(f"the request needs {count} model rows, more than the queue holds "
                            f"(--max-queue {self.max_queue})")
        futures = [[loop.create_future() for _ in p.rows] for p in plans]
        flat = [(p.key, enc, f) for p, fs in zip(plans, futures) for enc, f in zip(p.rows, fs)]
        with self._cond:
            self._requests += 1
            rows = [_Row(key, enc, f, loop, now, rank, self._requests) for rank, (key, enc, f) in enumerate(flat)]
            if self._closing:
                raise QueueFull("the server is shutting down")
            if len(self._rows) + len(rows) > self.max_queue:
                raise QueueFull("Model is overloaded")
            self._rows.extend(rows)
            if self._ready():  # waking a worker only to wait again cost ~40 us of CPU a request
                self._cond.notify()
        return futures

    async def run(self, plans: Sequence[Plan]) -> tuple[list[Any], Timings]:
        """The answers of ``plans`` (in order), computed in shared batches, and their timings."""
        start = time.perf_counter()
        futures = self.submit(plans)
        answers, queue, inference, rows, tokens, each = [], 0.0, 0.0, 0, 0, []
        for plan, fs in zip(plans, futures):
            outputs, q, r, n = [], 0.0, 0.0, 0
            for f, encoding in zip(fs, plan.rows):
                output, waited, ran = await f
                outputs.append(output)
                q, r, n = q + waited, r + ran, n + len(encoding.input_ids)
            answers.append(plan.finish(outputs))
            k = max(len(fs), 1)
            each.append((time.perf_counter() - start, q / k, r / k, n))
            queue, inference, rows, tokens = queue + q, inference + r, rows + len(fs), tokens + n
        rows = max(rows, 1)
        return answers, Timings(queue / rows, inference / rows, tokens, each)

    def close(self, timeout: float | None = None) -> None:
        """Finish the queued rows, then stop the worker (new rows are refused meanwhile)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    # ------------------------------------------------------------------ worker thread
    def _next_batch(self) -> list[_Row]:
        """The batch holding, by turns, the oldest row or the next row (lowest rank, then
        oldest) of the request with the fewest rows queued, cut from the length-sorted rows of
        its key; it leaves the queue, the other rows stay. (Ranking requests by rows already run
        instead let every newly arrived 64-input request, at rank 0, go before a short one that
        came later: with twelve clients flooding, a one-text /embed waited 2-5 s.)"""
        fair = self._turns % 2 == 1
        self._turns += 1
        if fair:
            queued = Counter(r.request for r in self._rows)
            oldest = min(self._rows, key=lambda r: (queued[r.request], r.rank, r.arrived))
        else:
            oldest = self._rows[0]
        same = sorted((r for r in self._rows if r.key == oldest.key), key=lambda r: -r.length)
        batches = token_batches(same, lambda r: r.length, self.max_batch_tokens, self.max_batch_size)
        batch = next(b for b in batches if any(r is oldest for r in b))
        pass_tokens = self.pass_cost.tokens if self.pass_cost is not None else None
        if pass_tokens is not None and len(batch) > 1:
            pieces = [batch[i:j] for i, j in cheapest_cuts([r.length for r in batch], pass_tokens)]
            batch = next(b for b in pieces if any(r is oldest for r in b))
        taken = {id(r) for r in batch}
        self._rows = deque(r for r in self._rows if id(r) not in taken)
        return batch

    def _ready(self) -> bool:
        """Can a worker take a batch now? Rows are queued, and no batch runs, or as many rows as
        run are queued (a second batch beside a running one only once as large: small
        batches cost more per row than the wait they save), or the batcher is closing."""
        return (bool(self._rows) and not self._probing
                and (not self._running or self._closing or len(self._rows) >= self._running_rows))

    def _done(self, batch: list[_Row]) -> None:
        with self._cond:
            self._running -= 1
            self._running_rows -= len(batch)
            self._cond.notify_all()  # a worker waiting to take a batch, or to probe alone

    def _probe(self, batch: list[_Row]) -> None:
        """Time a pass of ``batch``'s shorter half (the size of the pieces a cut makes), once,
        as any batch (a second timing of the same shape reuses the kernels the first built, which
        a real batch of a new shape does not), for :attr:`pass_cost`, with no other batch in
        flight (with two workers, the other's batch ends first and none starts meanwhile); its
        outputs are dropped, and a failure leaves the cost unknown (the batch itself runs next,
        its error going to its callers)."""
        with self._cond:
            self._probing = True
            self._cond.wait_for(lambda: self._running == 1)  # only this worker's own batch, not yet sent
        half = batch[len(batch) // 2:]  # sorted longest first: the shorter half
        try:
            start = time.monotonic()
            self.run_rows(half[0].key, [r.encoding for r in half])
            seconds = time.monotonic() - start
            if not self.compiling():  # (the pass may have set the batch graph compiling)
                self.pass_cost.probed(len(half) * half[0].length, seconds)
            else:
                self.pass_cost.dropped()
        except Exception:  # noqa: BLE001  (the batch's own pass reports what is wrong)
            pass
        finally:
            with self._cond:
                self._probing = False
                self._cond.notify_all()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._ready():
                    if self._closing and not self._rows:
                        return
                    self._cond.wait()
                batch = self._next_batch()
                self._running += 1
                self._running_rows += len(batch)
                probe = (self.pass_cost is not None and not self.compiling()
                         and self.pass_cost.due(len(batch), len(batch) * batch[0].length))
            if probe:
                self._probe(batch)
            start = time.monotonic()
            try:
                outputs = self.run_rows(batch[0].key, [r.encoding for r in batch])
            except BaseException as e:  # the callers get the error; the worker lives on
                self._done(batch)
                _deliver(batch, error=e)
                continue
            end = time.monotonic()
            seconds = end - start
            with self._cond:
                # with two batches in flight, this one was computed after the one before it ended
                computed, self._last_end = end - max(start, self._last_end), end
                if self.pass_cost is not None and len(batch) > 1:  # (see PassCost: a lone row is never cut)
                    self.pass_cost.ran(len(batch) * batch[0].length, computed)  # padded to its first, longest row
                self._done(batch)
                self.batches_run += 1
                self.rows_run += len(batch)
                self.last_ok = time.monotonic()
            if self.on_batch is not None:
                self.on_batch(len(batch), sum(r.length for r in batch), seconds)
            _deliver(batch, [(out, start - r.arrived, seconds) for r, out in zip(batch, outputs)])
