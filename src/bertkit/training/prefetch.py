"""Background prefetching: prepare the next batches while the current step runs.

Contract: ``prefetch(iterable, depth=2)`` yields the items of ``iterable`` in order while a
daemon thread produces them up to ``depth`` ahead. An exception raised by the producer is
re-raised in the consumer where the item would have come. Closing the generator (a
``break`` out of the loop, garbage collection) stops the producer. The producer must not
share mutable state with the consumer (the pre-training loop gives it its own dataset).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
_END = object()


def prefetch(iterable: Iterable[T], depth: int = 2) -> Iterator[T]:
    slots: queue.Queue = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()

    def put(entry) -> bool:
        while not stop.is_set():
            try:
                slots.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in iterable:
                if not put((True, item)):
                    return
            put((True, _END))
        except BaseException as e:  # handed to the consumer
            put((False, e))

    thread = threading.Thread(target=produce, name="bertkit-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            ok, item = slots.get()
            if not ok:
                raise item
            if item is _END:
                return
            yield item
    finally:
        stop.set()
