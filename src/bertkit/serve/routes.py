"""The routes of ``bertkit serve``, each a named handler (TEI's ``router/src/http/server.rs``
has one per route): the request body is parsed by :mod:`bertkit.serve.schemas`, the work is
the :class:`~bertkit.serve.app.Service`'s, the error answers are :mod:`bertkit.serve.errors`'.
:func:`install` adds them and the error handlers to an app whose ``state.service`` is set."""

from __future__ import annotations

import base64
import json
import re
from importlib import resources
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from bertkit.errors import InputError
from bertkit.inference.process import EngineProcessEnded
from bertkit.serve import offload
from bertkit.serve import schemas as s
from bertkit.serve.batcher import NeverFits, QueueFull
from bertkit.serve.errors import ApiError, from_input_error
from bertkit.serve.gate import replay, route_methods
from bertkit.serve.metrics import CONTENT_TYPE
from bertkit.serve.schemas import IGNORED_HEADER

ERRORS = {status: {"model": s.ErrorResponse} for status in (400, 413, 422, 424, 429)}
TEI, EXTRA = ["text-embeddings-inference"], ["bertkit extras"]
router = APIRouter()


async def service_of(request: Request):
    """The app's :class:`~bertkit.serve.app.Service` (async: FastAPI runs a plain function
    dependency in its thread pool, a thread hop per request: 8-12% of BERT-Tiny's req/s)."""
    return request.app.state.service


ServiceDep = Annotated[Any, Depends(service_of)]


IGNORED_NAMED = 20  # ignored fields named in the header at most


async def reply(answer: Any, headers: dict, body: BaseModel | None = None) -> Response:
    """``answer`` as JSON (Starlette's ``JSONResponse`` format), ``body``'s unknown fields
    added to the ignored ones named in ``X-Bertkit-Ignored``. A large answer (hidden states,
    a batch of vectors: rendering 60,000 floats holds the event loop 28 ms, and four clients
    asking for them made every other request wait 190x its time) is rendered in a worker
    thread, one innermost list at a time, so the loop gets the GIL between pieces."""
    unknown = s.ignored_fields(body) if body is not None else []
    if unknown:
        named = [*unknown, *filter(None, [headers.get(IGNORED_HEADER)])]
        more = f",... ({len(named) - IGNORED_NAMED} more)" if len(named) > IGNORED_NAMED else ""
        headers = {**headers, IGNORED_HEADER: ",".join(named[:IGNORED_NAMED]) + more}
    if _values(answer) <= offload.INLINE_VALUES:
        return JSONResponse(answer, headers=headers)
    body = await offload.off_loop(lambda: "".join(json_pieces(answer)).encode("utf-8"))
    return Response(body, media_type="application/json", headers=headers)


def json_pieces(value: Any):
    """``value``'s JSON text (as ``JSONResponse`` writes it) in pieces: one per list of plain
    values, brackets, braces, keys and commas between."""
    if isinstance(value, dict):
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            yield ("," if i else "") + _dumps(key) + ":"
            yield from json_pieces(item)
        yield "}"
    elif isinstance(value, list) and any(isinstance(x, list | dict) for x in value[:1]):
        yield "["
        for i, item in enumerate(value):
            if i:
                yield ","
            yield from json_pieces(item)
        yield "]"
    else:
        yield _dumps(value)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _values(answer: Any) -> int:
    """About how many values ``answer`` holds, from the first item of each list (the answers
    of a route are regular: vectors of one width, states of one width)."""
    if isinstance(answer, list):
        return len(answer) * _values(answer[0]) if answer else 0
    if isinstance(answer, dict):
        return sum(_values(v) for v in answer.values())
    return 1


# ------------------------------------------------------------------ TEI's routes
@router.post("/predict", tags=TEI, responses=ERRORS, response_model=s.PREDICT_ANSWER,
             summary="classification scores (TEI); bertkit: entities, QA spans, choices")
async def predict(body: s.PredictRequest, service: ServiceDep):
    return await reply(*await service.predict(body), body)


@router.post("/rerank", tags=TEI, responses=ERRORS, response_model=list[s.Rank],
             summary="texts ranked against a query (a one-output pair classifier)")
