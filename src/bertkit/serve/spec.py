"""The OpenAPI description of one ``bertkit serve``: exactly what this server serves and takes.

FastAPI's description, from :mod:`bertkit.serve.schemas`, types ``inputs`` as anything and
lists every route whatever the model. :func:`exact_openapi` narrows it to the served model
and the server's limits, so that a client generated from it, or a fuzzer
(``tests/serve/test_openapi.py`` runs schemathesis with all its checks), meets no answer the
description does not announce:

* routes the model does not serve (TEI's 424: ``/embed`` on a classifier, ``/rerank`` on
  anything but a one-output pair scorer, ``/fill-mask`` without a masked-LM head) are left out;
* ``inputs`` is typed by route and model: the shapes the model's task reads (found by planning
  one of each shape, so the description follows the engine), texts with a character the
  tokenizer keeps (:func:`kept_pattern`), token ids within the vocabulary, batches of 1 to
  ``--max-items``; layers, heads, ``dimensions``, ``top_k`` and ``prompt_name`` within the model's;
* the model's own route (``POST /``, ``/invocations``) takes its route's body; ``/health``,
  ``/ping`` and ``GET /`` answer an empty 200, ``/metrics`` Prometheus' text; every POST route
  may answer 415 (and 401 with an API key).

Not expressible, and so not described: the model's token limit (a text over it is truncated,
or with ``"truncate": false`` answered 413; the test model's limit is beyond what the fuzzer
writes).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from bertkit.errors import InputError

EMBEDDING_ROUTES = ("/embed", "/embed_all", "/similarity", "/v1/embeddings", "/embeddings")
EMPTY_ANSWERS = ("/health", "/ping", "/")


def install(app) -> None:
    """``app``'s description made exact (:func:`exact_openapi`, built once), served at
    ``/openapi.json`` and at TEI's ``/api-doc/openapi.json``."""
    from fastapi.openapi.utils import get_openapi
    from fastapi.responses import JSONResponse

    def openapi() -> dict:
        if app.openapi_schema is None:
            app.openapi_schema = exact_openapi(get_openapi(title=app.title, version=app.version,
                                                           description=app.description, routes=app.routes),
                                               app.state.service)
        return app.openapi_schema

    app.openapi = openapi

    @app.get("/api-doc/openapi.json", include_in_schema=False)
    async def tei_spec():
        return JSONResponse(openapi())


def exact_openapi(spec: dict, service) -> dict:
    """``spec`` (FastAPI's description of the app) narrowed to ``service``'s model and limits."""
    paths, bodies = spec["paths"], spec["components"]["schemas"]
    bodies["Text"] = {"type": "string", "pattern": kept_pattern(),
                      "description": "a text with a character the tokenizer keeps (not only white space, "
                                     "control, format, private-use or unassigned characters)"}
    for path in served_not(service):
        paths.pop(path, None)
    shapes = Shapes(service)
    for name, fields in shapes.bodies().items():
        for field, schema in fields.items():
            bodies[name]["properties"][field] = {**_described(bodies[name]["properties"].get(field, {})),
                                                 **schema}
    own = shapes.own_route_body()
    for path in ("/", "/invocations"):
        paths[path]["post"]["requestBody"] = {"required": True, "content": {"application/json": {"schema": own}}}
    statuses = {"415": "the body is not JSON (UnsupportedMediaType)"}
    if service.config.key():  # /docs' Authorize button: the scheme, on the operations it guards
        statuses["401"] = "no valid 'Authorization: Bearer KEY' (Unauthorized)"
        spec["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    for path, methods in paths.items():
        for method, operation in methods.items():
            _answers(path, method, operation, statuses)
    return spec


def served_not(service) -> list[str]:
    """The routes ``service``'s model does not serve (each answers TEI's 424)."""
    bert, kind = service.bert, service.model_kind
    masks = getattr(bert.model, "mlm_head", None) is not None
    gone = [] if bert.family() is not None else ["/predict"]
    gone += [] if kind == "reranker" else ["/rerank"]
    gone += [] if kind == "embedding" else list(EMBEDDING_ROUTES)
    gone += [] if masks else ["/fill-mask", "/embed_sparse"]
    return gone


def _described(schema: dict) -> dict:
    return {k: schema[k] for k in ("title", "description", "examples", "default") if k in schema}


def _answers(path: str, method: str, operation: dict, statuses: dict) -> None:
    """One operation's answers: empty 200s, Prometheus text, and the gate's statuses."""
    responses = operation["responses"]
    if path in EMPTY_ANSWERS and method == "get":
        responses["200"] = {"description": "the model answers (an empty body; GET / from a browser: the page)"}
    if path == "/metrics":
        responses["200"] = {"description": "Prometheus metrics",
                            "content": {"text/plain": {"schema": {"type": "string"}}}}
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}}
    for status, why in statuses.items():
        if method == "post" or status == "401" and path == "/info":
            responses.setdefault(status, {"description": why, **error})
            if status == "401":
                operation["security"] = [{"bearer": []}]


