"""Serving under load, on loopback: ``bertkit serve`` (fp32, INT8) vs a Hugging Face pipeline
behind the same framework (FastAPI + uvicorn) without dynamic batching.

For each server, a fresh process on 127.0.0.1 gets SST-2 dev sentences, one per request, at
each concurrency of ``--concurrency`` (``--requests`` requests in all, split evenly), and the
script prints requests/s and p50/p95/p99 latency. Every answer is checked: the status must be
200, and bertkit's labels and scores must equal the Python API's (``bertkit predict``'s
code) at the same precision (scores within 1e-4); the baseline's top label is compared with
bertkit fp32. Bounded: each level stops at ``--max-seconds``.

``bertkit serve`` sets glibc malloc to keep freed memory (``bertkit.cpu.keep_freed_memory``);
the baseline runs with glibc's defaults, as a user's pipeline would. The server
``hf pipeline kept`` is the baseline with the same malloc setting as bertkit, to tell the
two gains apart.

    python bench/serve.py --model runs/sst2                       # 10,000 requests in all
    python bench/serve.py --model runs/sst2 --requests 900 --max-seconds 60   # short
    python bench/serve.py --shape base     # a BERT-Base-shaped SST-2 model (see --shape)

``--shape PRESET`` measures a model of that size instead of ``--model``: a randomly initialised
encoder of the preset with the uncased vocabulary, given its SST-2 head by the real
``finetune`` code on 32 training sentences (one short epoch). Its predictions mean nothing;
its cost per request is that of a real model of the size, which is what serving measures
(with BERT-Tiny the forward pass is a small part of a request, so batching has little to
win).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from pydantic import BaseModel

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


class TextBody(BaseModel):
    inputs: str


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="a fine-tuned SST-2 model directory")
    p.add_argument("--shape", help="instead of --model: a model of this preset (base, mini, ...), "
                                   "random weights with an SST-2 head; see above")
    p.add_argument("--requests", type=int, default=10000, help="requests in all (default 10000)")
    p.add_argument("--concurrency", default="1,8,32")
    p.add_argument("--servers", default="bertkit fp32,bertkit int8,hf pipeline",
                   help="comma-separated, of: bertkit fp32, bertkit int8, hf pipeline, hf pipeline kept")
    p.add_argument("--max-seconds", type=float, default=300, help="per concurrency level at most")
    p.add_argument("--max-wait-ms", type=float, default=5.0)
    p.add_argument("--json")
    p.add_argument("--baseline-server", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--keep-freed-memory", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def baseline_app(model_dir: str):
    """The baseline: the HF text-classification pipeline, one call per request."""
    from fastapi import FastAPI
    from transformers import pipeline

    pipe = pipeline("text-classification", model=model_dir, device="cpu")
    app = FastAPI()

    @app.post("/predict")
    def predict(body: TextBody):  # a sync endpoint: FastAPI runs it in its thread pool
        return pipe(body.inputs, top_k=None)

    @app.get("/health")
    def health():
        return {"status": "ok"}

    return app


def shaped_model(shape: str, where: Path) -> str:
    """An SST-2 model directory of preset ``shape`` under ``where`` (see ``--shape``)."""
    import torch

    from bertkit.checkpoint import save_pretrained
    from bertkit.config import BertConfig
    from bertkit.model import BertModel
    from bertkit.tasks import get_task
    from bertkit.tasks.finetune import finetune
    from bertkit.tasks.finetune_config import FinetuneConfig
    from bertkit.tokenizer import BertTokenizer

    tokenizer = BertTokenizer.from_file(DATA / "vocab" / "bert-base-uncased-vocab.txt", lowercase=True)
    torch.manual_seed(0)
    save_pretrained(BertModel(BertConfig.preset(shape)), where / "encoder", tokenizer=tokenizer)
    cfg = FinetuneConfig(epochs=1, batch=16, max_train_examples=32, progress=False)
    finetune(get_task("sst2"), where / "encoder", DATA / "glue" / "SST-2", where / "sst2", cfg)
    return str(where / "sst2")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(server: str, args, port: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if server.startswith("hf pipeline"):
        cmd = [sys.executable, __file__, "--model", args.model, "--baseline-server", "--port", str(port)]
        cmd += ["--keep-freed-memory"] if server == "hf pipeline kept" else []
    else:
        precision = server.split()[-1]
        cmd = [sys.executable, "-m", "bertkit.cli.main", "serve", args.model, "--port", str(port),
               "--precision", precision, "--max-wait-ms", str(args.max_wait_ms), "--max-queue", "4096"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


async def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 180) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"the server exited: {proc.stderr.read()[-2000:]}")
            try:
                if (await client.get(url + "/health")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.3)
    raise SystemExit("the server did not start in time")


async def load_level(url, sentences, count, concurrency, max_seconds):
    """``count`` requests at ``concurrency``; returns (results, seconds)."""
    import httpx

    results = []
    next_index = 0
    deadline = time.monotonic() + max_seconds

    async def worker(client):
        nonlocal next_index
        while next_index < count and time.monotonic() < deadline:
            i = next_index
            next_index += 1
            text = sentences[i % len(sentences)]
            start = time.perf_counter()
            try:
                r = await client.post(url + "/predict", json={"inputs": text})
                body = r.json() if r.status_code == 200 else None
                results.append((text, r.status_code, body, time.perf_counter() - start))
            except httpx.HTTPError as e:
                results.append((text, type(e).__name__, None, time.perf_counter() - start))

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=120) as client:
        start = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        return results, time.perf_counter() - start


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q / 100 * len(values)))] if values else float("nan")


def check(server, results, references):
    """``(failed, wrong, max score difference)`` of one level's results against the Python API.

    fp32: an answer is wrong when a label or a score (beyond 1e-4) differs. INT8 quantises
    each batch's activations with one scale, so its scores move with the other rows of the
    batch (docs/serving.md): an INT8 answer is wrong only when its top label differs; the
    largest score difference is reported. The baseline is compared by top label with fp32.
    """
    failed = sum(1 for _, status, _, _ in results if status != 200)
    wrong, largest = 0, 0.0
    ref = references["int8" if server.endswith("int8") else "fp32"]
    for text, status, body, _ in results:
        if status != 200:
            continue
        want = ref[text]
        scores = {b["label"]: b["score"] for b in want}
        diff = max(abs(a["score"] - scores[a["label"]]) for a in body)
        largest = max(largest, diff)
        label_differs = body[0]["label"] != want[0]["label"]
        if server == "bertkit fp32":
            wrong += label_differs or diff > 1e-4
        else:
            wrong += label_differs
    return failed, wrong, largest


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.baseline_server:
        import uvicorn

        if args.keep_freed_memory:
            from bertkit.cpu import keep_freed_memory

            keep_freed_memory()
        uvicorn.run(baseline_app(args.model), host="127.0.0.1", port=args.port, log_level="warning")
        return 0
    from bertkit.inference import load

    if (args.model is None) == (args.shape is None):
        raise SystemExit("give --model DIR or --shape PRESET (one of them)")
    if args.shape:
        import tempfile

        scratch = tempfile.TemporaryDirectory(prefix="bench-serve-")
        args.model = shaped_model(args.shape, Path(scratch.name))
        print(f"model: {args.shape}-shaped SST-2 classifier, random weights ({args.model})", flush=True)
    dev = DATA / "glue" / "SST-2" / "dev.tsv"
    with open(dev, encoding="utf-8") as f:
        sentences = [r["sentence"] for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
    references = {p: dict(zip(sentences, load(args.model, precision=p).predict(sentences)))
                  for p in ("fp32", "int8")}
    levels = [int(c) for c in args.concurrency.split(",")]
    per_level = args.requests // len(levels)
    rows = []
    print(f"{'server':<16} {'conc':>4} {'done':>6} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
          f"{'failed':>6} {'wrong':>6} {'max diff':>9}", flush=True)
    for server in [s.strip() for s in args.servers.split(",") if s.strip()]:
        port = free_port()
        proc = start(server, args, port)
        try:
            url = f"http://127.0.0.1:{port}"
            asyncio.run(wait_ready(url, proc))
            asyncio.run(load_level(url, sentences, 20, 4, 60))  # warm-up
            for concurrency in levels:
                results, seconds = asyncio.run(load_level(url, sentences, per_level, concurrency, args.max_seconds))
                latencies = [r[3] * 1000 for r in results]
                failed, wrong, largest = check(server, results, references)
                row = {"server": server, "concurrency": concurrency, "requests": len(results),
                       "rps": len(results) / seconds, "p50_ms": percentile(latencies, 50),
                       "p95_ms": percentile(latencies, 95), "p99_ms": percentile(latencies, 99),
                       "failed": failed, "wrong": wrong, "max_score_diff": largest,
                       "not_sent": per_level - len(results)}  # the level hit --max-seconds
                rows.append(row)
                print(f"{server:<16} {concurrency:>4} {len(results):>6} {row['rps']:8.1f} {row['p50_ms']:8.1f} "
                      f"{row['p95_ms']:8.1f} {row['p99_ms']:8.1f} {failed:>6} {wrong:>6} {largest:9.2g}", flush=True)
        finally:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
    by = {(r["server"], r["concurrency"]): r["rps"] for r in rows}
    for server in ("bertkit fp32", "bertkit int8"):
        for baseline in ("hf pipeline", "hf pipeline kept"):
            for c in levels:
                if (server, c) in by and (baseline, c) in by:
                    print(f"{server} / {baseline} at concurrency {c}: x{by[(server, c)] / by[(baseline, c)]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