async def rerank(body: s.RerankRequest, service: ServiceDep):
    return await reply(*await service.rerank(body), body)


@router.post("/embed", tags=TEI, responses=ERRORS, response_model=list[list[float]],
             summary="one vector per input (normalised by default)")
async def embed(body: s.EmbedRequest, service: ServiceDep):
    return await reply(*await service.embeddings(
        "embed", body.inputs, field="inputs", truncate=body.truncate,
        left=body.truncation_direction.lower() == "left", normalize=body.normalize,
        dimensions=body.dimensions, pooling=body.pooling, layers=body.layers, prompt_name=body.prompt_name), body)


@router.post("/embed_all", tags=TEI, responses=ERRORS, response_model=list[list[list[float]]],
             summary="every token's last hidden state, per input")
async def embed_all(body: s.EmbedAllRequest, service: ServiceDep):
    return await reply(*await service.embed_all(body), body)


@router.post("/embed_sparse", tags=TEI, responses=ERRORS, response_model=list[list[s.SparseValue]],
             summary="SPLADE sparse vectors (a masked-LM model): the non-zero terms, per input")
async def embed_sparse(body: s.EmbedSparseRequest, service: ServiceDep):
    return await reply(*await service.embed_sparse(body), body)


@router.post("/similarity", tags=TEI, responses=ERRORS, response_model=list[float],
             summary="cosine similarity of each sentence to the source sentence")
async def similarity(body: s.SimilarityRequest, service: ServiceDep):
    return await reply(*await service.similarity(body), body)


