"""A real uvicorn server on loopback in a thread, for tests with real HTTP clients."""

from __future__ import annotations

import contextlib
import socket
import threading
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running(app, **options):
    """Serve ``app`` on a free loopback port until the block ends, with ``bertkit serve``'s
    connection limits (``options``: more uvicorn settings); yields the base URL."""
    import uvicorn

    from bertkit.serve.connections import uvicorn_options

    port = free_port()
    options = {**uvicorn_options(app.state.service.config), **options}
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", **options))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "the server did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
