"""Connection hygiene: no client holds ``bertkit serve`` with connections it does not use.

uvicorn alone keeps a connection that sends nothing, or its head a line a second, open for
ever, reads a head of any size (httptools, its parser when installed) and serves any number
of connections from one client (the 2026-11-25 faults report, cases 146, 156-158 and 196).
:func:`uvicorn_options` gives uvicorn bertkit's protocol (:data:`PROTOCOL`) and limits:

* idle: a connection is closed after ``--keep-alive-timeout`` seconds without a request,
  before its first one as between two (uvicorn's keep-alive timer, armed on connecting too);
* slow: a request must arrive whole, head and body, within ``--request-timeout`` seconds of
  its first byte; else a 408 ``RequestTimeout`` (head unfinished) or the connection is closed
  (body unfinished): slowloris;
* big: a request head over :data:`HEAD_LIMIT` bytes is answered 431 ``HeaderTooLarge`` and
  the connection closed (h11: h11's own 400 at the same size);
* many: once ``--max-connections`` connections are open (the limit lowered, and said, where
  the open-file limit is lower), a new one is answered 503 ``Overloaded`` and closed at once;
  so is a connection over its client address's share, ``--max-client-connections``, so one
  client cannot starve the rest.
"""

from __future__ import annotations

import json
import sys
from http import HTTPStatus

from uvicorn.protocols.http.h11_impl import H11Protocol

from bertkit.serve.errors import ApiError

HEAD_LIMIT = 64 * 1024  # request line and headers, bytes (browsers with many cookies: ~8-16 KiB)
RESERVED_FILES = 64  # open files a server needs besides its connections (model, logs, threads)


def uvicorn_options(config) -> dict:
    """uvicorn's keyword arguments for the connection limits of ``config`` (a
    :class:`~bertkit.serve.config.ServeConfig`): the protocol, keep-alive, the concurrency
    limit (lowered to the open-file limit, with a line on stderr) and h11's head limit."""
    # uvicorn counts the new connection too: N + 1 lets N be open, and the protocol refuses the next
    return dict(http=PROTOCOL, timeout_keep_alive=config.keep_alive_timeout,
                limit_concurrency=connection_limit(config.max_connections) + 1,
                h11_max_incomplete_event_size=HEAD_LIMIT)


def connection_limit(wanted: int) -> int:
    """``wanted``, or fewer where this process may open fewer files (each connection is one):
    a server out of files resets every client, and logs nothing (case 196)."""
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY or wanted <= soft - RESERVED_FILES:
        return wanted
    fits = max(soft - RESERVED_FILES, 1)
    print(f"bertkit serve: --max-connections {wanted} lowered to {fits}: this process may open "
          f"{soft} files (ulimit -n)", file=sys.stderr, flush=True)
    return fits


def served_config(app):
    """The :class:`~bertkit.serve.config.ServeConfig` of the app uvicorn serves (found under
    uvicorn's own middleware), or the defaults for an app ``create_app`` did not build."""
    from bertkit.serve.config import ServeConfig

    for _ in range(8):
        state = getattr(app, "state", None)
        service = getattr(state, "service", None) if state is not None else None
        if service is not None:
            return service.config
        app = getattr(app, "app", None)
    return ServeConfig()


