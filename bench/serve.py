"""Serving under load, on loopback: ``bertkit serve`` against a Hugging Face pipeline server
made as fair as we could, at the same precision.

Servers (``--servers``, comma-separated):

* ``bertkit fp32`` / ``bertkit int8``: ``bertkit serve`` (continuous batching); ``bertkit int8 x86``:
  the same with its INT8 layers packed for PyTorch's ``x86`` engine (``BERTKIT_INT8_ENGINE=x86``);
  ``bertkit int8 static``: ``bertkit serve --precision int8 --calibration`` (static INT8 through
  PyTorch 2's export route, calibrated on the first 300 sentences of ``--data``'s train.tsv);
* ``hf fp32`` / ``hf int8``: the ``text-classification`` pipeline behind the same framework
  (FastAPI + uvicorn), every model call serialised on ONE thread (a one-worker executor:
  no thread-pool oversubscription), loaded under one intra-op thread as bertkit loads its
  model; ``int8`` is PyTorch dynamic INT8 (``quantize_dynamic`` on every ``nn.Linear``,
  what bertkit's INT8 is too);
* ``hf fp32 batched`` / ``hf int8 batched``: the same, but the requests that arrive while the
  pipeline runs are gathered and given to the pipeline as one list with its own
  ``batch_size`` (``--hf-batch-size``): the pipeline's batching, fed continuously;
* ``bertkit fp32 process`` / ``bertkit int8 process`` / ``bertkit int8 static process`` /
  ``bertkit bf16 process``: the same with ``--model-process`` (the forward passes in a process of their own);
  ``bertkit bf16 unpadded process``: that with ``--attention-impl unpadded`` (bf16 on the real tokens only);
  ``bertkit bf16 auto process``: ``--model-process --runtime auto`` (OpenVINO for the batches where
  ``bertkit.inference.openvino.MEASURED_FASTER`` says it is faster, PyTorch for the rest);
* ``bertkit bf16`` / ``hf bf16`` / ``hf bf16 batched``: ``--precision bf16``, and the pipeline's
  model in bf16 (``model.to(torch.bfloat16)``); answers checked by top label, as INT8's;
* ``bertkit openvino fp32`` / ``bertkit openvino bf16`` / ``bertkit openvino int8``: ``bertkit
  serve --runtime openvino`` (bf16: only where the CPU computes it natively; int8: NNCF static
  INT8 calibrated on the first 300 sentences of ``--data``'s train.tsv); fp32 answers are
  checked within 1e-2, OpenVINO's kernels differing from PyTorch's by ~1e-3, bf16 by top label;
* ``bertkit embed`` / ``st embed``: ``/embed`` (mean pooling, unit vectors) from ``bertkit
  serve`` and from ``SentenceTransformer(dir).encode`` behind the same framework (one thread,
  the waiting requests encoded as one list), on a copy of the model in sentence-transformers'
  layout (``bertkit st-layout``); vectors checked against the Python API's within 1e-4.

Every server runs without an access log (bertkit with ``--no-access-log``, the baselines at
uvicorn's ``warning`` level), as a line per request cost bertkit's server 100-200 us (AMX Xeon).
All servers are started first; then, at each concurrency of ``--concurrency``, the servers'
rounds are interleaved (``--rounds`` rounds, each server in turn, the order rotated each
round) so that a slow period of the shared machine hits all of them. Each answer is checked:
status 200; fp32 servers must give the Python API's labels and scores (within 1e-4); INT8
servers are compared by top label with the fp32 answer (INT8 moves scores). Ratios are printed
only at the same precision (bertkit fp32 / hf fp32, bertkit int8 / hf int8).

    python bench/serve.py --model runs/sst2 --data ../shared/data/glue/SST-2
    python bench/serve.py --shape base --vocab VOCAB.txt --data GLUE/SST-2 --requests 6000

``--shape PRESET`` measures a model of that size instead of ``--model``: a randomly initialised
encoder of the preset with ``--vocab``, given its SST-2 head by the real ``finetune`` code on
32 training sentences. Its predictions mean nothing; its cost per request is that of a real
model of the size. The load generator shares the machine with the servers.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import functools
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

SERVERS = ("bertkit fp32", "bertkit int8", "bertkit int8 x86", "bertkit int8 static", "hf fp32", "hf int8", "hf fp32 batched", "hf int8 batched",
           "bertkit embed", "st embed", "bertkit openvino fp32", "bertkit openvino bf16", "bertkit openvino int8",
           "bertkit fp32 process", "bertkit int8 process", "bertkit int8 static process",
           "bertkit fp32 compiled process", "bertkit bf16", "bertkit bf16 process", "bertkit bf16 unpadded process", "bertkit bf16 auto process",
           "hf bf16", "hf bf16 batched")
CALIBRATION = 300  # SST-2 train sentences the OpenVINO INT8 server is calibrated on
EMBED_POOLING = "mean"  # the embedding servers' pooling (written as the model's sentence-transformers layout)


class TextBody(BaseModel):
    inputs: str


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="a fine-tuned SST-2 model directory")
    p.add_argument("--shape", help="instead of --model: a model of this preset (base, mini, ...), "
                                   "random weights with an SST-2 head; see above")
    p.add_argument("--data", help="the SST-2 folder (dev.tsv; train.tsv for --shape)")
    p.add_argument("--vocab", help="vocab.txt for --shape")
    p.add_argument("--requests", type=int, default=6000, help="requests per server in all (default 6000)")
    p.add_argument("--concurrency", default="1,32")
    p.add_argument("--rounds", type=int, default=4, help="interleaved rounds per level (default 4)")
    p.add_argument("--servers", default=",".join(SERVERS[:4]), help=f"comma-separated, of: {', '.join(SERVERS)}")
    p.add_argument("--hf-batch-size", type=int, default=32, help="the batched HF servers' batch_size")
    p.add_argument("--max-seconds", type=float, default=120, help="per server and round at most")
    p.add_argument("--server-threads", type=int, default=None, metavar="N",
                   help="CPU threads of every server (OMP_NUM_THREADS; default: each library's own); "
                        "1 on a machine where other jobs hold cores, or OpenMP's barriers stall")
    p.add_argument("--server-cpus", type=cpu_list, metavar="LIST",
                   help="CPUs the servers run on (e.g. 0,1 or 0-1), and with --client-cpus the load "
                        "generator on others: on a machine with cores to spare, the client's CPU then "
                        "no longer caps the servers (default: all CPUs for all)")
    p.add_argument("--client-cpus", type=cpu_list, metavar="LIST", help="CPUs of the load generator")
    p.add_argument("--client-processes", type=int, default=1, metavar="K",
                   help="load generator processes, each sending its share of the requests at its share "
                        "of the concurrency (default 1: one client process caps a fast server near its "
                        "own rate on a core; give K > 1 with --client-cpus on a larger machine)")
    p.add_argument("--client", choices=CLIENTS, default="httptools",
                   help="the load generator: httptools (default; about a third of aiohttp's CPU per request) "
                        "or aiohttp (the client of the earlier figures)")
    p.add_argument("--json")
    p.add_argument("--baseline-server", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not args.baseline_server and not args.data:
        p.error("--data is required (the SST-2 folder holding dev.tsv)")
    if args.client_processes < 1:
        p.error("--client-processes must be at least 1")
    return args


def cpu_list(text: str) -> set[int]:
    """``0,1`` / ``0-3,8`` -> the set of CPU numbers."""
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            first, _, last = part.partition("-")
            cpus.update(range(int(first), int(last or first) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a CPU list: {text!r} (e.g. 0,1 or 0-3)") from None
    return cpus


def popen(cmd: list[str], env: dict, args) -> subprocess.Popen:
    """A server process (on ``--server-cpus`` when given)."""
    pin = (lambda: os.sched_setaffinity(0, args.server_cpus)) if args.server_cpus else None
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=pin)


class Gatherer:
    """The baselines' batching: requests that arrive while ``call`` runs on ``one_thread``
    wait, then go to it together (at most 256 texts per call), one answer each; an error
    reaches every caller of that call."""

    def __init__(self, one_thread, call):
        self.one_thread, self.call = one_thread, call
        self.waiting: list = []
        self.draining = None

    async def __call__(self, text: str):
        future = asyncio.get_running_loop().create_future()
        self.waiting.append((text, future))
        if self.draining is None or self.draining.done():
            self.draining = asyncio.ensure_future(self._drain())
        return await future

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while self.waiting:
            taken = self.waiting[:256]
            del self.waiting[:256]
            try:
                answers = await loop.run_in_executor(self.one_thread, self.call, [t for t, _ in taken])
            except Exception as e:
                for _, f in taken:
                    f.set_exception(e)
                continue
            for (_, f), answer in zip(taken, answers):
                f.set_result(answer)


def st_app(model_dir: str, batch_size: int):
    """sentence-transformers behind FastAPI: ``/embed`` as TEI answers it, the waiting requests
    encoded together on one thread."""
    from concurrent.futures import ThreadPoolExecutor

    from fastapi import FastAPI
    from sentence_transformers import SentenceTransformer

    from bertkit.cpu import torch_threads

    with torch_threads(1):
        model = SentenceTransformer(model_dir, device="cpu")
    one_thread = ThreadPoolExecutor(1)
    app = FastAPI()

    def encode(texts):
        return model.encode(texts, batch_size=batch_size, normalize_embeddings=True).tolist()

    gathered = Gatherer(one_thread, lambda texts: [[v] for v in encode(texts)])

    @app.post("/embed")
    async def embed(body: TextBody):
        return await gathered(body.inputs)

    @app.get("/health")
    def health():
        return {"status": "ok"}

    return app


def baseline_app(model_dir: str, server: str, batch_size: int):
    """The baseline: the HF text-classification pipeline, its calls serialised on one thread;
    ``int8`` quantised as bertkit's INT8 is; ``batched`` feeds it the waiting requests as one
    list with its own ``batch_size``."""
    from concurrent.futures import ThreadPoolExecutor

    import torch
    from fastapi import FastAPI
    from transformers import pipeline

    from bertkit.cpu import torch_threads

    with torch_threads(1):  # loaded as bertkit serve loads its model
        pipe = pipeline("text-classification", model=model_dir, device="cpu")
        if "int8" in server:
            pipe.model = torch.ao.quantization.quantize_dynamic(pipe.model, {torch.nn.Linear}, dtype=torch.qint8)
        elif "bf16" in server:
            pipe.model = pipe.model.to(torch.bfloat16)
    one_thread = ThreadPoolExecutor(1)
    app = FastAPI()

    def call_batch(texts: list[str]):
        return pipe(texts, top_k=None, batch_size=batch_size)

    gathered = Gatherer(one_thread, call_batch)

    @app.post("/predict")
    async def predict(body: TextBody):
        loop = asyncio.get_running_loop()
        if "batched" not in server:
            return await loop.run_in_executor(one_thread, lambda: pipe(body.inputs, top_k=None))
        return await gathered(body.inputs)

    @app.get("/health")
    def health():
        return {"status": "ok"}

    return app


def shaped_model(shape: str, where: Path, vocab: str, data: str) -> str:
    """An SST-2 model directory of preset ``shape`` under ``where`` (see ``--shape``)."""
    import torch

    from bertkit.checkpoint import save_pretrained
    from bertkit.config import BertConfig
    from bertkit.finetuning.config import FinetuneConfig
    from bertkit.finetuning.loop import finetune
    from bertkit.model import BertModel
    from bertkit.tasks import get_task
    from bertkit.tokenizer import BertTokenizer

    tokenizer = BertTokenizer.from_file(vocab, lowercase=True)
    torch.manual_seed(0)
    save_pretrained(BertModel(BertConfig.preset(shape)), where / "encoder", tokenizer=tokenizer)
    cfg = FinetuneConfig(epochs=1, batch=16, max_train_examples=32, progress=False)
    finetune(get_task("sst2"), where / "encoder", data, where / "sst2", cfg)
    return str(where / "sst2")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(server: str, args, port: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if args.server_threads:  # torch's and OpenVINO's (bertkit passes torch's count on) thread count
        env["OMP_NUM_THREADS"] = str(args.server_threads)
    if server == "bertkit embed":
        cmd = [sys.executable, "-m", "bertkit.cli.main", "serve", args.embed_model, "--port", str(port),
               "--max-queue", "4096", "--no-access-log"]
        return popen(cmd, env, args)
    if server == "st embed":
        cmd = [sys.executable, __file__, "--model", args.embed_model, "--baseline-server", server,
               "--hf-batch-size", str(args.hf_batch_size), "--port", str(port)]
        return popen(cmd, env, args)
    if server.startswith("hf"):
        cmd = [sys.executable, __file__, "--model", args.model, "--baseline-server", server,
               "--hf-batch-size", str(args.hf_batch_size), "--port", str(port)]
    else:
        precision = precision_of(server)
        if server == "bertkit int8 x86":  # INT8 layers packed for PyTorch's x86 engine, not onednn
            env["BERTKIT_INT8_ENGINE"] = "x86"
        cmd = [sys.executable, "-m", "bertkit.cli.main", "serve", args.model, "--port", str(port),
               "--precision", precision, "--max-queue", "4096", "--no-access-log"]
        if "openvino" in server:
            cmd += ["--runtime", "openvino"]
        if "auto" in server.split():  # --runtime auto: OpenVINO where measured faster (bf16 on AMX: small batches)
            cmd += ["--runtime", "auto"]
        if precision == "int8" and ("openvino" in server or "static" in server.split()):
            cmd += ["--calibration", calibration_file(args.data)]
        if server.endswith(" process"):
            cmd += ["--model-process"]
        if "compiled" in server.split():
            cmd += ["--compile", "on"]
        if "unpadded" in server.split():  # position-wise work on the real tokens only (bf16: asked for)
            cmd += ["--attention-impl", "unpadded"]
    return popen(cmd, env, args)


def precision_of(server: str) -> str:
    """``fp32``, ``bf16`` or ``int8``: the word after ``bertkit``/``hf`` (after ``openvino`` for those)."""
    words = server.split()
    return words[2] if words[1] == "openvino" else words[1]


_keep: list = []  # temporary folders that live as long as this process


@functools.cache
def calibration_file(data: str) -> str:
    """The first :data:`CALIBRATION` sentences of ``data``/train.tsv, one per line, in a
    temporary folder that lives as long as this process."""
    folder = tempfile.TemporaryDirectory(prefix="bench-serve-")
    _keep.append(folder)
    lines = Path(data, "train.tsv").read_text(encoding="utf-8").splitlines()[1 : CALIBRATION + 1]
    path = Path(folder.name) / "calibration.txt"
    path.write_text("".join(line.split("\t")[0] + "\n" for line in lines), encoding="utf-8")
    return str(path)


async def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 900) -> None:
    """Until ``/health`` answers 200 and, for a ``bertkit serve``, ``/info`` no longer says
    ``compiling`` (static INT8's batch graph compiles in the background after the server
    listens: measured before, its batches would run on the slower package)."""
    import httpx

    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"the server exited: {proc.stderr.read()[-2000:]}")
            try:
                if (await client.get(url + "/health")).status_code == 200:
                    info = await client.get(url + "/info")
                    if not (info.status_code == 200 and info.json().get("bertkit", {}).get("compiling")):
                        return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.3)
    raise SystemExit("the server did not start in time")


def pass_tokens(url: str) -> float | None:
    """A ``bertkit serve``'s measured fixed cost of a pass, in padded tokens (``/info``'s
    ``bertkit.pass_tokens``: its batches are cut by it; None where unmeasured or unpadded), so a
    run's spread can be read against it."""
    import httpx

    try:
        return httpx.get(url + "/info", timeout=10).json().get("bertkit", {}).get("pass_tokens")
    except (httpx.HTTPError, ValueError):
        return None


