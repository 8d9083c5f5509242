"""Task options declared once: every option a task family takes, with its type, help and range.

Each field of :class:`TaskOptions` is a ``--flag`` of ``finetune``/``evaluate``/``predict``
(in the family's help group, :data:`GROUPS`) and a key of ``-o KEY=VALUE``; both are parsed
and range-checked by the same declaration (:mod:`bertkit.options`). A field left ``None``
is not given: the family's own default applies (e.g. ``text_column`` "text", ``doc_stride``
128). The options a model was fine-tuned with are saved in its ``config.json``
(:func:`bertkit.tasks.base.saved_task_options`); given options override saved ones. Which
options a family accepts is the family's check (an unknown one is named there).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from typing import Any

from bertkit.errors import BertkitError
from bertkit.options import comma_list, element_type, field_type, option, range_error

# SQuAD's settings as google-research/bert's run_squad.py has them (the one home of each)
SQUAD_DEFAULTS = {"doc_stride": 128, "max_query_length": 64, "n_best_size": 20,
                  "max_answer_length": 30, "null_score_diff_threshold": 0.0}


@dataclasses.dataclass
class TaskOptions:
    # generic sentence tasks (tasks/generic.py) and token classification's files (tasks/ner.py)
    text_column: str | None = option(None, "column (or JSON field) of the text (default: text)")
    pair_column: str | None = option(
        None, "column of the second text of a pair task (default: text_pair)")
    label_column: str | None = option(None, "column of the label (default: label)")
    labels: tuple[str, ...] | None = option(
        None, "comma-separated label names in head order (default: the sorted labels of train)",
        metavar="A,B,...")
    label_names: tuple[str, ...] | None = option(
        None, "comma-separated meanings of the labels, in head order, written as the model's "
              "id2label (e.g. negative,positive for labels 0,1; default: the labels)",
        metavar="A,B,...")
    id_column: str | None = option(None, "column of an example id (default: the line number)")
    format: str | None = option(None, "csv, tsv or jsonl (default: from the file suffix)")
    train_file: str | None = option(None, "training file (default: DATA/train.{csv,tsv,jsonl})")
    dev_file: str | None = option(None, "evaluation file (default: DATA/dev.{csv,tsv,jsonl})")
    # token classification (tasks/ner.py)
    tokens_field: str | None = option(None, "JSON field of the words (default: tokens)")
    tags_field: str | None = option(None, "JSON field of the tags (default: tags)")
    bio: bool | None = option(None, "check BIO-shaped tags and convert them to IOB2 "
                                    "(default: on for CoNLL-2003)")
    long_sentences: str | None = option(
        None, "sentences longer than --max-seq-length: split into windows, truncate, or "
              "overlapping windows (default: split)", choices=("split", "truncate", "window"))
    # feature-based use (tasks/feature_based.py)
    feature_based: bool | None = option(
        None, "freeze the encoder and train a BiLSTM tagger on its hidden states")
    feature_layers: str | None = option(
        None, "hidden states to use, e.g. -1,-2,-3,-4 (the last four)", metavar="LIST")
    combine: str | None = option(None, "how to join the layers", choices=("concat", "sum"))
    lstm_hidden: int | None = option(None, "BiLSTM hidden size per direction", ge=1)
    lstm_layers: int | None = option(None, "BiLSTM layers", ge=1)
    # texts longer than the length limit (bertkit/windows.py; GLUE, generic, NER)
    long_text: str | None = option(
        None, "truncate (default) or cut into overlapping windows of the length limit whose "
              "outputs are pooled (tags: from the window with the most context)",
        choices=("truncate", "window"))
    stride: int | None = option(None, "with --long-text window: windows start N tokens apart "
                                      "(default: half the window); smaller than the window",
                                ge=1, metavar="N")
    pool_windows: str | None = option(None, "how window logits are pooled (default mean)",
                                      choices=("mean", "max"))
    # SQuAD (tasks/squad.py)
    doc_stride: int | None = option(None, "tokens between the starts of a context's windows "
                                          f"(default: {SQUAD_DEFAULTS['doc_stride']})", ge=1)
    max_query_length: int | None = option(
        None, f"question tokens kept (default: {SQUAD_DEFAULTS['max_query_length']})", ge=1)
    n_best_size: int | None = option(
        None, f"start/end candidates per window (default: {SQUAD_DEFAULTS['n_best_size']})", ge=1)
    max_answer_length: int | None = option(
        None, f"longest answer in tokens (default: {SQUAD_DEFAULTS['max_answer_length']})", ge=1)
    null_score_diff_threshold: float | None = option(
        None, "SQuAD v2.0: answer only when the best span beats no-answer by more than this "
              f"(default: {SQUAD_DEFAULTS['null_score_diff_threshold']:g}, or the value tuned on dev)")
    # sentence embeddings (tasks/embedding.py)
    pooling: str | None = option(None, "how token vectors become the sentence embedding "
                                       "(default: mean)", choices=("mean", "cls", "max"))
    loss: str | None = option(None, "scored pairs: cosine (MSE of cosine vs score, the default) "
                                    "or cosent; positive pairs: mnr (in-batch negatives)",
                              choices=("cosine", "cosent", "mnr"))
    mnr_temperature: float | None = option(None, "mnr: the softmax temperature of the cosines "
                                                 "(default: 0.05, sentence-transformers' scale 20)", gt=0)
    matryoshka_dims: tuple[int, ...] | None = option(
        None, "Matryoshka: the loss summed over these leading widths of the embedding (e.g. "
              "128,64,32; include the full width to train it too); dev also scores each", ge=1,
        metavar="D,D,...")
    score_scale: float | None = option(
        None, "scored pairs: the score that means identical, for the cosine loss (default: the "
              "largest score of the training file, e.g. STS-B's 5)", gt=0)


GROUPS = {  # help group -> the fields shown in it
    "generic tasks (text-classification, regression, ...; token-classification files)": (
        "text_column", "pair_column", "label_column", "labels", "label_names", "id_column",
        "format", "train_file", "dev_file"),
    "token classification (ner, conll2003, token-classification)": (
        "tokens_field", "tags_field", "bio", "long_sentences"),
    "feature-based use (NER; the paper's section 5.3 ablation)": (
        "feature_based", "feature_layers", "combine", "lstm_hidden", "lstm_layers"),
    "texts longer than the length limit": ("long_text", "stride", "pool_windows"),
    "SQuAD (squad, squad2)": (
        "doc_stride", "max_query_length", "n_best_size", "max_answer_length",
        "null_score_diff_threshold"),
    "sentence embeddings (embedding)": ("pooling", "loss", "mnr_temperature", "matryoshka_dims",
                                        "score_scale"),
}
_FIELDS = {f.name: f for f in dataclasses.fields(TaskOptions)}
_HINTS = typing.get_type_hints(TaskOptions)


def parse_task_option(item: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of ``-o`` -> ``(key, value)``, the value typed and checked as the key's
    flag would be (a JSON list is accepted for a list option, ``true``/``false`` for a switch)."""
    key, sep, text = item.partition("=")
    key = key.strip().replace("-", "_")
    if not sep or not key:
        raise BertkitError(f"bad task option {item!r}; expected KEY=VALUE")
    if key not in _FIELDS:
        raise BertkitError(f"unknown task option {key!r}; known: {', '.join(_FIELDS)}")
    field, kind = _FIELDS[key], field_type(_HINTS[key])
    try:
        value = _typed(kind, field, text.strip())
    except (argparse.ArgumentTypeError, ValueError) as e:
        raise BertkitError(f"task option {key}: {e}") from None
    choices = field.metadata.get("choices")
    if choices and value not in choices:
        raise BertkitError(f"task option {key}: must be one of {', '.join(choices)} (got {value!r})")
    return key, value


def _typed(kind: type, field: dataclasses.Field, text: str) -> Any:
    limits = {k: field.metadata.get(k) for k in ("ge", "gt", "le", "lt")}
    element = element_type(kind)
    if element is not None:
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, list):
            return tuple(element(v) for v in value)
        return comma_list(element, **limits)(text)
    if kind is bool:
        lowered = text.lower()
        if lowered not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
            raise ValueError(f"expected true or false (got {text!r})")
        return lowered in ("true", "1", "yes", "on")
    if kind in (int, float):
        value = kind(text)
        error = range_error(value, **limits)
        if error:
            raise ValueError(error)
        return value
    return text


def task_options_from(args: argparse.Namespace, saved: dict | None = None) -> dict:
    """The task options of a command: ``saved`` ones (the model's), then the flags given,
    then ``-o KEY=VALUE`` (``args.task_option``); lists as JSON lists."""
    options = dict(saved or {})
    for name in _FIELDS:
        value = getattr(args, name, None)
        if value is not None:
            options[name] = value
    for item in getattr(args, "task_option", None) or []:
        key, value = parse_task_option(item)
        options[key] = value
    return {k: list(v) if isinstance(v, tuple) else v for k, v in options.items()}
