"""Continuous batching: no waiting on an idle model, rows gathered while the model runs, the
token budget, the oldest row first, 429 and 413 paths."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest

from bertkit.serve.batcher import ContinuousBatcher, NeverFits, PassCost, QueueFull
from bertkit.tasks.base import Plan


def plan(length: int, key=("k",)) -> Plan:
    row = SimpleNamespace(input_ids=list(range(length)), token_type_ids=[0] * length)
    return Plan([row], key, lambda outputs: outputs[0])


class Recorder:
    """``run_rows`` that records each batch (key, lengths); the first call waits for ``release``."""

    def __init__(self):
        self.batches, self.entered, self.release = [], threading.Event(), threading.Event()

    def __call__(self, key, rows):
        self.entered.set()
        assert self.release.wait(30)
        self.batches.append((key, [len(r.input_ids) for r in rows]))
        return [len(r.input_ids) for r in rows]


def test_a_lone_request_runs_at_once_and_later_ones_gather_while_the_model_runs():
    async def scenario():
        record = Recorder()
        batcher = ContinuousBatcher(record, max_batch_tokens=1000, max_batch_size=64, max_queue=100)
        first = asyncio.ensure_future(batcher.run([plan(5)]))
        while not record.entered.is_set():  # the worker took the lone row without waiting for company
            await asyncio.sleep(0.001)
        later = [asyncio.ensure_future(batcher.run([plan(n)])) for n in (3, 7, 4)]
        await asyncio.sleep(0)  # the three are queued while the model runs
        while batcher.queued < 3:
            await asyncio.sleep(0.001)
        record.release.set()
        answers = [await first] + [await x for x in later]
        await asyncio.to_thread(batcher.close)
        return record.batches, answers

    batches, answers = asyncio.run(scenario())
    assert batches == [(("k",), [5]), (("k",), [7, 4, 3])]  # one batch, length-sorted
    assert [a[0] for a in answers] == [[5], [3], [7], [4]]
    timings = answers[1][1]
    assert timings.tokens == 3 and timings.queue >= 0 and timings.inference >= 0


def test_the_batch_holding_the_oldest_row_runs_first_under_the_token_budget():
    async def scenario():
        record = Recorder()
        batcher = ContinuousBatcher(record, max_batch_tokens=20, max_batch_size=64, max_queue=100)
        record.release.clear()
        blocker = asyncio.ensure_future(batcher.run([plan(1, key=("other",))]))
        while not record.entered.is_set():
            await asyncio.sleep(0.001)
        queued = [asyncio.ensure_future(batcher.run([plan(n)])) for n in (2, 10, 9, 3)]
        while batcher.queued < 4:
            await asyncio.sleep(0.001)
        record.release.set()
        await blocker
        for x in queued:
            await x
        await asyncio.to_thread(batcher.close)
        return record.batches

    batches = asyncio.run(scenario())
    # sorted 10, 9, 3, 2 and cut at 20 padded tokens: [10, 9] [3, 2]; the oldest row (2) first
    assert batches[1:] == [(("k",), [3, 2]), (("k",), [10, 9])]


def test_a_full_queue_and_a_request_that_never_fits():
    async def scenario():
        record = Recorder()
        batcher = ContinuousBatcher(record, max_queue=2)
        running = asyncio.ensure_future(batcher.run([plan(2)]))
        while not record.entered.is_set():
            await asyncio.sleep(0.001)
        waiting = asyncio.ensure_future(batcher.run([plan(2), plan(3)]))
        while batcher.queued < 2:
            await asyncio.sleep(0.001)
        with pytest.raises(QueueFull, match="Model is overloaded"):
            batcher.submit([plan(1)])
        with pytest.raises(NeverFits, match="needs 3 model rows.*--max-queue 2"):
            batcher.submit([plan(1), plan(1), plan(1)])
        record.release.set()
        assert (await running)[0] == [2] and (await waiting)[0] == [2, 3]
        await asyncio.to_thread(batcher.close)

    asyncio.run(scenario())


def batches_behind_a_blocker(longs: list[int]) -> list[tuple]:
    """The keys of the batches run (batches of at most 4 rows) when, while a one-row batch
    runs, requests of ``longs`` rows each are queued in that order, then a one-row request."""
    async def scenario():
        record = Recorder()
        batcher = ContinuousBatcher(record, max_batch_tokens=1000, max_batch_size=4, max_queue=100)
        blocker = asyncio.ensure_future(batcher.run([plan(1, key=("other",))]))
        while not record.entered.is_set():
            await asyncio.sleep(0.001)
        requests, queued = [], 0
        for rows in longs:
            requests.append(asyncio.ensure_future(batcher.run([plan(5) for _ in range(rows)])))
            queued += rows
            while batcher.queued < queued:
                await asyncio.sleep(0.001)
        short = asyncio.ensure_future(batcher.run([plan(2, key=("short",))]))
        while batcher.queued < queued + 1:
            await asyncio.sleep(0.001)
        record.release.set()
        await asyncio.gather(blocker, *requests, short)
        await asyncio.to_thread(batcher.close)
        return [key for key, _ in record.batches]

    return asyncio.run(scenario())


def test_a_short_request_waits_a_batch_or_two_not_behind_every_row_of_a_long_one():
    keys = batches_behind_a_blocker([32])  # 8 batches of 4
    # by turns the oldest row's batch and the least served request's: the short request runs
    # third or fourth (tied with the long one at rank 0, the older goes first), not last (tenth)
    assert len(keys) == 10 and keys.index(("short",)) <= 3


def test_a_short_request_goes_before_long_requests_queued_ahead_of_it():
    keys = batches_behind_a_blocker([8, 8, 8])  # three clients' 8-row requests, none begun
    # the first fair turn (the batch after the blocker) goes to the request with the fewest rows
    # queued. Ranking rows by their place in their request instead put every long request's
    # first row (rank 0, older) before the short one: it ran eighth, after three rounds of them
    assert len(keys) == 8 and keys.index(("short",)) == 1


def test_two_workers_put_a_second_batch_in_only_once_it_is_as_large():
    """``workers=2`` (the model in its own process): while a batch of 3 rows runs, 2 queued
    rows wait; once 3 are queued they go in beside it."""
    calls, first_in, release = [], threading.Event(), threading.Event()

    def run_rows(key, rows):
        calls.append(len(rows))
        if len(calls) == 1:
            first_in.set()
            assert release.wait(30)
        return [len(r.input_ids) for r in rows]

    async def scenario():
        batcher = ContinuousBatcher(run_rows, max_batch_tokens=1000, max_batch_size=64, max_queue=100, workers=2)
        first = asyncio.ensure_future(batcher.run([plan(4), plan(4), plan(4)]))
        while not first_in.is_set():
            await asyncio.sleep(0.001)
        two = [asyncio.ensure_future(batcher.run([plan(2)])) for _ in range(2)]
        await asyncio.sleep(0.05)
        waiting = (len(calls), batcher.queued)  # the two rows are not sent beside the three
        third = asyncio.ensure_future(batcher.run([plan(2)]))
        while len(calls) < 2:
            await asyncio.sleep(0.001)
        beside = (calls[1], batcher.running)  # three queued: they go in while the first still runs
        release.set()
        answers = [await first] + [await x for x in [*two, third]]
        await asyncio.to_thread(batcher.close)
        return waiting, beside, answers

    waiting, beside, answers = asyncio.run(scenario())
    assert waiting == (1, 2)
    assert beside == (3, True)
    assert [a[0] for a in answers] == [[4, 4, 4], [2], [2], [2]]


def test_the_cost_of_a_pass_is_a_line_through_the_passes_timed():
    """Padded tokens and seconds of the probe and the batches: the median slope between passes
    1.5x apart in tokens, the median intercept; an outlier moves neither; passes too short to time
    leave it unknown."""
    cost = PassCost(every=3)
    assert cost.tokens is None and not cost.due(3) and cost.due(4) and not cost.due(4)  # claimed once
    cost.probed(10, 0.100 + 0.010 * 10)  # a pass costs as much as 10 tokens, each 10 ms
    cost.ran(12, 0.100 + 0.010 * 12)  # too close to the probe to give a slope
    cost.ran(40, 0.100 + 0.010 * 40)
    assert cost.tokens is None  # two slopes, three needed
    cost.ran(100, 0.100 + 0.010 * 100)
    assert cost.tokens == pytest.approx(10)
    cost.ran(200, 0.100 + 0.010 * 200 + 5.0)  # one slow outlier: the medians hold
    assert cost.tokens == pytest.approx(10)
    assert cost.due(4)  # four batches since the probe, every 3: probe again
    for tokens in (40, 60, 80, 100, 120, 140):  # passes too short to time beside the interpreter lock's waits
        cost.ran(tokens, 0.001 + 0.0001 * tokens)
    assert cost.tokens is None  # and the estimate before them is gone too


def test_a_batch_far_larger_than_the_probe_is_probed_again():
    """A probe taken at a light load (a warm-up 4 at a time) says little of cutting batches of 32:
    a batch of 8 times the probe's tokens (4 times the batch it came from) is probed again."""
    cost = PassCost(every=100)
    assert cost.due(4, 40)
    cost.probed(20, 0.100)
    assert not cost.due(4, 100) and not cost.due(32, 159)  # under 8 x 20 tokens: not yet
    assert cost.due(32, 160) and not cost.due(32, 160)  # claimed once
    cost.probed(80, 0.300)
    assert not cost.due(32, 600) and not cost.due(4, 40)  # at the new scale, and lighter again: every 100