CLIENTS = ("httptools", "aiohttp")


async def load_level(url, sentences, count, concurrency, max_seconds, route="/predict", client="httptools"):
    """``count`` requests at ``concurrency``; returns (results, seconds): per request ``(text,
    status or error name, parsed JSON body or None, seconds)``.

    The load generator shares the cores with the server on a small machine, so its own CPU per
    request caps what a fast server can show. ``httptools`` (the default): one keep-alive
    connection per concurrent request, each request written whole and the answer parsed by
    httptools, uvicorn's C parser (80-140 us of CPU per request on the 2-core VNNI Xeon);
    ``aiohttp``, the client of the earlier figures (270-355 us there; httpx 5.8 ms)."""
    if client == "aiohttp":
        return await _aiohttp_level(url, sentences, count, concurrency, max_seconds, route)
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    head = (f"POST {route} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            "Content-Length: ").encode()
    loop = asyncio.get_running_loop()
    results = []
    texts = _texts(sentences, count, max_seconds)

    async def worker():
        connection = None
        for text in texts:
            start = time.perf_counter()
            try:
                if connection is None or connection.closed:
                    _, connection = await loop.create_connection(_Connection, host, int(port))
                status, body = await connection.post(head, json.dumps({"inputs": text}).encode(), 120)
                seconds = time.perf_counter() - start
                results.append((text, status, json.loads(body) if status == 200 else None, seconds))
            except (OSError, ConnectionError, asyncio.TimeoutError) as e:
                results.append((text, type(e).__name__, None, time.perf_counter() - start))
                connection = None
        if connection is not None:
            connection.transport.close()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results, time.perf_counter() - start


def _texts(sentences, count, max_seconds):
    """The ``count`` texts a level sends (``sentences`` in turn), until ``max_seconds`` have
    passed: one iterator shared by the level's concurrent workers, each taking the next (an
    asyncio worker never pauses inside ``next``)."""
    deadline = time.monotonic() + max_seconds
    for i in range(count):
        if time.monotonic() >= deadline:
            return
        yield sentences[i % len(sentences)]


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection of the ``httptools`` load generator: one request in
    flight at a time; :meth:`post` answers ``(status, body bytes)``, or raises ConnectionError
    when the server closes the connection or answers what httptools cannot parse, and
    TimeoutError after ``timeout`` seconds."""

    def __init__(self):
        import httptools

        self.parser = httptools.HttpResponseParser(self)
        self.transport = None
        self.waiter = None
        self.body = []
        self.closed = False

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        import httptools

        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._fail(ConnectionError(f"unparseable answer: {e}"))
            self.transport.close()

    def on_body(self, body):
        self.body.append(body)

    def on_message_complete(self):
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result((self.parser.get_status_code(), b"".join(self.body)))
        self.body = []
        if not self.parser.should_keep_alive():
            self.closed = True
            self.transport.close()

    def connection_lost(self, exc):
        self.closed = True
        self._fail(ConnectionError(f"connection closed: {exc}" if exc else "connection closed"))

    def _fail(self, error):
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)

    async def post(self, head: bytes, body: bytes, timeout: float):
        self.waiter = waiter = asyncio.get_running_loop().create_future()
        self.transport.write(head + b"%d\r\n\r\n" % len(body) + body)
        timer = asyncio.get_running_loop().call_later(
            timeout, lambda: waiter.done() or waiter.set_exception(asyncio.TimeoutError()))
        try:
            return await waiter
        finally:
            timer.cancel()


async def _aiohttp_level(url, sentences, count, concurrency, max_seconds, route):
    """:func:`load_level` through aiohttp."""
    import aiohttp

    results = []
    texts = _texts(sentences, count, max_seconds)

    async def worker(session):
        for text in texts:
            start = time.perf_counter()
            try:
                async with session.post(url + route, json={"inputs": text}) as r:
                    body = await r.json() if r.status == 200 else None
                    results.append((text, r.status, body, time.perf_counter() - start))
            except (aiohttp.ClientError, asyncio.TimeoutError) as e:
                results.append((text, type(e).__name__, None, time.perf_counter() - start))

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        start = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        return results, time.perf_counter() - start


def run_level(job: tuple) -> tuple[list, float]:
    """:func:`load_level` in a process of a ``--client-processes`` pool."""
    return asyncio.run(load_level(*job))


def drive_level(pool, k, url, sentences, count, concurrency, max_seconds, route,
                client="httptools") -> tuple[list, float]:
    """One round: :func:`load_level` here, or split over ``pool``'s ``k`` processes (each its
    share of ``count`` and of ``concurrency``, rotated texts); the round's seconds are the
    slowest share's, as the shares run at once."""
    if pool is None:
        return asyncio.run(load_level(url, sentences, count, concurrency, max_seconds, route, client))
    jobs = [(url, sentences[i * 97:] + sentences[:i * 97], count // k + (i < count % k),
             concurrency // k + (i < concurrency % k), max_seconds, route, client) for i in range(k)]
    shares = list(pool.map(run_level, [j for j in jobs if j[2] and j[3]]))
    return [r for results, _ in shares for r in results], max(seconds for _, seconds in shares)


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q / 100 * len(values)))] if values else float("nan")


