"""CPU time per request of a server, by thread, in process: ``bertkit serve``'s app against the
Hugging Face pipeline app of ``bench/serve.py`` (``hf fp32 batched``: the requests waiting while
the pipeline runs go to it as one list), the same SST-2 dev sentences at the same concurrency.

No network and no client: each app is called as an ASGI application, ``--concurrency``
requests in flight at once, so that the figure is the server's own work, which a load
generator on the same two cores blurs (bench/serve.py's own httptools client takes about 0.1 ms of
CPU per request, its aiohttp client 0.2-0.7 ms). Printed per server and round: requests/s (wall; moves with the machine's
load), CPU microseconds per request in all, in the event loop thread (parsing, validation,
tokenising where the server does it there, answers, the web framework) and in the other
threads (the model's worker: batching, forward passes), in the model process of
``--model-process``, and the rows per forward pass. The CPU figures are what a busy machine
moves least. Rounds alternate the servers.

Servers: ``bertkit`` (``serve``'s defaults, one thread), ``bertkit process``
(``--model-process``), ``bertkit padded process`` (``--attention-impl padded``: batches padded
and cut by what a pass costs, not run on their real tokens), ``bertkit compiled process``, ``bertkit bf16`` / ``bf16 process`` /
``bf16 compiled process`` / ``bf16 unpadded``, ``bertkit int8`` (dynamic) and ``bertkit int8
static`` / ``int8 static process`` (``--calibration``: the first 300 sentences of ``--data``'s
train.tsv, as ``bench/serve.py``; measured once its batch graph has compiled); ``hf`` (fp32),
``hf bf16`` (the pipeline's model in bf16) and ``hf int8`` (PyTorch dynamic INT8), all batched.
A bertkit server's name ending in `` uncut`` runs its batches whole, as they gather (no cut by
what a pass costs: ``bertkit.serve.batcher.PassCost``). ``--shape PRESET --vocab VOCAB`` serves a randomly initialised model of that size, as
``bench/serve.py --shape`` does.

    python bench/serve_cpu.py --model runs/sst2 --data ../shared/data/glue/SST-2 --servers "bertkit,bertkit process,hf"
    python bench/serve_cpu.py --model runs/sst2 --profile bertkit     # cProfile of the event loop
    python bench/serve_cpu.py --shape base --vocab VOCAB.txt --servers "bertkit int8 static,hf int8" --requests 320
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # bench/serve.py: the baselines, the calibration sentences
SERVERS = ("bertkit", "bertkit process", "bertkit padded process", "bertkit compiled process", "bertkit bf16", "bertkit bf16 process",
           "bertkit bf16 compiled process", "bertkit bf16 unpadded", "bertkit int8", "bertkit int8 static",
           "bertkit int8 static process", "hf", "hf bf16", "hf int8")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="a fine-tuned SST-2 model directory")
    p.add_argument("--shape", help="instead of --model: a model of this preset (base, mini, ...), random weights")
    p.add_argument("--vocab", help="vocab.txt for --shape")
    p.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "glue" / "SST-2"),
                   help="the SST-2 folder (its dev.tsv)")
    p.add_argument("--servers", default="bertkit,hf", help="comma-separated, of bertkit, hf")
    p.add_argument("--requests", type=int, default=4000, help="requests per server and round (default 4000)")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--hf-batch-size", type=int, default=32)
    p.add_argument("--profile", choices=SERVERS, help="one round of this server under cProfile (event loop)")
    args = p.parse_args(argv)
    for server in args.servers.split(","):
        if server.removesuffix(" uncut") not in SERVERS or (server.endswith(" uncut") and "bertkit" not in server):
            p.error(f"--servers: unknown server {server!r} (choose from {', '.join(SERVERS)})")
    if (args.model is None) == (args.shape is None) or (args.shape and not args.vocab):
        p.error("give --model DIR, or --shape PRESET with --vocab VOCAB")
    if args.requests < 1 or args.concurrency < 1 or args.rounds < 1:
        p.error("--requests, --concurrency and --rounds must be at least 1")
    return args


def stat_cpu(stat: str) -> float:
    """User + system CPU seconds from a Linux ``/proc/.../stat`` file."""
    fields = Path(stat).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` (all its threads)."""
    return stat_cpu(f"/proc/{pid}/stat")


