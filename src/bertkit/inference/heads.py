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

import json
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from bertkit.errors import BertkitError
from bertkit.modeldir.entry import saved_task_options
from bertkit.precision import autocast
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
    # classification/regression: the rows' outputs -> the example's logits (its task family's
    # pooling over windows), for a door that scores them its own way (TEI's raw_scores)
    logits: Callable[[list[Any]], np.ndarray] | None = None


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
    from bertkit.tokenizer.basic import is_blank

    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, got {type(value).__name__}")
    if is_blank(value):  # the tokenizer family's rule: empty once cleaned
        hidden = " (only control or zero-width characters, which the tokenizer drops)" if value.strip() else ""
        raise InputError(f"{what} is empty{hidden}")
    return value


def pool_features(features: torch.Tensor, mask: torch.Tensor, pool: str) -> torch.Tensor:
    """(B, D) vectors of (B, T, D) features: the ``[CLS]`` row (``cls``) or the mean over each
    sequence's tokens, specials included, padding excluded (``mean``). The one pooling of
    ``embed``, ``/embed`` and long-text windows."""
    if pool == "cls":
        return features[:, 0]
    weights = mask.unsqueeze(-1).to(features.dtype)
    return (features * weights).sum(1) / weights.sum(1)


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
        """The head's label names in head order: those of the task the model was fine-tuned on
        (its ``label_names``, as ``bertkit predict`` writes them, also for a directory saved
        before GLUE's labels had names), else the model's ``id2label``."""
        n = getattr(self.model, "num_labels", None)
        if n is None:
            return []
        if self.saved_task[0] is not None:
            names = getattr(self.family(), "label_names", None)
            if names is not None and len(names) == n:
                return list(names)
        id2label = self.model.config.extra.get("id2label") or {}
        return [id2label.get(str(i), f"LABEL_{i}") for i in range(n)]

    @property
    def is_regression(self) -> bool:
        return self.task == "text-classification" and getattr(self.model, "num_labels", 2) == 1

    # ------------------------------------------------------------------ the task family
    def family(self, long_text: LongText | None = None):
        """The task family that decodes this model's head (a :class:`~bertkit.tasks.base.Task`):
        the task it was fine-tuned on with its saved options (so ``bertkit predict`` and every
        other door decode alike), else the family's default for the head (generic text
        classification or regression with the model's labels, token classification, SQuAD
        v1.1, SWAG); ``None`` for a model without a task head. ``long_text``, when it differs
        from the model's own choice, replaces the saved long-text options."""
        cache = self.__dict__.setdefault("_families", {})
        if "own" not in cache:  # the model's own family: built once
            cache["own"] = self._build_family(*self.saved_task)
        if long_text is None:
            return cache["own"]
        if "own long text" not in cache:
            cache["own long text"] = self.long_text_choice()
        if long_text == cache["own long text"]:
            return cache["own"]
        name, options = self.saved_task
        options = {k: v for k, v in options.items() if k not in LONG_TEXT_OPTIONS}
        options.update(long_text.options() or {"long_text": "truncate"})
        key = json.dumps(options, sort_keys=True, default=str)
        if key not in cache:
            cache[key] = self._build_family(name, options)
        return cache[key]

    @property
    def saved_task(self) -> tuple[str | None, dict]:
        """The task this model was fine-tuned on and its options (:func:`saved_task_options`),
        read once."""
        if "_saved_task" not in self.__dict__:
            self._saved_task = saved_task_options(self.model.config)
        return self._saved_task[0], dict(self._saved_task[1])

    def _build_family(self, name: str | None, options: dict):
        from bertkit.tasks import get_task

        if name is not None:
            try:
                return get_task(name, **options)
            except BertkitError as e:
                raise BertkitError(f"{self.source}: its saved task {name!r} cannot be rebuilt: {e}") from None
        task = self.task
        if task == "text-classification":
            if self.is_regression:
                return get_task("regression", **options)
            labels = self.labels
            if len(set(labels)) != len(labels):
                labels = [f"LABEL_{i}" for i in range(len(labels))]
            return get_task("text-classification", labels=labels, **options)
        if task == "token-classification":
            return get_task("token-classification", labels=self.labels, **options)
        if task == "question-answering":  # SQuAD's windows, fitted to a model with few positions
            length = min(384, self.model.config.max_position_embeddings)
            query = min(64, (length - 3) // 2)
            return get_task("squad", max_query_length=query,
                            doc_stride=min(128, max(1, (length - query - 3) // 2)))
        if task == "multiple-choice":
            return get_task("swag")
        return None

    @property
    def pair_inputs(self) -> bool:
        """True for a model fine-tuned on a sentence-pair task (MRPC, STS-B, ...)."""
        return bool(getattr(self.family(), "pair", False))

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
        saved = {k: v for k, v in self.saved_task[1].items() if k in LONG_TEXT_OPTIONS}
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

    def _featurize(self, family, example) -> tuple[list[_Row], Any]:
        """The family's features of one example as model rows, and the feature set."""
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the answer says what was cut (``truncated``)
                features = family.featurize([example], self.tokenizer, self.max_length)
        except (BertkitError, ValueError) as e:
            raise InputError(str(e)) from None
        rows = []
        for f in features.features:
            ids = np.asarray(f["input_ids"])
            types = np.asarray(f["token_type_ids"]) if "token_type_ids" in f else np.zeros_like(ids)
            if ids.ndim == 2:  # multiple choice: one row per choice, padding dropped
                lengths = np.asarray(f["attention_mask"]).sum(-1)
                rows += [_Row(ids[c, :n].tolist(), types[c, :n].tolist()) for c, n in enumerate(lengths)]
            else:
                rows.append(_Row(ids.tolist(), types.tolist()))
        return rows, features

    def _check_overflow(self, truncated: bool, on_overflow: str) -> None:
        if truncated and on_overflow == "error":
            raise InputError(f"the input is longer than the model's limit of {self.max_length} "
                             "tokens", status=413)

    # ------------------------------------------------------------------ plans
    def plan_predict(self, item: Any, on_overflow: str = "truncate", long_text: LongText | None = None) -> Plan:
        """The plan of one ``/predict`` input for this model's task, decoded by the task
        family's own decoder (see the module docstring; ``long_text`` None: the model's saved
        choice)."""
        task = self.task
        if task == "text-classification":
            return self._plan_classify(item, on_overflow, long_text)
        if task == "token-classification":
            return self._plan_tokens(item, on_overflow, long_text)
        if task == "question-answering":
            return self._plan_span(item, on_overflow)
        if task == "multiple-choice":
            return self._plan_choice(item, on_overflow)
        raise InputError(f"this model ({type(self.model).__name__}) has no task head for /predict; "
                         f"it serves " + ("/fill-mask and /embed" if task == "fill-mask" else "/embed"),
                         status=400)

    def _plan_classify(self, item, on_overflow, long_text: LongText | None) -> Plan:
        """Text classification / regression: :class:`~bertkit.tasks.text.TextTask`'s features
        (windows of a long text in ``window`` mode) and its ``example_logits`` (windows pooled)."""
        from bertkit.tasks.formats.base import TextExample

        if isinstance(item, list) and len(item) == 2:
            text, pair = _text(item[0], "the first text"), _text(item[1], "the second text")
        elif isinstance(item, dict) and "text" in item:
            text, pair = _text(item["text"], "text"), item.get("text_pair")
            pair = None if pair is None else _text(pair, "text_pair")
        else:
            text, pair = _text(item, "the input"), None
        family = self.family(long_text)
        if pair is not None and self.saved_task[0] and not getattr(family, "pair", True):
            raise InputError(f"this model was fine-tuned on single texts ({family.name}); a sentence "
                             "pair would be read as an input it never saw: send one text per input")
        rows, features = self._featurize(family, TextExample("0", text, pair, None))
        truncated = bool(features.num_truncated) or self._pair_cut(family, text, pair)
        self._check_overflow(truncated, on_overflow)
        labels, regression = self.labels, self.is_regression

        def example_logits(outputs):
            return family.example_logits(features, {"logits": outputs})[0]

        def finish(outputs):
            logits = example_logits(outputs)
            if regression:
                return [{"label": labels[0], "score": float(logits[0])}]
            probs = _softmax(logits.astype(np.float64))
            order = np.argsort(-probs, kind="stable")
            return [{"label": labels[i], "score": float(probs[i])} for i in order]

        return Plan(rows, ("logits",), finish, truncated, windows=len(rows), logits=example_logits)

    def _pair_cut(self, family, text: str, pair: str | None) -> bool:
        """Does a windowed pair's second text lose tokens (windows keep it beside each one)?"""
        long_text = getattr(family, "long_text", None)
        if pair is None or long_text is None or not long_text.windowed:
            return False
        tok = self.tokenizer
        return bool(text_windows(tok, tok.text_to_ids(text), tok.text_to_ids(pair), self.max_length,
                                 long_text)[1])

    def _plan_tokens(self, item, on_overflow, long_text: LongText | None) -> Plan:
        """Token tagging: the words of :func:`~bertkit.tasks.tagging.split_words`, the tagging
        family's features (long sentences split, windowed or truncated as the model's task
        says) and its ``word_tags``; entities by :func:`~bertkit.tasks.tagging.group_entities`."""
        from bertkit.tasks.formats.conll import TaggedSentence
        from bertkit.tasks.tagging import group_entities, split_words

        text = _text(item, "the input")
        words, spans = split_words(text)
        family = self.family(long_text)
        example = TaggedSentence(words, [], None)
        rows, features = self._featurize(family, example)
        truncated = bool(features.num_truncated)
        self._check_overflow(truncated, on_overflow)

        def finish(outputs):
            tags = family.word_tags([example], features, {"logits": outputs})[0]
            scores = [0.0] * len(words)
            for meta, logits in zip(features.meta, outputs):
                probs = _softmax(np.asarray(logits, dtype=np.float64))
                for position, w in enumerate(meta.word_index):
                    if w >= 0:
                        scores[w] = float(probs[position].max())
            return group_entities(text, spans, tags, scores)

        return Plan(rows, ("tokens",), finish, truncated, windows=len(rows))

    def _plan_span(self, item, on_overflow) -> Plan:
        """Question answering: SQuAD's windows (doc stride, max query length) and its
        post-processing (max-context rule, n-best, the saved no-answer threshold of a v2.0
        model), exactly as ``bertkit predict``."""
        from bertkit.tasks.formats.squad import SquadExample

        if not isinstance(item, dict) or "question" not in item or "context" not in item:
            raise InputError('question answering takes {"question": Q, "context": C}')
        question, context = _text(item["question"], "question"), _text(item["context"], "context")
        family = self.family()
        example = SquadExample("0", question, context)
        rows, features = self._featurize(family, example)

        def finish(outputs):
            answers = family.answers([example], features, {"start_logits": [o[0] for o in outputs],
                                                           "end_logits": [o[1] for o in outputs]})
            answer = answers.answers["0"]
            score = next((x["probability"] for x in answers.nbest["0"] if x["text"] == answer), 0.0)
            start, end = answers.spans.get("0", (0, 0)) if answer else (0, 0)
            return {"answer": answer, "score": float(score), "start": int(start), "end": int(end)}

        return Plan(rows, ("span",), finish, False, windows=len(rows))

    def _plan_choice(self, item, on_overflow) -> Plan:
        """Multiple choice: SWAG's features (context, then each choice) and a softmax over the
        choices' scores."""
        from bertkit.tasks.formats.swag import SwagExample

        if not isinstance(item, dict) or not isinstance(item.get("choices"), list) or len(item["choices"]) < 2:
            raise InputError('multiple choice takes {"context": C, "choices": [A, B, ...]} (two or more)')
        context = _text(item.get("context", item.get("question")), "context")
        choices = [_text(c, f"choice {i + 1}") for i, c in enumerate(item["choices"])]
        rows, features = self._featurize(self.family(), SwagExample("0", context, "", choices))
        truncated = bool(features.num_truncated)
        self._check_overflow(truncated, on_overflow)

        def finish(outputs):
            probs = _softmax(np.array([float(o) for o in outputs]))
            order = np.argsort(-probs, kind="stable")
            return [{"label": choices[i], "index": int(i), "score": float(probs[i])} for i in order]

        return Plan(rows, ("choice",), finish, truncated)

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
        """Top-``top_k`` candidates for every ``[MASK]`` of one text (a flat list when the text
        has one mask, as Hugging Face's pipeline answers)."""
        if getattr(self.model, "mlm_head", None) is None:
            raise InputError(f"this model ({type(self.model).__name__}) has no masked-LM head for fill-mask",
                             status=400)
        if not isinstance(top_k, int) or not 1 <= top_k <= 100:
            raise InputError("top_k must be an integer from 1 to 100")
        enc = self._encode(_text(item, "the input"), on_overflow=on_overflow)
        if self.tokenizer.mask_token_id not in enc.input_ids:
            mask = self.tokenizer.convert_ids_to_tokens(self.tokenizer.mask_token_id)
            raise InputError(f"the input has no {mask} token: {item!r}")
        plan = self.mask_plan(enc, top_k)
        nested = plan.finish
        plan.finish = lambda outputs: (lambda masks: masks[0] if len(masks) == 1 else masks)(nested(outputs))
        return plan

    def mask_plan(self, enc, top_k: int) -> Plan:
        """The plan of one encoding with ``[MASK]`` tokens: per mask, left to right, ``top_k``
        candidates ``{"score", "token" (id), "token_str", "sequence"}``, best first."""
        where = [i for i, t in enumerate(enc.input_ids) if t == self.tokenizer.mask_token_id]
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
            return per_mask

        return Plan([enc], ("mlm", top_k), finish, bool(getattr(enc, "num_truncated", 0)))

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
                features = self.features(ids, types, mask, layers, "concat")
                return list(pool_features(features, mask, pool).cpu().numpy())
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
                  max_batch_size: int = 64, progress: bool | None = False, desc: str = "predict") -> list[Any]:
        """Every plan's answer, in order: rows grouped by key, sorted by length, cut into
        batches of at most ``max_batch_size`` rows and ``max_batch_tokens`` padded tokens
        (a progress bar over the batches unless ``progress`` is False)."""
        from tqdm.auto import tqdm

        from bertkit.runlog import bar_disabled

        flat = [(p, j) for p in plans for j in range(len(p.rows))]
        for p in plans:
            p.outputs = [None] * len(p.rows)
        batches = []
        for key in dict.fromkeys(p.key for p in plans):
            todo = sorted((x for x in flat if x[0].key == key), key=lambda x: -len(x[0].rows[x[1]].input_ids))
            batches += [(key, b) for b in token_batches(todo, lambda x: len(x[0].rows[x[1]].input_ids),
                                                        max_batch_tokens, max_batch_size)]
        for key, batch in tqdm(batches, desc=desc, unit="batch", disable=bar_disabled(progress)):
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

    def attention(self, text: str, layer: int = -1, head: int = 0, pair: str | None = None,
                  on_overflow: str = "error"):
        """``(tokens, matrix (T, T))``: one head's attention probabilities for ``text``. ``head``
        counts the heads the layer kept (a pruned layer has fewer). A text longer than the
        model's limit is a 413 InputError (``on_overflow="error"``: a map of a cut text must not
        pass for the whole), or is cut with a warning saying how many tokens went
        (``"truncate"``)."""
        import warnings

        layers = self.model.config.num_hidden_layers
        if isinstance(layer, bool) or not isinstance(layer, int) or not -layers <= layer < layers:
            raise InputError(f"layer must be an integer in {-layers}..{layers - 1}, got {layer!r}")
        blocks = getattr(getattr(self.encoder, "encoder", None), "layer", None)
        kept = blocks[layer].attention.self.num_heads if blocks is not None else \
            self.model.config.num_attention_heads
        if isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < kept:
            pruned = "" if kept == self.model.config.num_attention_heads else \
                f" (layer {layer % layers} keeps {kept} of {self.model.config.num_attention_heads} heads after pruning)"
            raise InputError(f"head must be in 0..{kept - 1}{pruned}, got {head!r}")
        enc = self._encode(_text(text, "the text"), pair, on_overflow=on_overflow)
        if enc.num_truncated:
            warnings.warn(f"the text was cut to the model's limit of {self.max_length} tokens "
                          f"({enc.num_truncated} left out): the map shows only its start", stacklevel=2)
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