def check(server, results, references):
    """``(failed, wrong, max score difference)`` of one round's results against the Python API.

    fp32 servers: wrong when a label or a score (beyond 1e-4) differs from bertkit fp32's
    answer; bf16 ones when the top label differs. INT8 quantises each batch's activations with one scale, so its scores move with
    the other rows of the batch (docs/serving.md): an INT8 answer is wrong only when its top
    label differs from the fp32 answer; the largest score difference is reported."""
    failed = sum(1 for _, status, _, _ in results if status != 200)
    wrong, largest = 0, 0.0
    for text, status, body, _ in results:
        if status != 200:
            continue
        if server.endswith("embed"):  # one unit vector, [[...]]
            diff = max(abs(a - b) for a, b in zip(body[0], references["embed"][text]))
            largest, wrong = max(largest, diff), wrong + (diff > 1e-4 or len(body) != 1)
            continue
        want = references[text]
        scores = {b["label"]: b["score"] for b in want}
        diff = max(abs(a["score"] - scores[a["label"]]) for a in body)
        largest = max(largest, diff)
        label_differs = body[0]["label"] != want[0]["label"]
        tolerance = 1e-2 if "openvino" in server else 1e-4  # OpenVINO's kernels: ~1e-3 off PyTorch's
        wrong += label_differs or ("fp32" in server and diff > tolerance)
    return failed, wrong, largest


