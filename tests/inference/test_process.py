"""``EngineProcess``: an engine's forward passes in a child process (``serve --model-process``)."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from bertkit.errors import BertkitError
from bertkit.inference import load
from bertkit.inference.process import EngineProcess, EngineProcessEnded
from bertkit.tasks.base import Row


class _Toy:
    """An engine whose answers are the rows' lengths; some keys fail or end the process."""

    def run_rows(self, key, rows):
        if key == ("die",):
            os._exit(3)
        if key == ("raise",):
            raise ValueError("a bad batch")
        return [len(r.input_ids) for r in rows]


def toy_engine():
    return _Toy()


class _Compiling(_Toy):
    """A toy engine that builds a compiled form in the background for its first second."""

    def __init__(self):
        self.until = time.monotonic() + 1.0

    @property
    def compiling(self):
        return time.monotonic() < self.until


def compiling_engine():
    return _Compiling()


def failing_load(directory):
    raise BertkitError(f"{directory}: no model here")


ROWS = [Row([101, 7, 8, 102], [0, 0, 0, 0]), Row([101, 102], [0, 0])]


def test_answers_errors_and_a_process_that_died_under_a_batch():
    engine = EngineProcess(toy_engine)
    engine.start()
    try:
        assert engine.run_rows(("ok",), ROWS) == [4, 2]
        with pytest.raises(ValueError, match="a bad batch"):  # the engine's own error, the child lives on
            engine.run_rows(("raise",), ROWS)
        assert engine.run_rows(("ok",), ROWS[:1]) == [4] and engine.starts == 1
        with pytest.raises(EngineProcessEnded, match="exit code 3"):
            engine.run_rows(("die",), ROWS)
        assert engine.run_rows(("ok",), ROWS) == [4, 2]  # started again for the next batch
        assert engine.starts == 2
        os.kill(engine.pid, signal.SIGKILL)  # killed between batches: the next call restarts it
        engine._process.join(10)
        assert engine.run_rows(("ok",), ROWS) == [4, 2] and engine.starts == 3
    finally:
        engine.close()
    assert engine.pid is None


class _Slow(_Toy):
    """A toy engine whose batches take a while, so that several wait in the pipe."""

    def run_rows(self, key, rows):
        time.sleep(1.0 if key == ("die",) else 0.05)  # the batches behind it are in the pipe by then
        return super().run_rows(key, rows)


def slow_engine():
    return _Slow()


def test_batches_from_several_threads_are_answered_each_its_own():
    import threading

    engine = EngineProcess(slow_engine)
    engine.start()
    answers = {}

    def call(n):
        answers[n] = engine.run_rows(("ok",), [Row([1] * (n + 2), [0] * (n + 2))] * (n % 3 + 1))

    try:
        threads = [threading.Thread(target=call, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert answers == {n: [n + 2] * (n % 3 + 1) for n in range(8)}
    finally:
        engine.close()


def test_every_batch_in_flight_fails_when_the_process_dies_and_the_next_restarts_it():
    import threading

    engine = EngineProcess(slow_engine)
    engine.start()
    failed, answered = [], []

    def call(key):
        try:
            answered.append(engine.run_rows(key, ROWS))
        except EngineProcessEnded:
            failed.append(key)

    try:
        threads = [threading.Thread(target=call, args=(k,)) for k in [("die",), ("ok",), ("ok",)]]
        for t in threads:
            t.start()
            time.sleep(0.01)  # in this order in the pipe
        for t in threads:
            t.join(30)
        assert sorted(failed) == [("die",), ("ok",), ("ok",)] and answered == []  # sent to the dead child: all fail
        assert engine.run_rows(("ok",), ROWS) == [4, 2] and engine.starts == 2
    finally:
        engine.close()


def test_compiling_is_the_child_engines_and_ends():
    engine = EngineProcess(compiling_engine)
    engine.start()
    try:
        assert engine.compiling  # read at once, not behind a batch
        deadline = time.monotonic() + 10
        while engine.compiling and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not engine.compiling
        assert engine.run_rows(("ok",), ROWS) == [4, 2]
    finally:
        engine.close()
    assert not engine.compiling  # a closed engine compiles nothing


def test_ctrl_c_is_left_to_the_parent():
    """Ctrl-C reaches the whole process group; the child lives on until the parent, which
    finishes its requests in flight first, closes it (no traceback from the child)."""
    engine = EngineProcess(toy_engine)
    engine.start()
    try:
        os.kill(engine.pid, signal.SIGINT)
        time.sleep(0.3)
        assert engine.alive() and engine.run_rows(("ok",), ROWS) == [4, 2] and engine.starts == 1
    finally:
        engine.close()


def test_a_restart_that_fails_fails_the_batch_as_an_ended_process(monkeypatch):
    engine = EngineProcess(toy_engine)
    engine.start()
    try:
        os.kill(engine.pid, signal.SIGKILL)
        engine._process.join(10)
        monkeypatch.setattr(engine, "args", ())
        monkeypatch.setattr(engine, "load", failing_load)  # now needs an argument: a TypeError in the child
        with pytest.raises(EngineProcessEnded, match="could not be started again: .*failing_load"):
            engine.run_rows(("ok",), ROWS)
    finally:
        engine.close()


def test_a_load_error_is_raised_by_start():
    engine = EngineProcess(failing_load, "/nowhere")
    with pytest.raises(BertkitError, match="/nowhere: no model here"):
        engine.start()
    assert not engine.alive()


def test_the_child_answers_as_the_engine_in_this_process(make_mlm_dir):
    directory = str(make_mlm_dir(32))
    bert = load(directory, precision="fp32")
    texts = ["the man went to the store", "hello", "he is good"]
    plans = [bert.states_plan(bert.tokenizer.encode(t)) for t in texts]
    rows = [p.rows[0] for p in plans]
    engine = EngineProcess(load, directory)
    engine.start()
    try:
        got = engine.run_rows(plans[0].key, rows)
    finally:
        engine.close()
    for mine, theirs in zip(got, bert.run_rows(plans[0].key, rows)):
        np.testing.assert_allclose(mine, theirs, atol=1e-6)