def thread_cpu() -> dict[int, float]:
    """CPU seconds of each thread of this process, by native thread id."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            out[int(tid)] = stat_cpu(f"/proc/self/task/{tid}/stat")
        except OSError:  # the thread ended
            continue
    return out


async def call(app, body: bytes, method: str = "POST", path: str = "/predict", answer: list | None = None) -> int:
    """One request through the ASGI ``app`` (POST /predict unless asked): its status; the
    answer's body appended to ``answer`` where given."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000),
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())]}
    sent, status = False, []

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client never disconnects

    async def send(message):
        if message["type"] == "http.response.start":
            status.append(message["status"])
        elif answer is not None and message["type"] == "http.response.body":
            answer.append(message.get("body", b""))

    await app(scope, receive, send)
    return status[0]


async def start(app):
    """Run ``app``'s lifespan startup (the batcher, the model process) and leave it running;
    the coroutine that shuts it down."""
    inbox, outbox = asyncio.Queue(), asyncio.Queue()
    await inbox.put({"type": "lifespan.startup"})
    task = asyncio.get_running_loop().create_task(
        app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, inbox.get, outbox.put))
    started = await outbox.get()
    if started["type"] != "lifespan.startup.complete":
        raise SystemExit(f"the app did not start: {started}")

    while True:  # static INT8 compiles its batch graph after start-up: measure it once done
        answer = []
        await call(app, b"", "GET", "/info", answer)
        if not json.loads(b"".join(answer) or b"{}").get("bertkit", {}).get("compiling"):
            break
        await asyncio.sleep(1)

    async def stop():
        await inbox.put({"type": "lifespan.shutdown"})
        await outbox.get()
        await task

    return stop


async def drive(app, bodies: list[bytes], concurrency: int) -> None:
    pending = iter(bodies)

    async def client():
        for body in pending:
            status = await call(app, body)
            if status != 200:
                raise SystemExit(f"a request was answered {status}")

    await asyncio.gather(*[client() for _ in range(concurrency)])


async def measure(app, bodies: list[bytes], concurrency: int, profile: bool) -> dict:
    """One round: requests/s and CPU microseconds per request (all, event loop, other threads)."""
    import cProfile
    import pstats

    loop_thread = threading.get_native_id()
    service = getattr(app.state, "service", None)
    batcher = getattr(service, "batcher", None)  # bertkit's: rows per pass
    engine = getattr(service, "engine", None)  # bertkit's --model-process: its CPU counts too
    passes = (batcher.batches_run, batcher.rows_run) if batcher else None
    child = process_cpu(engine.pid) if engine else 0.0
    before, cpu, clock = thread_cpu(), time.process_time(), time.perf_counter()
    profiler = cProfile.Profile() if profile else None
    if profiler:
        profiler.enable()
    await drive(app, bodies, concurrency)
    if profiler:
        profiler.disable()
    seconds, cpu = time.perf_counter() - clock, time.process_time() - cpu
    child = process_cpu(engine.pid) - child if engine else 0.0
    after, n = thread_cpu(), len(bodies)
    loop = after[loop_thread] - before.get(loop_thread, 0.0)
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
    rows_per_pass = ((batcher.rows_run - passes[1]) / max(batcher.batches_run - passes[0], 1)
                     if batcher else float("nan"))
    pass_tokens = service.pass_tokens() if service is not None else None
    return {"pass_tokens": float("nan") if pass_tokens is None else pass_tokens, "req_s": n / seconds, "cpu_us": 1e6 * (cpu + child) / n, "loop_us": 1e6 * loop / n,
            "other_us": 1e6 * (cpu - loop) / n, "child_us": 1e6 * child / n, "rows_per_pass": rows_per_pass}


