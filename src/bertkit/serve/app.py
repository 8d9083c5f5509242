"""The HTTP API of ``bertkit serve`` (FastAPI on uvicorn; why: docs/serving.md).

Request bodies follow the Hugging Face inference API and text-embeddings-inference:
``{"inputs": ITEM}`` or ``{"inputs": [ITEM, ...]}``; an answer is one result for one item, a
list for a list. ITEM is a text, a pair ``[A, B]`` (pair models; a list of pairs is
``[[A, B], ...]``), ``{"question", "context"}`` (QA) or ``{"context", "choices"}`` (multiple
choice). Errors are JSON ``{"error": message, "error_type": kind}`` with a 4xx status (400 a
malformed body or a request the model cannot serve, 413 too many items or, with
``--no-truncate``, too long a text, 422 a bad value), 503 when the queue is full. Truncated
inputs are named in the ``X-Bertkit-Truncated`` response header (their 0-based indexes).
With ``--long-text window`` (or a model fine-tuned with it) ``/predict`` (classification,
regression, token tagging) and ``/embed`` read a text longer than the limit in overlapping
windows (:mod:`bertkit.inference.heads`); the inputs read in more than one window are named in
the ``X-Bertkit-Windows`` header as ``index:windows`` (e.g. ``0:3,2:2``).
"""

from __future__ import annotations

import contextlib
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, Field, StrictInt

from bertkit.cpu import torch_threads
from bertkit.inference.heads import InputError, Plan
from bertkit.serve.batcher import DynamicBatcher, QueueFull
from bertkit.serve.config import ServeConfig

TRUNCATED_HEADER = "X-Bertkit-Truncated"
WINDOWS_HEADER = "X-Bertkit-Windows"


class PredictBody(BaseModel):
    inputs: Any = Field(..., description="a text, a pair [A, B], {question, context}, "
                                         "{context, choices}, or a list of those",
                        examples=["a great movie", ["the first sentence", "the second"]])
    truncate: bool | None = Field(None, description="truncate over-long inputs (default: the server's setting)")


class EmbedBody(PredictBody):
    pooling: str = Field("cls", description="cls or mean")
    layers: list[StrictInt] = Field([-1], description="hidden states to concatenate (-1 = last layer)")
    normalize: bool = Field(False, description="scale each vector to unit length")


class FillMaskBody(PredictBody):
    top_k: StrictInt = Field(5, description="candidates per [MASK] (1-100)")


class AttentionBody(BaseModel):
    inputs: str = Field(..., description="one text")
    layer: StrictInt = Field(-1, description="encoder layer (negative counts from the last)")
    head: StrictInt = Field(0, description="attention head")


def _error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse({"error": message, "error_type": kind}, status_code=status)


def _validation_message(exc: RequestValidationError) -> tuple[int, str]:
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        where = next(e for e in errors if e.get("type") == "json_invalid")
        return 400, f"malformed JSON: {where.get('ctx', {}).get('error', where.get('msg'))}"
    parts = []
    for e in errors:
        location = ".".join(str(x) for x in e.get("loc", ()) if x != "body") or "body"
        parts.append(f"{location}: {e.get('msg')}")
    return 422, "; ".join(parts)


class Service:
    """The loaded model, its batcher and the request logic of every endpoint."""

    def __init__(self, config: ServeConfig, bert):
        self.config = config
        self.bert = bert
        self.batcher: DynamicBatcher | None = None
        self.long_text = bert.long_text_choice(config.long_text)  # a bad --stride: refused here

    def start(self) -> None:
        c = self.config
        self.batcher = DynamicBatcher(self.bert.run_rows, c.max_batch_tokens, c.max_batch_size,
                                      c.max_wait_ms / 1000, c.max_queue)

    def stop(self) -> None:
        if self.batcher is not None:
            self.batcher.close()

    def items(self, inputs: Any, for_predict: bool) -> tuple[list, bool]:
        """``(items, single)`` of a body's ``inputs``; too many or no items is an error."""
        if isinstance(inputs, list) and not (for_predict and self.bert.is_pair_item(inputs)):
            if not inputs:
                raise InputError("inputs is an empty list")
            if len(inputs) > self.config.max_items:
                raise InputError(f"{len(inputs)} inputs, more than the server's --max-items "
                                 f"{self.config.max_items}", status=413)
            return inputs, False
        if inputs is None:
            raise InputError("inputs is null")
        return [inputs], True

    def overflow(self, truncate: bool | None) -> str:
        return "truncate" if (self.config.truncate if truncate is None else truncate) else "error"

    async def answer(self, plans: list[Plan], single: bool) -> JSONResponse:
        answers = await self.batcher.run(plans)
        truncated = [i for i, p in enumerate(plans) if p.truncated]
        windowed = [f"{i}:{p.windows}" for i, p in enumerate(plans) if p.windows > 1]
        headers = {}
        if truncated:
            headers[TRUNCATED_HEADER] = ",".join(map(str, truncated))
        if windowed:
            headers[WINDOWS_HEADER] = ",".join(windowed)
        return JSONResponse(answers[0] if single else answers, headers=headers or None)

    def info(self) -> dict:
        bert, c = self.bert, self.config
        config = bert.model.config
        return {"model": c.model, "task": bert.task, "labels": bert.labels,
                "pair_inputs": bert.pair_inputs, "max_length": bert.max_length,
                "precision": bert.precision, "num_layers": config.num_hidden_layers,
                "num_heads": config.num_attention_heads, "hidden_size": config.hidden_size,
                "max_batch_tokens": c.max_batch_tokens, "max_batch_size": c.max_batch_size,
                "max_wait_ms": c.max_wait_ms, "max_queue": c.max_queue, "max_items": c.max_items,
                "truncate": c.truncate,
                "long_text": {"mode": self.long_text.mode, "stride": self.long_text.stride,
                              "pool_windows": self.long_text.pool},
                "batches_run": self.batcher.batches_run if self.batcher else 0,
                "rows_run": self.batcher.rows_run if self.batcher else 0}