def test_a_line_that_leaves_a_pass_no_cost_of_its_own_leaves_the_estimate_as_it_was():
    """Seen on the AMX Xeon: a probe timed in a quiet moment put the batches' line through it
    below zero, and the estimate read 0 tokens, cutting batches into a pass per length."""
    cost = PassCost(every=100, window=4)
    cost.probed(100, 0.010)  # 0.1 ms a token, as if a pass cost nothing ...
    for tokens in (400, 500, 600):  # ... while the batches cost 0.2 ms a token
        cost.ran(tokens, 0.2e-3 * tokens)
    assert cost.tokens is None  # not 0: unknown, nothing is cut
    cost.probed(10, 0.100 + 0.010 * 10)
    for tokens in (40, 100, 60):
        cost.ran(tokens, 0.100 + 0.010 * tokens)
    assert cost.tokens == pytest.approx(10)
    cost.probed(100, 0.010)
    for tokens in (400, 500, 600):
        cost.ran(tokens, 0.2e-3 * tokens)
    assert cost.tokens == pytest.approx(10)  # the last estimate holds


def test_a_padded_route_cuts_a_batch_where_padding_costs_more_than_a_pass():
    """With what a pass costs known (40 tokens here), a queued batch of rows of 50, 12, 11, 10,
    4, 4 tokens runs as [50] and [12, 11, 10, 4, 4] instead of one pass padded to 50."""
    async def scenario():
        record = Recorder()
        batcher = ContinuousBatcher(record, max_batch_tokens=10_000, max_batch_size=64, max_queue=100,
                                    cut_padding=True)
        blocker = asyncio.ensure_future(batcher.run([plan(1, key=("other",))]))
        while not record.entered.is_set():
            await asyncio.sleep(0.001)
        batcher.pass_cost.probed(8, 0.048)  # 40 ms fixed, 1 ms a token
        for tokens in (100, 200, 300):
            batcher.pass_cost.ran(tokens, 0.040 + 0.001 * tokens)
        queued = [asyncio.ensure_future(batcher.run([plan(n)])) for n in (4, 12, 50, 11, 4, 10)]
        while batcher.queued < 6:
            await asyncio.sleep(0.001)
        record.release.set()
        answers = [(await x)[0] for x in [blocker, *queued]]
        await asyncio.to_thread(batcher.close)
        return record.batches, answers

    batches, answers = asyncio.run(scenario())
    assert batches[1:] == [(("k",), [12, 11, 10, 4, 4]), (("k",), [50])]  # the oldest row's piece first
    assert answers == [[1], [4], [12], [50], [11], [4], [10]]


