"""An engine's forward passes in a process of their own, away from the caller's GIL.

A server's event loop (HTTP parsing, validation, tokenising, answers) and its batcher's
forward passes share one interpreter lock when they share a process. An eager forward pass
gives the lock back at every operator and waits for it again, up to the interpreter's switch
interval (5 ms) each time the loop is running Python: on BERT-Tiny at concurrency 32 (the
2-core AMX Xeon) the
batcher thread spent 625 us of CPU per row against 300 in a quiet process, and a forward pass
of 20 rows took 35x its time with a busy Python thread beside it (docs/serving-results.md).
:class:`EngineProcess` runs ``run_rows`` in a child process instead: the batches go to it
through a pipe (ids and token types only), the outputs (numpy arrays) come back, and the
caller's lock is released while it waits. Several threads may call :meth:`run_rows` at once:
their batches queue in the pipe and are answered in the order sent, so the child starts the
next batch as soon as it has answered one, instead of idling while the caller's thread waits
for the interpreter lock to read the answer and send the next batch (the server's batcher keeps
two batches in flight this way).

Contract: ``EngineProcess(load, *args)`` starts nothing; :meth:`start` spawns the child, which
calls ``load(*args)`` (a module-level function: the child imports it) for an engine with
``run_rows(key, rows)``, and returns once it is loaded (or raises its load error as a
:class:`BertkitError`). :meth:`run_rows` is the engine's, with its exceptions. A child that
dies under a batch (killed, out of memory) fails that batch (:class:`EngineProcessEnded`) and
is started again by the next call; one found dead between batches is started again first: the
server lives on. :attr:`compiling` is the child engine's (read from a shared flag, never
waiting behind a batch). :meth:`close` ends the child.
"""

from __future__ import annotations

import multiprocessing
import pickle
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from bertkit.errors import BertkitError
from bertkit.tasks.base import Row


class EngineProcessEnded(BertkitError):
    """The engine's process ended under a batch; it is started again for the next."""


def _serve(conn, compiling, load: Callable, args: tuple) -> None:
    """The child: load the engine, then answer ``(key, rows)`` until ``None``; ``compiling``
    (a shared flag) says while the engine still builds a compiled form in the background.
    Ctrl-C reaches the terminal's whole process group: the child leaves it to the parent, which
    finishes the requests in flight through it and then closes it (a parent that dies ends it
    through the pipe's end)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        engine = load(*args)
    except BaseException as e:  # the parent raises it: the server does not start
        conn.send(("error", _portable(e)))
        return
    threading.Thread(target=_watch_compiling, args=(engine, compiling), daemon=True).start()
    conn.send(("ready", None))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if message is None:
            return
        key, rows = message
        try:
            conn.send(("ok", engine.run_rows(key, rows)))
        except BaseException as e:  # the batch's callers get it; the child lives on
            conn.send(("error", _portable(e)))


def _watch_compiling(engine, compiling, every: float = 0.2) -> None:
    while getattr(engine, "compiling", False):
        time.sleep(every)
    compiling.value = 0


def _portable(error: BaseException) -> BaseException:
    """``error`` if it survives pickling (the pipe's format), else a BertkitError saying it."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:
        return BertkitError(f"{type(error).__name__}: {error}")


class _Link:
    """One child process's end of the pipe, and its batches, answered in the order sent."""

    def __init__(self, process, conn):
        self.process, self.conn = process, conn
        self.sent = 0  # tickets handed out
        self.answered = 0  # tickets whose turn has passed
        self.turn = threading.Condition()

    def receive(self, ticket: int, sent: bool) -> tuple:
        """The answer to batch ``ticket``, read in its turn (``EOFError`` if it never left)."""
        with self.turn:
            while self.answered != ticket:
                self.turn.wait()
            try:
                if not sent:
                    raise EOFError
                return self.conn.recv()
            finally:
                self.answered += 1
                self.turn.notify_all()

    def drain(self, timeout: float) -> None:
        """Wait until every batch sent has had its turn (a dead child answers them at once)."""
        with self.turn:
            self.turn.wait_for(lambda: self.answered == self.sent, timeout)


class EngineProcess:
    """``load(*args)``'s engine in a child process; :meth:`run_rows` is its forward pass."""

    def __init__(self, load: Callable, *args: Any, name: str = "bertkit-engine"):
        self.load, self.args, self.name = load, args, name
        self._link: _Link | None = None
        self._sending = threading.Lock()  # one batch written to the pipe at a time
        self._compiling = None
        self.starts = 0

    @property
    def _process(self):
        return self._link.process if self._link is not None else None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        """Spawn the child and wait until its engine is loaded."""
        ctx = multiprocessing.get_context("spawn")  # no fork of a process holding threads
        parent, child = ctx.Pipe()
        self._compiling = ctx.Value("b", 1, lock=False)
        process = ctx.Process(target=_serve, args=(child, self._compiling, self.load, self.args), name=self.name,
                              daemon=True)
        process.start()
        child.close()
        try:
            status, value = parent.recv()
        except EOFError:
            process.join()
            raise BertkitError(f"the model process ended while loading the model (exit code "
                               f"{process.exitcode})") from None
        if status == "error":
            process.join()
            raise value
        self._link = _Link(process, parent)
        self.starts += 1

    @property
    def compiling(self) -> bool:
        """Whether the child's engine still builds a compiled form in the background (static
        INT8's batch graph): the engine's own ``compiling``, read without waiting for a batch."""
        return self.alive() and bool(self._compiling.value)

    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    def run_rows(self, key: tuple, rows: Sequence) -> list:
        """The engine's ``run_rows(key, rows)``, run in the child (only each row's ids and
        token types travel); callable from several threads at once (answered in turn)."""
        message = (key, [Row(list(r.input_ids), list(r.token_type_ids)) for r in rows])
        with self._sending:
            if not self.alive():
                self._restart()
            link = self._link
            ticket, link.sent = link.sent, link.sent + 1
            try:
                link.conn.send(message)
                sent = True
            except (OSError, BrokenPipeError):
                sent = False
        try:
            status, value = link.receive(ticket, sent)
        except (EOFError, OSError, BrokenPipeError):
            link.process.join(5)
            raise EngineProcessEnded(f"the model process ended during a forward pass (exit code "
                                     f"{link.process.exitcode}); it is started again for the next batch") from None
        if status == "error":
            raise value
        return value

    def _restart(self) -> None:
        if self._link is not None:
            self._link.drain(10)  # the batches in flight on the dead child fail first
            self._link.conn.close()
        try:
            self.start()
        except Exception as e:  # the batch fails as one the process died under; the next tries again
            raise EngineProcessEnded(f"the model process ended and could not be started again: {e}") from None

    def close(self, timeout: float = 10.0) -> None:
        """Ask the child to finish (after the batches in flight), then end it."""
        with self._sending:
            link = self._link
            if link is None:
                return
            try:
                link.conn.send(None)
            except (OSError, BrokenPipeError):
                pass
            link.process.join(timeout)
            if link.process.is_alive():
                link.process.kill()
                link.process.join()
            link.drain(timeout)
            link.conn.close()
            self._link = None
