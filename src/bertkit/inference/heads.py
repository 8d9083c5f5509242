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
from collections.abc import Callable, Sequence
from itertools import chain
from typing import Any

import numpy as np
import torch

from bertkit.errors import BertkitError, InputError
from bertkit.model.pooling import POOLINGS, pool_features, splade_pool  # pool_features re-exported
from bertkit.model.sparse_last_layer import encode_cls
from bertkit.modeldir.entry import saved_task_options
from bertkit.precision import autocast
from bertkit.tasks.base import Plan, PlanContext, Row, text_of
from bertkit.tasks.windows import LONG_TEXT_OPTIONS, LongText, check_stride, pool_rows, text_windows

__all__ = ["InputError", "Plan", "TaskInference", "cheapest_cuts", "pool_features", "token_batches"]


def hidden_features(encoder, ids, types, mask, layers: Sequence[int], combine: str) -> torch.Tensor:
    """(B, T, D) float32 features of a batch: the ``layers`` hidden states of ``encoder``
    (a :class:`~bertkit.model.BertModel`) concatenated (``concat``) or summed (``sum``)."""
    layers = list(layers)
    out = encoder(ids, types, mask, output_hidden_states=layers != [-1])
    states = [out.last_hidden_state] if layers == [-1] else [out.hidden_states[k] for k in layers]
    features = torch.cat(states, dim=-1) if combine == "concat" else torch.stack(states).sum(0)
    return features.float()


def pooled_vectors(encoder, ids, types, mask, layers: Sequence[int], pool: str,
                   combine: str = "concat") -> torch.Tensor:
    """(B, D) float32: :func:`hidden_features` pooled by ``pool`` (:func:`pool_features`). The
    last layer's ``[CLS]`` alone runs that layer at ``[CLS]`` only where
    :func:`~bertkit.model.sparse_last_layer.encode_cls` answers (the same vectors within float
    rounding, or static INT8's ``[CLS]`` graph)."""
    if list(layers) == [-1] and pool == "cls":
        out = encode_cls(encoder, ids, types, mask)
        if out is not None:
            return out.last_hidden_state[:, 0].float()
    return pool_features(hidden_features(encoder, ids, types, mask, layers, combine), mask, pool)


class _EmbedRows:
    """Rows -> one pooled vector each (``key``: layers, pooling)."""

    def row_outputs(self, model, ids, types, mask, lengths, layers, pool) -> list:
        return list(pooled_vectors(model.encoder_model(), ids, types, mask, layers, pool).cpu().numpy())


class _MaskRows:
    """Rows -> per ``[MASK]``, left to right, the top-k (probabilities, token ids) (``key``:
    k, the mask token's id)."""

    def row_outputs(self, model, ids, types, mask, lengths, top_k, mask_id) -> list:
        hidden = model.encoder_model()(ids, types, mask).last_hidden_state
        where = ids == mask_id
        probs = model.mlm_head(hidden[where]).float().softmax(-1)
        scores, token_ids = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
        result: list[list] = [[] for _ in lengths]
        for r, s, t in zip(where.nonzero()[:, 0].tolist(), scores.cpu().numpy(), token_ids.cpu().numpy()):
            result[r].append((s, t))
        return result


class _StateRows:
    """Rows -> each row's last hidden states, ``(T_i, hidden)`` float32 (``/embed_all``)."""

    def row_outputs(self, model, ids, types, mask, lengths) -> list:
        hidden = model.encoder_model()(ids, types, mask).last_hidden_state.float().cpu().numpy()
        return [hidden[i, :n] for i, n in enumerate(lengths)]


# real tokens a masked-LM head call takes when making SPLADE vectors: its logits are
# vocabulary-wide (30,522 floats a token: 31 MB for 256), and the decoder's product runs faster
# on more rows (BERT-Tiny's: 125 us a row at 20 rows, 95 at 64; VNNI Xeon, one thread)
SPARSE_HEAD_TOKENS = 256


