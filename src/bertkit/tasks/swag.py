"""SWAG (paper section 4.4): pick the ending that best continues a sentence, of four.

Each of the four choices is the pair ``[CLS] sent1 [SEP] sent2 + " " + ending_i [SEP]``
(truncated longest-first); ``BertForMultipleChoice`` scores each from its pooled ``[CLS]``
with one vector, and a softmax over the four scores is trained with cross-entropy. Data:
the official CSVs (``train.csv``, ``val.csv``, ``test.csv``; ``dev.csv`` also accepted for
the dev split) via :func:`~bertkit.tasks.formats.read_swag`. Predict input: JSON Lines with
``sent1``, ``sent2`` and ``ending0..3`` (or an ``endings`` list), optional ``label``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bertkit.errors import BertkitError, DataFormatError, InputError
from bertkit.metrics import accuracy
from bertkit.model import BertForMultipleChoice
from bertkit.tasks.base import FeatureSet, Plan, PlanContext, Task, softmax, text_of
from bertkit.tasks.formats import SwagExample, read_swag
from bertkit.tasks.formats.base import iter_jsonl

__all__ = ["SwagTask", "create_task"]

NUM_CHOICES = 4
_FILES = {"train": ("train.csv",), "dev": ("val.csv", "dev.csv"), "test": ("test.csv",)}


class SwagTask(Task):
    """Four-way multiple choice over SWAG examples."""

    model_class = BertForMultipleChoice

    def model_kwargs(self) -> dict:
        return {}

    @property
    def num_labels(self) -> int:
        return 1  # one score per choice

    def read(self, data_dir: str | Path, split: str) -> list[SwagExample]:
        if split not in _FILES:
            raise BertkitError(f"swag has no split {split!r}; known: {', '.join(_FILES)}")
        for name in _FILES[split]:
            if (Path(data_dir) / name).is_file():
                return read_swag(Path(data_dir) / name)
        raise FileNotFoundError(f"{data_dir}: no SWAG {split} file ({', '.join(_FILES[split])})")

    def read_input(self, path: str | Path) -> list[SwagExample]:
        examples = []
        for line, record in iter_jsonl(path):
            endings = record.get("endings") or [record.get(f"ending{i}") for i in range(NUM_CHOICES)]
            texts = [record.get("sent1"), record.get("sent2", ""), *endings]
            if len(endings) != NUM_CHOICES or not all(isinstance(t, str) for t in texts):
                raise DataFormatError(path, "expected string fields sent1, sent2 and ending0..3 "
                                            "(or a list 'endings' of 4)", line)
            label = record.get("label")
            if label is not None and str(label) not in ("0", "1", "2", "3"):
                raise DataFormatError(path, f"unknown label {label!r}; expected 0, 1, 2 or 3", line)
            examples.append(SwagExample(str(record.get("id", line)), texts[0], texts[1], endings,
                                        None if label is None else int(label), line))
        return examples

    def featurize(self, examples, tokenizer, max_seq_length: int, train: bool = False) -> FeatureSet:
        labelled = all(ex.label is not None for ex in examples)
        if train and not labelled:
            raise BertkitError("swag: the training data has examples without a label")
        features, truncated = [], 0
        for ex in examples:
            encs = [tokenizer.encode(ex.context, f"{ex.start} {ending}".strip(), max_length=max_seq_length)
                    for ending in ex.endings]
            truncated += any(e.num_truncated for e in encs)
            longest = max(len(e) for e in encs)
            for e in encs:
                e.pad(longest, tokenizer.pad_token_id)
            feature = {"input_ids": np.array([e.input_ids for e in encs], dtype=np.int32),
                       "token_type_ids": np.array([e.token_type_ids for e in encs], dtype=np.int8),
                       "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int8)}
            if labelled:
                feature["labels"] = np.asarray(ex.label, dtype=np.int64)
            features.append(feature)
        pad = {"input_ids": tokenizer.pad_token_id, "token_type_ids": 0, "attention_mask": 0}
        return FeatureSet(features, list(range(len(examples))), pad,
                          num_examples=len(examples), num_truncated=truncated)

    @property
    def metric_names(self) -> tuple[str, ...]:
        return ("accuracy",)

    def evaluate(self, examples, features, outputs) -> dict[str, float]:
        if any(ex.label is None for ex in examples):
            raise BertkitError("swag: the evaluation data has no labels to score against")
        predicted = np.stack(outputs["logits"]).argmax(axis=-1)
        return {"accuracy": accuracy(predicted, [ex.label for ex in examples])}

    def predict(self, examples, features, outputs) -> list[dict]:
        probs = softmax(np.stack(outputs["logits"]))
        return [{"id": ex.id, "label": int(p.argmax()), "probabilities": [round(float(x), 6) for x in p]}
                for ex, p in zip(examples, probs)]

    # ------------------------------------------------------------ one raw input
    structured_inputs = True
    rows_from_outputs = False  # rows are scored as the choices of one example

    def plan(self, item, ctx: PlanContext) -> Plan:
        """``{"context": C, "choices": [A, B, ...]}``: SWAG's features (context, then each
        choice), one row per choice; the choices with their probabilities, best first."""
        if not isinstance(item, dict) or not isinstance(item.get("choices"), list) or len(item["choices"]) < 2:
            raise InputError('multiple choice takes {"context": C, "choices": [A, B, ...]} (two or more)')
        context = text_of(item.get("context", item.get("question")), "context")
        choices = [text_of(c, f"choice {i + 1}") for i, c in enumerate(item["choices"])]
        rows, features = self.feature_rows(SwagExample("0", context, "", choices), ctx)
        truncated = bool(features.num_truncated)
        ctx.check_overflow(truncated)

        def finish(outputs):
            probs = softmax(np.array([float(o) for o in outputs]))
            order = np.argsort(-probs, kind="stable")
            return [{"label": choices[i], "index": int(i), "score": float(probs[i])} for i in order]

        return Plan(rows, (self,), finish, truncated)

    def row_outputs(self, model, ids, types, mask, lengths) -> list:
        """Each row's choice score: the rows of a batch scored as the choices of one example
        (a choice's score depends on its own row only); from the model's ``head_logits`` where
        it has one (the last layer at each row's ``[CLS]`` only, where that pays)."""
        score = model.head_logits if hasattr(model, "head_logits") else lambda *rows: model(*rows).logits
        return list(score(ids[None], types[None], mask[None]).float()[0].cpu().numpy())


def create_task(name: str = "swag", **options) -> SwagTask:
    """The SWAG task; it takes no options."""
    if options:
        raise BertkitError(f"swag takes no options (got {', '.join(options)})")
    return SwagTask("swag")


def task_for_head(labels: list[str], regression: bool, max_positions: int, **options) -> SwagTask:
    """The family of a multiple-choice head never fine-tuned by bertkit."""
    return create_task("swag")