def test_lone_passes_are_not_timed_into_the_line():
    """A quiet spell's one-row passes (nothing in them to cut, and shorter than a pass worth
    timing) are not given to the pass cost: they would push the next burst's batches out of its
    window and leave them uncut."""
    async def scenario():
        batcher = ContinuousBatcher(lambda key, rows: [0] * len(rows), max_queue=100, cut_padding=True)
        for n in (5, 9, 12):
            await batcher.run([plan(n)])
        lone = list(batcher.pass_cost.recent)
        with batcher._cond:
            futures = batcher.submit([plan(n) for n in (7, 3, 9, 5)])
        for f in futures:
            await f[0]
        await asyncio.to_thread(batcher.close)
        return lone, [tokens for tokens, _ in batcher.pass_cost.recent]

    lone, timed = asyncio.run(scenario())
    assert lone == [] and timed == [10, 36]  # the probe (5, 3 padded to 5) and the batch (4 x 9)


def test_the_probe_runs_the_shorter_half_of_the_batch_and_its_answers_go_nowhere():
    calls = []

    def run_rows(key, rows):
        calls.append([len(r.input_ids) for r in rows])
        return [len(r.input_ids) for r in rows]

    async def scenario():
        batcher = ContinuousBatcher(run_rows, max_queue=100, cut_padding=True)
        with batcher._cond:  # four rows queued at once: one batch
            futures = batcher.submit([plan(n) for n in (7, 3, 9, 5)])
        answers = [await f[0] for f in futures]
        await asyncio.to_thread(batcher.close)
        return answers

    answers = asyncio.run(scenario())
    assert calls == [[5, 3], [9, 7, 5, 3]]  # the probe timed once, as any batch
    assert [a[0] for a in answers] == [7, 3, 9, 5]
    assert ContinuousBatcher(lambda k, r: [], cut_padding=False).pass_cost is None