def client_share(wanted: int | None, limit: int | None) -> int | None:
    """Connections one client address may hold: ``--max-client-connections``, else a quarter
    of the connection limit (None: no limit at all)."""
    return wanted or (max(1, limit // 4) if limit else None)


def refusal(error: ApiError) -> bytes:
    """``error`` as a whole HTTP/1.1 answer that closes the connection."""
    body = json.dumps(error.body()).encode()
    head = (f"HTTP/1.1 {error.status} {HTTPStatus(error.status).phrase}\r\ncontent-type: "
            f"application/json\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n")
    return head.encode("latin-1") + body


class _Hygiene:
    """The limits over either uvicorn protocol; a parser's subclass says when a request
    starts and ends (:meth:`_started`, :meth:`_finished`) and whether its head is unfinished
    (:meth:`_head_unfinished`)."""

    def connection_made(self, transport) -> None:
        """Refuse a connection over a limit (503, closed), else start its idle timer."""
        super().connection_made(transport)
        settings = served_config(self.app)
        self._request_timeout = settings.request_timeout
        self._deadline = None
        over = self._over_limit(settings.max_client_connections)
        if over:
            return self._refuse(ApiError(over, "Overloaded", 503))
        # uvicorn arms its keep-alive timer only after an answer: a silent client stayed for ever
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive,
                                                            self.timeout_keep_alive_handler)

    def _over_limit(self, client_connections: int | None) -> str | None:
        """Why this new connection is one too many, or None. Refused here, uvicorn's own
        check (a plain-text 503 once ``limit_concurrency`` connections or requests are open,
        a connection running one request at a time) never fires."""
        limit = self.limit_concurrency - 1 if self.limit_concurrency else None  # --max-connections
        host = self.client[0] if self.client else None
        if limit and len(self.connections) > limit:  # this one counted
            return f"the server has {limit} connections open (--max-connections)"
        share = client_share(client_connections, limit)
        if share and host and sum(1 for c in self.connections if c.client and c.client[0] == host) > share:
            return f"too many connections from {host} (--max-client-connections {share})"
        return None

    def connection_lost(self, exc) -> None:
        self._finished()
        super().connection_lost(exc)

    def _started(self) -> None:
        """A request's first byte: it has ``--request-timeout`` seconds to arrive whole."""
        if self._deadline is None:
            self._deadline = self.loop.call_later(self._request_timeout, self._too_slow)

    def _finished(self) -> None:
        """The request arrived whole (or the connection is gone): no deadline."""
        if getattr(self, "_deadline", None) is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._head_unfinished():  # nothing answered yet on this request: say why
            return self._refuse(ApiError(f"the request did not arrive within {self._request_timeout:g} "
                                         "s (--request-timeout)", "RequestTimeout"))
        self.transport.close()  # the body is late: the route sees a disconnect

    def _refuse(self, error: ApiError) -> None:
        self.transport.write(refusal(error))
        self.transport.close()


class _HttpTools(_Hygiene):
    """httptools' callbacks mark a request's start, head and end. A head's size is counted
    twice: the bytes read while it is unfinished (a head trickling in), and its request line
    and headers as parsed (a whole head in one read); over :data:`HEAD_LIMIT`, a 431 and the
    request never reaches the app."""

    def connection_made(self, transport) -> None:
        self._in_head, self._head_bytes, self._parsed_bytes, self._too_big = True, 0, 0, False
        super().connection_made(transport)

    def data_received(self, data: bytes) -> None:
        """Feed the parser; then a head over the limit is answered 431 and the connection closed."""
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        too_big = self._too_big or (self._in_head and max(self._head_bytes, self._parsed_bytes) > HEAD_LIMIT)
        if too_big and not self.transport.is_closing():
            self._refuse(ApiError(f"the request head has more than {HEAD_LIMIT} bytes", "HeaderTooLarge"))

    def on_message_begin(self) -> None:
        self._started()
        self._parsed_bytes = 0
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        self._parsed_bytes += len(url)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._parsed_bytes += len(name) + len(value) + 4  # ": " and CRLF
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head, self._head_bytes = False, 0
        self._too_big = self._parsed_bytes > HEAD_LIMIT
        if not self._too_big:  # else no request for the app: data_received answers 431
            super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._too_big:
            super().on_body(body)

    def on_message_complete(self) -> None:
        self._finished()
        self._in_head = True
        if not self._too_big:
            super().on_message_complete()

    def _head_unfinished(self) -> bool:
        return self._in_head


class H11Hygiene(_Hygiene, H11Protocol):
    """On h11 (no httptools): h11's state after each read says where the request stands."""

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        import h11

        if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
            self._started()
        else:
            self._finished()

    def _head_unfinished(self) -> bool:
        import h11

        return self.conn.their_state is h11.IDLE


try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools is in the serve extras; without it uvicorn parses with h11
    PROTOCOL: type = H11Hygiene
else:
    class HttpToolsHygiene(_HttpTools, HttpToolsProtocol):
        """uvicorn's httptools protocol with bertkit's limits."""

    PROTOCOL = HttpToolsHygiene