def build(server: str, args):
    if server.startswith("bertkit"):
        from serve import calibration_file

        from bertkit.serve.app import create_app
        from bertkit.serve.config import ServeConfig

        precision = "bf16" if "bf16" in server else "int8" if "int8" in server else "auto"
        calibration = calibration_file(args.data) if "static" in server else None
        return create_app(ServeConfig(model=args.model, threads=1, max_queue=4096, precision=precision,
                                      calibration=calibration,
                                      compile="on" if "compiled" in server else "auto",
                                      model_process="process" in server,
                                      attention_impl="unpadded" if "unpadded" in server else
                                      "padded" if "padded" in server else "auto"))
    from serve import baseline_app

    precision = "bf16" if "bf16" in server else "int8" if "int8" in server else "fp32"
    return baseline_app(args.model, f"hf {precision} batched", args.hf_batch_size)


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from machine import describe, line

    print(line(describe()), flush=True)
    if args.shape:
        import tempfile

        from serve import shaped_model

        scratch = tempfile.TemporaryDirectory(prefix="bench-serve-cpu-")
        args.model = shaped_model(args.shape, Path(scratch.name), args.vocab, args.data)
        print(f"model: {args.shape}-shaped SST-2 classifier, random weights ({args.model})", flush=True)
    with open(Path(args.data) / "dev.tsv", encoding="utf-8") as f:
        sentences = [row[0] for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)][1:]
    bodies = [json.dumps({"inputs": sentences[i % len(sentences)]}).encode() for i in range(args.requests)]
    servers = args.servers.split(",")
    if args.profile and args.profile not in servers:
        servers.append(args.profile)

    async def run():
        apps = {server: build(server, args) for server in servers}
        stops = []
        for server, app in apps.items():
            stops.append(await start(app))
            if server.endswith(" uncut"):  # batches as they gather, not cut by what a pass costs
                app.state.service.batcher.pass_cost = None
            await drive(app, bodies[:200], args.concurrency)  # warm-up
        rows = {server: [] for server in servers}
        for r in range(args.rounds):
            for server in servers[r % len(servers):] + servers[:r % len(servers)]:
                row = await measure(apps[server], bodies, args.concurrency, False)
                rows[server].append(row)
                print(f"round {r + 1} {server:8s} {row['req_s']:7.0f} req/s  CPU/request {row['cpu_us']:5.0f} us: "
                      f"event loop {row['loop_us']:4.0f}, other threads {row['other_us']:4.0f}, "
                      f"model process {row['child_us']:4.0f}, "
                      f"rows per forward pass {row['rows_per_pass']:.1f}, "
                      f"a pass costs {row['pass_tokens']:.0f} tokens", flush=True)
        if args.profile:
            await measure(apps[args.profile], bodies, args.concurrency, True)
        for stop in stops:
            await stop()
        return rows

    rows = asyncio.run(run())
    print(f"\nmedians over {args.rounds} rounds, {args.requests} requests each, concurrency {args.concurrency}, "
          f"load average {os.getloadavg()[0]:.1f}:")
    print("| server | req/s | CPU us/request | event loop | other threads | model process | rows per pass |\n"
          "|---|---|---|---|---|---|---|")
    for server, found in rows.items():
        med = {k: statistics.median(r[k] for r in found) for k in found[0]}
        print(f"| {server} | {med['req_s']:.0f} | {med['cpu_us']:.0f} | {med['loop_us']:.0f} | {med['other_us']:.0f} "
              f"| {med['child_us']:.0f} | {med['rows_per_pass']:.1f} |")
    os._exit(0)  # the apps' worker threads hold no state worth a clean shutdown here


if __name__ == "__main__":
    raise SystemExit(main())
