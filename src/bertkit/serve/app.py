"""The HTTP API of ``bertkit serve``: text-embeddings-inference's API (FastAPI on uvicorn).

TEI's routes answer as TEI answers (its ``router/src/http/server.rs`` and ``types.rs``):
``/predict``, ``/rerank``, ``/embed``, ``/embed_all``, ``/similarity``, ``/tokenize``,
``/decode``, ``/v1/embeddings`` (and ``/embeddings``), ``/info``, ``/health`` (and ``/ping``),
``/metrics``, ``POST /`` and ``/invocations`` (the model's own route). Request grammar:
:mod:`bertkit.serve.inputs`; bodies: :mod:`bertkit.serve.schemas`; errors:
:mod:`bertkit.serve.errors`. Every answer of a model route carries TEI's timing headers
(``x-compute-time``, ``x-compute-characters``, ``x-compute-tokens``, ``x-total-time``,
``x-tokenization-time``, ``x-queue-time``, ``x-inference-time``, in milliseconds) and names its
truncated inputs in ``X-Bertkit-Truncated`` (0-based indexes) and its windowed ones in
``X-Bertkit-Windows`` (``index:windows``). bertkit's extras live on routes and fields TEI does
not use: ``/fill-mask``, ``/attention``, question answering and multiple choice on ``/predict``,
``pooling``/``layers`` on ``/embed``, the page at ``GET /`` (for a browser; other clients get
TEI's health answer there) and ``/docs`` (Swagger UI served from the package, offline).
The table of every route and field is in docs/serving.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import math
import sys
import threading
import time
from typing import Any

import numpy as np
from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool

from bertkit.cpu import torch_threads
from bertkit.errors import BertkitError, InputError
from bertkit.inference.process import EngineProcess
from bertkit.model.pooling import SPLADE
from bertkit.modeldir.st_layout import read_st_pooling
from bertkit.serve import offload
from bertkit.serve import schemas as s
from bertkit.serve.batcher import ContinuousBatcher, NeverFits, QueueFull, Timings
from bertkit.serve.config import ServeConfig
from bertkit.serve.errors import ApiError, from_input_error
from bertkit.serve.inputs import (
    check_batch_size,
    check_text,
    check_unicode,
    embed_items,
    id_row,
    left_row,
    predict_items,
    prompted,
    text_items,
)
from bertkit.serve.metrics import INFERENCE, Metrics, method_of
from bertkit.serve.schemas import IGNORED_HEADER, TRUNCATED_HEADER, WINDOWS_HEADER
from bertkit.tasks.base import Plan

TEI_SCORING = ("top_k", "function_to_apply")  # the HF parameters a text scorer's answer takes
VERSION = "1"
HEALTH_TIMEOUT_S = 30.0
ERRORS = {status: {"model": s.ErrorResponse} for status in (400, 413, 422, 424, 429)}


def _ms(seconds: float) -> str:
    return str(int(seconds * 1000))


_EXP_LIMIT = 709.0  # math.exp overflows past ~709.78 (numpy gave inf, a sigmoid of 0.0)


def tei_scores(logits: np.ndarray, labels: list[str], raw: bool, function: str | None = None,
               top_k: int | None = None) -> list[dict]:
    """TEI's ``/predict`` answer from one input's logits: softmax over 2+ labels, sigmoid for
    one (unless ``raw``); best first (``function`` / ``top_k``: the HF API's parameters)."""
    # Python floats, not numpy: a few labels a request, where numpy's cost per call was 3.6x
    # the arithmetic's (15 against 4 us on the VNNI Xeon), on the event loop of every request.
    x = np.asarray(logits, dtype=np.float64).ravel().tolist()
    function = "none" if raw else function or ("softmax" if len(x) > 1 else "sigmoid")
    if function == "softmax":
        top = max(x)
        e = [math.exp(v - top) for v in x]
        total = sum(e)
        x = [v / total for v in e]
    elif function == "sigmoid":
        x = [1 / (1 + math.exp(-v)) if v > -_EXP_LIMIT else 0.0 for v in x]
    order = sorted(range(len(x)), key=x.__getitem__, reverse=True)[:top_k]  # stable: ties in label order
    return [{"score": x[i], "label": labels[i]} for i in order]


class Service:
    """The loaded model, its batcher, its metrics and the logic of every route."""

    def __init__(self, config: ServeConfig, bert):
        self.config = config
        self.bert = bert
        self.batcher: ContinuousBatcher | None = None
        self.engine: EngineProcess | None = None  # --model-process: the forward passes' process
        self.long_text = bert.long_text_choice(config.long_text)  # a bad --stride: refused here
        self.pooling, self.pooling_reason = served_pooling(config, bert)
        self.metrics = Metrics(lambda: self.batcher.queued if self.batcher else 0, bert.max_length)
        self.tokenizing_off_loop = 0  # long requests being cut into windows in a worker thread

    def start(self) -> None:
        c = self.config
        if c.model_process:
            self.engine = EngineProcess(functools.partial(load_model, announce=False), c, name="bertkit-model")
            self.engine.start()
        # with the model in its own process, two batches in flight: the next waits in its pipe
        self.batcher = ContinuousBatcher(self.run_rows, c.max_batch_tokens, c.max_batch_size, c.max_queue,
                                         on_batch=self.metrics.on_batch, workers=2 if self.engine else 1,
                                         cut_padding=self.bert.attention_impl == "padded",
                                         compiling=self.compiling)

    def compiling(self) -> bool:
        """Is the model still building a compiled form (its answers meanwhile from a slower one)?"""
        return self.engine.compiling if self.engine else self.bert.compiling

    def stop(self) -> None:
        if self.batcher is not None:
            self.batcher.close()
        if self.engine is not None:
            self.engine.close()

    def run_rows(self, key: tuple, rows) -> list:
        """The batcher's forward pass: the engine's (in its own process with --model-process)."""
        return (self.engine or self.bert).run_rows(key, rows)

    # ------------------------------------------------------------------ what the model is
    @property
    def num_labels(self) -> int:
        return len(self.bert.labels)

    @property
    def model_kind(self) -> str:
        """TEI's model type: ``classifier``, ``reranker`` (a text scorer with one label) or
        ``embedding`` (no task head: also a sentence-embedding fine-tune, a bare encoder)."""
        family = self.bert.family()
        if family is None or not family.head_answers:
            return "embedding"
        return "reranker" if getattr(family, "scores_texts", False) and self.num_labels == 1 else "classifier"

    def pooling_line(self) -> str:
        """The start-up line saying how embeddings are pooled (``""`` for a model with a task
        head, which --pooling does not touch: said so where it was given)."""
        if self.model_kind != "embedding":
            return (f"bertkit serve: --pooling {self.config.pooling} ignored: the model is a {self.model_kind}"
                    if self.config.pooling else "")
        return f"bertkit serve: embeddings pooled by {self.pooling} ({self.pooling_reason})"

    def overflow(self, truncate: bool | None) -> str:
        return "truncate" if self.truncates(truncate) else "error"

    def truncates(self, truncate: bool | None) -> bool:
        return self.config.truncate if truncate is None else truncate

    # ------------------------------------------------------------------ planning and answering
    async def plans(self, make, items: list, single: bool, shared_chars: int = 0) -> tuple[list[Plan], float]:
        """``make(item, where)`` for every item (off the event loop for long requests: the
        items' characters plus ``shared_chars``, text every item reads, as /rerank's query) and
        the seconds it took; an engine :class:`InputError` names the item of a batch."""
        def build():
            out = []
            for i, item in enumerate(items):
                where = "" if single else f"inputs[{i}]: "
                try:
                    out.append(make(item, where))
                except InputError as e:
                    raise from_input_error(e, where) from None
            return out

        start = time.perf_counter()
        large = _chars(items) + shared_chars * len(items) > offload.OFF_LOOP_CHARS  # not to stall /health
        self.tokenizing_off_loop += large
        try:
            plans = await offload.run(large, build)
        finally:
            self.tokenizing_off_loop -= large
        return plans, time.perf_counter() - start

    async def run(self, route: str, plans: list[Plan], single: bool, started: float,
                  tokenizing: float, chars: int, kind: str | None = None) -> tuple[list, dict]:
        """The plans' answers and the answer headers (TEI's timings, bertkit's truncation);
        the request counted answered (``kind``: TEI's ``embed`` or ``predict`` metrics)."""
        try:
            answers, timings = await self.batcher.run(plans)
        except Exception as e:  # a forward pass failed: TEI's err="inference"
            if not isinstance(e, ApiError | InputError | QueueFull | NeverFits):
                self.metrics.failure.inc(INFERENCE)
            raise
        headers = self.headers(plans, started, tokenizing, timings, chars)
        each = tokenizing / max(len(plans), 1)  # TEI's tokenisation time is per input
        self.metrics.answered("single" if single else "batch", kind, time.perf_counter() - started, each,
                              timings.queue, timings.inference,
                              [(each + seconds, each, q, r, n) for seconds, q, r, n in timings.plans])
        return answers, headers

    def headers(self, plans: list[Plan], started: float, tokenizing: float, t: Timings, chars: int) -> dict:
        total = time.perf_counter() - started
        headers = {"x-compute-type": str(self.bert.device.type), "x-compute-time": _ms(total),
                   "x-compute-characters": str(chars), "x-compute-tokens": str(t.tokens),
                   "x-total-time": _ms(total), "x-tokenization-time": _ms(tokenizing / max(len(plans), 1)),
                   "x-queue-time": _ms(t.queue), "x-inference-time": _ms(t.inference)}
        truncated = [i for i, p in enumerate(plans) if p.truncated]
        windowed = [f"{i}:{p.windows}" for i, p in enumerate(plans) if p.windows > 1]
        if truncated:
            headers[TRUNCATED_HEADER] = ",".join(map(str, truncated))
        if windowed:
            headers[WINDOWS_HEADER] = ",".join(windowed)
        return headers

    def left(self, plan: Plan, text: str, pair: str | None, where: str) -> Plan:
        """``truncation_direction: left``: a truncated single-window row is rebuilt cut from
        the left (classification, rerank, embeddings); other tasks refuse it."""
        if not plan.truncated:
            return plan
        if not plan.left_truncatable:
            raise ApiError(f"{where}truncation_direction 'left' is not supported for this input "
                           f"({self.bert.task}{', windows' if plan.windows > 1 else ''})")
        plan.rows = [left_row(self.bert.tokenizer, text, pair, self.bert.max_length)]
        return plan

    # ------------------------------------------------------------------ /predict, /rerank
    async def predict(self, body: s.PredictRequest) -> tuple[Any, dict]:
        started = time.perf_counter()
        self.metrics.request(method_of(body.inputs, pairs=True))  # as TEI: before validating it
        bert, family = self.bert, self.bert.family()
        if family is None:
            masks = getattr(bert.model, "mlm_head", None) is not None
            raise ApiError(f"this model ({type(bert.model).__name__}) has no task head for /predict; it "
                           f"serves {'/fill-mask and ' if masks else ''}/embed", "Backend")
        structured = family.structured_inputs
        items, single = predict_items(body.inputs, structured, self.config.max_items)
        params = body.parameters or s.HFParameters()
        given = {k: getattr(params, k) for k in s.HFParameters.model_fields if getattr(params, k) is not None}
        left = body.truncation_direction.lower() == "left"
        overflow = self.overflow(body.truncate)
        ignored: set[str] = set()

        def make(item, where):
            texts = item if isinstance(item, list) else [item] if isinstance(item, str) else []
            for t in texts:
                check_text(t, where)
            plan = bert.plan_predict(item, overflow, self.long_text)
            if isinstance(item, str) and len(plan.rows) == 1 and len(plan.rows[0].input_ids) <= 2:
                raise ApiError(f"{where}the input has no tokens", "Empty")
            if left and texts:
                plan = self.left(plan, texts[0], texts[1] if len(texts) == 2 else None, where)
            if plan.logits is not None:  # a text scorer's logits, scored as TEI scores them
                labels, logits = bert.labels, plan.logits
                plan.finish = lambda outputs: tei_scores(logits(outputs), labels, body.raw_scores,
                                                         params.function_to_apply, params.top_k)
                takes = TEI_SCORING
            else:  # the family's answer takes the parameters it honours
                takes = keywords(plan.finish)
                plan.finish = functools.partial(plan.finish, **{k: v for k, v in given.items() if k in takes})
                ignored.update(["raw_scores"] if body.raw_scores else [])
            ignored.update(f"parameters.{k}" for k in given if k not in takes)
            return plan

        self.metrics.inputs("predict", len(items))
        plans, tokenizing = await self.plans(make, items, single)
        answers, headers = await self.run("predict", plans, single, started, tokenizing, _chars(items), "predict")
        if ignored:
            headers[IGNORED_HEADER] = ",".join(sorted(ignored))
        return (answers[0] if single else answers), headers

    async def rerank(self, body: s.RerankRequest) -> tuple[list, dict]:
        started = time.perf_counter()
        if not body.texts:
            raise ApiError("`texts` cannot be empty", "Empty")
        if self.model_kind != "reranker":
            raise ApiError("model is not a re-ranker model (/rerank needs a sentence-pair "
                           "classifier with one output)", "Backend")
        self.metrics.request("batch")  # TEI counts /rerank after these two checks
        check_batch_size(len(body.texts), self.config.max_items)
        check_text(body.query, "query: ")
        overflow, left, bert = self.overflow(body.truncate), body.truncation_direction.lower() == "left", self.bert

        def make(text, where):
            check_text(text, where)
            plan = bert.plan_predict([body.query, text], overflow, self.long_text)
            if left:
                plan = self.left(plan, body.query, text, where)
            plan.finish = lambda outputs: tei_scores(outputs[0], ["score"], body.raw_scores)[0]["score"]
            return plan

        self.metrics.inputs("predict", len(body.texts))
        plans, tokenizing = await self.plans(make, list(body.texts), False, shared_chars=len(body.query))
        scores, headers = await self.run("rerank", plans, False, started, tokenizing,
                                         _chars(body.texts) + len(body.query) * len(body.texts), "predict")
        ranks = [{"index": i, **({"text": body.texts[i]} if body.return_text else {}), "score": float(x)}
                 for i, x in enumerate(scores)]
        ranks.sort(key=lambda r: -r["score"])
        return ranks, headers

    # ------------------------------------------------------------------ embeddings
    def embed_plan(self, item, where: str, layers, pooling: str, truncate: bool | None, left: bool,
                   dimensions: int | None, normalize: bool) -> Plan:
        """One ``/embed`` input (a text or token ids): the engine's plan, its rows rebuilt for
        ids or left truncation, its vector cut to ``dimensions`` then normalised."""
        bert = self.bert
        overflow = self.overflow(truncate)
        if pooling == SPLADE:  # the vector over the vocabulary, dense (TEI's /embed of a SPLADE model)
            plan = bert.sparse_plan(self.token_row(item, where, truncate, left))
            pooled = functools.partial(dense_sparse, size=bert.model.config.vocab_size)
        elif isinstance(item, str):
            check_text(item, where)
            plan = bert.plan_embed(item, layers, pooling, False, overflow, self.long_text)
            if left:
                plan = self.left(plan, item, None, where)
            pooled = plan.finish
        else:  # token ids: the engine plans a text, so plan one and give it the client's row
            row = id_row(item, bert.model.config.vocab_size, bert.max_length, self.truncates(truncate), left, where)
            plan = bert.pooled_plan([row], layers, pooling)
            pooled = plan.finish

        def finish(outputs):
            vector = np.asarray(pooled(outputs), dtype=np.float64)
            if dimensions is not None:
                if dimensions > len(vector):
                    raise ApiError("`dimensions` should be smaller than the maximum embedding dimension.")
                vector = vector[:dimensions]
            if normalize:
                vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
            return [float(x) for x in vector]

        plan.finish = finish
        return plan

    def check_embeds(self) -> None:
        """TEI's 424 for an embedding route on a model with a task head (a classifier, a tagger, QA)."""
        if self.model_kind != "embedding":
            raise ApiError(f"Model is not an embedding model (a {self.bert.task} model: it answers "
                           "/predict; `bertkit embed` gives its encoder's vectors)", "Backend")

    async def embeddings(self, route: str, inputs: Any, *, field: str, truncate: bool | None, left: bool,
                         normalize: bool, dimensions: int | None, pooling: str | None = None,
                         layers: list[int] | None = None, prompt_name: str | None = None) -> tuple[list, dict]:
        started = time.perf_counter()
        self.metrics.request(method_of(inputs))  # as TEI: before validating the request
        self.check_embeds()
        if dimensions is not None and dimensions < 1:
            raise ApiError("`dimensions` should be positive")
        pooling = pooling or self.pooling
        if pooling == SPLADE:  # TEI's answers for a SPLADE model
            if normalize:
                raise ApiError("`normalize` is not available for SPLADE models", "Backend")
            if layers is not None:
                raise ApiError("`layers` is not available for SPLADE models (the vector comes from the "
                               "masked-LM head over the last layer)", "Validation")
        items, single = embed_items(prompted(self.bert, inputs, prompt_name), self.config.max_items, field)
        layers = tuple(layers) if layers is not None else (-1,)

        def make(item, where):
            return self.embed_plan(item, where, layers, pooling, truncate, left, dimensions, normalize)

        self.metrics.inputs("embed", len(items))
        plans, tokenizing = await self.plans(make, items, single)
        return await self.run(route, plans, single, started, tokenizing, _chars(items), "embed")

    def token_row(self, item, where: str, truncate: bool | None, left: bool):
        """One input (a text or token ids) as a model row, cut from the ``left`` or the right
        when ``truncate`` allows, else a 413 naming its length (``/embed_all``, ``/embed_sparse``)."""
        bert, truncate = self.bert, self.truncates(truncate)
        if isinstance(item, str):
            check_text(item, where)
            if left:
                row = left_row(bert.tokenizer, item, None, bert.max_length)
            else:
                row = bert.tokenizer.encode(item, max_length=bert.max_length, truncation="longest_first")
            if row.num_truncated and not truncate:
                raise ApiError(f"{where}the input has {len(row.input_ids) + row.num_truncated} tokens, "
                               f"more than the model's limit of {bert.max_length}", "Validation", 413)
            return row
        return id_row(item, bert.model.config.vocab_size, bert.max_length, truncate, left, where)

    async def embed_all(self, body: s.EmbedAllRequest) -> tuple[list, dict]:
        """TEI's ``/embed_all``: per input, every token's last hidden state."""
        self.metrics.request(method_of(body.inputs))
        self.check_embeds()
        if self.pooling == SPLADE:
            raise ApiError("`embed_all` is not available for SPLADE models", "Backend")
        return await self.row_route("embed_all", body, self.bert.states_plan, self.bert.model.config.hidden_size)

    async def embed_sparse(self, body: s.EmbedSparseRequest) -> tuple[list, dict]:
        """TEI's ``/embed_sparse``: per input, the non-zero terms of its SPLADE vector."""
        self.metrics.request(method_of(body.inputs))
        try:  # TEI checks the model before counting the inputs
            self.bert.check_sparse()
        except InputError as e:
            raise from_input_error(e) from None
        return await self.row_route("embed_sparse", body, self.bert.sparse_plan)

    async def row_route(self, route: str, body, plan_of, values_per_token: int = 0) -> tuple[list, dict]:
        """A route answering each input (a text or token ids: :meth:`token_row`) with
        ``plan_of(row)``'s answer, of ``values_per_token`` numbers per token (0: not per token)."""
        started = time.perf_counter()
        items, single = embed_items(prompted(self.bert, body.inputs, body.prompt_name), self.config.max_items)
        left = body.truncation_direction.lower() == "left"

        def make(item, where):
            return plan_of(self.token_row(item, where, body.truncate, left))

        self.metrics.inputs("embed", len(items))
        plans, tokenizing = await self.plans(make, items, single)
        tokens = sum(len(row.input_ids) for plan in plans for row in plan.rows)
        self.check_answer_size(tokens * values_per_token, f"{tokens:,} tokens x {values_per_token:,}")
        return await self.run(route, plans, single, started, tokenizing, _chars(items), "embed")

    def check_answer_size(self, values: int, what: str) -> None:
        """The bound on an answer's size (the bytes a request makes the server build and send:
        15 KB asking for hidden states built a 231 MB answer), checked before the forward pass."""
        if values > self.config.max_answer_values:
            raise ApiError(f"the answer would hold {values:,} numbers ({what}), more than --max-answer-values "
                           f"{self.config.max_answer_values:,}: send fewer or shorter inputs", "Validation", 413)

    async def similarity(self, body: s.SimilarityRequest) -> tuple[list, dict]:
        if not body.inputs.sentences:
            raise ApiError("`inputs.sentences` cannot be empty", "Empty")
        p = body.parameters or s.SimilarityParameters()
        n = len(body.inputs.sentences)
        check_batch_size(n + 1, self.config.max_items,
                         f": the source_sentence is embedded with the {n} sentence{'s' * (n != 1)}")
        vectors, headers = await self.embeddings(
            "similarity", [body.inputs.source_sentence, *body.inputs.sentences], field="inputs",
            truncate=p.truncate, left=p.truncation_direction.lower() == "left", normalize=True, dimensions=None,
            prompt_name=p.prompt_name)
        source = np.asarray(vectors[0])
        return [float(np.dot(source, np.asarray(v))) for v in vectors[1:]], headers

    # ------------------------------------------------------------------ tokenizer routes
    def tokenize(self, body: s.TokenizeRequest) -> list:
        texts = prompted(self.bert, [body.inputs] if isinstance(body.inputs, str) else body.inputs,
                         body.prompt_name)
        if not texts:
            raise ApiError("`inputs` cannot be empty", "Empty")
        check_batch_size(len(texts), self.config.max_items)
        return [self.tokens(t, body.add_special_tokens, f"inputs[{i}]: " if len(texts) > 1 else "")
                for i, t in enumerate(texts)]

    def tokens(self, text: str, special: bool, where: str) -> list[dict]:
        """TEI's ``SimpleToken`` list: ``start``/``stop`` are UTF-8 byte offsets (as TEI's Rust
        tokenizer gives them), ``text`` the piece of the input; special tokens have no span."""
        if not text:
            raise ApiError(f"{where}`inputs` cannot be empty", "Empty")
        check_unicode(text, where)
        tok = self.bert.tokenizer
        ids, offsets = tok.text_to_ids_and_offsets(text)
        byte_at = np.concatenate([[0], np.cumsum([len(c.encode("utf-8")) for c in text])]).astype(int)
        specials = set(tok.special_token_ids)
        out = []
        for token_id, (a, b) in zip(ids, offsets):
            if token_id in specials:
                out.append(_special(tok, token_id))
            else:
                out.append({"id": token_id, "text": text[a:b], "special": False,
                            "start": int(byte_at[a]), "stop": int(byte_at[b])})
        if special:
            out = [_special(tok, tok.cls_token_id), *out, _special(tok, tok.sep_token_id)]
        return out

    def decode(self, body: s.DecodeRequest) -> list[str]:
        """TEI's ``/decode``: ids (``[]`` decodes to ``""``) or a batch of id lists."""
        batch = body.ids if body.ids and isinstance(body.ids[0], list) else [body.ids]
        check_batch_size(len(batch), self.config.max_items)
        size = self.bert.model.config.vocab_size
        for i, row in enumerate(batch):
            bad = next((x for x in row if not 0 <= x < size), None)
            if bad is not None:
                where = f"ids[{i}]: " if len(batch) > 1 else ""
                raise ApiError(f"{where}token id {bad} is outside the vocabulary (0..{size - 1})", "Tokenizer")
        return [self.bert.tokenizer.decode(row, skip_special_tokens=body.skip_special_tokens) for row in batch]

    # ------------------------------------------------------------------ bertkit extras
    async def fill_mask(self, body: s.FillMaskRequest) -> tuple[Any, dict]:
        started = time.perf_counter()
        self.metrics.request("single" if not isinstance(body.inputs, list) else "batch")
        items, single = text_items(body.inputs, self.config.max_items)
        overflow = self.overflow(body.truncate)
        top_k = body.parameters.top_k if body.parameters and body.parameters.top_k is not None else body.top_k
        plans, tokenizing = await self.plans(lambda x, where: self.bert.plan_fill_mask(x, top_k, overflow),
                                             items, single)
        answers, headers = await self.run("fill-mask", plans, single, started, tokenizing, _chars(items))
        return (answers[0] if single else answers), headers

    async def attention(self, body: s.AttentionRequest) -> tuple[dict, dict]:
        bert = self.bert
        check_unicode(body.inputs, "inputs: ")
        if body.pair is not None:
            check_unicode(body.pair, "pair: ")
        enc = bert.tokenizer.encode(body.inputs, body.pair, max_length=bert.max_length, truncation="longest_first")
        try:  # outside the batcher: one request's one forward pass with attentions
            tokens, matrix = await offload.off_loop(bert.attention, body.inputs, body.layer, body.head, body.pair,
                                                    self.overflow(body.truncate))
        except InputError as e:
            raise from_input_error(e) from None
        first = enc.input_ids.index(bert.tokenizer.sep_token_id) + 1 if body.pair is not None else len(tokens)
        answer = {"tokens": tokens, "layer": body.layer, "head": body.head, "segment_a": first,
                  "attention": [[round(float(x), 5) for x in row] for row in matrix]}
        return answer, ({TRUNCATED_HEADER: "0"} if enc.num_truncated else {})

    # ------------------------------------------------------------------ /info, /health
    def info(self) -> dict:
        bert, c = self.bert, self.config
        config = bert.model.config
        labels = bert.labels
        kind = self.model_kind
        heads = _heads(bert.model)
        model_type = ({kind: {"id2label": {str(i): x for i, x in enumerate(labels)},
                              "label2id": {x: i for i, x in enumerate(labels)}}}
                      if kind != "embedding" else {"embedding": {"pooling": self.pooling}})
        precision = bert.served_precision
        dtype = {"fp32": "float32", "bf16": "bfloat16", "int8": "int8"}.get(precision, precision)
        return {"model_id": c.model, "model_sha": None, "model_dtype": dtype, "served_model_name": c.model,
                "model_type": model_type, "max_concurrent_requests": c.max_queue,
                "max_input_length": bert.max_length, "max_batch_tokens": c.max_batch_tokens,
                "max_batch_requests": c.max_batch_size, "max_client_batch_size": c.max_items,
                "auto_truncate": c.truncate, "tokenization_workers": 1, "version": VERSION,
                "sha": None, "docker_label": None,
                "bertkit": {"task": bert.task, "labels": labels, "pair_inputs": bert.pair_inputs,
                            "max_length": bert.max_length, "precision": precision,
                            "runtime": bert.runtime,
                            "compiling": self.compiling(),
                            "attention_impl": bert.attention_impl,
                            "num_layers": config.num_hidden_layers, "num_heads": max(heads),
                            "heads_per_layer": heads,
                            "hidden_size": config.hidden_size,
                            "long_text": {"mode": self.long_text.mode, "stride": self.long_text.stride,
                                          "pool_windows": self.long_text.pool},
                            "model_process": self.engine.pid if self.engine else None,
                            "batches_run": self.batcher.batches_run if self.batcher else 0,
                            "rows_run": self.batcher.rows_run if self.batcher else 0,
                            "pass_tokens": self.pass_tokens()}}

    def pass_tokens(self) -> float | None:
        """What a forward pass costs beyond its tokens, in padded tokens, as the batcher
        measured it (it cuts batches by it); None until measured, or where batches run unpadded."""
        cost = self.batcher.pass_cost if self.batcher else None
        tokens = cost.tokens if cost is not None else None
        return None if tokens is None else round(tokens, 1)

    def health_probe(self) -> Plan:
        """``/health``'s pass of two tokens (``[CLS] [SEP]``): through the model's own head where
        it scores texts (a classifier: the route its requests take; a static-INT8 classifier reads
        a ``[CLS]``-only graph, and the whole encoder's package, loaded for this probe alone, was a
        second 190 MB on BERT-Base, built for 45 s on a cold start while requests waited), else
        its last hidden states."""
        tok = self.bert.tokenizer
        row = _Tokens([tok.cls_token_id, tok.sep_token_id])
        family = self.bert.family()
        if getattr(family, "scores_texts", False):
            return Plan([row], (family,), lambda outputs: True)
        probe = self.bert.states_plan(row)
        probe.finish = lambda outputs: True
        return probe

    async def healthy(self) -> bool:
        """The worker thread lives and the model answers: busy, it is working; idle, a
        two-token probe runs through the batcher (as TEI's backend health check).

        While a long text is tokenised in a worker thread the probe is skipped: that thread
        holds the GIL for most of each switch interval, and the probe's forward pass, which
        takes it back between every operator, would wait for it (about 1 s for a 4 MB text)."""
        b = self.batcher
        if b is None or not b.alive:
            return False
        if b.running or b.queued or self.tokenizing_off_loop:
            return True
        probe = self.health_probe()
        try:
            await asyncio.wait_for(b.run([probe]), HEALTH_TIMEOUT_S)
        except Exception:
            return False
        return True


class _Tokens:
    def __init__(self, ids):
        self.input_ids, self.token_type_ids, self.num_truncated = ids, [0] * len(ids), 0


def keywords(function) -> set[str]:
    """The names of ``function``'s arguments that have defaults (a plan's ``finish`` takes the
    Hugging Face parameters its task honours that way)."""
    return {name for name, p in inspect.signature(function).parameters.items() if p.default is not p.empty}


def _special(tok, token_id: int) -> dict:
    return {"id": token_id, "text": tok.convert_ids_to_tokens(token_id), "special": True, "start": None,
            "stop": None}


def _chars(items) -> int:
    """Characters of a request's texts (token ids count one each), as TEI's ``count_chars``."""
    total = 0
    for x in items:
        if isinstance(x, str):
            total += len(x)
        elif isinstance(x, list):
            total += _chars(x) if x and not isinstance(x[0], int) else len(x)
        elif isinstance(x, dict):
            total += _chars(list(v for v in x.values() if isinstance(v, str | list)))
    return total


def _heads(model) -> list[int]:
    """Attention heads of each layer: a pruned model has fewer than its config's
    ``num_attention_heads`` (the config's ``pruned_heads`` says which are gone)."""
    from bertkit.model.pruning import remaining_heads

    config = model.config
    return [len(remaining_heads(config, layer)) for layer in range(config.num_hidden_layers)]


def check_port(host: str, port: int) -> None:
    """A :class:`BertkitError` naming ``--port`` when ``host:port`` cannot be bound (another
    server there), before a model is loaded; uvicorn alone logs the error and then
    "Application shutdown complete"."""
    import socket

    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as e:
            raise BertkitError(f"--port {port}: cannot listen on {host}:{port} ({e.strerror}); "
                               "another server may be using it: choose another --port") from None


def create_app(config: ServeConfig, bert=None) -> FastAPI:
    """The application serving ``config.model`` (or the already loaded ``bert``): the model
    loaded, the service with its batcher started for the app's lifetime, the gate (API key,
    CORS, payload limit, offline docs), the error answers and the routes of
    :mod:`bertkit.serve.routes`."""
    from bertkit.serve import routes, spec
    from bertkit.serve.gate import Gate, add_docs

    config.check()
    service = Service(config, bert if bert is not None else load_model(config, warm=not config.model_process))
    if service.pooling_line():
        print(service.pooling_line(), file=sys.stderr, flush=True)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        service.start()
        try:
            yield
        finally:  # uvicorn has finished the requests in flight; the queue is drained here
            await run_in_threadpool(service.stop)

    app = FastAPI(title="bertkit serve", version=VERSION, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="A bertkit model behind text-embeddings-inference's HTTP API "
                              "(docs/serving.md has the table of routes and fields).")
    app.state.service = service
    add_docs(app)
    Gate.install(app, config)
    routes.install(app)
    spec.install(app)
    return app


def served_pooling(config: ServeConfig, bert) -> tuple[str, str]:
    """``(pooling, why)`` of an embedding model's vectors: ``--pooling``, else, as TEI, the
    directory's sentence-transformers pooling, else ``cls``. ``splade`` needs the model's
    masked-LM head (a :class:`BertkitError` naming the flag without it)."""
    if config.pooling == SPLADE:
        try:
            bert.check_sparse()
        except InputError as e:
            raise BertkitError(f"--pooling splade: {e}") from None
    if config.pooling:
        return config.pooling, "--pooling"
    declared = read_st_pooling(config.model) if config.model else None
    if declared:
        return declared, "the model directory's: its 1_Pooling/config.json, or the pooling it was fine-tuned with"
    return "cls", "the model directory names no pooling; --pooling chooses cls, mean, max or splade"


def dense_sparse(outputs, size: int) -> np.ndarray:
    """A sparse plan's ``(indices, values)`` as the dense vector of ``size`` it stands for."""
    indices, values = outputs[0]
    vector = np.zeros(size, dtype=np.float64)
    vector[indices] = values
    return vector


def load_model(config: ServeConfig, announce: bool = True, warm: bool = True):
    """The engine serving ``config.model`` (PyTorch or OpenVINO), its choice printed unless not
    ``announce``, its compiled graphs built unless not ``warm``. With --model-process both
    processes load it: the server's copy (plans, /info, /attention) is neither announced twice
    nor warmed, the model process's runs the forward passes."""
    from bertkit.inference import load

    if config.threads:
        import torch

        torch.set_num_threads(config.threads)
    # One intra-op thread while loading (and quantising): the forward passes run in the
    # batcher's worker thread, and once the main thread had run parallel work of its own
    # (an OpenMP thread team beside the worker's, on two cores) the worker's single-sentence
    # passes were 1.4-1.6x slower (BERT-Base: 115-127 ms instead of 77-82; docs/serving.md).
    with torch_threads(1):
        calibration = serve_calibration(config)
        if config.runtime == "openvino":
            from bertkit.inference.openvino import load_openvino

            bert = load_openvino(config.model, config.precision, calibration, threads=config.threads)
        elif calibration:  # static INT8, compiled by the warm-up below
            bert = load(config.model, device=config.device, precision=config.precision, calibration=calibration,
                        warm_up=False)
        else:
            bert = load(config.model, device=config.device, precision=config.precision)
        if config.runtime == "auto":
            from bertkit.inference.openvino import on_openvino

            bert = on_openvino(bert, threads=config.threads)
        if bert.runtime == "torch" and not calibration:  # OpenVINO and static INT8 compile their own graphs
            bert.compile(config.compile)
        bert.unpad(config.attention_impl)
    # the compiled graphs are built outside the one-thread block (their kernels take the thread
    # count they are built with) and in a thread of their own, whose OpenMP threads end with it
    if warm:
        warming = threading.Thread(target=bert.warm_up, kwargs={"background": True}, name="bertkit-compile")
        warming.start()
        warming.join()
    if announce:
        runtime = f"{bert.runtime} ({bert.runtime_reason})" if config.runtime == "auto" else bert.runtime
        print(f"bertkit serve: {config.model}: task {bert.task}, runtime {runtime}, precision "
              f"{bert.served_precision} ({bert.precision_reason}), compile: {bert.compile_reason}, "
              f"batches {bert.attention_impl} ({bert.attention_reason})"
              f"{', forward passes in a process of their own' if config.model_process else ''}",
              file=sys.stderr, flush=True)
    return bert


def serve_calibration(config: ServeConfig) -> list | None:
    """The static-INT8 calibration inputs the server uses: ``--calibration``'s (a file's, or the
    model directory's with ``saved``); without the flag, at ``--precision int8`` of a float
    directory that saved its training inputs (``bertkit finetune`` does), those, where static
    INT8 can run (a server pays its compilation once and keeps the faster, 8-bit route); else
    None (dynamic INT8, with a line saying why where saved inputs went unused)."""
    from bertkit.inference.calibration import SAVED, calibration_option, has_saved_calibration
    from bertkit.modeldir.int8 import is_int8_dir

    if config.calibration:
        rows = calibration_option(config.calibration, config.precision, "serve", config.model)
        if config.runtime == "openvino" and str(config.calibration) != SAVED:
            from bertkit.inference.openvino import check_calibration_fits

            check_calibration_fits(config.model, rows, config.calibration)
        return rows
    if config.precision != "int8" or not has_saved_calibration(config.model) or is_int8_dir(config.model):
        return None
    if config.runtime == "torch":
        from bertkit.inference import static_int8

        why = static_int8.blocker()
        if why:
            print(f"bertkit serve: {config.model} saved calibration inputs for static INT8, but {why}; "
                  "serving dynamic INT8", file=sys.stderr, flush=True)
            return None
    return calibration_option(SAVED, config.precision, "serve", config.model)


def app_from_env() -> FastAPI:
    """The factory ``uvicorn`` calls in each ``--workers`` process (config from the environment)."""
    import os

    from bertkit.serve.config import ENV_VAR

    try:
        return create_app(ServeConfig.from_json(os.environ[ENV_VAR]))
    except BertkitError as e:  # e.g. the model directory removed since the server started
        # one line, not uvicorn's traceback of the factory. Exit status 1, not uvicorn's 3
        # ("failed to start"), which would make it stop the workers still serving
        print(f"bertkit serve: worker {os.getpid()} cannot start: {e}; the workers already running go on "
              "with the model they loaded", file=sys.stderr, flush=True)
        os._exit(1)


def run(config: ServeConfig) -> None:
    """Serve until interrupted (SIGINT/SIGTERM finish the requests in flight first)."""
    import os

    import uvicorn

    from bertkit.serve.config import ENV_VAR
    from bertkit.serve.connections import uvicorn_options

    config.check()
    check_port(config.host, config.port)
    options = dict(host=config.host, port=config.port, log_level="info", timeout_graceful_shutdown=30,
                   access_log=config.access_log, **uvicorn_options(config))
    if config.workers > 1:
        os.environ[ENV_VAR] = config.to_json()
        uvicorn.run("bertkit.serve.app:app_from_env", factory=True, workers=config.workers, **options)
    else:
        uvicorn.run(create_app(config), **options)
