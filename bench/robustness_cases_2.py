"""Re-run the 178 cases of ``../shared/reports/2026-11-24-new-bad-inputs.md`` (serve,
export-onnx, quantize, downstream, compare-downstream, distill, prune, attention, plot,
--budget, --long-text window, kill -9 and resume) against this tree.

Usage: ``python bench/robustness_cases_2.py [SCRATCH_DIR] [--only 9,10,...] [--jobs 2]``
(needs ``../shared/data`` beside the repository). Same machinery and verdicts as
``bench/robustness_cases.py`` (CLEAR ERROR, UNCLEAR ERROR, SILENT WRONG, WARNED, OK, TRACEBACK,
HANG, CRASH, FAILED when an "ok" case did not do what it should); HTTP cases start a real
``bertkit serve`` on 127.0.0.1 and read its status, body and console (a 500, or a traceback
on the console, is a TRACEBACK). A case is ``(number, name, kind, command, expect)``: ``kind``
"error" (an error naming ``expect`` is the right answer), "ok" or "warn" (exit 0, ``expect``
matched), or "http" with ``command`` a request spec. Writes ``SCRATCH_DIR/results-new.json``
and prints the Markdown table of ``docs/robustness.md``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from robustness_cases import GLUE, PY, ROOT, SHARED, TINY, B, _line, run, verdict  # noqa: E402

BASE_VOCAB = SHARED / "vocab" / "bert-base-uncased-vocab.txt"
PYDOCS = SHARED / "corpus" / "python-docs.txt"
SST = f"--data {GLUE}/SST-2"
FT = f"--model {TINY} {SST} --max-train-examples 200 --epochs 1 --max-seq-length 64 --batch-size 16 --no-progress"
DS = f"--teacher ft_sst2 --student-layers 1 {SST} --max-train-examples 200 --epochs 1 --max-seq-length 64 --no-progress"
PR = f"--task sst2 {SST} --importance-examples 64 --max-seq-length 64 --no-progress"
PT = f"--data pd64 --vocab {BASE_VOCAB} --model-size tiny --batch-size 8 --no-progress"
DSTREAM = f"--data {GLUE} --max-seq-length 64 --lrs 1e-4 --no-progress"
UNF = (f"{B} finetune sst2 --model {TINY} {SST} --max-train-examples 600 --epochs 3 --max-seq-length 64 "
       "--batch-size 16 --lr 1e-4 --no-progress")


def kill_when(cmd: str, path: str, out: str) -> str:
    """Bash: run ``cmd`` in the background and kill -9 it once ``path`` exists (then 0.2 s)."""
    return (f"({cmd}) >/dev/null 2>&1 & P=$!; for i in $(seq 1 3000); do test -e {path} && break; "
            f"kill -0 $P 2>/dev/null || break; sleep 0.1; done; sleep 0.2; kill -9 $P 2>/dev/null; "
            f"wait $P 2>/dev/null; test -e {out}")


def setup(s: Path) -> None:
    """The models and data the cases use (as in the report's setup), made with bertkit."""
    steps = [
        ("ft_sst2", f"{B} finetune sst2 {FT} --out ft_sst2"),
        ("ft_unf/.unfinished.json", kill_when(f"{UNF} --out ft_unf", "ft_unf/.resume.pt", "ft_unf/config.json")),
        ("pr_half", f"{B} prune ft_sst2 {PR} --heads 0.5 --out pr_half"),
        ("q8", f"{B} quantize ft_sst2 --out q8"),
        ("ds_base", f"{B} distill sst2 {DS} --out ds_base"),
        ("pd64", f"head -3000 {PYDOCS} > corp3000.txt && {B} pretrain-data --input corp3000.txt --vocab "
                 f"{BASE_VOCAB} --output pd64 --max-seq-length 64 --dupe-factor 1 --no-progress"),
        ("dsref", f"{B} downstream {TINY} --tasks sst2,rte --seeds 1,2 --epochs 2 --max-train-examples 300 "
                  f"{DSTREAM} --out dsref"),
        ("dsx3", f"{B} downstream {TINY} --tasks sst2 --seeds 1 --epochs 1 --max-train-examples 200 "
                 f"{DSTREAM} --out dsx3"),
        ("ft_ref", f"{B} finetune sst2 --model {TINY} {SST} --max-train-examples 600 --epochs 3 --max-seq-length 64 "
                   "--batch-size 16 --lr 1e-4 --no-progress --out ft_ref"),
    ]
    for done, cmd in steps:
        if (s / done).exists():
            continue
        code, out, err, _ = run(cmd, s, timeout=1800)
        if not (s / done).exists():
            raise SystemExit(f"setup step failed ({code}): {cmd}\n{err[-2000:]}")
    (s / "p.jsonl").write_text('{"sentence": "a great film"}\n')
    (s / "long.jsonl").write_text(json.dumps({"sentence": " ".join(["a good film"] * 100)}) + "\n"
                                  + '{"sentence": "short"}\n')
    for name in ("emptydir", "existing_dir", "nosteps", "badlog"):
        (s / name).mkdir(exist_ok=True)
    (s / "nosteps" / "log.jsonl").write_text('{"event": "start"}\n')
    (s / "badlog" / "log.jsonl").write_text('not json\n{"step": 1, "loss": 1.0}\n')  # a torn last line is skipped
    (s / "emptydir" / "results.json").write_text('{"tasks": "x"}')
    (s / "existing.onnx").write_text("text")
    if not (s / "nanlog").exists():  # the log of a run whose loss is NaN at every step
        (s / "nanlog").mkdir()
        lines = [{"event": "train", "lr": 1e-4, "batch": 16, "epochs": 1, "seed": 42, "epoch": 1,
                  "step": k, "steps": 13, "loss": float("nan"), "lr_now": 1e-4} for k in range(1, 14)]
        (s / "nanlog" / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))