class _SparseRows:
    """Rows -> each row's SPLADE vector (:func:`splade_pool` of the masked-LM logits) as the
    ``(indices, values)`` of its non-zero terms, indices ascending (``/embed_sparse``). The
    head runs on the real tokens of a few rows at a time (:data:`SPARSE_HEAD_TOKENS`), which
    bounds the vocabulary-wide logits' memory."""

    def row_outputs(self, model, ids, types, mask, lengths) -> list:
        hidden = model.encoder_model()(ids, types, mask).last_hidden_state
        result = []
        for rows in token_batches(range(len(lengths)), lengths.__getitem__, SPARSE_HEAD_TOKENS, len(lengths)):
            logits = model.mlm_head(torch.cat([hidden[i, :lengths[i]] for i in rows]))
            for part in logits.split([lengths[i] for i in rows]):
                vector = splade_pool(part[None], mask.new_ones(1, len(part)))[0].cpu().numpy()
                where = np.flatnonzero(vector)
                result.append((where, vector[where]))
        return result


EMBED, MASKS, STATES, SPARSE = _EmbedRows(), _MaskRows(), _StateRows(), _SparseRows()


class TaskInference:
    """Mixin of :class:`~bertkit.inference.BertInference`: raw-text task predictions.

    Needs ``self.model``, ``self.tokenizer``, ``self.device``, ``self.precision`` and
    ``self.max_length`` (the token limit of an input).
    """

    # ------------------------------------------------------------------ what the model is
    @property
    def task(self) -> str:
        """The Hugging Face pipeline the model's head answers (its class's ``pipeline``):
        ``text-classification``, ``token-classification``, ``question-answering``,
        ``multiple-choice``, ``fill-mask`` or ``feature-extraction``."""
        return getattr(self.model, "pipeline", "feature-extraction")

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
        """A one-output sequence head (classification heads carry ``num_labels``)."""
        return getattr(self.family(), "scores_texts", False) and getattr(self.model, "num_labels", 2) == 1

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
        from bertkit.tasks import get_task, task_for_head

        if name is not None:
            try:
                return get_task(name, **options)
            except BertkitError as e:
                raise BertkitError(f"{self.source}: its saved task {name!r} cannot be rebuilt: {e}") from None
        regression = getattr(self.model, "num_labels", 2) == 1
        return task_for_head(self.task, self.labels, regression, self.model.config.max_position_embeddings,
                             **options)

    @property
    def pair_inputs(self) -> bool:
        """True for a model fine-tuned on a sentence-pair task (MRPC, STS-B, ...)."""
        return bool(getattr(self.family(), "pair", False))

    def is_pair_item(self, inputs: Any) -> bool:
        """Is ``inputs`` (a request's ``inputs``) one sentence pair ``[A, B]`` rather than a
        list of two texts? Only for a pair model; a list of pairs is ``[[A, B], ...]``."""
        return (getattr(self.family(), "scores_texts", False) and self.pair_inputs
                and isinstance(inputs, list) and len(inputs) == 2 and all(isinstance(x, str) for x in inputs))

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
        to fit is ``truncated`` (a ``too_long`` InputError with ``on_overflow="error"``)."""
        tok = self.tokenizer
        try:
            windows, cut = text_windows(tok, tok.text_to_ids(text),
                                        None if pair is None else tok.text_to_ids(pair),
                                        self.max_length, long_text)
        except BertkitError as e:  # a stride too large for the room a pair leaves
            raise InputError(str(e)) from None
        if cut and on_overflow == "error":
            raise InputError(f"the second text loses {cut} tokens to fit the model's limit of "
                             f"{self.max_length} beside the first text's windows", "too_long")
        return [Row(ids, types) for ids, types in windows], bool(cut)

    # ------------------------------------------------------------------ tokenisation
    def _encode(self, text, pair=None, truncation="longest_first", offsets=False, on_overflow="truncate"):
        enc = self.tokenizer.encode(text, pair, max_length=self.max_length, truncation=truncation,
                                    return_offsets=offsets)
        if enc.num_truncated and on_overflow == "error":
            raise InputError(f"the input has {len(enc.input_ids) + enc.num_truncated} tokens, more "
                             f"than the model's limit of {self.max_length}", "too_long")
        return enc

    # ------------------------------------------------------------------ plans
    def plan_context(self, on_overflow: str = "truncate") -> PlanContext:
        """What the task families plan one input with (:class:`~bertkit.tasks.base.PlanContext`)."""
        return PlanContext(self.tokenizer, self.max_length, self.labels, self.is_regression,
                           self.saved_task[0] is not None, on_overflow)

    def plan_predict(self, item: Any, on_overflow: str = "truncate", long_text: LongText | None = None) -> Plan:
        """The plan of one ``/predict`` input, made and decoded by the model's task family
        (:meth:`bertkit.tasks.base.Task.plan`; ``long_text`` None: the model's saved choice,
        for the families that read long texts in windows)."""
        family = self.family()
        if family is None:
            can = "fill masks and embed texts" if getattr(self.model, "mlm_head", None) is not None else "embed texts"
            raise InputError(f"this model ({type(self.model).__name__}) has no task head to predict "
                             f"with; it can {can}", "unsupported")
        if getattr(family, "long_text", None) is not None:
            family = self.family(long_text)
        return family.plan(item, self.plan_context(on_overflow))

    def plan_embed(self, item: Any, layers: Sequence[int] = (-1,), pool: str = "cls",
                   normalize: bool = False, on_overflow: str = "truncate",
                   long_text: LongText | None = None) -> Plan:
        """One embedding (pooled over ``layers``, concatenated) per input, as a list of floats;
        a single text in ``window`` mode: the windows' vectors pooled (as
        :func:`bertkit.tasks.windows.embed_in_windows`)."""
        layers = self._check_pooling(layers, pool)
        long_text = self._long_text(long_text)
        if isinstance(item, list) and len(item) == 2:  # pairs are not windowed
            rows = [self._encode(text_of(item[0], "the first text"), text_of(item[1], "the second text"),
                                 on_overflow=on_overflow)]
        elif long_text.windowed:
            rows, _ = self._text_windows(text_of(item, "the input"), None, long_text, on_overflow)
        else:
            rows = [self._encode(text_of(item, "the input"), on_overflow=on_overflow)]
        return self.pooled_plan(rows, layers, pool, normalize, long_text.pool)

    def _check_pooling(self, layers: Sequence[int], pool: str) -> tuple[int, ...]:
        if pool not in POOLINGS:
            raise InputError(f"pooling must be one of {', '.join(POOLINGS)}, got {pool!r}")
        states = self.model.config.num_hidden_layers + 1
        layers = tuple(int(x) for x in layers)
        if not layers or any(not -states <= x < states for x in layers):
            raise InputError(f"layers must index the {states} hidden states ({-states}..{states - 1})")
        if len(layers) > states:  # each layer widens the answer: 5,000 of them made 231 MB
            raise InputError(f"layers: at most {states} (the model's hidden states), got {len(layers)}")
        return layers

    def pooled_plan(self, rows: Sequence, layers: Sequence[int] = (-1,), pool: str = "cls",
                    normalize: bool = False, windows_pool: str = "mean") -> Plan:
        """The embedding plan of ready model ``rows`` (one text's encoding, its windows, or a
        client's token ids): each row pooled over ``layers``, several rows (windows) pooled
        again by ``windows_pool``, then normalised if asked."""
        layers = self._check_pooling(layers, pool)
        truncated = any(getattr(r, "num_truncated", 0) for r in rows)

        def finish(outputs):
            vector = pool_rows([0] * len(outputs), outputs, 1, windows_pool)[0]
            if normalize:
                vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
            return [float(x) for x in vector]

        return Plan(list(rows), (EMBED, layers, pool), finish, truncated, windows=len(rows),
                    left_truncatable=len(rows) == 1)

    def check_sparse(self) -> None:
        """An :class:`InputError` (``unsupported``) unless the model has the masked-LM head that
        sparse (SPLADE) embeddings need."""
        if getattr(self.model, "mlm_head", None) is None:
            raise InputError(f"this model ({type(self.model).__name__}) has no masked-LM head for sparse "
                             "(SPLADE) embeddings", "unsupported")

    def sparse_plan(self, row) -> Plan:
        """The plan of one row's SPLADE sparse vector (a model with a masked-LM head):
        ``[{"index": token id, "value": weight}, ...]`` of its non-zero terms, as TEI's
        ``/embed_sparse`` answers."""
        self.check_sparse()

        def finish(outputs):
            indices, values = outputs[0]
            return [{"index": int(i), "value": float(v)} for i, v in zip(indices, values)]

        return Plan([row], (SPARSE,), finish, bool(getattr(row, "num_truncated", 0)), left_truncatable=True)

    def states_plan(self, row) -> Plan:
        """The plan of one row's last hidden states (a list of per-token vectors)."""
        return Plan([row], (STATES,), lambda outputs: outputs[0].tolist(), bool(getattr(row, "num_truncated", 0)),
                    left_truncatable=True)

    def plan_fill_mask(self, item: Any, top_k: int = 5, on_overflow: str = "truncate") -> Plan:
        """Top-``top_k`` candidates for every ``[MASK]`` of one text (a flat list when the text
        has one mask, as Hugging Face's pipeline answers)."""
        if getattr(self.model, "mlm_head", None) is None:
            raise InputError(f"this model ({type(self.model).__name__}) has no masked-LM head for fill-mask",
                             "unsupported")
        if not isinstance(top_k, int) or not 1 <= top_k <= 100:
            raise InputError("top_k must be an integer from 1 to 100")
        enc = self._encode(text_of(item, "the input"), on_overflow=on_overflow)
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

        return Plan([enc], (MASKS, top_k, self.tokenizer.mask_token_id), finish,
                    bool(getattr(enc, "num_truncated", 0)))

    # ------------------------------------------------------------------ running
    def _pad(self, rows: Sequence) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Rows' ids, token types and attention mask, padded to the longest row (numpy fills
        them: three small torch ops per row took a fifth of a BERT-Tiny server's worker samples on
        the AMX Xeon)."""
        lengths = np.fromiter((len(r.input_ids) for r in rows), dtype=np.int64, count=len(rows))
        width = int(lengths.max())
        mask = np.arange(width) < lengths[:, None]
        ids = np.full((len(rows), width), self.tokenizer.pad_token_id or 0, dtype=np.int64)
        types = np.zeros((len(rows), width), dtype=np.int64)
        ids[mask] = np.fromiter(chain.from_iterable(r.input_ids for r in rows), dtype=np.int64)
        types[mask] = np.fromiter(chain.from_iterable(r.token_type_ids for r in rows), dtype=np.int64)
        return tuple(torch.from_numpy(a).to(self.device) for a in (ids, types, mask.astype(np.int64)))

    def run_rows(self, key: tuple, rows: Sequence) -> list[Any]:
        """One forward pass over ``rows`` (encodings sharing ``key``); one output per row, as
        ``key[0].row_outputs`` gives it (a task family's head outputs, a pooled vector, or per
        mask the top-k probabilities and ids)."""
        ids, types, mask = self._pad(rows)
        lengths = [len(r.input_ids) for r in rows]
        kind, *params = key
        with torch.inference_mode(), autocast(self.precision, self.device):
            return kind.row_outputs(self.model, ids, types, mask, lengths, *params)

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
        model's limit is a ``too_long`` InputError (``on_overflow="error"``: a map of a cut text must not
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
        enc = self._encode(text_of(text, "the text"), pair, on_overflow=on_overflow)
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
        return self.run_rows((STATES,), rows)


def cheapest_cuts(lengths: Sequence[int], pass_tokens: float) -> list[tuple[int, int]]:
    """Where to cut a batch of rows sorted longest first into consecutive batches, padded each
    to its longest row, so that their padded tokens plus ``pass_tokens`` per forward pass (the
    fixed cost of a pass, in padded tokens) are fewest: ``[(start, end), ...]`` covering every
    row. With ``pass_tokens`` large, one batch; with 0, a batch per distinct length."""
    n = len(lengths)
    if n == 0:
        return []
    if sum(lengths[0] - x for x in lengths) <= pass_tokens:  # no cut saves more padding than a pass costs
        return [(0, n)]
    cost = [0.0] + [float("inf")] * n  # cost[j]: the cheapest cut of rows [0, j)
    start = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(j):
            c = cost[i] + (j - i) * lengths[i] + pass_tokens
            if c < cost[j]:
                cost[j], start[j] = c, i
    cuts, j = [], n
    while j > 0:
        cuts.append((start[j], j))
        j = start[j]
    return cuts[::-1]


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
