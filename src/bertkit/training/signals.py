"""Graceful stop: SIGINT / SIGTERM ask the training loop to checkpoint and exit.

Contract: inside ``with GracefulStop() as stop:`` the first SIGINT or SIGTERM only sets
``stop.requested`` (and ``stop.signal_name``); the loop polls it between optimizer steps,
writes a checkpoint and returns. A second SIGINT raises ``KeyboardInterrupt`` for users who
really want out. Previous handlers come back on exit. Outside the main thread it is inert.
"""

from __future__ import annotations

import signal
import threading


class GracefulStop:
    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.requested = False
        self.signal_name: str | None = None
        self._previous: dict[int, object] = {}

    def _handle(self, signum, frame) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        self.signal_name = signal.Signals(signum).name

    def __enter__(self) -> GracefulStop:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> bool:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        return False
