"""Dynamic batching: rows of concurrent requests share forward passes.

A request's plans (:class:`~bertkit.inference.heads.Plan`) put their rows on one queue. A
single worker thread waits until the oldest row has waited ``max_wait`` seconds or the queue
holds a token budget's worth, takes every queued row with the oldest row's key, sorts them by
length and runs them in batches of at most ``max_batch_tokens`` padded tokens and
``max_batch_size`` rows (:func:`~bertkit.inference.heads.token_batches`); each output goes back
to the future of its own row. The queue is bounded: :meth:`DynamicBatcher.submit` raises
:class:`QueueFull` at once when the rows would not fit (the server answers 503).
:meth:`DynamicBatcher.close` stops taking new rows, finishes every queued row, then stops.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bertkit.inference.heads import Plan, token_batches


class QueueFull(Exception):
    """The queue cannot take the rows of a request now."""


@dataclass
class _Row:
    key: tuple
    encoding: Any
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    arrived: float


def _deliver(row: _Row, value: Any = None, error: BaseException | None = None) -> None:
    def set_it():
        if not row.future.done():
            if error is not None:
                row.future.set_exception(error)
            else:
                row.future.set_result(value)

    row.loop.call_soon_threadsafe(set_it)


class DynamicBatcher:
    """Batches rows for ``run_rows(key, encodings) -> outputs`` on one worker thread."""

    def __init__(self, run_rows: Callable[[tuple, Sequence], list], max_batch_tokens: int = 8192,
                 max_batch_size: int = 64, max_wait_s: float = 0.005, max_queue: int = 1024):
        self.run_rows = run_rows
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self.max_queue = max_queue
        self._rows: deque[_Row] = deque()
        self._cond = threading.Condition()
        self._closing = False
        self.batches_run = 0  # counters for /info and the tests
        self.rows_run = 0
        self._thread = threading.Thread(target=self._work, name="bertkit-batcher", daemon=True)
        self._thread.start()

    @property
    def queued(self) -> int:
        return len(self._rows)

    def submit(self, plans: Sequence[Plan]) -> list[list[asyncio.Future]]:
        """Queue every row of ``plans`` (all or none); one future per row, per plan."""
        loop = asyncio.get_running_loop()
        now = time.monotonic()
        futures = [[loop.create_future() for _ in p.rows] for p in plans]
        rows = [_Row(p.key, enc, f, loop, now) for p, fs in zip(plans, futures) for enc, f in zip(p.rows, fs)]
        with self._cond:
            if self._closing:
                raise QueueFull("the server is shutting down")
            if len(self._rows) + len(rows) > self.max_queue:
                raise QueueFull(f"the queue is full ({len(self._rows)} rows waiting, at most "
                                f"{self.max_queue}); retry later")
            self._rows.extend(rows)
            self._cond.notify()
        return futures

    async def run(self, plans: Sequence[Plan]) -> list[Any]:
        """The answers of ``plans`` (in order), computed in shared batches."""
        futures = self.submit(plans)
        answers = []
        for plan, fs in zip(plans, futures):
            outputs = [await f for f in fs]
            answers.append(plan.finish(outputs))
        return answers

    def close(self, timeout: float | None = None) -> None:
        """Finish the queued rows, then stop the worker (new rows are refused meanwhile)."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join(timeout)

    # ------------------------------------------------------------------ worker thread
    def _ready(self) -> bool:
        if not self._rows:
            return False
        if self._closing:
            return True
        waited = time.monotonic() - self._rows[0].arrived
        tokens = sum(len(r.encoding.input_ids) for r in self._rows)
        return waited >= self.max_wait_s or tokens >= self.max_batch_tokens

    def _take(self) -> list[_Row]:
        """Every queued row with the oldest row's key, longest first."""
        key = self._rows[0].key
        taken = [r for r in self._rows if r.key == key]
        self._rows = deque(r for r in self._rows if r.key != key)
        taken.sort(key=lambda r: -len(r.encoding.input_ids))
        return taken

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._ready():
                    if self._closing and not self._rows:
                        return
                    if self._rows:
                        left = self.max_wait_s - (time.monotonic() - self._rows[0].arrived)
                        self._cond.wait(max(left, 0.0005))
                    else:
                        self._cond.wait()
                taken = self._take()
            for batch in token_batches(taken, lambda r: len(r.encoding.input_ids),
                                       self.max_batch_tokens, self.max_batch_size):
                try:
                    outputs = self.run_rows(batch[0].key, [r.encoding for r in batch])
                except BaseException as e:  # the callers get the error; the worker lives on
                    for r in batch:
                        _deliver(r, error=e)
                    continue
                self.batches_run += 1
                self.rows_run += len(batch)
                for r, out in zip(batch, outputs):
                    _deliver(r, out)
