"""What every request passes before a route: CORS, the API key, the body's size and type; and
``/docs`` served offline.

:class:`Gate` is an ASGI middleware. In order: a body declared or found larger than
``--payload-limit`` is a 413 ``PayloadTooLarge`` (TEI's ``--payload-limit``, default 2 MB); with
``--api-key`` a model route without ``Authorization: Bearer KEY`` is a 401 ``Unauthorized``
(as TEI, ``/health``, ``/ping``, ``/metrics``, ``/docs``, ``/openapi.json`` and the page stay
open); a POST to a POST route whose ``Content-Type`` is not JSON is a 415
``UnsupportedMediaType`` (axum's rule, which TEI inherits; a POST to another route is the
router's 404 or 405). CORS is Starlette's middleware, open to any origin unless
``--cors-allow-origin`` names them (TEI's default). Swagger UI's script and style come from the
``fastapi-offline`` package and are served by this server, so ``/docs`` needs no network.
"""

from __future__ import annotations

import hmac

from fastapi import FastAPI
from starlette.responses import JSONResponse

OPEN_PATHS = ("/health", "/ping", "/metrics", "/docs", "/openapi.json", "/api-doc/openapi.json", "/docs-static/")
DOCS_STATIC = "/docs-static"


class Gate:
    """ASGI middleware: payload limit, API key, JSON content type (see the module docstring)."""

    def __init__(self, app, api_key: str | None, payload_limit: int, routed=None):
        self.app = app
        self.expected = f"Bearer {api_key}".encode() if api_key else None
        self.payload_limit = payload_limit
        self.routed = routed  # the FastAPI app: only a POST route's body is checked (else 404/405)
        self._posts: set[str] | None = None

    @classmethod
    def install(cls, app: FastAPI, config) -> None:
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(cls, api_key=config.key(), payload_limit=config.payload_limit, routed=app)
        app.add_middleware(CORSMiddleware, allow_origins=config.origins(), allow_methods=["GET", "POST"],
                           allow_headers=["content-type", "authorization"],
                           expose_headers=["x-compute-time", "x-total-time", "x-tokenization-time",
                                           "x-queue-time", "x-inference-time", "x-compute-tokens",
                                           "x-compute-characters", "x-bertkit-truncated",
                                           "x-bertkit-windows"])

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers", [])}
        path, method = scope.get("path", ""), scope.get("method", "GET")

        async def refuse(status: int, message: str, kind: str, extra: dict | None = None):
            await JSONResponse({"error": message, "error_type": kind}, status_code=status,
                               headers=extra)(scope, receive, send)

        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.payload_limit:
            return await refuse(413, f"the body has {int(declared)} bytes, more than --payload-limit "
                                     f"{self.payload_limit}", "PayloadTooLarge")
        if self.expected is not None and method != "OPTIONS" and not self._open(path, method):
            given = headers.get("authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                return await refuse(401, "a valid 'Authorization: Bearer KEY' header is required "
                                         "(the server runs with --api-key)", "Unauthorized",
                                    {"WWW-Authenticate": "Bearer"})
        if method == "POST" and self._takes_posts(path):
            kind = headers.get("content-type", b"").decode("latin-1").split(";")[0].strip().lower()
            if not (kind == "application/json" or kind.endswith("+json")):
                return await refuse(415, "Expected request with `Content-Type: application/json`",
                                    "UnsupportedMediaType")
            if declared is None:  # a chunked body: read it within the limit, then replay it
                body, more = b"", True
                while more:
                    message = await receive()
                    body += message.get("body", b"")
                    more = message.get("more_body", False)
                    if len(body) > self.payload_limit:
                        return await refuse(413, f"the body has more than --payload-limit "
                                                 f"{self.payload_limit} bytes", "PayloadTooLarge")
                receive = replay(body)
        return await self.app(scope, receive, send)

    def _takes_posts(self, path: str) -> bool:
        """Whether ``path`` is a POST route (the routes are read once, at the first request)."""
        if self.routed is None:
            return True
        if self._posts is None:
            self._posts = {p for p, methods in route_methods(self.routed).items() if "POST" in methods}
        return path in self._posts

    @staticmethod
    def _open(path: str, method: str) -> bool:
        return (method == "GET" and path == "/") or path in OPEN_PATHS or path.startswith(DOCS_STATIC + "/")


def route_methods(app) -> dict[str, set[str]]:
    """Every route path of ``app`` and its methods (FastAPI keeps an included router's routes
    inside it, not in ``app.routes``)."""
    found: dict[str, set[str]] = {}
    pending = list(app.routes)
    while pending:
        route = pending.pop()
        inner = getattr(route, "original_router", None)
        if inner is not None:
            pending += inner.routes
        elif getattr(route, "path", None) is not None:
            found.setdefault(route.path, set()).update(getattr(route, "methods", None) or ())
    return found


def replay(body: bytes):
    """An ASGI ``receive`` that gives ``body`` as the whole request body, once read."""
    sent = False

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive


def add_docs(app: FastAPI) -> None:
    """``/docs``: Swagger UI from the ``fastapi-offline`` package's files, served locally."""
    from pathlib import Path

    import fastapi_offline
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.staticfiles import StaticFiles

    static = Path(fastapi_offline.__file__).parent / "static"
    app.mount(DOCS_STATIC, StaticFiles(directory=static), name="docs-static")

    @app.get("/docs", include_in_schema=False)
    async def docs():
        return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{app.title} - Swagger UI",
                                   swagger_js_url=f"{DOCS_STATIC}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{DOCS_STATIC}/swagger-ui.css",
                                   swagger_favicon_url=f"{DOCS_STATIC}/favicon.png")
