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


def test_the_light_client_parses_answers_and_counts_what_fails(bench_module):
    """The httptools load generator against a raw HTTP server: JSON answers parsed, a 4xx
    kept as its status, a connection closed without an answer counted as an error and
    replaced by a new connection, an answer that ends the connection honoured."""
    import asyncio
    import json

    serve = bench_module("serve")

    async def handle(reader, writer):
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            text = json.loads(await reader.readexactly(length))["inputs"]
            if text == "drop":
                writer.close()
                return
            status, body = (422, b'{"error": "bad"}') if text == "bad" else (200, json.dumps([{"label": text}]).encode())
            closing = text == "last"
            writer.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n"
                         % (status, len(body), b"Connection: close\r\n" if closing else b"") + body)
            await writer.drain()
            if closing:
                writer.close()
                return

    async def run():
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            return await serve.load_level(f"http://127.0.0.1:{port}", ["a", "bad", "drop", "last", "b"], 10, 1, 30)

    results, seconds = asyncio.run(run())
    assert [(text, status) for text, status, _, _ in results] == [
        ("a", 200), ("bad", 422), ("drop", "ConnectionError"), ("last", 200), ("b", 200)] * 2
    assert results[0][2] == [{"label": "a"}] and results[1][2] is None and seconds > 0