def create_app(config: ServeConfig, bert=None) -> FastAPI:
    """The application serving ``config.model`` (or the already loaded ``bert``)."""
    config.check()
    if bert is None:
        from bertkit.inference import load

        if config.threads:
            import torch

            torch.set_num_threads(config.threads)
        # One intra-op thread while loading (and quantising): the forward passes run in the
        # batcher's worker thread, and once the main thread had run parallel work of its own
        # (an OpenMP thread team beside the worker's, on two cores) the worker's single-sentence
        # passes were 1.4-1.6x slower (BERT-Base: 115-127 ms instead of 77-82; docs/serving.md).
        with torch_threads(1):
            bert = load(config.model, device=config.device, precision=config.precision)
    service = Service(config, bert)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        service.start()
        try:
            yield
        finally:  # uvicorn has finished the requests in flight; the queue is drained here
            await run_in_threadpool(service.stop)

    app = FastAPI(title="bertkit serve", version="1", lifespan=lifespan,
                  description="A bertkit model behind an HTTP API (see docs/serving.md).")
    app.state.service = service

    @app.exception_handler(RequestValidationError)
    async def on_validation(request: Request, exc: RequestValidationError):
        status, message = _validation_message(exc)
        return _error(status, message, "validation")

    @app.exception_handler(InputError)
    async def on_input(request: Request, exc: InputError):
        kind = {413: "too_large", 400: "unsupported"}.get(exc.status, "validation")
        return _error(exc.status, str(exc), kind)

    @app.exception_handler(QueueFull)
    async def on_full(request: Request, exc: QueueFull):
        return JSONResponse({"error": str(exc), "error_type": "overloaded"}, status_code=503,
                            headers={"Retry-After": "1"})

    async def plan(make, inputs, for_predict=False):
        items, single = service.items(inputs, for_predict)
        plans = [make(x) for x in items]  # in the event loop: tokenising is short, and fewer
        # threads contending for the GIL keep the batcher's forward passes from stalling
        return await service.answer(plans, single)

    @app.post("/predict", summary="the task head's answer (classification, tagging, QA, choice)")
    async def predict(body: PredictBody):
        overflow = service.overflow(body.truncate)
        return await plan(lambda x: bert.plan_predict(x, overflow, service.long_text), body.inputs,
                          for_predict=True)

    @app.post("/embed", summary="one vector per input (pooling and layers as bertkit embed)")
    async def embed(body: EmbedBody):
        overflow = service.overflow(body.truncate)
        return await plan(lambda x: bert.plan_embed(x, body.layers, body.pooling, body.normalize, overflow,
                                                    service.long_text), body.inputs)

    @app.post("/fill-mask", summary="candidates for every [MASK]")
    async def fill_mask(body: FillMaskBody):
        overflow = service.overflow(body.truncate)
        return await plan(lambda x: bert.plan_fill_mask(x, body.top_k, overflow), body.inputs)

    @app.post("/attention", summary="one head's attention probabilities (tokens x tokens)")
    async def attention(body: AttentionBody):
        tokens, matrix = await run_in_threadpool(bert.attention, body.inputs, body.layer, body.head)
        return {"tokens": tokens, "layer": body.layer, "head": body.head,
                "attention": [[round(float(x), 5) for x in row] for row in matrix]}

    @app.get("/health", summary="200 while the server runs")
    async def health():
        return {"status": "ok"}

    @app.get("/info", summary="task, labels, max length, precision and batching settings")
    async def info():
        return service.info()

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page():
        return HTMLResponse(resources.files("bertkit.serve").joinpath("page.html").read_text("utf-8"))

    return app


def app_from_env() -> FastAPI:
    """The factory ``uvicorn`` calls in each ``--workers`` process (config from the environment)."""
    import os

    from bertkit.serve.config import ENV_VAR

    return create_app(ServeConfig.from_json(os.environ[ENV_VAR]))


def run(config: ServeConfig) -> None:
    """Serve until interrupted (SIGINT/SIGTERM finish the requests in flight first)."""
    import os

    import uvicorn

    from bertkit.serve.config import ENV_VAR

    config.check()
    options = dict(host=config.host, port=config.port, log_level="info", timeout_graceful_shutdown=30)
    if config.workers > 1:
        os.environ[ENV_VAR] = config.to_json()
        uvicorn.run("bertkit.serve.app:app_from_env", factory=True, workers=config.workers, **options)
    else:
        uvicorn.run(create_app(config), **options)
