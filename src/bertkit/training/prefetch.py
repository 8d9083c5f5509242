"""Background prefetching: prepare the next batches while the current step runs.

Contract: ``prefetch(iterable, depth=2)`` yields the items of ``iterable`` in order while a
producer thread prepares them up to ``depth`` ahead. An exception raised by the producer is
re-raised in the consumer where the item would have come. Closing the generator (a
``break`` out of the loop, ``close()``, garbage collection) stops the producer and waits for
it to finish the item in hand, so no producer thread is left running. The producer must not
share mutable state with the consumer (the pre-training loop gives it its own dataset).

Why the join matters: the producer runs torch ops, which release the GIL. A *daemon* thread
still inside one when the interpreter shuts down is killed with ``pthread_exit`` as it takes
the GIL back, from a C++ frame that may not unwind, and the whole process aborts with
"terminate called without an active exception" after its work is done (seen under load at
the end of ``torchrun`` runs). So the thread is not a daemon, is joined on close, and also
stops by itself once the main thread has finished (a consumer that never closed it).
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
    main = threading.main_thread()

    def wanted() -> bool:
        return not stop.is_set() and main.is_alive()

    def put(entry) -> bool:
        while wanted():
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

    thread = threading.Thread(target=produce, name="bertkit-prefetch", daemon=False)
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
        if thread is not threading.current_thread():
            thread.join()
