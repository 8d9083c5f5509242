"""bench/serve.py's placement options: CPU lists, and the requests split over client processes."""

from __future__ import annotations

import argparse

import pytest


def test_cpu_lists_and_a_bad_one(bench_module):
    serve = bench_module("serve")
    assert serve.cpu_list("0,1") == {0, 1}
    assert serve.cpu_list("0-3,8") == {0, 1, 2, 3, 8}
    with pytest.raises(argparse.ArgumentTypeError, match="not a CPU list: 'a-b'"):
        serve.cpu_list("a-b")
    args = serve.parse_args(["--data", "d", "--server-cpus", "0-1", "--client-cpus", "2,3", "--client-processes", "2"])
    assert args.server_cpus == {0, 1} and args.client_cpus == {2, 3} and args.client_processes == 2


def test_client_processes_share_the_requests_and_the_concurrency(bench_module, monkeypatch):
    serve = bench_module("serve")
    jobs = []

    class Pool:
        def map(self, function, given):
            jobs.extend(given)
            return [([("t", 200, None, 0.01)] * job[2], 1.0 + i) for i, job in enumerate(given)]

    results, seconds = serve.drive_level(Pool(), 3, "http://x", ["a", "b"], 10, 32, 60, "/predict")
    assert [job[2] for job in jobs] == [4, 3, 3] and [job[3] for job in jobs] == [11, 11, 10]
    assert len(results) == 10 and seconds == 3.0  # the slowest share's time