async def openai(body: s.OpenAIRequest, service: ServiceDep):
    """OpenAI's embeddings (``/v1/embeddings``, ``/embeddings``): always normalised."""
    vectors, headers = await service.embeddings("openai", body.input,
                                                field="input", truncate=None,
                                                left=False, normalize=True, dimensions=body.dimensions)
    if body.encoding_format == "base64":
        vectors = [base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode() for v in vectors]
    data = [{"object": "embedding", "embedding": v, "index": i} for i, v in enumerate(vectors)]
    tokens = int(headers["x-compute-tokens"])
    return await reply({"object": "list", "data": data, "model": service.config.model,
                        "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}, headers, body)


for _path in ("/v1/embeddings", "/embeddings"):
    router.post(_path, tags=TEI, response_model=s.OpenAIResponse,
                responses={k: {"model": s.OpenAIErrorResponse} for k in ERRORS},
                summary="OpenAI-compatible embeddings (always normalised)")(openai)


@router.post("/tokenize", tags=TEI, responses=ERRORS, response_model=list[list[s.SimpleToken]],
             summary="tokens with ids and byte offsets")
async def tokenize(body: s.TokenizeRequest, service: ServiceDep):
    texts = [body.inputs] if isinstance(body.inputs, str) else body.inputs
    # a long text must not stall /health
    return await offload.run(sum(map(len, texts)) > offload.OFF_LOOP_CHARS, service.tokenize, body)


@router.post("/decode", tags=TEI, responses=ERRORS, response_model=list[str], summary="text of token ids")
async def decode(body: s.DecodeRequest, service: ServiceDep):
    return service.decode(body)


@router.get("/info", tags=TEI, response_model=s.Info, summary="the served model and the server's limits")
async def info(service: ServiceDep):
    return service.info()


async def health(service: ServiceDep):
    """200 (empty) when the model answers, else 503."""
    if await service.healthy():
        return Response(status_code=200)
    raise ApiError("unhealthy", "Unhealthy")


for _path in ("/health", "/ping"):
    router.get(_path, tags=TEI, responses={200: {"description": "the model answers (empty body)"},
                                           503: {"model": s.ErrorResponse}},
               summary="200 when the model answers")(health)


@router.get("/metrics", tags=TEI, summary="Prometheus metrics")
async def metrics(service: ServiceDep):
    return Response(service.metrics.render(), media_type=CONTENT_TYPE)


async def own_route(request: Request, service: ServiceDep):
    """The model's own route (TEI: predict for a classifier, rerank for a reranker, embed for
    an embedding model; an embedding model also takes ``sentence_similarity``'s body)."""
    data = await _json(request)
    kind = service.model_kind
    try:
        if kind == "reranker":
            return await rerank(s.RerankRequest.model_validate(data), service)
        if kind == "classifier":
            return await predict(s.PredictRequest.model_validate(data), service)
        if isinstance(data, dict) and isinstance(data.get("inputs"), dict):
            return await similarity(s.SimilarityRequest.model_validate(data), service)
        return await embed(s.EmbedRequest.model_validate(data), service)
    except ValidationError as e:
        raise _uncounted(validation_error(e)) from None


for _path in ("/", "/invocations"):
    router.post(_path, tags=TEI, responses=ERRORS, summary="the model's own route (as TEI)")(own_route)


# ------------------------------------------------------------------ bertkit's extras
@router.post("/fill-mask", tags=EXTRA, responses=ERRORS, summary="candidates for every [MASK]")
async def fill_mask(body: s.FillMaskRequest, service: ServiceDep):
    return await reply(*await service.fill_mask(body), body)


@router.post("/attention", tags=EXTRA, responses=ERRORS,
             summary="one head's attention probabilities (tokens x tokens), pairs included")
async def attention(body: s.AttentionRequest, service: ServiceDep):
    return await reply(*await service.attention(body), body)


@router.get("/", tags=TEI, responses={503: {"model": s.ErrorResponse}},
            summary="200 when the model answers (TEI's health); a browser gets the page")
async def page(request: Request, service: ServiceDep):
    """The page, for a browser; TEI's health answer for every other client."""
    if "text/html" not in request.headers.get("accept", ""):
        return await health(service)
    return HTMLResponse(resources.files("bertkit.serve").joinpath("page.html").read_text("utf-8"))


# ------------------------------------------------------------------ error answers
def fail(request: Request, error: ApiError, counted: bool = True) -> JSONResponse:
    """The error answer, counted (TEI's ``te_request_failure`` only when ``counted`` and TEI
    counts its kind: :func:`~bertkit.serve.metrics.tei_err`)."""
    request.app.state.service.metrics.failed(error, counted)
    return JSONResponse(error.body(request.url.path), status_code=error.status, headers=error.headers)


async def on_api_error(request: Request, exc: ApiError):
    return fail(request, exc)


async def on_validation(request: Request, exc: RequestValidationError):
    return fail(request, validation_error(exc), counted=False)  # TEI: its JSON extractor's answer


async def on_input(request: Request, exc: InputError):
    return fail(request, from_input_error(exc))


async def on_full(request: Request, exc: QueueFull):
    return fail(request, ApiError(str(exc), "Overloaded", headers={"Retry-After": "1"}))


async def on_engine_ended(request: Request, exc: EngineProcessEnded):
    # --model-process: the model's process died under this batch; it is started again for the next
    return fail(request, ApiError(str(exc), "Unhealthy", headers={"Retry-After": "1"}))


async def on_never(request: Request, exc: NeverFits):
    # TEI: more inputs than its concurrent-request permits
    return fail(request, ApiError(str(exc), "Validation", 413, tei_err="overloaded"))


async def on_http(request: Request, exc: StarletteHTTPException):
    kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(exc.status_code, "Validation")
    message = {404: f"no route {request.url.path}", 405: f"{request.method} is not allowed on "
               f"{request.url.path}"}.get(exc.status_code, str(exc.detail))
    if exc.status_code == 400 and str(exc.detail) == "There was an error parsing the body":
        message = await _unreadable_body(request)
    headers = getattr(exc, "headers", None)
    if exc.status_code == 405:  # Starlette names the methods of the first route of the path only
        methods = route_methods(request.app).get(request.url.path, set())
        headers = {**(headers or {}), "Allow": ", ".join(sorted(methods))}
    return fail(request, ApiError(message, kind, exc.status_code, headers), counted=False)


HANDLERS = {ApiError: on_api_error, RequestValidationError: on_validation, InputError: on_input,
            QueueFull: on_full, NeverFits: on_never, StarletteHTTPException: on_http,
            EngineProcessEnded: on_engine_ended}


def install(app: FastAPI) -> None:
    """The error answers and the routes, on ``app``: each model route of :data:`DIRECT` behind
    a :class:`Direct` route in front of it."""
    for kind, handler in HANDLERS.items():
        app.add_exception_handler(kind, handler)
    app.include_router(router)
    direct = [Direct(route) for route in router.routes
              if isinstance(route, APIRoute) and route.endpoint in DIRECT]
    app.router.routes[:0] = [Route(d.path, d, methods=["POST"], include_in_schema=False) for d in direct]


DIRECT = (predict, rerank, embed, embed_sparse, embed_all, similarity, openai, fill_mask, attention)


class Direct:
    """A model route's valid request without FastAPI's request machinery: the body parsed and
    validated as FastAPI would (``json.loads``, the route's model), the route's own function
    called with it and the service, its answer (always a ``Response``) sent. FastAPI's routing,
    dependency solving, body handling and endpoint wrapping were about 40% of a BERT-Tiny
    ``/predict`` request's event-loop time under ``bench/serve_cpu.py --profile``; without them
    the loop spends about a fifth less per request (the Intel Xeon with VNNI only;
    docs/serving-results.md). A body that does not parse or validate goes to the FastAPI route
    itself, with the body replayed, so every error answer is FastAPI's, unchanged; an error raised by the
    route's function is the app's handlers' (``HANDLERS``), as behind FastAPI."""

    def __init__(self, route: APIRoute):
        self.path, self.endpoint, self.fallback = route.path, route.endpoint, route.app
        self.model = route.dependant.body_params[0].field_info.annotation

    async def __call__(self, scope, receive, send):
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left: no one to answer
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        raw = b"".join(chunks)
        try:
            body = self.model.model_validate(json.loads(raw))
        except Exception:  # bad JSON or UTF-8, too deep, invalid: FastAPI's own answer
            return await self.fallback(scope, replay(raw), send)
        response = await self.endpoint(body, scope["app"].state.service)
        await response(scope, receive, send)


def _loc_name(part) -> str:
    """A part of pydantic's error location as the schema names it: a validator's wrapper
    (``list[function-before[_whole(), int]]``) becomes the type it wraps (``list[int]``)."""
    text = str(part)
    while True:
        plain = re.sub(r"function-\w+\[\w+\(\), ([^\[\]]*(?:\[[^\[\]]*\])?)\]", r"\1", text)
        if plain == text:
            return text
        text = plain


def validation_error(exc: Exception) -> ApiError:
    """FastAPI's or pydantic's validation error as an :class:`ApiError` (400 bad JSON, else 422
    naming each field)."""
    errors = exc.errors()
    bad_json = next((e for e in errors if e.get("type") == "json_invalid"), None)
    if bad_json is not None:
        return ApiError(f"malformed JSON: {bad_json.get('ctx', {}).get('error', bad_json.get('msg'))}",
                        "Validation", 400)
    parts = []
    for e in errors:
        location = ".".join(_loc_name(x) for x in e.get("loc", ()) if x != "body") or "body"
        parts.append(f"{location}: {e.get('msg')}")
    return ApiError("; ".join(dict.fromkeys(parts)), "Validation")


async def _unreadable_body(request: Request) -> str:
    """Why FastAPI could not parse a body (it says only "There was an error parsing the body")."""
    body = await request.body()
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as e:
        return (f"the body is not UTF-8 (byte {e.start}: 0x{body[e.start]:02x}); send JSON "
                "encoded as UTF-8")
    return "the body could not be parsed as JSON (nested too deeply, or not JSON)"


async def _json(request: Request) -> Any:
    try:
        return json.loads(await request.body())
    except ValueError as e:
        raise _uncounted(ApiError(f"malformed JSON: {e}", "Validation", 400)) from None
    except RecursionError:
        raise _uncounted(ApiError("malformed JSON: nested too deeply", "Validation", 400)) from None


def _uncounted(error: ApiError) -> ApiError:
    """A body that could not be read: TEI's JSON extractor answers it before any metric."""
    error.tei_err = None
    return error


