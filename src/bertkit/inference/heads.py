"""Task predictions on raw text: the head post-processing shared by the Python API and the server.

:class:`~bertkit.inference.BertInference` inherits :class:`TaskInference`. Work is planned in
two halves so that a server can batch rows from many requests together:

* ``plan_*(item)`` tokenises one input into a :class:`Plan`: its model rows (encodings), the
  batching ``key`` (rows with equal keys may share a forward pass) and ``finish``, which turns
  the rows' outputs into the answer;
* :meth:`TaskInference.run_rows` runs one padded batch of rows with the same key (under the
  model's precision) and returns one output per row.

:meth:`TaskInference.run_plans` does both for a list of plans in length-sorted batches capped
by a token budget; ``predict`` / ``embed_texts`` / ``fill_mask_texts`` are the public entry points.
Answer shapes follow the Hugging Face pipelines (and text-embeddings-inference):

* sequence classification: ``[{"label", "score"}, ...]`` every label, best first (softmax);
  regression: ``[{"label", "score"}]`` with the raw value as score;
* token classification: entities ``{"entity_group", "score", "word", "start", "end"}`` with
  character offsets into the text (words are split at spaces and punctuation, each word takes
  its first wordpiece's tag, B-/I- runs of one type are merged, score = mean tag probability);
* question answering: ``{"answer", "score", "start", "end"}`` (SQuAD 2.0 models may answer
  ``""`` with start = end = 0 when the no-answer score wins);
* multiple choice: ``[{"label": choice, "index", "score"}, ...]`` best first;
* embeddings: one vector (list of floats) per input; fill-mask: per ``[MASK]``, candidates
  ``{"score", "token", "token_str", "sequence"}`` (a flat list when the text has one mask).

Texts longer than the limit: with a :class:`~bertkit.tasks.windows.LongText` in ``window`` mode
(the ``long_text`` argument, default the model's saved choice, :meth:`TaskInference.long_text_choice`)
classification / regression, token tagging and ``/embed`` read a long text in overlapping
windows, built by the code the tasks use (:func:`bertkit.tasks.windows.text_windows`,
:func:`bertkit.tasks.tagging.featurize_tagging`), so answers equal ``bertkit predict
--long-text window``'s: logits (or vectors) pooled over the windows (``mean`` / ``max``), each
word's tag from its max-context window, character offsets into the whole text. A plan's
``windows`` counts its windows (1: read whole, as without windowing). Pairs keep their second
text (cut to half the room when both do not fit: ``truncated``); ``/embed`` pairs, QA,
multiple choice and fill-mask are not windowed (truncated as before).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from bertkit.errors import BertkitError
from bertkit.inference.int8 import autocast
from bertkit.tasks.windows import LONG_TEXT_OPTIONS, LongText, check_stride, pool_rows, text_windows

TASK_OF_CLASS = {
    "BertForSequenceClassification": "text-classification",
    "BertForTokenClassification": "token-classification",
    "BertForQuestionAnswering": "question-answering",
    "BertForMultipleChoice": "multiple-choice",
    "BertForMaskedLM": "fill-mask",
    "BertForPreTraining": "fill-mask",
    "BertModel": "feature-extraction",
}
WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)
MAX_ANSWER_TOKENS = 30


class InputError(BertkitError):
    """An input the model cannot take; the server answers ``status`` (a 4xx) with the message
    (422 a bad value, 413 too long, 400 a request this model cannot serve)."""

    def __init__(self, message: str, status: int = 422):
        super().__init__(message)
        self.status = status


@dataclass
class Plan:
    """One input's work: model rows, their batching key, and how to finish the answer."""

    rows: list  # Encoding per model row
    key: tuple
    finish: Callable[[list[Any]], Any]
    truncated: bool = False
    outputs: list = field(default_factory=list)
    windows: int = 1  # model rows that are windows of one long text (1: not windowed)


@dataclass
class _Row:
    """A model row built without the tokenizer's ``encode`` (a window)."""

    input_ids: list[int]
    token_type_ids: list[int]
    num_truncated: int = 0


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InputError(f"{what} is empty")
    return value


