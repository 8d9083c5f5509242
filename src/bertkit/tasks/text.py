"""Sentence and sentence-pair classification or regression: the base of GLUE and generic tasks.

Inputs are ``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]`` (segment ids 0 / 1, pairs
truncated longest-first to ``max_seq_length``); the head is ``BertForSequenceClassification``
on the pooled ``[CLS]``: ``len(labels)`` classes, or one output (MSE) when ``labels`` is
``None``. Features carry ``labels`` (class index, or float score) when every example has one.
Predictions are ``{"label": name, "probabilities": {name: p}}`` (names: the task's
``label_names``, the saved ``id2label``, e.g. SST-2's ``negative``/``positive``) or
``{"score": x}``.
With the option ``long_text="window"`` (``stride``, ``pool_windows``; see
:mod:`bertkit.tasks.windows`) a text longer than the limit becomes several features, windows of the
first text (the second text of a pair, cut to half the room, is repeated in each), each
with the example's label; ``meta[k]`` is the example of feature ``k`` and the logits of an
example's windows are pooled (mean or max) before scoring and prediction.
``predict`` input (JSON Lines) names its texts by :attr:`TextTask.input_fields`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bertkit.errors import BertkitError, DataFormatError, InputError
from bertkit.model import BertForSequenceClassification
from bertkit.tasks.base import (
    FeatureSet,
    Plan,
    PlanContext,
    Row,
    Task,
    input_errors,
    softmax,
    text_of,
)
from bertkit.tasks.formats.base import TextExample, iter_jsonl, parse_label
from bertkit.tasks.windows import LongText, pool_rows, text_windows

__all__ = ["TextTask"]


class TextTask(Task):
    """Shared featurization, scoring and prediction of sentence(-pair) tasks.

    Subclasses give :meth:`read`, :meth:`score` (metrics from predictions and gold values)
    and :attr:`metric_names`; ``pair`` says whether inputs are pairs; ``input_fields`` are
    the JSON field names accepted for the first and second text of ``predict`` input.
    """

    model_class = BertForSequenceClassification
    pair = False
    input_fields: tuple[tuple[str, ...], tuple[str, ...]] = (("text", "sentence", "text_a"),
                                                             ("text_pair", "text_b"))
    label_fields: tuple[str, ...] = ("label",)

    @property
    def regression(self) -> bool:
        return self.labels is None

    # ------------------------------------------------------------ one raw input
    scores_texts = True  # a text (pair) in, logits out: the answers TEI scores (classify, rerank)

    def plan(self, item, ctx: PlanContext) -> Plan:
        """A text, a pair ``[A, B]`` or ``{"text", "text_pair"}``: this family's features
        (windows of a long text in ``window`` mode) and its :meth:`example_logits` (windows
        pooled); every label with its probability, best first, or the regression value."""
        if isinstance(item, list) and len(item) == 2:
            text, pair = text_of(item[0], "the first text"), text_of(item[1], "the second text")
        elif isinstance(item, dict) and "text" in item:
            text, pair = text_of(item["text"], "text"), item.get("text_pair")
            pair = None if pair is None else text_of(pair, "text_pair")
        else:
            text, pair = text_of(item, "the input"), None
        if pair is not None and ctx.fine_tuned and not self.pair:
            raise InputError(f"this model was fine-tuned on single texts ({self.name}); a sentence "
                             "pair would be read as an input it never saw: send one text per input")
        long_text = self.long_text
        with input_errors():  # the rows straight from the encodings: no feature arrays on a server's hot path
            encodings, cut = self.encodings(TextExample("0", text, pair, None), ctx.tokenizer, ctx.max_length,
                                            long_text)
        rows = [Row(ids, types) for ids, types in encodings]
        ctx.check_overflow(cut > 0)
        labels, regression = ctx.labels, ctx.regression

        def example_logits(outputs):  # the windows' rows pooled (one window: its row)
            return pool_rows([0] * len(outputs), outputs, 1, long_text.pool)[0]

        def finish(outputs):
            logits = example_logits(outputs)
            if regression:
                return [{"label": labels[0], "score": float(logits[0])}]
            probs = softmax(logits)
            order = np.argsort(-probs, kind="stable")
            return [{"label": labels[i], "score": float(probs[i])} for i in order]

        return Plan(rows, (self,), finish, cut > 0, windows=len(rows), logits=example_logits,
                    left_truncatable=len(rows) == 1)

    def encodings(self, ex: TextExample, tokenizer, max_seq_length: int,
                  long_text: LongText | None = None) -> tuple[list[tuple[list[int], list[int]]], int]:
        """``([(input_ids, token_type_ids), ...], cut)``: the model rows of one example and the
        tokens it lost: one row, a pair truncated longest-first to ``max_seq_length``, or in
        ``window`` mode (``long_text``, default the task's) its windows, where ``cut`` counts the
        pieces of a pair's second text dropped (windows keep it beside each one). The one rule
        of :meth:`featurize` (training, evaluation) and :meth:`plan` (one raw input)."""
        long_text = long_text or self.long_text
        if long_text.windowed:
            first = tokenizer.text_to_ids(ex.text_a)
            second = tokenizer.text_to_ids(ex.text_b) if ex.text_b is not None else None
            return text_windows(tokenizer, first, second, max_seq_length, long_text)
        enc = tokenizer.encode(ex.text_a, ex.text_b, max_length=max_seq_length)
        return [(enc.input_ids, enc.token_type_ids)], enc.num_truncated

    # ------------------------------------------------------------ features
    def featurize(self, examples: Sequence[TextExample], tokenizer, max_seq_length: int,
                  train: bool = False) -> FeatureSet:
        labelled = all(ex.label is not None for ex in examples)
        if train and not labelled:
            missing = next(ex for ex in examples if ex.label is None)
            raise BertkitError(f"{self.name}: training example {missing.guid} has no label")
        features, meta, truncated = [], [], 0
        long_text = self.long_text
        for e, ex in enumerate(examples):
            encodings, cut = self.encodings(ex, tokenizer, max_seq_length, long_text)
            truncated += cut > 0
            for ids, types in encodings:
                feature = {"input_ids": np.asarray(ids, dtype=np.int32),
                           "token_type_ids": np.asarray(types, dtype=np.int8),
                           "attention_mask": np.ones(len(ids), dtype=np.int8)}
                if labelled:
                    feature["labels"] = self.target(ex)
                features.append(feature)
                meta.append(e)
        pad = {"input_ids": tokenizer.pad_token_id, "token_type_ids": 0, "attention_mask": 0}
        return FeatureSet(features, meta, pad, num_examples=len(examples), num_truncated=truncated)

    @property
    def long_text(self) -> LongText:
        """The long-text choice of the task options (default: truncate)."""
        return LongText.from_options(self.options)

    def example_logits(self, features: FeatureSet, outputs) -> np.ndarray:
        """(examples, outputs) logits: each example's window rows pooled (one row: itself)."""
        pooled = pool_rows(features.meta, outputs["logits"], features.num_examples,
                           self.long_text.pool)
        return np.stack(pooled)

    def target(self, ex: TextExample) -> np.ndarray:
        """The training target of an example: float32 score or int64 class index."""
        if self.regression:
            return np.asarray(float(ex.label), dtype=np.float32)
        where = f"{ex.line}: " if ex.line is not None else ""
        return np.asarray(self.label_index(str(ex.label), where), dtype=np.int64)

    # ------------------------------------------------------------ scoring
    def score(self, predictions: np.ndarray, gold: np.ndarray) -> dict[str, float]:
        """Metrics of predicted vs gold class indices (or scores), main first (override)."""
        raise NotImplementedError

    def _predicted(self, features, outputs) -> np.ndarray:
        logits = self.example_logits(features, outputs)
        return logits[:, 0] if self.regression else logits.argmax(axis=-1)

    def evaluate(self, examples, features, outputs) -> dict[str, float]:
        if any(ex.label is None for ex in examples):
            raise BertkitError(f"{self.name}: the evaluation data has no labels to score against")
        gold = np.array([self.target(ex) for ex in examples])
        return self.score(self._predicted(features, outputs), gold)

    def predict(self, examples, features, outputs) -> list[dict]:
        logits = self.example_logits(features, outputs)
        if self.regression:
            return [{"id": ex.guid, "score": float(row[0])} for ex, row in zip(examples, logits)]
        records, names = [], self.label_names  # the model's id2label, as every other door answers
        for ex, probs in zip(examples, softmax(logits)):
            records.append({"id": ex.guid, "label": names[int(probs.argmax())],
                            "probabilities": {n: round(float(p), 6) for n, p in zip(names, probs)}})
        return records

    # ------------------------------------------------------------ predict input
    def read_input(self, path: str | Path) -> list[TextExample]:
        """One example per JSON Lines record: texts from :attr:`input_fields`, optional label."""
        examples = []
        for line, record in iter_jsonl(path):
            text_a = self._text(path, line, record, self.input_fields[0])
            text_b = self._text(path, line, record, self.input_fields[1]) if self.pair else None
            label = next((record[k] for k in self.label_fields if k in record), None)
            if label is not None and label != "":  # an input to predict may leave it blank
                label = parse_label(path, line, label, self.labels, self.regression)
            examples.append(TextExample(str(record.get("id", line)), text_a, text_b, label, line))
        return examples

    @staticmethod
    def _text(path, line: int, record: dict, names: Sequence[str]) -> str:
        for name in names:
            if name in record:
                if not isinstance(record[name], str):
                    raise DataFormatError(path, f"field {name!r} should be a string", line)
                return record[name]
        unique = list(dict.fromkeys(names))
        raise DataFormatError(path, f"missing text field (one of {', '.join(map(repr, unique))})", line)