# ------------------------------------------------------------------ HTTP
class Server:
    """``bertkit serve MODEL ARGS`` on a free port; its console goes to a file."""

    def __init__(self, s: Path, model: str, args: str = ""):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.log = s / f"serve-{self.port}.log"
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "BERTKIT_DEBUG": ""}
        cmd = [PY, "-m", "bertkit.cli.main", "serve", model, "--host", "127.0.0.1", "--port", str(self.port),
               *args.split()]
        self.proc = subprocess.Popen(cmd, cwd=s, env=env, stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        for _ in range(1200):
            if self.proc.poll() is not None:
                break
            try:
                if self.request("GET", "/health", timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)

    def console(self) -> str:
        return self.log.read_text(errors="replace")

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
                timeout: float = 300) -> tuple[int, dict, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        text = response.read().decode(errors="replace")
        conn.close()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, text

    def raw(self, data: bytes, close_after: bool = False, timeout: float = 30) -> str:
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
            sock.sendall(data)
            if close_after:
                return ""
            chunks = []
            while True:
                try:
                    chunk = sock.recv(65536)
                except TimeoutError:
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")

    def stop(self, sig=signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def post(server: Server, path: str, obj, headers=None):
    body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return server.request("POST", path, body, {"Content-Type": "application/json", **(headers or {})})


def judge(kind: str, status: int, body: str, expect: str, console_before: int, server: Server,
          extra_ok: bool = True) -> str:
    """The verdict of one HTTP answer (``kind``: error / ok / tei-error)."""
    if status >= 500 and status != 503 or "Traceback" in server.console()[console_before:]:
        return "TRACEBACK"
    matched = bool(re.search(expect, body, re.S)) if expect else True
    if kind == "error":
        if status == 200:
            return "SILENT WRONG"
        return "CLEAR ERROR" if 400 <= status < 500 and matched else "UNCLEAR ERROR"
    return "OK" if status == 200 and matched and extra_ok else "FAILED"


BIG = "word " * 3000
HTTP_CASES = [  # (number, name, server, kind, path, body (obj or bytes), headers, expect)
    ("1", "serve: malformed JSON", "default", "error", "/predict", b'{"inputs": "good"', None, r"malformed JSON"),
    ("2", "serve: trailing garbage", "default", "error", "/predict", b'{"inputs": "good"} xyz', None, r"malformed JSON"),
    ("3", "serve: inputs is an int", "default", "error", "/predict", {"inputs": 5}, None, r"expected a string.*got int"),
    ("4", "serve: inputs null", "default", "error", "/predict", {"inputs": None}, None, r"null"),
    ("5", "serve: empty list", "default", "error", "/predict", {"inputs": []}, None, r"empty list"),
    ("6", "serve: 3-deep nested list", "default", "error", "/predict", {"inputs": [[["a"]]]}, None, r"expected \[string\]"),
    ("7", "serve: mixed item types", "default", "error", "/predict", {"inputs": [["a"], 3, None]}, None, r"inputs\[1\]"),
    ("8", "serve: whitespace-only text", "default", "error", "/predict", {"inputs": "   \t\n "}, None, r"cannot be empty"),
    ("9", "serve: control characters only", "default", "error", "/predict", {"inputs": "\x00\x01\x02"}, None, r"no tokens"),
    ("10", "serve: zero-width spaces only", "default", "error", "/predict", {"inputs": "\u200b\u200b"}, None, r"no tokens"),
    ("11", "serve: lone surrogate", "default", "ok", "/predict", b'{"inputs": "\\ud800 bad"}', None, r"score"),
    ("12", "serve: NUL inside text", "default", "ok", "/predict", {"inputs": "good\x00film"}, None, r"score"),
    ("13", "serve: RTL override + emoji ZWJ + Arabic", "default", "ok", "/predict",
     {"inputs": "\u202e👨\u200d👩 العربية"}, None, r"score"),
    ("14", "serve: list of pairs on a single-sentence model", "default", "error", "/predict", {"inputs": [["a", "b"]]},
     None, r"pair"),
    ("15", "serve: body is a JSON list", "default", "error", "/predict", ["good"], None, r"dictionary|object"),
    ("16", "serve: empty body", "default", "error", "/predict", b"", None, r"required|empty"),
    ("17", "serve: JSON body with Content-Type text/plain", "default", "error", "/predict", b'{"inputs": "good"}',
     {"Content-Type": "text/plain"}, r"Content-Type"),
    ("18", "serve: JSON body with no Content-Type", "default", "error", "/predict", b'{"inputs": "good"}',
     {"Content-Type": ""}, r"Content-Type"),
    ("19", "serve: form-encoded body", "default", "error", "/predict", b"inputs=good",
     {"Content-Type": "application/x-www-form-urlencoded"}, r"dictionary|Content-Type|JSON"),
    ("20", "serve: Latin-1 bytes in JSON body", "default", "error", "/predict", b'{"inputs": "caf\xe9"}', None,
     r'"error".*(UTF-8|utf-8)'),
    ("21", "serve: 100,000-deep nested brackets", "default", "error", "/predict",
     b'{"inputs": ' + b"[" * 100000 + b"]" * 100000 + b"}", None, r'"error"'),
    # TEI's grammar (the TEI work): unknown fields are refused, not ignored; a batch is a list of lists
    ("24", "serve: unknown extra field", "default", "error", "/predict", {"inputs": "good", "foo": 1}, None,
     r"foo: Extra inputs"),
    ("25", "serve: truncate given as string", "default", "error", "/predict",
     {"inputs": "good " * 200, "truncate": "no"}, None, r"longer than the model's limit"),
    ("26", "serve: fill-mask on a classifier", "default", "error", "/fill-mask", {"inputs": "the [MASK] ."}, None,
     r"no masked-LM head"),
    ("27", "serve: embed layers out of range", "default", "error", "/embed", {"inputs": ["a"], "layers": [99]}, None,
     r"layers must index"),
    ("28", "serve: embed layers empty", "default", "error", "/embed", {"inputs": ["a"], "layers": []}, None, r"layers"),
    ("29", "serve: embed layers duplicated", "default", "ok", "/embed", {"inputs": ["a"], "layers": [-1, -1]}, None, r""),
    ("30", "serve: embed layer as float", "default", "error", "/embed", {"inputs": ["a"], "layers": [-1.5]}, None,
     r"integer"),
    ("31", "serve: embed pooling max", "default", "error", "/embed", {"inputs": ["a"], "pooling": "max"}, None,
     r"pooling"),
    ("32", "serve: attention layer out of range", "default", "error", "/attention",
     {"inputs": "a film", "layer": 99}, None, r"layer must be"),
    ("33", "serve: attention head out of range", "default", "error", "/attention",
     {"inputs": "a film", "head": 9}, None, r"head must be"),
    ("34", "serve: attention head negative", "default", "error", "/attention",
     {"inputs": "a film", "head": -1}, None, r"head must be"),
    ("35", "serve: attention layer = true", "default", "error", "/attention",
     {"inputs": "a film", "layer": True, "head": 0}, None, r"layer.*integer"),
    ("36", "serve: attention on a 3,000-word text", "default", "error", "/attention",
     {"inputs": BIG, "layer": 0, "head": 0}, None, r"more than the model's limit|longer than"),
    ("37", "serve: attention with a list", "default", "error", "/attention", {"inputs": ["a", "b"]}, None, r"string"),
    ("38", "serve: attention layer 1e400", "default", "error", "/attention", b'{"inputs": "a", "layer": 1e400}',
     None, r"layer"),
    ("39", "serve: 65 inputs", "default", "error", "/predict", {"inputs": [["good"]] * 65}, None, r"--max-items"),
    ("40", "serve: 10,000 inputs", "default", "error", "/predict", {"inputs": [["good"]] * 10000}, None,
     r"--max-items|payload-limit"),
    # a 5 MB body passes TEI's default --payload-limit (2 MB) no more than TEI's own server
    ("41", "serve: 5 MB text", "default", "error", "/predict", {"inputs": "good film " * 500000}, None,
     r"payload-limit"),
    ("42", "serve: 5 MB text, truncate false", "default", "error", "/predict",
     {"inputs": "good film " * 500000, "truncate": False}, None, r"payload-limit|longer than"),
    ("43", "serve: 64 x 1 MB texts", "default", "error", "/predict", {"inputs": [["good film " * 100000]] * 64},
     None, r"payload-limit"),
    ("51", "serve: duplicate JSON keys", "default", "ok", "/predict", b'{"inputs": "terrible", "inputs": "great"}',
     None, r"score"),
    ("54", "serve: --long-text window --stride 1, 2,000-token text", "window", "error", "/predict",
     {"inputs": "good " * 2000}, None, r"more than the queue holds"),
    ("55", "serve: same server, 5 MB text", "window", "error", "/predict", {"inputs": "good film " * 500000},
     None, r"payload-limit"),
    ("56", "serve: --max-queue 1, request with 2 inputs", "queue1", "error", "/predict",
     {"inputs": [["a great film"], ["dull"]]}, None, r"--max-queue"),
    ("57", "serve: --max-batch-tokens 1", "tokens1", "ok", "/predict", {"inputs": [["a great film"], ["dull"]]}, None,
     r"score"),
    ("62", "serve: /attention on a pruned layer", "pruned", "error", "/attention",
     {"inputs": "a great film", "layer": 0, "head": 1}, None, r"head must be in 0\.\.0"),
]
SERVERS = {"default": ("ft_sst2", ""), "window": ("ft_sst2", "--long-text window --stride 1"),
           "queue1": ("ft_sst2", "--max-queue 1"), "tokens1": ("ft_sst2", "--max-batch-tokens 1"),
           "pruned": ("pr_half", "")}


SPECIAL = {"22", "23", "44", "45", "46", "47", "48", "49", "50", "59"}  # special_http's cases


def http_cases(s: Path, only: set[str] | None) -> list[dict]:
    results = []
    by_server: dict[str, list] = {}
    for case in HTTP_CASES:
        if only is None or case[0] in only:
            by_server.setdefault(case[2], []).append(case)
    if only is None or only & SPECIAL:
        by_server.setdefault("default", [])
    for key, cases in by_server.items():
        model, args = SERVERS[key]
        server = Server(s, model, args)
        try:
            for number, name, _, kind, path, body, headers, expect in cases:
                before = len(server.console())
                start = time.perf_counter()
                try:
                    status, head, text = post(server, path, body, headers)
                    shown = f"{status} {text[:200]}"
                    extra = True
                    if number == "29":
                        extra = len(json.loads(text)[0]) == 2 * 128
                    v = judge(kind, status, text, expect, before, server, extra)
                except OSError as e:
                    v, shown = "FAILED", f"{type(e).__name__}: {e}"
                results.append({"number": number, "name": name, "command": f"POST {path} ({key} server)",
                                "exit": None, "verdict": v, "shown": shown.replace("\n", " ")[:240],
                                "seconds": round(time.perf_counter() - start, 1)})
                print(f"{v:13} #{number} {name}", file=sys.stderr, flush=True)
            if key == "default" and (only is None or only & SPECIAL):
                results += special_http(s, server, only)
        finally:
            server.stop()
    if only is None or only & {"52", "53", "58", "61", "63"}:
        results += lifecycle_http(s, only)
    return results


def _result(number, name, command, verdict_, shown, seconds=0.0):
    print(f"{verdict_:13} #{number} {name}", file=sys.stderr, flush=True)
    return {"number": number, "name": name, "command": command, "exit": None, "verdict": verdict_,
            "shown": str(shown).replace("\n", " ")[:240], "seconds": round(seconds, 1)}


def special_http(s: Path, server: Server, only) -> list[dict]:
    """Routes, methods, concurrency, disconnects and raw requests on the default server."""
    out = []
    def want(n):
        return (only is None or n in only)
    if want("22"):
        status, _, text = post(server, "/predictt", {"inputs": "good"})
        out.append(_result("22", "serve: unknown route", "POST /predictt", "OK" if status == 404 else "FAILED",
                           f"{status} {text}"))
    if want("23"):
        a, _, t1 = server.request("GET", "/predict")
        b, _, t2 = server.request("DELETE", "/health")
        out.append(_result("23", "serve: wrong method", "GET /predict; DELETE /health",
                           "OK" if a == b == 405 else "FAILED", f"{a} {t1} / {b} {t2}"))
    if want("44") or want("45"):
        import random

        rng = random.Random(0)
        words = "good bad film great dull plot acting lovely awful".split()

        def one(k, mixed):
            path = ["/predict", "/embed", "/attention"][k % 3] if mixed else "/predict"
            # /attention refuses a text over the model's limit (413, by design): keep those within it
            text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 60 if path == "/attention" else 80)))
            body = {"inputs": text} if path != "/attention" else {"inputs": text, "layer": 0, "head": 0}
            return post(server, path, body)[0]

        for number in ("44", "45"):
            if want(number):
                start = time.perf_counter()
                with ThreadPoolExecutor(32) as pool:
                    codes = list(pool.map(lambda k, n=number: one(k, n == "45"), range(300)))
                ok = sum(c == 200 for c in codes)
                out.append(_result(number, "serve: 300 concurrent requests" + (" (mixed routes)" if number == "45" else ""),
                                   "300 requests, 32 threads", "OK" if ok == 300 else "FAILED",
                                   f"{ok} of 300 answered 200", time.perf_counter() - start))
    if want("46"):
        server.raw(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Content-Length: 1000\r\n\r\n{\"inputs\": \"go", close_after=True)
        status = server.request("GET", "/health")[0]
        out.append(_result("46", "serve: client disconnects mid-body", "Content-Length 1000, 14 bytes sent",
                           "OK" if status == 200 else "FAILED", f"/health {status}"))
    if want("47"):
        body = json.dumps({"inputs": [["good film " * 20]] * 64}).encode()
        for _ in range(20):
            server.raw(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       + f"Content-Length: {len(body)}\r\n\r\n".encode() + body, close_after=True)
        status = server.request("GET", "/health")[0]
        out.append(_result("47", "serve: 20 requests abandoned after sending", "20 x 64 items, closed unread",
                           "OK" if status == 200 else "FAILED", f"/health {status}"))
    if want("48"):
        socks = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(20)]
        for sock in socks:
            sock.sendall(b"POST /predict HTTP/1.1\r\n")
        start = time.perf_counter()
        status = server.request("GET", "/health", timeout=30)[0]
        took = time.perf_counter() - start
        for sock in socks:
            sock.close()
        out.append(_result("48", "serve: 20 half-open connections", "20 sockets, request line only",
                           "OK" if status == 200 else "FAILED", f"/health {status} in {took:.2f} s"))
    if want("49"):
        text = server.raw(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          b"Content-Length: -5\r\nConnection: close\r\n\r\n", timeout=10)
        out.append(_result("49", "serve: negative Content-Length", "Content-Length: -5",
                           "OK" if " 400 " in text.split("\r\n")[0] + " " else "FAILED", text.split("\r\n")[0]))
    if want("50"):
        body = b'{"inputs": "good"}'
        for _attempt in range(20):  # the floods above may leave the queue full: 429 + Retry-After
            text = server.raw(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                              + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n", timeout=30)
            if " 429 " not in text.split("\r\n")[0] + " ":
                break
            time.sleep(1.0)
        out.append(_result("50", "serve: chunked request body", "Transfer-Encoding: chunked",
                           "OK" if " 200 " in text.split("\r\n")[0] + " " else "FAILED", text.split("\r\n")[0]))
    if want("59"):
        code, _, err, secs = run(f"{B} serve ft_sst2 --host 127.0.0.1 --port {server.port}", s, timeout=300)
        out.append(_result("59", "serve: port in use", f"bertkit serve ft_sst2 --port {server.port} (taken)",
                           verdict("error", r"--port \d+: cannot listen", code, "", err), _line(err), secs))
    return out


def lifecycle_http(s: Path, only) -> list[dict]:
    """SIGTERM and kill -9 under load, a pending batch at shutdown, NaN and unfinished models."""
    out = []
    def want(n):
        return (only is None or n in only)
    if want("52"):
        server = Server(s, "ft_sst2")
        body = {"inputs": [["a great film with a plot"]] * 64}

        def load_one(_):
            try:
                status, _, text = post(server, "/predict", body)
                return "ok" if status == 200 and len(json.loads(text)) == 64 else f"bad {status}"
            except (OSError, http.client.HTTPException):
                return "refused"

        with ThreadPoolExecutor(16) as pool:
            futures = [pool.submit(load_one, k) for k in range(200)]
            time.sleep(1.0)
            server.proc.send_signal(signal.SIGTERM)
            answers = [f.result() for f in futures]
        exited = server.proc.wait(timeout=300) is not None
        bad = [a for a in answers if a.startswith("bad")]
        out.append(_result("52", "serve: SIGTERM during load", "200 x 64-item requests, 16 threads, SIGTERM at 1 s",
                           "OK" if exited and not bad else "FAILED",
                           f"{answers.count('ok')} answered 200, {answers.count('refused')} refused, {len(bad)} bad"))
    if want("53"):
        before = sorted(p.name for p in (s / "ft_sst2").iterdir())
        server = Server(s, "ft_sst2", "--precision int8")
        with ThreadPoolExecutor(8) as pool:
            for _k in range(40):
                pool.submit(lambda: post(server, "/predict", {"inputs": [["good"]] * 8}) if server.proc.poll() is None else None)
            time.sleep(0.5)
            server.stop(signal.SIGKILL)
        after = sorted(p.name for p in (s / "ft_sst2").iterdir())
        out.append(_result("53", "serve: kill -9 under load (--precision int8)", "serve ft_sst2 --precision int8; kill -9",
                           "OK" if before == after else "FAILED", f"ft_sst2 listing unchanged: {before == after}"))
    if want("58"):
        server = Server(s, "ft_sst2", "")  # --max-wait-ms is gone: continuous batching never waits
        try:
            post_in_thread = ThreadPoolExecutor(1)
            pending = post_in_thread.submit(lambda: post(server, "/predict", {"inputs": "good"}))
            time.sleep(1.0)
            server.proc.send_signal(signal.SIGTERM)
            code = server.proc.wait(timeout=300)
            status = pending.result(timeout=60)[0]
        finally:
            server.stop()
        out.append(_result("58", "serve: --max-wait-ms 20000 then SIGTERM", "a request pending in its batch, SIGTERM",
                           "OK" if status == 200 and code is not None else "FAILED",
                           f"the pending request got {status}; the server exited {code}"))
    if want("61"):
        code, o, err, secs = run(f"{B} finetune sst2 {FT.replace('--epochs 1', '--epochs 1 --lr 1e6')} --out ft_lrhuge",
                                 s, timeout=600)
        v = verdict("error", r"training diverged at step \d+", code, o, err)
        out.append(_result("61", "serve: model whose outputs are NaN (made by finetune --lr 1e6)",
                           "bertkit finetune sst2 ... --lr 1e6 --out ft_lrhuge (then serve it)", v, _line(err), secs))
    if want("63"):
        server = Server(s, "ft_unf")
        try:
            console = server.console()
        finally:
            server.stop()
        out.append(_result("63", "serve: an unfinished fine-tuning run", "bertkit serve ft_unf",
                           "WARNED" if "unfinished fine-tuning run" in console else "SILENT WRONG",
                           next((x for x in console.splitlines() if "warning" in x), console[:200])))
    return out


# ------------------------------------------------------------------ CLI
BUDGET = f"{B} pretrain {PT} --out ptb"
CLI_CASES = [
    ("60", "serve: --stride equal to window", f"{B} serve ft_sst2 --long-text window --stride 62", "error", r"--stride=62 must be"),
    ("64", "export-onnx to an existing directory", f"{B} export-onnx ft_sst2 --out existing_dir; R=$?; ls -a | grep -c 'tmp$'; exit $R", "error", r"(?s)^0\n.*existing_dir: the --out ONNX file is a directory"),
    ("65", "export-onnx to an unwritable place", f"{B} export-onnx ft_sst2 --out /proc/x.onnx", "error", r"/proc/x\.onnx"),
    ("66", "export-onnx under a file", f"{B} export-onnx ft_sst2 --out /etc/passwd/x.onnx", "error", r"/etc/passwd"),
    ("67", "export-onnx without .onnx suffix", f"{B} export-onnx ft_sst2 --out plainname", "ok", ""),
    ("68", "export-onnx --opset 3", f"{B} export-onnx ft_sst2 --out o1.onnx --opset 3", "error", r"opset"),
    ("69", "export-onnx missing model", f"{B} export-onnx nonexist --out o2.onnx", "error", r"nonexist"),
    ("70", "export-onnx --int8", f"{B} export-onnx ft_sst2 --out i8.onnx --int8", "ok", r"wrote INT8 ONNX"),
    ("71", "export-onnx over an existing file", f"{B} export-onnx ft_sst2 --out existing.onnx", "ok", ""),
    ("72", "export-onnx of a PyTorch INT8 dir", f"{B} export-onnx q8 --out q8.onnx", "error", r"PyTorch INT8"),
    ("73", "export-onnx killed (-9)", f"({B} export-onnx ft_sst2 --out ok_k.onnx >/dev/null 2>&1 & P=$!; sleep 1.5; kill -9 $P; wait $P); test -e ok_k.onnx && {PY} -c \"import onnx; onnx.load('ok_k.onnx')\" || echo 'no final file'", "ok", r"no final file|^$"),
    ("74", "prune --heads 0", f"{B} prune ft_sst2 {PR} --heads 0 --out pr_zero", "error", r"--heads 0"),
    ("75", "prune --heads 1 (a count)", f"{B} prune ft_sst2 {PR} --heads 1 --out pr_one", "ok", ""),
    ("76", "prune --heads 1.0", f"{B} prune ft_sst2 {PR} --heads 1.0 --out pr_x", "error", r"--heads 1.0"),
    ("77", "prune --heads 1.5", f"{B} prune ft_sst2 {PR} --heads 1.5 --out pr_x", "error", r"--heads 1.5"),
    ("78", "prune --heads -0.5", f"{B} prune ft_sst2 {PR} --heads -0.5 --out pr_x", "error", r"--heads -0.5"),
    ("79", "prune --heads 5 of 4", f"{B} prune ft_sst2 {PR} --heads 5 --out pr_x", "error", r"would remove 5 of the 4"),
    ("80", "prune an already-pruned model", f"{B} prune pr_half {PR} --heads 1 --out pr_x", "error", r"cannot remove 1 heads"),
    ("81", "prune pruned model, fraction", f"{B} prune pr_half {PR} --heads 0.99 --out pr_x", "error", r"would remove 2 of the 2"),
    ("82", "prune in place", f"{B} prune ft_sst2 {PR} --heads 1 --out pr_inplace >/dev/null && {B} prune pr_inplace {PR} --heads 1 --out pr_inplace", "error", r"would overwrite the MODEL_DIR"),  # refused since issue 36: an output never replaces its input
    ("83", "prune --curve bad", f"{B} prune ft_sst2 {PR} --heads 1 --curve 0.5,abc --out pr_x", "error", r"--curve"),
    ("84", "prune with another task's data", f"{B} prune ft_sst2 --task rte --data {GLUE}/RTE --importance-examples 64 --max-seq-length 64 --heads 1 --out pr_x", "error", r"task rte has labels"),
    ("85", "attention CLI on a pruned layer", f"{B} attention pr_half 'a gripping film' --layer 0 --head 1 --out att_pr.png", "error", r"head must be in 0\.\.0 \(layer 0 keeps 1 of 2 heads"),
    ("86", "--stride 0", f"{B} predict sst2 --model ft_sst2 --input long.jsonl --output o.jsonl --long-text window --stride 0", "error", r"--stride"),
    ("87", "--stride = window (62)", f"{B} predict sst2 --model ft_sst2 --input long.jsonl --output o.jsonl --long-text window --stride 62", "error", r"--stride=62"),
    ("88", "--stride = max length (64)", f"{B} predict sst2 --model ft_sst2 --input long.jsonl --output o.jsonl --long-text window --stride 64", "error", r"--stride=64"),
    ("89", "--stride -5", f"{B} predict sst2 --model ft_sst2 --input long.jsonl --output o.jsonl --long-text window --stride -5", "error", r"--stride"),
    ("90", "--stride 1000", f"{B} predict sst2 --model ft_sst2 --input long.jsonl --output o.jsonl --long-text window --stride 1000", "error", r"--stride=1000"),
    ("91", "--stride 1", f"{B} predict sst2 --model ft_sst2 --input long.jsonl --output o.jsonl --long-text window --stride 1", "ok", ""),
    ("92", "--stride 1.5", f"{B} predict sst2 --model ft_sst2 --input long.jsonl --output o.jsonl --long-text window --stride 1.5", "error", r"1\.5"),
    ("93", "--stride without --long-text window", f"{B} predict sst2 --model ft_sst2 --input long.jsonl --output o.jsonl --stride 10", "error", r"--stride 10 only apply with --long-text window"),
    ("94", "finetune --long-text window --stride 100", f"{B} finetune sst2 {FT} --long-text window --stride 100 --out ft_x94", "error", r"--stride=100"),
    ("95", "distill --alpha -0.5", f"{B} distill sst2 {DS} --alpha -0.5 --out d95", "error", r"--alpha"),
    ("96", "distill --temperature 0", f"{B} distill sst2 {DS} --temperature 0 --out d96", "error", r"--temperature"),
    ("97", "distill --temperature inf", f"{B} distill sst2 {DS} --temperature inf --out ds_tinf", "error", r"training diverged at step \d+"),
    ("98", "distill --temperature 1e-9", f"{B} distill sst2 {DS} --temperature 1e-9 --out d98", "ok", ""),
    ("99", "distill --hidden-weight inf", f"{B} distill sst2 {DS} --hidden-weight inf --out dsp4", "error", r"training diverged at step \d+"),
    ("100", "distill --hidden-weight -1", f"{B} distill sst2 {DS} --hidden-weight -1 --out d100", "error", r"--hidden-weight"),
    ("101", "distill: student vocab differs", f"rm -rf stud_shuf && cp -r {TINY} stud_shuf && rm stud_shuf/tokenizer*.json && {PY} -c \"import random;v=open('{BASE_VOCAB}').read().split(chr(10));h=v[1000:-1];random.Random(0).shuffle(h);open('stud_shuf/vocab.txt','w').write(chr(10).join(v[:1000]+h)+chr(10))\" && {B} distill sst2 {DS.replace('--student-layers 1', '--student stud_shuf')} --out d101", "error", r"different vocabularies"),
    ("102", "distill: untrained teacher", f"{B} distill sst2 {DS.replace('--teacher ft_sst2', '--teacher ' + TINY)} --out d102", "error", r"--teacher .*no trained sst2 head"),
    ("103", "distill: teacher of another task", f"{B} distill rte {DS.replace(SST, '--data ' + str(GLUE) + '/RTE')} --out d103", "error", r"task rte has labels"),
    ("104", "distill: SST-2 teacher used for CoLA", f"{B} distill cola {DS.replace(SST, '--data ' + str(GLUE) + '/CoLA')} --out ds_cola", "warn", r"--teacher ft_sst2 was fine-tuned on sst2, not cola"),
    ("105", "distill --student-layers 5", f"{B} distill sst2 {DS.replace('--student-layers 1', '--student-layers 5')} --out d105", "error", r"keep between 1 and 2"),
    ("106", "distill bad preset", f"{B} distill sst2 {DS.replace('--student-layers 1', '--student huge')} --out d106", "error", r"neither a model directory nor a preset"),
    ("107", "distill kill -9 after epoch 1, same command", kill_when(f"{B} distill sst2 {DS.replace('200 --epochs 1', '600 --epochs 3')} --out ds_kill", "ds_kill/.resume.pt", "ds_kill/config.json") + f" && {B} distill sst2 {DS.replace('200 --epochs 1', '600 --epochs 3')} --out ds_kill", "error", r"ds_kill holds an unfinished fine-tuning run: pass --resume"),
    ("108", "predict on the killed distill output", f"{B} predict sst2 --model ds_kill --input p.jsonl --output pk.jsonl", "warn", r"ds_kill is from an unfinished fine-tuning run"),
    ("109", "distill --resume after kill -9", f"{B} distill sst2 {DS.replace('200 --epochs 1', '600 --epochs 3')} --out ds_kill --resume >/dev/null 2>&1 && {B} distill sst2 {DS.replace('200 --epochs 1', '600 --epochs 3')} --out ds_full >/dev/null 2>&1 && cmp ds_kill/model.safetensors ds_full/model.safetensors && echo identical; ls -A | grep -c '^\\.student'; ls -A ds_kill | grep -c student; true", "ok", r"identical\n0\n0"),
    ("110", "finetune kill -9 in epoch 1, --resume", kill_when(f"{UNF} --out ft_kA", "ft_kA/log.jsonl", "ft_kA/log.jsonl") + f"; {UNF} --out ft_kA --resume", "error", r"nothing to resume"),
    ("111", "finetune kill -9 after epoch 1, --resume is bit-identical", kill_when(f"{UNF} --out ft_kB", "ft_kB/.resume.pt", "ft_kB/config.json") + f" && {UNF} --out ft_kB --resume >/dev/null 2>&1 && cmp ft_kB/model.safetensors ft_ref/model.safetensors && cmp ft_kB/predictions_dev.jsonl ft_ref/predictions_dev.jsonl && echo identical", "ok", r"identical"),
    ("113", "finetune killed after an epoch: predict warns", f"{B} predict sst2 --model ft_unf --input p.jsonl --output pu.jsonl", "warn", r"ft_unf is from an unfinished fine-tuning run"),
    ("114", "finetune --lr 1e6", f"{B} finetune sst2 {FT} --lr 1e6 --out ft_lrhuge114; R=$?; ls ft_lrhuge114; test -e ft_lrhuge114/results.json && echo FINISHED-LOOKING; exit $R", "error", r"training diverged at step \d+"),
    ("115", "predict with that model", f"{B} predict sst2 --model ft_lrhuge114 --input p.jsonl --output pnan.jsonl", "error", r"ft_lrhuge114"),
    ("116", "evaluate with that model", f"{B} evaluate sst2 --model ft_lrhuge114 {SST}", "error", r"ft_lrhuge114"),
    ("117", "plot a fine-tuning run", f"{B} plot ft_ref && {PY} -c \"import sys; sys.path.insert(0, '{ROOT}/src'); from bertkit.plot import curves, _records; from pathlib import Path; c = curves(_records(Path('ft_ref'))[1]); lr = [v for _, v in c['learning rate']['lr_now']]; print('panels', sorted(c), 'lr', lr[0], '->', lr[-1], 'decays' if lr[-1] < lr[0] / 10 else 'flat')\"", "ok", r"dev metrics.*decays"),
    ("118", "plot an empty dir", f"{B} plot existing_dir", "error", r"existing_dir/log.jsonl: no such log"),
    ("119", "plot: bad first log line", f"{B} plot badlog", "error", r"badlog/log.jsonl:1"),
    ("120", "plot: log without steps", f"{B} plot nosteps", "error", r"no metrics to plot yet"),
    ("121", "plot: run whose loss is all NaN", f"{B} plot nanlog", "error", r"loss is NaN or infinite at every one"),
    ("122", "plot two runs without --out", f"{B} plot ft_sst2 ds_base", "error", r"--out"),
    ("123", "plot a predictions file", f"{B} plot p.jsonl", "error", r"no metrics to plot yet"),
    ("124", "plot unknown metric", f"{B} plot ft_sst2 ds_base --out cmp.png --metrics nosuchmetric", "error", r"nosuchmetric"),
    ("125", "pretrain --budget 0s", f"{BUDGET}0 --budget 0s", "error", r"--budget '0s'"),
    ("126", "pretrain --budget abc", f"{BUDGET}0 --budget abc", "error", r"--budget 'abc'"),
    ("127", "pretrain --budget -5m", f"{BUDGET}0 --budget -5m", "error", r"--budget '-5m': a budget cannot be negative"),
    ("128", "pretrain --budget=-5m", f"{BUDGET}0 --budget=-5m", "error", r"--budget '-5m'"),
    ("129", "pretrain --budget 60", f"{BUDGET}0 --budget 60", "error", r"--budget '60'"),
    ("130", "pretrain --budget 1m1m", f"{BUDGET}0 --budget 1m1m", "error", r"--budget '1m1m'"),
    ("131", "pretrain --budget 1s", f"{BUDGET}1 --budget 1s", "error", r"--budget 1 s leaves no time for one training step.*at least \d+ s"),
    ("132", "pretrain --budget 0.0001h", f"{BUDGET}2 --budget 0.0001h", "error", r"--budget 0.36 s leaves no time for one training step: measuring the step time took"),
    ("133", "pretrain --budget 99999999h", f"{BUDGET}3 --budget 99999999h", "error", r"--budget '99999999h' is [\d,.]+ years; at most 8784h"),
    ("134", "pretrain --budget 60s, kill -9, --resume", kill_when(f"{BUDGET}4 --save-every 20 --log-every 10 --budget 60s", "ptb4/checkpoints/step-00000040.pt", "ptb4/checkpoints") + f" && {BUDGET}4 --save-every 20 --log-every 10 --budget 60s --resume >/dev/null 2>&1 && test -e ptb4/model/config.json && grep -c resume ptb4/log.jsonl", "ok", r"[1-9]"),
    ("135", "downstream bad task", f"{B} downstream {TINY} {DSTREAM} --tasks sst3 --out dsb", "error", r"unknown task 'sst3'"),
    ("136", "downstream empty --tasks", f"{B} downstream {TINY} {DSTREAM} --tasks '' --out dsb", "error", r"--tasks"),
    ("137", "downstream duplicated task", f"{B} downstream {TINY} {DSTREAM} --tasks sst2,sst2 --seeds 1 --epochs 1 --max-train-examples 200 --out ds137", "ok", ""),
    ("138", "downstream missing data dir", f"{B} downstream {TINY} --data /nonexistent/glue --tasks sst2 --out dsb", "error", r"/nonexistent/glue/SST-2"),
    ("139", "downstream --data is the task folder", f"{B} downstream {TINY} --data {GLUE}/SST-2 --lrs 1e-4 --max-seq-length 64 --tasks sst2 --seeds 1 --epochs 1 --max-train-examples 200 --no-progress --out ds139", "ok", ""),
    ("140", "downstream --tasks squad", f"{B} downstream {TINY} {DSTREAM} --tasks squad --out dsb", "error", r"unknown task 'squad'"),
    ("141", "downstream --lrs 1e-4,abc", f"{B} downstream {TINY} --data {GLUE} --lrs 1e-4,abc --tasks sst2 --out dsb", "error", r"--lrs"),
    ("142", "downstream default --data", f"mkdir -p nodata && cd nodata && {B} downstream {TINY} --lrs 1e-4 --tasks sst2 --out dsb", "error", r"no sst2 train file"),
    ("143", "downstream from a fine-tuned SST-2 model to RTE", f"{B} downstream ft_sst2 {DSTREAM} --tasks rte --seeds 1 --epochs 1 --out dsb143", "error", r"task rte has labels"),
    ("144", "downstream --epochs 0", f"{B} downstream {TINY} {DSTREAM} --tasks sst2 --epochs 0 --out dsb", "error", r"--epochs"),
    ("145", "downstream kill -9 mid-run, run again", kill_when(f"{B} downstream {TINY} --tasks sst2,rte --seeds 1,2 --epochs 2 --max-train-examples 300 {DSTREAM} --out dsk", "dsk/sst2/lr1e-04-seed1/results.json", "dsk") + f" && {B} downstream {TINY} --tasks sst2,rte --seeds 1,2 --epochs 2 --max-train-examples 300 {DSTREAM} --out dsk >/dev/null 2>&1 && python3 -c \"import json; a, b = (json.load(open(p + '/results.json'))['tasks'] for p in ('dsk', 'dsref')); print('same' if all(a[t]['mean'] == b[t]['mean'] for t in b) else 'differ')\"", "ok", r"same"),
    ("146", "compare-downstream, different task sets", f"{B} compare-downstream dsref dsx3", "ok", r"note: left out: rte \(missing from dsx3\)"),
    ("147", "compare-downstream with a finetune dir", f"{B} compare-downstream dsref ft_sst2", "error", r"ft_sst2/results.json: not a downstream results file"),
    ("148", "compare-downstream missing dir", f"{B} compare-downstream dsref nonexist", "error", r"nonexist: cannot read"),
    ("149", "compare-downstream unknown baseline", f"{B} compare-downstream dsref dsx3 --baseline nosuch", "error", r"--baseline 'nosuch'"),
    ("150", "compare-downstream 3 names for 2 dirs", f"{B} compare-downstream dsref dsx3 --names a,b,c", "error", r"--names"),
    ("151", "compare-downstream same dir twice", f"{B} compare-downstream dsref dsref", "error", r"dsref: given more than once"),
    ("152", "compare-downstream --chart unwritable", f"{B} compare-downstream dsref dsx3 --chart /etc/passwd/c.png", "error", r"/etc/passwd/c.png"),
    ("153", "compare-downstream bad results.json", f"{B} compare-downstream dsref emptydir", "error", r"emptydir/results.json: not a downstream results file"),
    ("154", "attention --layer 5", f"{B} attention ft_sst2 'a gripping film' --layer 5 --out a1.png", "error", r"layer must be"),
    ("155", "attention --head -1", f"{B} attention ft_sst2 'a gripping film' --head -1 --out a1.png", "error", r"head must be in 0\.\.1"),
    ("156", "attention empty text", f"{B} attention ft_sst2 ''", "error", r"the text is empty"),
    ("157", "attention --out a directory", f"{B} attention ft_sst2 'a film' --out existing_dir", "error", r"existing_dir"),
    ("158", "attention on a 3,000-word text", f"{B} attention ft_sst2 \"$(python3 -c \"print('word '*3000)\")\" --out a4.png", "warn", r"the text was cut to the model's limit of 64 tokens"),
    ("159", "attention --out a4.txt / --pair on single model / int8", f"{B} attention ft_sst2 'a film' --out a4.txt && {B} attention ft_sst2 'a film' --pair 'b' --out a5.png && {B} attention ft_sst2 'a film' --precision int8 --out a6.png", "ok", ""),
    ("160", "export-onnx of an unfinished run", f"{B} export-onnx ft_unf --out unf.onnx", "warn", r"ft_unf is from an unfinished fine-tuning run"),
    ("161", "quantize an unfinished run", f"{B} quantize ft_unf --out unf_q && {B} predict sst2 --model unf_q --input p.jsonl --output pu.jsonl", "warn", r"(?s)ft_unf is from an unfinished.*unf_q is from an unfinished"),
    ("162", "distill from an unfinished teacher", f"{B} distill sst2 {DS.replace('ft_sst2', 'ft_unf')} --out ds_unf", "warn", r"--teacher ft_unf is from an unfinished fine-tuning run"),
    ("163", "prune an unfinished run", f"{B} prune ft_unf {PR} --heads 1 --out pr_unf", "warn", r"ft_unf is from an unfinished fine-tuning run"),
    ("164", "attention / info on an unfinished run", f"{B} attention ft_unf 'a film' --out au.png && {B} info ft_unf", "warn", r"unfinished"),
    ("165", "tokenizer train --output = --corpus", f"head -3000 {PYDOCS} > corp2.txt && {B} tokenizer train --corpus corp2.txt --vocab-size 500 --output corp2.txt; R=$?; wc -l < corp2.txt; exit $R", "error", r"(?s)3000\n.*--output corp2.txt would overwrite the --corpus corp2.txt"),
    ("166", "convert in place", f"rm -rf conv_src && cp -r {TINY} conv_src && {B} convert conv_src conv_src", "error", r"TARGET conv_src would overwrite the SOURCE"),  # refused since issue 36
    ("167", "quantize in place", f"rm -rf q_src && cp -r ft_sst2 q_src && {B} quantize q_src --out q_src", "error", r"--out q_src would overwrite the MODEL_DIR"),  # refused since issue 36
    ("168", "predict --output = --input", f"cp p.jsonl pin.jsonl && {B} predict sst2 --model ft_sst2 --input pin.jsonl --output pin.jsonl; R=$?; cat pin.jsonl; exit $R", "error", r"--output pin.jsonl would overwrite the --input pin.jsonl"),
    ("169", "quantize an INT8 dir again", f"{B} quantize q8 --out q8b && {B} predict sst2 --model q8b --input p.jsonl --output p8.jsonl", "ok", ""),
    ("170", "quantize killed (-9) at 3 moments", " ; ".join(f"({B} quantize ft_sst2 --out qk_{k} >/dev/null 2>&1 & P=$!; sleep {t}; kill -9 $P; wait $P) ; test ! -e qk_{k} || (test -e qk_{k}/config.json && test -e qk_{k}/model.int8.safetensors) || echo PARTIAL" for k, t in enumerate((0.8, 1.4, 2.0))) + "; echo done", "ok", r"^done"),
    ("171", "fill-mask --top-k 0", f"{B} fill-mask {TINY} 'the man went to the [MASK] .' --top-k 0", "error", r"--top-k"),
    ("172", "fill-mask --top-k 100000", f"{B} fill-mask {TINY} 'the man went to the [MASK] .' --top-k 100000 --json", "ok", ""),
    ("173", "fill-mask [MASK] alone", f"{B} fill-mask {TINY} '[MASK]'", "ok", ""),
    ("174", "fill-mask lower-case [mask]", f"{B} fill-mask {TINY} 'the man went to the [mask] .'", "error", r"no \[MASK\] token"),
    ("175", "fill-mask on a classifier", f"{B} fill-mask ft_sst2 'the [MASK] .'", "error", r"no masked-LM head"),
    ("176", "embed --layers 7", f"printf 'a film\\n' > e.txt && {B} embed ft_sst2 --input e.txt --layers 7 --output e1.npy", "error", r"layer 7"),
    ("177", "embed --output without suffix", f"printf 'a film\\n' > e.txt && {B} embed ft_sst2 --input e.txt --output e2", "error", r"--output must end in"),
    ("178", "tokenize --max-length 1", f"{B} tokenize --vocab {BASE_VOCAB} --max-length 1 'hello world'", "error", r"--max-length"),
]


def cli_cases(s: Path, only: set[str] | None, jobs: int) -> list[dict]:
    cases = [c for c in CLI_CASES if only is None or c[0] in only]
    order = {"107": 0, "108": 1, "109": 2, "114": 0, "115": 1, "116": 2}  # run after their setup case

    def one(case):
        number, name, cmd, kind, expect = case
        code, out, err, seconds = run(cmd, s, timeout=1200)
        v = verdict(kind, expect, code, out, err)
        if kind == "warn" and v == "OK":
            v = "FAILED"  # the warning the case needs was not printed
        if kind == "ok" and v == "WARNED" and "warning" in err:
            v = "WARNED"
        print(f"{v:13} #{number} {name} ({seconds:.0f} s)", file=sys.stderr, flush=True)
        return {"number": number, "name": name, "command": cmd.replace(B, "bertkit").replace(str(SHARED), "$DATA"),
                "exit": code, "verdict": v, "shown": _line(err if code else out + "\n" + err),
                "seconds": round(seconds, 1)}

    chained = [c for c in cases if c[0] in order]
    free = [c for c in cases if c[0] not in order]
    results = []
    with ThreadPoolExecutor(jobs) as pool:
        futures = [pool.submit(one, c) for c in free]
        results += [one(c) for c in sorted(chained, key=lambda c: (int(c[0]) // 10, order[c[0]]))]
        results += [f.result() for f in futures]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("scratch", nargs="?", default=str(Path(tempfile.gettempdir()) / "bertkit-robustness-new"))
    parser.add_argument("--only", default=None, help="comma-separated case numbers")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--table", action="store_true", help="print the table of an earlier run")
    args = parser.parse_args()
    s = Path(args.scratch)
    results_file = s / "results-new.json"
    if args.table:
        print_table(json.loads(results_file.read_text()))
        return
    s.mkdir(parents=True, exist_ok=True)
    setup(s)
    only = set(args.only.split(",")) if args.only else None
    results = cli_cases(s, only, args.jobs) + http_cases(s, only)
    old = {}
    if only and results_file.exists():
        old = {r["number"]: r for r in json.loads(results_file.read_text())}
    old.update({r["number"]: r for r in results})
    ordered = sorted(old.values(), key=lambda r: int(re.match(r"\d+", r["number"]).group()))
    results_file.write_text(json.dumps(ordered, indent=1))
    print_table(ordered)


def print_table(results: list[dict]) -> None:
    print("| # | case | command | exit | what the user sees now | verdict |")
    print("|---|---|---|---|---|---|")
    for r in results:
        cmd = r["command"].replace("|", "\\|")
        cmd = cmd if len(cmd) <= 140 else cmd[:140] + "…"
        shown = r["shown"].replace("|", "\\|")
        print(f"| {r['number']} | {r['name']} | `{cmd}` | {r['exit']} | {shown} | **{r['verdict']}** |")


if __name__ == "__main__":
    main()
