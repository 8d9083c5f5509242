"""Shared by the tests that launch ``torchrun``: the launcher, its environment, free ports, and
launches that are always cleaned up (each in its own process group, killed on the way out).

``Launch`` starts one ``torchrun`` agent in a new session; the workers torchrun starts live in
sessions of their own, so :meth:`Launch.kill` finds them as the agent's descendants (``/proc``)
and kills every process group involved. :func:`launches` is a context manager that kills
whatever is left of its launches on every way out, a failed assertion included.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import bertkit


def torchrun_path() -> str:
    """The ``torchrun`` beside this Python (or on PATH); skips the calling test without it."""
    found = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    if not Path(found).exists():
        pytest.skip("torchrun not available")
    return found


def torchrun_env() -> dict[str, str]:
    """The environment of a launch: one thread per process, collectives that give up after
    120 s, this checkout's bertkit first."""
    src = str(Path(bertkit.__file__).parents[1])
    # a lost node must fail the survivors within the tests' FAIL_TIMEOUT, not gloo's 30 min
    return dict(os.environ, OMP_NUM_THREADS="1", BERTKIT_DIST_TIMEOUT_S="120",
                PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))


def free_port() -> int:
    """A TCP port free on the loopback now (bound to port 0, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_args(node_rank: int, nnodes: int, port: int, rdzv_id: str) -> list[str]:
    """torchrun's flags for one "machine" of a c10d rendezvous on the loopback, one process."""
    return ["--nnodes", str(nnodes), "--nproc_per_node", "1", "--node_rank", str(node_rank),
            "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", rdzv_id,
            "--max_restarts", "0"]


def rendezvous() -> tuple[int, str]:
    """A free port and a run id no other launch uses."""
    return free_port(), f"bertkit-test-{uuid.uuid4().hex[:12]}"


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (Linux ``/proc``; empty elsewhere)."""
    if not Path("/proc").is_dir():
        return []
    tree, found, todo = _children(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class Launch:
    """One ``torchrun`` agent (``args`` after the launcher), output in ``log``."""

    def __init__(self, args: list[str], log: Path):
        self.log = log
        self._out = open(log, "w")
        self.proc = subprocess.Popen([torchrun_path(), *args], stdout=self._out,
                                     stderr=subprocess.STDOUT, env=torchrun_env(),
                                     start_new_session=True)

    def kill(self) -> None:
        """SIGKILL the agent and its workers (every process group they lead), at once."""
        groups = {self.proc.pid}
        for pid in descendants(self.proc.pid):
            with contextlib.suppress(OSError):
                groups.add(os.getpgid(pid))
        for group in groups:
            with contextlib.suppress(OSError):
                os.killpg(group, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)
        self._out.close()

    def wait(self, timeout: float) -> int | None:
        """The agent's exit status, or None when it is still running after ``timeout`` s."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def output(self) -> str:
        if not self._out.closed:  # a killed launch has closed it
            self._out.flush()
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def launches():
    """A list to append :class:`Launch` es to; every one is killed (with its workers) on exit."""
    started: list[Launch] = []
    try:
        yield started
    finally:
        for launch in started:
            launch.kill()


def wait_all(started: list[Launch], timeout: float) -> list[int | None]:
    """Exit statuses of ``started``, waiting at most ``timeout`` s in all (None: still running)."""
    deadline = time.monotonic() + timeout
    return [launch.wait(max(0.0, deadline - time.monotonic())) for launch in started]