class Shapes:
    """JSON Schemas of what ``service``'s model and limits accept, field by field."""

    def __init__(self, service):
        self.service, self.bert, self.config = service, service.bert, service.config
        config = self.bert.model.config
        self.vocab, self.hidden, self.layers = config.vocab_size, config.hidden_size, config.num_hidden_layers

    def text(self) -> dict:
        return {"$ref": "#/components/schemas/Text"}

    def batch(self, item: dict, most: int | None = None) -> dict:
        return {"type": "array", "items": item, "minItems": 1, "maxItems": most or self.config.max_items}

    def ids(self, least: int = 1) -> dict:
        return {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": self.vocab - 1},
                "minItems": least}

    def optional(self, schema: dict) -> dict:
        return {"anyOf": [schema, {"type": "null"}]}

    def embed_inputs(self) -> dict:
        one = {"anyOf": [self.text(), self.ids()]}
        return {"anyOf": [self.text(), self.ids(), self.batch(one)]}

    def prompt_name(self) -> dict:
        names = sorted(getattr(self.bert, "prompts", None) or {})
        return self.optional({"type": "string", "enum": names}) if names else {"type": "null"}

    def bodies(self) -> dict[str, dict[str, dict]]:
        """Per request body (its component's name), the fields narrowed."""
        text, states = self.text(), self.layers + 1
        size = {"type": "integer", "minimum": 1, "maximum": self.hidden}
        mask = {"type": "string", "pattern": _escaped(self.bert.tokenizer.convert_ids_to_tokens(
            self.bert.tokenizer.mask_token_id))} if self.bert.tokenizer.mask_token_id is not None else text
        top_k = {"type": "integer", "minimum": 1, "maximum": 100}
        heads = min(self.service.info()["bertkit"]["heads_per_layer"])
        return {
            "PredictRequest": {"inputs": self.predict_inputs()},
            "RerankRequest": {"query": text, "texts": self.batch(text)},
            "EmbedRequest": {"inputs": self.embed_inputs(), "dimensions": self.optional(size),
                             "prompt_name": self.prompt_name(),
                             "layers": self.optional({"type": "array", "items": {
                                 "type": "integer", "minimum": -states, "maximum": states - 1},
                                 "minItems": 1, "maxItems": states})},
            "EmbedAllRequest": {"inputs": self.embed_inputs(), "prompt_name": self.prompt_name()},
            "EmbedSparseRequest": {"inputs": self.embed_inputs(), "prompt_name": self.prompt_name()},
            "SimilarityInput": {"source_sentence": text,
                                "sentences": self.batch(text, self.config.max_items - 1)},
            "SimilarityParameters": {"prompt_name": self.prompt_name()},
            "OpenAIRequest": {"input": self.embed_inputs(), "dimensions": self.optional(size)},
            "TokenizeRequest": {"inputs": {"anyOf": [{"type": "string", "minLength": 1},
                                                     self.batch({"type": "string", "minLength": 1})]},
                                "prompt_name": self.prompt_name()},
            "DecodeRequest": {"ids": {"anyOf": [self.ids(0), self.batch(self.ids(0))]}},
            "FillMaskRequest": {"inputs": {"anyOf": [mask, self.batch(mask)]}, "top_k": top_k},
            "FillMaskParameters": {"top_k": self.optional(top_k)},
            "AttentionRequest": {"inputs": text, "pair": self.optional({"type": "string"}),
                                 "layer": {"type": "integer", "minimum": -self.layers, "maximum": self.layers - 1},
                                 "head": {"type": "integer", "minimum": 0, "maximum": heads - 1}},
        }

    def predict_inputs(self) -> dict:
        """``/predict``'s ``inputs``: the shapes the model's task plans (each tried once)."""
        text = self.text()
        if self.accepts({"question": "a", "context": "b"}):
            one = {"type": "object", "properties": {"question": text, "context": text},
                   "required": ["question", "context"]}
        elif self.accepts({"context": "a", "choices": ["b", "c"]}):
            one = {"type": "object", "properties": {"context": text, "choices": {
                "type": "array", "items": text, "minItems": 2}}, "required": ["context", "choices"]}
        else:
            single, pair = self.accepts("a b"), self.accepts(["a b", "c d"])
            pair_schema = {"type": "array", "items": text, "minItems": 2, "maxItems": 2}
            one_item = {"type": "array", "items": text, "minItems": 1, "maxItems": 1}
            shapes = [s for s, ok in ((text, single), (one_item, single), (pair_schema, pair)) if ok]
            rows = [s for s, ok in ((one_item, single), (pair_schema, pair)) if ok]
            return {"anyOf": [*shapes, self.batch({"anyOf": rows})]}
        return {"anyOf": [one, self.batch(one)]}

    def accepts(self, item: Any) -> bool:
        """Whether the model's task plans ``item`` (tokenising only: no forward pass)."""
        try:
            self.bert.plan_predict(item)
        except InputError:
            return False
        return True

    def own_route_body(self) -> dict:
        """``POST /``'s body: the model's route's (an embedding model's: /embed's or /similarity's)."""
        kind = self.service.model_kind
        name = {"reranker": "RerankRequest", "classifier": "PredictRequest"}.get(kind)
        if name:
            return {"$ref": f"#/components/schemas/{name}"}
        return {"anyOf": [{"$ref": "#/components/schemas/EmbedRequest"},
                          {"$ref": "#/components/schemas/SimilarityRequest"}]}


@functools.lru_cache(maxsize=1)
def kept_pattern() -> str:
    """A regular expression finding a character the tokenizer keeps: any but those of
    :func:`~bertkit.tokenizer.basic.is_blank` (white space, controls, format, private-use,
    surrogate and unassigned code points, by this Python's Unicode tables, the server's own),
    as ranges (named, not negated: a fuzzer draws from them 7x faster): ``\\uXXXX`` escapes
    in the BMP, the characters themselves beyond it."""
    from bertkit.tokenizer.basic import is_blank

    ranges: list[list[int]] = []
    for code in range(0x110000):
        if not is_blank(chr(code)):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    return "[" + "".join(_char(a) + (f"-{_char(b)}" if b > a else "") for a, b in ranges) + "]"


def _char(code: int) -> str:
    return f"\\u{code:04x}" if code < 0x10000 else chr(code)


def _escaped(token: str) -> str:
    """A regular expression matching ``token`` literally (``[MASK]`` -> ``\\[MASK\\]``)."""
    return re.escape(token)