def test_no_probe_while_the_batch_graph_compiles_and_none_timed_as_it_began():
    """Static INT8 starts compiling its batch graph at the first batch and answers from its
    package meanwhile: a probe timed then says nothing of the passes after, so it is not kept,
    and none is taken until the graph is ready."""
    calls, compiling = [], [False]

    def run_rows(key, rows):
        calls.append([len(r.input_ids) for r in rows])
        if len(calls) == 1:
            compiling[0] = True  # the first pass starts the compiling
        return [0] * len(rows)

    async def batch_of_four(batcher):
        with batcher._cond:  # four rows queued at once: one batch
            futures = batcher.submit([plan(n) for n in (7, 3, 9, 5)])
        return [await f[0] for f in futures]

    async def scenario():
        batcher = ContinuousBatcher(run_rows, max_queue=100, cut_padding=True, compiling=lambda: compiling[0])
        await batch_of_four(batcher)
        dropped = batcher.pass_cost.probe is None
        await batch_of_four(batcher)  # still compiling: no probe
        compiling[0] = False
        await batch_of_four(batcher)  # compiled: the probe is taken now
        await asyncio.to_thread(batcher.close)
        return dropped, batcher.pass_cost.probe

    dropped, probe = asyncio.run(scenario())
    half, whole = [[5, 3]], [[9, 7, 5, 3]]
    assert calls == half + whole + whole + half + whole
    assert dropped and probe is not None and probe[0] == 10


def test_with_two_workers_the_probe_waits_for_the_other_batch_and_runs_alone():
    """``workers=2``: a batch of four rows (due for a probe) taken while a batch of three runs
    probes (its shorter half) only once that one has ended, with nothing else in flight."""
    calls, active, first_in, release = [], [0], threading.Event(), threading.Event()
    lock = threading.Lock()

    def run_rows(key, rows):
        with lock:
            active[0] += 1
            calls.append(([len(r.input_ids) for r in rows], active[0]))
        if len(calls) == 1:
            first_in.set()
            assert release.wait(30)
        with lock:
            active[0] -= 1
        return [len(r.input_ids) for r in rows]

    async def scenario():
        batcher = ContinuousBatcher(run_rows, max_queue=100, workers=2, cut_padding=True)
        first = asyncio.ensure_future(batcher.run([plan(4), plan(4), plan(4)]))
        while not first_in.is_set():
            await asyncio.sleep(0.001)
        second = asyncio.ensure_future(batcher.run([plan(n) for n in (6, 2, 5, 3)]))
        while batcher._running < 2:  # the second worker took the four rows
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.05)
        waiting = len(calls)  # its probe waits for the first batch
        release.set()
        answers = [await first, await second]
        await asyncio.to_thread(batcher.close)
        return waiting, answers

    waiting, answers = asyncio.run(scenario())
    assert waiting == 1
    assert calls == [([4, 4, 4], 1), ([3, 2], 1), ([6, 5, 3, 2], 1)]
    assert [a[0] for a in answers] == [[4, 4, 4], [6, 2, 5, 3]]