def group_entities(text: str, spans: Sequence[tuple[int, int]], tags: Sequence[str],
                   scores: Sequence[float]) -> list[dict]:
    """Entities of word-level BIO (or IOB1) tags: runs of ``B-X I-X ...`` of one type."""
    entities: list[dict] = []
    current: dict | None = None
    for (start, end), tag, score in zip(spans, tags, scores):
        prefix, _, kind = tag.partition("-") if "-" in tag else ("O", "", "")
        if tag == "O" or not kind:
            current = None
            continue
        if current is not None and prefix == "I" and current["entity_group"] == kind:
            current["end"], current["_scores"] = end, current["_scores"] + [score]
            continue
        current = {"entity_group": kind, "start": start, "end": end, "_scores": [score]}
        entities.append(current)
    for e in entities:
        e["score"] = float(np.mean(e.pop("_scores")))
        e["word"] = text[e["start"]:e["end"]]
    return [{k: e[k] for k in ("entity_group", "score", "word", "start", "end")} for e in entities]


class TaskInference:
    """Mixin of :class:`~bertkit.inference.BertInference`: raw-text task predictions.

    Needs ``self.model``, ``self.tokenizer``, ``self.device``, ``self.precision`` and
    ``self.max_length`` (the token limit of an input).
    """

    # ------------------------------------------------------------------ what the model is
    @property
    def task(self) -> str:
        """``text-classification``, ``token-classification``, ``question-answering``,
        ``multiple-choice``, ``fill-mask`` or ``feature-extraction``."""
        return TASK_OF_CLASS.get(type(self.model).__name__, "feature-extraction")

    @property
    def labels(self) -> list[str]:
        id2label = self.model.config.extra.get("id2label") or {}
        n = getattr(self.model, "num_labels", None)
        if n is None:
            return []
        return [id2label.get(str(i), f"LABEL_{i}") for i in range(n)]

    @property
    def is_regression(self) -> bool:
        return self.task == "text-classification" and getattr(self.model, "num_labels", 2) == 1

    @property
    def allows_no_answer(self) -> bool:
        entry = self.model.config.extra.get("bertkit_finetune") or {}
        return entry.get("task") == "squad2" or bool((entry.get("options") or {}).get("version_2_with_negative"))

    @property
    def pair_inputs(self) -> bool:
        """True for a model fine-tuned on a sentence-pair task (MRPC, STS-B, ...)."""
        entry = self.model.config.extra.get("bertkit_finetune") or {}
        if not entry.get("task"):
            return False
        try:
            from bertkit.tasks import get_task

            return bool(getattr(get_task(entry["task"], **(entry.get("options") or {})), "pair", False))
        except Exception:  # an unknown or changed task: inputs are single texts
            return False

    def is_pair_item(self, inputs: Any) -> bool:
        """Is ``inputs`` (a request's ``inputs``) one sentence pair ``[A, B]`` rather than a
        list of two texts? Only for a pair model; a list of pairs is ``[[A, B], ...]``."""
        return (self.task == "text-classification" and self.pair_inputs and isinstance(inputs, list)
                and len(inputs) == 2 and all(isinstance(x, str) for x in inputs))

    def long_text_choice(self, given: dict | None = None) -> LongText:
        """The long-text choice: the model's saved task options (``long_text``, ``stride``,
        ``pool_windows``, as ``bertkit predict`` reads them) overlaid with ``given`` (the
        flags set); a stride not smaller than the window of one text (``max_length - 2``) is a
        :class:`BertkitError` naming ``--stride``."""
        entry = self.model.config.extra.get("bertkit_finetune") or {}
        saved = {k: v for k, v in (entry.get("options") or {}).items() if k in LONG_TEXT_OPTIONS}
        choice = LongText.from_options({**saved, **{k: v for k, v in (given or {}).items() if v is not None}})
        if choice.windowed and choice.stride is not None:
            check_stride(self.max_length - 2, choice.stride)
        return choice

    def _long_text(self, long_text: LongText | None) -> LongText:
        return long_text if long_text is not None else getattr(self, "long_text", None) or LongText()

    def _text_windows(self, text: str, pair: str | None, long_text: LongText, on_overflow: str):
        """``(rows, truncated)``: the windows of a text (pair) as model rows; a second text cut
        to fit is ``truncated`` (413 with ``on_overflow="error"``)."""
        tok = self.tokenizer
        try:
            windows, cut = text_windows(tok, tok.text_to_ids(text),
                                        None if pair is None else tok.text_to_ids(pair),
                                        self.max_length, long_text)
        except BertkitError as e:  # a stride too large for the room a pair leaves
            raise InputError(str(e)) from None
        if cut and on_overflow == "error":
            raise InputError(f"the second text loses {cut} tokens to fit the model's limit of "
                             f"{self.max_length} beside the first text's windows", status=413)
        return [_Row(ids, types) for ids, types in windows], bool(cut)

    # ------------------------------------------------------------------ tokenisation
    def _encode(self, text, pair=None, truncation="longest_first", offsets=False, on_overflow="truncate"):
        enc = self.tokenizer.encode(text, pair, max_length=self.max_length, truncation=truncation,
                                    return_offsets=offsets)
        if enc.num_truncated and on_overflow == "error":
            raise InputError(f"the input has {len(enc.input_ids) + enc.num_truncated} tokens, more "
                             f"than the model's limit of {self.max_length}", status=413)
        return enc

    # ------------------------------------------------------------------ plans
    def plan_predict(self, item: Any, on_overflow: str = "truncate", long_text: LongText | None = None) -> Plan:
        """The plan of one ``/predict`` input for this model's task (see the module docstring;
        ``long_text`` None: the model's saved choice)."""
        task = self.task
        if task == "text-classification":
            return self._plan_classify(item, on_overflow, self._long_text(long_text))
        if task == "token-classification":
            return self._plan_tokens(item, on_overflow, self._long_text(long_text))
        if task == "question-answering":
            return self._plan_span(item, on_overflow)
        if task == "multiple-choice":
            return self._plan_choice(item, on_overflow)
        raise InputError(f"this model ({type(self.model).__name__}) has no task head for /predict; "
                         f"it serves " + ("/fill-mask and /embed" if task == "fill-mask" else "/embed"),
                         status=400)

    def _plan_classify(self, item, on_overflow, long_text: LongText) -> Plan:
        if isinstance(item, list) and len(item) == 2:
            text, pair = _text(item[0], "the first text"), _text(item[1], "the second text")
        elif isinstance(item, dict) and "text" in item:
            text, pair = _text(item["text"], "text"), item.get("text_pair")
            pair = None if pair is None else _text(pair, "text_pair")
        else:
            text, pair = _text(item, "the input"), None
        if long_text.windowed:
            rows, truncated = self._text_windows(text, pair, long_text, on_overflow)
        else:
            rows = [self._encode(text, pair, on_overflow=on_overflow)]
            truncated = bool(rows[0].num_truncated)
        labels, regression, pool = self.labels, self.is_regression, long_text.pool

        def finish(outputs):
            logits = pool_rows([0] * len(outputs), outputs, 1, pool)[0]  # one row: itself
            if regression:
                return [{"label": labels[0], "score": float(logits[0])}]
            probs = _softmax(logits.astype(np.float64))
            order = np.argsort(-probs, kind="stable")
            return [{"label": labels[i], "score": float(probs[i])} for i in order]

        return Plan(rows, ("logits",), finish, truncated, windows=len(rows))

    def _plan_tokens(self, item, on_overflow, long_text: LongText) -> Plan:
        text = _text(item, "the input")
        matches = list(WORD.finditer(text))
        if long_text.windowed:
            return self._plan_tagging_windows(text, matches, long_text)
        enc = self._encode([m.group() for m in matches], offsets=True, on_overflow=on_overflow)
        first: dict[int, int] = {}
        for position, word in enumerate(enc.word_ids):
            if word is not None and word not in first:
                first[word] = position
        words = sorted(first)
        labels = self.labels

        def finish(outputs):
            probs = _softmax(outputs[0].astype(np.float64))
            best = [int(probs[first[w]].argmax()) for w in words]
            return group_entities(text, [matches[w].span() for w in words], [labels[b] for b in best],
                                  [float(probs[first[w], b]) for w, b in zip(words, best)])

        return Plan([enc], ("tokens",), finish, bool(enc.num_truncated))

    def _plan_tagging_windows(self, text: str, matches: list, long_text: LongText) -> Plan:
        """Token tagging in overlapping windows: the features of ``featurize_tagging``'s
        ``window`` mode (as ``bertkit predict ner --long-text window``), each word's tag read
        from its max-context window."""
        from bertkit.tasks.tagging import featurize_tagging

        try:
            features = featurize_tagging(self.tokenizer, [[m.group() for m in matches]], None, None,
                                         self.max_length, "window", long_text.stride, warn=False)
        except (BertkitError, ValueError) as e:
            raise InputError(str(e)) from None
        rows = [_Row([int(x) for x in f["input_ids"]], [0] * len(f["input_ids"])) for f in features.features]
        where = {w: (k, p) for k, m in enumerate(features.meta) for p, w in enumerate(m.word_index) if w >= 0}
        words = sorted(where)
        labels = self.labels

        def finish(outputs):
            probs = {w: _softmax(outputs[k][p].astype(np.float64)) for w, (k, p) in where.items()}
            best = [int(probs[w].argmax()) for w in words]
            return group_entities(text, [matches[w].span() for w in words], [labels[b] for b in best],
                                  [float(probs[w][b]) for w, b in zip(words, best)])

        return Plan(rows, ("tokens",), finish, False, windows=len(rows))

    def _plan_span(self, item, on_overflow) -> Plan:
        if not isinstance(item, dict) or "question" not in item or "context" not in item:
            raise InputError('question answering takes {"question": Q, "context": C}')
        question, context = _text(item["question"], "question"), _text(item["context"], "context")
        enc = self._encode(question, context, truncation="only_second", offsets=True, on_overflow=on_overflow)
        positions = np.array([i for i, s in enumerate(enc.sequence_ids) if s == 1])
        no_answer = self.allows_no_answer

        def finish(outputs):
            start, end = (x.astype(np.float64) for x in outputs[0])
            keep = np.concatenate([[0], positions])  # [CLS] (no answer) + context tokens
            p_start = dict(zip(keep, _softmax(start[keep])))
            p_end = dict(zip(keep, _softmax(end[keep])))
            best, best_logit = None, -np.inf
            for s in positions[np.argsort(-start[positions])[:20]]:
                for e in positions[np.argsort(-end[positions])[:20]]:
                    if s <= e < s + MAX_ANSWER_TOKENS and start[s] + end[e] > best_logit:
                        best, best_logit = (int(s), int(e)), start[s] + end[e]
            if best is None or (no_answer and start[0] + end[0] > best_logit):
                return {"answer": "", "score": float(p_start[0] * p_end[0]), "start": 0, "end": 0}
            a, b = enc.offsets[best[0]][0], enc.offsets[best[1]][1]
            return {"answer": context[a:b], "score": float(p_start[best[0]] * p_end[best[1]]),
                    "start": int(a), "end": int(b)}

        return Plan([enc], ("span",), finish, bool(enc.num_truncated))

    def _plan_choice(self, item, on_overflow) -> Plan:
        if not isinstance(item, dict) or not isinstance(item.get("choices"), list) or len(item["choices"]) < 2:
            raise InputError('multiple choice takes {"context": C, "choices": [A, B, ...]} (two or more)')
        context = _text(item.get("context", item.get("question")), "context")
        choices = [_text(c, f"choice {i + 1}") for i, c in enumerate(item["choices"])]
        rows = [self._encode(context, c, on_overflow=on_overflow) for c in choices]

        def finish(outputs):
            probs = _softmax(np.array([float(o) for o in outputs]))
            order = np.argsort(-probs, kind="stable")
            return [{"label": choices[i], "index": int(i), "score": float(probs[i])} for i in order]

        return Plan(rows, ("choice",), finish, any(r.num_truncated for r in rows))

    def plan_embed(self, item: Any, layers: Sequence[int] = (-1,), pool: str = "cls",
                   normalize: bool = False, on_overflow: str = "truncate",
                   long_text: LongText | None = None) -> Plan:
        """One embedding (pooled over ``layers``, concatenated) per input, as a list of floats;
        a single text in ``window`` mode: the windows' vectors pooled (as
        :func:`bertkit.tasks.windows.embed_in_windows`)."""
        if pool not in ("cls", "mean"):
            raise InputError(f"pooling must be 'cls' or 'mean', got {pool!r}")
        states = self.model.config.num_hidden_layers + 1
        layers = tuple(int(x) for x in layers)
        if not layers or any(not -states <= x < states for x in layers):
            raise InputError(f"layers must index the {states} hidden states ({-states}..{states - 1})")
        long_text = self._long_text(long_text)
        if isinstance(item, list) and len(item) == 2:  # pairs are not windowed
            rows = [self._encode(_text(item[0], "the first text"), _text(item[1], "the second text"),
                                 on_overflow=on_overflow)]
        elif long_text.windowed:
            rows, _ = self._text_windows(_text(item, "the input"), None, long_text, on_overflow)
        else:
            rows = [self._encode(_text(item, "the input"), on_overflow=on_overflow)]
        truncated = any(getattr(r, "num_truncated", 0) for r in rows)
        windows_pool = long_text.pool

        def finish(outputs):
            vector = pool_rows([0] * len(outputs), outputs, 1, windows_pool)[0]
            if normalize:
                vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
            return [float(x) for x in vector]

        return Plan(rows, ("embed", layers, pool), finish, truncated, windows=len(rows))

    def plan_fill_mask(self, item: Any, top_k: int = 5, on_overflow: str = "truncate") -> Plan:
        """Top-``top_k`` candidates for every ``[MASK]`` of one text."""
        if getattr(self.model, "mlm_head", None) is None:
            raise InputError(f"this model ({type(self.model).__name__}) has no masked-LM head for fill-mask",
                             status=400)
        if not isinstance(top_k, int) or not 1 <= top_k <= 100:
            raise InputError("top_k must be an integer from 1 to 100")
        enc = self._encode(_text(item, "the input"), on_overflow=on_overflow)
        mask_id = self.tokenizer.mask_token_id
        where = [i for i, t in enumerate(enc.input_ids) if t == mask_id]
        if not where:
            raise InputError(f"the input has no {self.tokenizer.convert_ids_to_tokens(mask_id)} token: {item!r}")
        tokenizer = self.tokenizer

        def finish(outputs):
            per_mask = []
            for k, (scores, ids) in enumerate(outputs[0]):
                candidates = []
                for score, token_id in zip(scores.tolist(), ids.tolist()):
                    filled = list(enc.input_ids)
                    filled[where[k]] = token_id
                    candidates.append({"score": float(score), "token": int(token_id),
                                       "token_str": tokenizer.convert_ids_to_tokens(int(token_id)),
                                       "sequence": tokenizer.decode(filled, skip_special_tokens=True)})
                per_mask.append(candidates)
            return per_mask[0] if len(per_mask) == 1 else per_mask

        return Plan([enc], ("mlm", top_k), finish, bool(enc.num_truncated))

    # ------------------------------------------------------------------ running
    def _pad(self, rows: Sequence) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        width = max(len(r.input_ids) for r in rows)
        ids = torch.full((len(rows), width), self.tokenizer.pad_token_id or 0, dtype=torch.long)
        types = torch.zeros_like(ids)
        mask = torch.zeros_like(ids)
        for i, r in enumerate(rows):
            n = len(r.input_ids)
            ids[i, :n] = torch.tensor(r.input_ids)
            types[i, :n] = torch.tensor(r.token_type_ids)
            mask[i, :n] = 1
        return ids.to(self.device), types.to(self.device), mask.to(self.device)

    def run_rows(self, key: tuple, rows: Sequence) -> list[Any]:
        """One forward pass over ``rows`` (encodings sharing ``key``); one output per row:
        logits (labels,) / token logits (T_i, labels) / (start (T_i,), end (T_i,)) / choice
        score / pooled vector / per-mask (top-k probs, top-k ids)."""
        kind = key[0]
        ids, types, mask = self._pad(rows)
        lengths = [len(r.input_ids) for r in rows]
        model = self.model
        with torch.inference_mode(), autocast(self.precision, self.device):
            if kind == "logits":
                out = model(ids, types, mask).logits.float().cpu().numpy()
                return list(out)
            if kind == "tokens":
                out = model(ids, types, mask).logits.float().cpu().numpy()
                return [out[i, :n] for i, n in enumerate(lengths)]
            if kind == "span":
                out = model(ids, types, mask)
                start, end = out.start_logits.float().cpu().numpy(), out.end_logits.float().cpu().numpy()
                return [(start[i, :n], end[i, :n]) for i, n in enumerate(lengths)]
            if kind == "choice":
                return list(model._scores(ids, types, mask, False, False).logits.float()[:, 0].cpu().numpy())
            if kind == "embed":
                _, layers, pool = key
                out = self.encoder(ids, types, mask, output_hidden_states=layers != (-1,))
                states = [out.last_hidden_state] if layers == (-1,) else [out.hidden_states[k] for k in layers]
                features = torch.cat(states, dim=-1).float()
                if pool == "cls":
                    pooled = features[:, 0]
                else:
                    weights = mask.unsqueeze(-1).to(features.dtype)
                    pooled = (features * weights).sum(1) / weights.sum(1)
                return list(pooled.cpu().numpy())
            if kind == "mlm":
                top_k = key[1]
                hidden = self.encoder(ids, types, mask).last_hidden_state
                where = ids == self.tokenizer.mask_token_id
                probs = model.mlm_head(hidden[where]).float().softmax(-1)
                scores, token_ids = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
                rows_of = where.nonzero()[:, 0].tolist()
                result: list[list] = [[] for _ in rows]
                for r, s, t in zip(rows_of, scores.cpu().numpy(), token_ids.cpu().numpy()):
                    result[r].append((s, t))
                return result
        raise ValueError(f"unknown row kind {kind!r}")

    def run_plans(self, plans: Sequence[Plan], max_batch_tokens: int = 16384,
                  max_batch_size: int = 64) -> list[Any]:
        """Every plan's answer, in order: rows grouped by key, sorted by length, cut into
        batches of at most ``max_batch_size`` rows and ``max_batch_tokens`` padded tokens."""
        flat = [(p, j) for p in plans for j in range(len(p.rows))]
        for p in plans:
            p.outputs = [None] * len(p.rows)
        for key in dict.fromkeys(p.key for p in plans):
            todo = sorted((x for x in flat if x[0].key == key), key=lambda x: -len(x[0].rows[x[1]].input_ids))
            for batch in token_batches(todo, lambda x: len(x[0].rows[x[1]].input_ids),
                                       max_batch_tokens, max_batch_size):
                outputs = self.run_rows(key, [p.rows[j] for p, j in batch])
                for (p, j), out in zip(batch, outputs):
                    p.outputs[j] = out
        return [p.finish(p.outputs) for p in plans]

    # ------------------------------------------------------------------ public API
    def predict(self, inputs: Any, on_overflow: str = "truncate", long_text: LongText | None = None,
                **batching) -> Any:
        """The task head's answer for one input or a list (shapes: the module docstring;
        ``long_text`` None: the model's saved choice, else truncation)."""
        single = not isinstance(inputs, list) or self.is_pair_item(inputs)
        items = [inputs] if single else inputs
        answers = self.run_plans([self.plan_predict(x, on_overflow, long_text) for x in items], **batching)
        return answers[0] if single else answers

    def attention(self, text: str, layer: int = -1, head: int = 0, pair: str | None = None):
        """``(tokens, matrix (T, T))``: one head's attention probabilities for ``text``."""
        config = self.model.config
        if not -config.num_hidden_layers <= layer < config.num_hidden_layers:
            raise InputError(f"layer must be in {-config.num_hidden_layers}..{config.num_hidden_layers - 1}")
        if not 0 <= head < config.num_attention_heads:
            raise InputError(f"head must be in 0..{config.num_attention_heads - 1}")
        enc = self._encode(_text(text, "the text"), pair)
        ids, types, mask = self._pad([enc])
        with torch.inference_mode(), autocast(self.precision, self.device):
            out = self.encoder(ids, types, mask, output_attentions=True)
        matrix = out.attentions[layer][0, head].float().cpu().numpy()
        return self.tokenizer.convert_ids_to_tokens(enc.input_ids), matrix

    # ------------------------------------------------------------------ for bertkit serve
    def run_token_states(self, rows: Sequence) -> list[np.ndarray]:
        """One padded forward pass of the encoder over ``rows`` (objects with ``input_ids`` and
        ``token_type_ids``); each row's last hidden states, ``(T_i, hidden)`` float32 (the
        server's ``/embed_all`` and its health probe)."""
        ids, types, mask = self._pad(rows)
        with torch.inference_mode(), autocast(self.precision, self.device):
            hidden = self.encoder(ids, types, mask).last_hidden_state.float().cpu().numpy()
        return [hidden[i, :len(r.input_ids)] for i, r in enumerate(rows)]


def token_batches(items: Sequence, length: Callable[[Any], int], max_tokens: int, max_size: int) -> list[list]:
    """``items`` (sorted longest first) cut in order into batches whose padded size
    (rows x longest) stays within ``max_tokens`` and ``max_size`` rows (a row longer than the
    budget goes alone)."""
    batches: list[list] = []
    current: list = []
    longest = 0
    for item in items:
        n = length(item)
        if current and (len(current) + 1 > max_size or (len(current) + 1) * max(longest, n) > max_tokens):
            batches.append(current)
            current, longest = [], 0
        current.append(item)
        longest = max(longest, n)
    if current:
        batches.append(current)
    return batches