def route_of(server: str) -> str:
    return "/embed" if server.endswith("embed") else "/predict"


def summarise(server, concurrency, rounds, references) -> dict:
    results = [r for rs, _ in rounds for r in rs]
    seconds = sum(t for _, t in rounds)
    latencies = [r[3] * 1000 for r in results]
    failed, wrong, largest = check(server, results, references)
    return {"server": server, "concurrency": concurrency, "requests": len(results),
            "rps": len(results) / seconds if seconds else float("nan"),
            "p50_ms": percentile(latencies, 50), "p95_ms": percentile(latencies, 95),
            "p99_ms": percentile(latencies, 99), "failed": failed, "wrong": wrong,
            "max_score_diff": largest}


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.baseline_server:
        import uvicorn

        app = (st_app(args.model, args.hf_batch_size) if args.baseline_server == "st embed"
               else baseline_app(args.model, args.baseline_server, args.hf_batch_size))
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
        return 0
    from bertkit.inference import load

    if (args.model is None) == (args.shape is None):
        raise SystemExit("give --model DIR or --shape PRESET (one of them)")
    data = Path(args.data)
    dev = data / "dev.tsv" if data.is_dir() else data
    if not dev.is_file():
        raise SystemExit(f"--data {args.data}: no dev.tsv there")
    if args.shape:
        import tempfile

        if not args.vocab:
            raise SystemExit("--shape needs --vocab (a vocab.txt)")
        scratch = tempfile.TemporaryDirectory(prefix="bench-serve-")
        args.model = shaped_model(args.shape, Path(scratch.name), args.vocab, str(dev.parent))
        print(f"model: {args.shape}-shaped SST-2 classifier, random weights ({args.model})", flush=True)
    with open(dev, encoding="utf-8") as f:
        sentences = [r["sentence"] for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
    from machine import describe, line

    machine = describe()
    print(f"{line(machine)}; load generator: {args.client}", flush=True)
    bert = load(args.model, precision="fp32")  # the reference answers: fp32 (auto is bf16 on a wide model)
    references = dict(zip(sentences, bert.predict(sentences)))
    levels = [int(c) for c in args.concurrency.split(",")]
    servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    unknown = set(servers) - set(SERVERS)
    if unknown:
        raise SystemExit(f"--servers: unknown {', '.join(sorted(unknown))}; known: {', '.join(SERVERS)}")
    if any(s.endswith("embed") for s in servers):
        import shutil
        import tempfile

        import numpy as np

        from bertkit.modeldir.st_layout import write_st_layout

        embed_scratch = tempfile.TemporaryDirectory(prefix="bench-serve-st-")
        args.embed_model = str(Path(embed_scratch.name) / "model")
        shutil.copytree(args.model, args.embed_model)
        write_st_layout(args.embed_model, EMBED_POOLING, bert.model.config.hidden_size, bert.max_length)
        vectors = bert.embed(sentences, pool=EMBED_POOLING)
        vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        references["embed"] = dict(zip(sentences, vectors.tolist()))
    per_round = max(args.requests // len(levels) // args.rounds, 1)
    procs, urls, rows, pool = {}, {}, [], None
    try:
        for server in servers:
            port = free_port()
            procs[server] = start(server, args, port)
            urls[server] = f"http://127.0.0.1:{port}"
        if args.client_cpus:  # after the servers started: they keep --server-cpus
            os.sched_setaffinity(0, args.client_cpus)
        if args.client_processes > 1:
            from concurrent.futures import ProcessPoolExecutor

            pool = ProcessPoolExecutor(args.client_processes)
        for server in servers:
            asyncio.run(wait_ready(urls[server], procs[server]))
            asyncio.run(load_level(urls[server], sentences, 40, 4, 60, route_of(server), args.client))  # warm-up
        print(f"{'server':<16} {'conc':>4} {'done':>6} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
              f"{'failed':>6} {'wrong':>6} {'max diff':>9}", flush=True)
        for concurrency in levels:
            rounds = {s: [] for s in servers}
            for r in range(args.rounds):
                order = servers[r % len(servers):] + servers[:r % len(servers)]
                for server in order:
                    offset = (r * per_round) % len(sentences)
                    rotated = sentences[offset:] + sentences[:offset]
                    rounds[server].append(drive_level(pool, args.client_processes, urls[server], rotated, per_round, concurrency,
                                                      args.max_seconds, route_of(server), args.client))
            for server in servers:
                row = summarise(server, concurrency, rounds[server], references)
                row["pass_tokens"] = pass_tokens(urls[server]) if server.startswith("bertkit") else None
                rows.append(row)
                print(f"{server:<16} {concurrency:>4} {row['requests']:>6} {row['rps']:8.1f} {row['p50_ms']:8.1f} "
                      f"{row['p95_ms']:8.1f} {row['p99_ms']:8.1f} {row['failed']:>6} {row['wrong']:>6} "
                      f"{row['max_score_diff']:9.2g}"
                      + ("" if row["pass_tokens"] is None else f"  (pass cost {row['pass_tokens']} tokens)"), flush=True)
    finally:
        if pool is not None:
            pool.shutdown()
        for proc in procs.values():
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
    by = {(r["server"], r["concurrency"]): r for r in rows}
    for c in levels:
        ours, theirs = by.get(("bertkit embed", c)), by.get(("st embed", c))
        if ours and theirs:
            print(f"bertkit embed / st embed at concurrency {c}: x{ours['rps'] / theirs['rps']:.2f} "
                  f"requests/s, p50 {ours['p50_ms']:.1f} vs {theirs['p50_ms']:.1f} ms")
    for mine in ("bertkit fp32", "bertkit int8", "bertkit int8 x86", "bertkit int8 static", "bertkit openvino fp32",
                 "bertkit openvino bf16", "bertkit openvino int8", "bertkit fp32 process", "bertkit int8 process", "bertkit int8 static process",
                 "bertkit fp32 compiled process", "bertkit bf16", "bertkit bf16 process", "bertkit bf16 auto process"):
        precision = precision_of(mine)
        for baseline in (f"hf {precision}", f"hf {precision} batched"):
            for c in levels:
                ours, theirs = by.get((mine, c)), by.get((baseline, c))
                if ours and theirs:
                    print(f"{mine} / {baseline} at concurrency {c}: "
                          f"x{ours['rps'] / theirs['rps']:.2f} requests/s, p50 {ours['p50_ms']:.1f} vs "
                          f"{theirs['p50_ms']:.1f} ms")
    if args.json:  # each row names the machine it ran on
        Path(args.json).write_text(json.dumps([dict(r, cpu_class=machine["cpu_class"], cpu=machine["cpu"],
                                                    client=args.client) for r in rows], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
