"""The task interface every fine-tuning family implements (GLUE, generic, SWAG, NER, SQuAD).

A :class:`Task` knows its data and its head; the one loop in :mod:`bertkit.finetuning.loop`
knows nothing task-specific. The loop calls, in order::

    task = create_task("sst2", **options)              # via bertkit.tasks.TASKS
    task = task.for_data(data_dir)                     # labels from train when not given
    examples = task.read(data_dir, "train")            # any objects, file order
    feats = task.featurize(examples, tokenizer, max_seq_length, train=True)   # FeatureSet
    model = task.build_model(model_dir, config_overrides={...})   # head sized from labels
    loss = task.compute(model, batch).loss             # batch = feats.collate(indices)
    outputs = {name: [per-feature numpy arrays]}       # task.output_names, in feature order
    task.evaluate(examples, feats, outputs) -> {"metric": value, ...}   # main metric first
    task.predict(examples, feats, outputs) -> [one JSON-able dict per example]
    save_pretrained(model, out, tokenizer=tok, extra_config=task.config_entries(metrics))
    task.write_model_files(out, model, max_seq_length)  # the family's own files, if any

Contract details:

* **Unchanged after construction.** A task's name, labels and options are fixed when it is
  built; reading, featurising and scoring never change them. A family whose labels (or
  evaluation splits) come from the training data builds them in :meth:`Task.for_data`,
  which returns a new task (the default returns the task itself).
* **Splits.** ``read(data_dir, split)`` reads ``"train"`` or one of :meth:`eval_splits`
  (``("dev",)`` unless a family has more, e.g. MNLI's mismatched dev); malformed input
  raises :class:`~bertkit.errors.DataFormatError` with file and line. ``read_input(path)``
  reads the JSON Lines file of ``bertkit predict`` (labels optional): one example per
  non-empty line, in file order, since ``predict`` writes ``{**input record, **prediction}``
  pairing the i-th record with the i-th record of :meth:`Task.predict`.
* **Features.** A :class:`FeatureSet` is a list of feature dicts (name -> numpy int array,
  the last axis being the token axis for the names in ``pad_values``), one ``meta`` entry per
  feature (anything: e.g. the example index, offsets, word ids; the loop never reads it) and
  ``num_truncated`` (examples that lost tokens; the loop warns). An example may give several
  features (SQuAD windows) or none. Feature keys are the model's ``forward`` keyword
  arguments (``input_ids``, ``token_type_ids``, ``attention_mask``, ``labels``,
  ``start_positions``...); ``collate`` pads the ``pad_values`` keys to the batch's longest
  feature (``labels`` of a token task pads with -100) and stacks everything else.
* **Outputs.** ``output_names`` are the :class:`~bertkit.model.outputs.ModelOutput` fields to
  keep per feature (``("logits",)``; QA: ``("start_logits", "end_logits")``). With
  ``token_outputs`` the loop cuts each feature's row back to that feature's own length (no
  padding positions), so ``outputs[name][i]`` is ``(len_i, ...)``; otherwise it is the row as
  the model gave it (``(num_labels,)``, ``(choices,)``).
* **Head and labels.** ``labels`` are the label names in head order (``None`` for
  regression or span tasks); :meth:`build_model` loads ``model_class`` with
  :meth:`model_kwargs` and refuses (:class:`~bertkit.errors.CheckpointError`) a checkpoint
  whose trained head has another label count or other label names. :meth:`config_entries`
  goes into the saved ``config.json`` (``id2label``/``label2id``, ``finetuning_task`` and
  ``bertkit_finetune = {"task", "options"}``) so ``evaluate``/``predict`` rebuild the same
  task from the model directory alone (:func:`saved_task_options`).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bertkit.config import IGNORE_INDEX
from bertkit.errors import BertkitError, CheckpointError, InputError
from bertkit.model.outputs import ModelOutput
from bertkit.modeldir.entry import DEFAULT_MAX_SEQ_LENGTH, FINETUNE_KEY, read_model_config
from bertkit.runlog import RunLogger

__all__ = [
    "IGNORE_INDEX",
    "FeatureSet",
    "Task",
    "check_head",
    "featurize",
    "label_maps",
]



@dataclass
class FeatureSet:
    """Model inputs of one split: ``features[i]`` is a dict of numpy arrays, ``meta[i]`` its
    side information; see the module docstring.

    ``pad_values`` maps the token-axis keys to their padding value; ``num_examples`` is the
    number of examples the features came from; ``num_truncated`` how many of them lost tokens.
    """

    features: list[dict[str, np.ndarray]]
    meta: list[Any]
    pad_values: dict[str, int]
    num_examples: int = 0
    num_truncated: int = 0
    lengths: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.meta) != len(self.features):
            raise ValueError(f"{len(self.features)} features but {len(self.meta)} meta entries")
        # widths: each feature's token axis, what a batch pads to; lengths: what batching sorts
        # by (the same, unless a family wants its batches in random order)
        self.widths = np.array([np.shape(f["input_ids"])[-1] for f in self.features], dtype=np.int64)
        self.lengths = self.widths

    def __len__(self) -> int:
        return len(self.features)

    def collate(self, indices: Sequence[int]) -> dict[str, torch.Tensor]:
        """The features at ``indices`` as a batch of tensors, token axes padded to the longest."""
        items = [self.features[i] for i in indices]
        longest = int(max(self.widths[i] for i in indices))
        batch = {}
        for key in items[0]:
            arrays = [np.asarray(item[key]) for item in items]
            if key in self.pad_values:
                lead = arrays[0].shape[:-1]
                out = np.full((len(arrays), *lead, longest), self.pad_values[key], dtype=np.int64)
                for row, array in zip(out, arrays):
                    row[..., : array.shape[-1]] = array
            else:
                out = np.stack(arrays)
            batch[key] = torch.from_numpy(out)
        return batch

    def subset(self, indices: Sequence[int]) -> FeatureSet:
        """The features at ``indices`` (e.g. a quick sample of the training set)."""
        return FeatureSet([self.features[i] for i in indices], [self.meta[i] for i in indices],
                          self.pad_values, len(indices), 0)


def label_maps(labels: Sequence[str]) -> dict[str, dict]:
    """``{"id2label": {"0": name, ...}, "label2id": {name: 0, ...}}`` (HF config fields)."""
    return {"id2label": {str(i): name for i, name in enumerate(labels)},
            "label2id": {name: i for i, name in enumerate(labels)}}










def _head_rows(model_dir: str | Path, tensor_names: Sequence[str]) -> int | None:
    """Output rows of the first tensor of ``tensor_names`` in the checkpoint (None: absent)."""
    directory = Path(model_dir)
    if (directory / "model.safetensors").is_file():
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(str(directory / "model.safetensors"), framework="pt") as f:
                for name in tensor_names:
                    if name in f.keys():
                        return int(f.get_slice(name).get_shape()[0])
        except SafetensorError as e:  # a cut or foreign file: named, as the weights' loader does
            raise CheckpointError(f"{directory / 'model.safetensors'}: unreadable ({e})") from None
        return None
    return None  # pytorch_model.bin: load_pretrained's own shape check reports it


def check_head(model_dir: str | Path, head_tensor: str, labels: Sequence[str] | None,
               num_outputs: int, task_name: str, names: Sequence[str] | None = None) -> None:
    """Refuse a checkpoint whose trained head does not fit the task.

    ``head_tensor`` is the HF name of the head's weight (e.g. ``classifier.weight``);
    ``num_outputs`` the rows the task needs. A head of another size, or (for a directory
    with real label names) other label names, is a :class:`CheckpointError` saying both.
    Saved names equal to ``labels`` (the data's strings, as directories written before label
    names had) or to ``names`` (the task's label names) both fit.
    """
    rows = _head_rows(model_dir, [head_tensor])
    if rows is None:
        return
    id2label = read_model_config(model_dir).get("id2label") or {}
    saved = [id2label[k] for k in sorted(id2label, key=int)] if id2label else []
    if rows != num_outputs:
        names = f" ({', '.join(saved)})" if saved else ""
        raise CheckpointError(
            f"{model_dir}: its head has {rows} output(s){names} but task {task_name} needs "
            f"{num_outputs}" + (f" ({', '.join(labels)})" if labels else "")
            + "; start from a model without this head (e.g. the pre-trained one)")
    generic = all(name == f"LABEL_{i}" for i, name in enumerate(saved))
    fits = [list(labels)] + ([list(names)] if names is not None else []) if labels is not None else []
    if labels is not None and saved and not generic and list(saved) not in fits:
        shown = list(names) if names is not None and list(names) != list(labels) else list(labels)
        raise CheckpointError(f"{model_dir}: its head predicts labels {saved}, "
                              f"but task {task_name} has labels {shown}")


# ------------------------------------------------------------------ answering raw inputs
@dataclass
class Row:
    """One model row built without the tokenizer's ``encode`` (a window, a feature's row)."""

    input_ids: list[int]
    token_type_ids: list[int]
    num_truncated: int = 0


@dataclass
class Plan:
    """One raw input's work for the inference engine: its model ``rows``, their batching
    ``key`` (rows with equal keys share a forward pass; ``key[0]`` has ``row_outputs(model,
    ids, types, mask, lengths, *key[1:])``), and ``finish``, which turns the rows' outputs into
    the answer (its keyword arguments with defaults, if any, are the Hugging Face inference
    parameters its task honours: ``top_k``, ``aggregation_strategy``, ...). ``windows``: model rows that are windows of one long text (1: not windowed);
    ``logits``: classification's rows -> the example's logits, for a door that scores them its
    own way (TEI's ``raw_scores``); ``left_truncatable``: one row a door may rebuild cut from
    the left."""

    rows: list
    key: tuple
    finish: Callable[[list[Any]], Any]
    truncated: bool = False
    outputs: list = field(default_factory=list)
    windows: int = 1
    logits: Callable[[list[Any]], np.ndarray] | None = None
    left_truncatable: bool = False


@dataclass
class PlanContext:
    """What a family needs from the engine to plan one input: the tokenizer, the token limit,
    the head's label names in head order, whether the head is a regression, whether the model
    was fine-tuned by bertkit on a named task, and what to do with a too-long input
    (``on_overflow``: ``truncate`` or ``error``)."""

    tokenizer: Any
    max_length: int
    labels: list[str]
    regression: bool = False
    fine_tuned: bool = False
    on_overflow: str = "truncate"

    def check_overflow(self, truncated: bool) -> None:
        if truncated and self.on_overflow == "error":
            raise InputError(f"the input is longer than the model's limit of {self.max_length} "
                             "tokens", "too_long")


def text_of(value: Any, what: str) -> str:
    """``value`` if it is a text with something the tokenizer keeps, else an InputError."""
    from bertkit.tokenizer.basic import is_blank

    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, got {type(value).__name__}")
    if is_blank(value):  # the tokenizer family's rule: empty once cleaned
        hidden = " (only control or zero-width characters, which the tokenizer drops)" if value.strip() else ""
        raise InputError(f"{what} is empty{hidden}")
    return value


@contextlib.contextmanager
def input_errors():
    """Featurising one raw input: a featurising error (:class:`BertkitError`, ``ValueError``)
    raised inside is an :class:`InputError` (the server's 4xx) with its message."""
    try:
        yield
    except (BertkitError, ValueError) as e:
        raise InputError(str(e)) from None


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64."""
    z = np.asarray(logits, dtype=np.float64)
    z = np.exp(z - z.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


_NOT_TEXT = frozenset({"id", "qid", "guid", "label", "labels", "line", "tags", "answers", "score"})


class Task:
    """Base class of a fine-tuning task; a family overrides the methods marked below.

    Class attributes: ``model_class`` (a :mod:`bertkit.model` head class), ``head_tensor``
    (HF name of the head weight, for :func:`check_head`; ``None`` skips the check),
    ``output_names``, ``token_outputs`` (see the module docstring). Instance attributes:
    ``name`` (registry name), ``labels`` (names in head order or ``None``), ``options``
    (JSON-able constructor options, saved with the model).
    """

    model_class: type = None  # type: ignore[assignment]
    default_max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH
    head_tensor: str | None = "classifier.weight"
    output_names: tuple[str, ...] = ("logits",)
    token_outputs: bool = False

    def __init__(self, name: str, labels: Sequence[str] | None = None, **options: Any):
        self.name = name
        self.labels = list(labels) if labels is not None else None
        self.options = dict(options)

    # ------------------------------------------------------------ data (override)
    def for_data(self, data_dir: str | Path) -> Task:
        """This task as it trains on ``data_dir``: a family whose labels or splits come from
        the training data returns a new task built with them (override); default: itself."""
        return self

    def eval_splits(self) -> tuple[str, ...]:
        """Splits scored after every epoch; the first one's main metric selects the model."""
        return ("dev",)

    def read(self, data_dir: str | Path, split: str) -> list:
        """Examples of ``split`` under ``data_dir`` (override)."""
        raise NotImplementedError

    def read_input(self, path: str | Path) -> list:
        """Examples of a ``predict`` JSON Lines file, labels optional (override)."""
        raise NotImplementedError

    def featurize(self, examples: Sequence, tokenizer, max_seq_length: int,
                  train: bool = False) -> FeatureSet:
        """Examples -> :class:`FeatureSet` (override). With ``train`` every feature carries
        its training target; without it targets are added when the examples have them."""
        raise NotImplementedError

    # ------------------------------------------------------------ scoring (override)
    @property
    def metric_names(self) -> tuple[str, ...]:
        """Metric names :meth:`evaluate` returns, main (model-selecting) metric first."""
        raise NotImplementedError

    @property
    def main_metric(self) -> str:
        return self.metric_names[0]

    def evaluate(self, examples: Sequence, features: FeatureSet,
                 outputs: dict[str, list[np.ndarray]]) -> dict[str, float]:
        """Metrics of the outputs against the examples' labels, main metric first (override)."""
        raise NotImplementedError

    def predict(self, examples: Sequence, features: FeatureSet,
                outputs: dict[str, list[np.ndarray]]) -> list[dict]:
        """One JSON-able prediction record per example, in example order (override)."""
        raise NotImplementedError

    def texts(self, example) -> list[str]:
        """The texts of one example a tokenizer reads (for the ``[UNK]`` check): its string
        fields and lists of strings (words joined), not its ids or labels (override where
        that rule does not fit)."""
        out = []
        for name, value in vars(example).items():
            if name in _NOT_TEXT:
                continue
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, (list, tuple)) and value and all(isinstance(x, str) for x in value):
                out.append(" ".join(value) if name in ("words", "tokens") else "\n".join(value))
        return [t for t in out if t]

    def findings(self, metrics: dict[str, float], saved: bool = False) -> list[str]:
        """What a user must be told about a model with these dev ``metrics``, beyond the
        figures: results that look like success and are not (override; none by default).
        ``saved``: the metrics were scored at the model's saved settings (``evaluate``), not
        those tuned by fine-tuning."""
        return []

    # ------------------------------------------------------------ answering raw inputs
    structured_inputs = False  # inputs are mappings (QA, multiple choice), not texts
    head_answers = True  # the model has a task head whose answers /predict gives (not embeddings)
    rows_from_outputs = True  # row_outputs reads the model's named outputs only (an exported graph can)

    def plan(self, item: Any, ctx: PlanContext) -> Plan:
        """The plan of one raw input for a model with this family's head (override; the
        engine batches the plans' rows and calls their ``finish``)."""
        raise InputError(f"{self.name} answers no raw inputs", "unsupported")

    def row_outputs(self, model, ids, types, mask, lengths: Sequence[int]) -> list:
        """One output per row of a padded batch: the ``output_names`` of the model's output,
        each row cut to its own length for ``token_outputs`` (a tuple when several). Logits
        alone come from the model's ``head_logits`` where it has one (a pooled classifier then
        runs its last layer at ``[CLS]`` only)."""
        if self.reads_head_logits(model):
            values = [model.head_logits(ids, types, mask).float().cpu().numpy()]
        else:
            out = model(ids, types, mask)
            values = [getattr(out, name).float().cpu().numpy() for name in self.output_names]
        rows = []
        for i, n in enumerate(lengths):
            cut = [v[i, :n] if self.token_outputs else v[i] for v in values]
            rows.append(cut[0] if len(cut) == 1 else tuple(cut))
        return rows

    def plan_features(self, example, ctx: PlanContext) -> FeatureSet:
        """:meth:`featurize` of one raw input, issuing no warning: the answer says what was
        cut (``truncated``). A family whose featurising warns overrides this to stay quiet
        without ``warnings.catch_warnings``, whose filters are process-wide: a server plans a
        long input in another thread than the event loop, and two such blocks interleaved
        leave the process's filters changed."""
        return self.featurize([example], ctx.tokenizer, ctx.max_length)

    def feature_rows(self, example, ctx: PlanContext) -> tuple[list[Row], FeatureSet]:
        """This family's features of one example as model rows (padding dropped), and the
        feature set; a featurising error is an InputError."""
        with input_errors():
            features = self.plan_features(example, ctx)
        rows = []
        for f in features.features:
            ids = np.asarray(f["input_ids"])
            types = np.asarray(f["token_type_ids"]) if "token_type_ids" in f else np.zeros_like(ids)
            if ids.ndim == 2:  # multiple choice: one row per choice, padding dropped
                lengths = np.asarray(f["attention_mask"]).sum(-1)
                rows += [Row(ids[c, :n].tolist(), types[c, :n].tolist()) for c, n in enumerate(lengths)]
            else:
                rows.append(Row(ids.tolist(), types.tolist()))
        return rows, features

    # ------------------------------------------------------------ model
    @property
    def num_labels(self) -> int:
        """Head outputs: the label count, 1 for regression."""
        return len(self.labels) if self.labels is not None else 1

    def model_kwargs(self) -> dict[str, Any]:
        """Constructor keyword arguments of ``model_class`` besides the config."""
        return {"num_labels": self.num_labels}

    def build_model(self, model_dir: str | Path, config_overrides: dict[str, Any] | None = None):
        """``model_class`` loaded from ``model_dir`` (eval mode, CPU), head checked against
        the task. Missing head tensors are freshly initialised, as fine-tuning expects; the
        loader's warnings (fresh / unused tensors) are kept in ``self.load_notes``."""
        from bertkit.checkpoint import load_pretrained

        if self.head_tensor is not None:
            kwargs = self.model_kwargs()
            check_head(model_dir, self.head_tensor, self.labels,
                       kwargs.get("num_labels", self.num_labels), self.name, self.label_names)
        overrides = dict(config_overrides or {})
        if self.labels is not None:
            overrides.update(label_maps(self.label_names))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = load_pretrained(model_dir, self.model_class, config_overrides=overrides,
                                    **self.model_kwargs())
        self.load_notes = [str(w.message) for w in caught]
        return model

    def compute(self, model, batch: dict[str, torch.Tensor]):
        """The model's output on a collated batch (its ``loss`` when targets are present)."""
        return model(**batch)

    def infer(self, model, batch: dict[str, torch.Tensor]):
        """The model's :attr:`output_names` on a collated batch, for inference (``run_model``:
        ``predict``, ``evaluate``): computed as the engine's rows are (:meth:`row_outputs`), so
        that every door runs a classifier alike, else :meth:`compute`'s (targets ignored)."""
        if self.reads_head_logits(model):
            return ModelOutput(logits=model.head_logits(batch["input_ids"], batch.get("token_type_ids"),
                                                        batch.get("attention_mask")))
        return self.compute(model, batch)

    def reads_head_logits(self, model) -> bool:
        """Logits alone come from the model's ``head_logits`` where it has one: a pooled
        classifier then runs its last layer at ``[CLS]`` only where that pays (whose rounding
        in bf16 may differ from the full layer's by an ulp: every door must take one path)."""
        return self.output_names == ("logits",) and hasattr(model, "head_logits")

    def config_entries(self, metrics: dict[str, float] | None = None) -> dict[str, Any]:
        """Extra ``config.json`` fields of the fine-tuned model (labels, task, options);
        ``metrics`` are the saved epoch's evaluation (a family may keep a tuned value)."""
        entries: dict[str, Any] = {"finetuning_task": self.name,
                                   FINETUNE_KEY: {"task": self.name, "options": self.options}}
        if self.labels is not None:
            entries.update(label_maps(self.label_names))
        return entries

    def write_model_files(self, directory: Path, model, max_seq_length: int) -> None:
        """Add the family's own files to the saved model ``directory`` (written beside
        ``config.json`` and the weights, published with them); none by default."""

    @property
    def label_names(self) -> list[str] | None:
        """What each label means, in head order: the saved model's ``id2label`` (GLUE's
        ``negative``/``positive`` for SST-2's ``0``/``1``). Default: the labels themselves."""
        return self.labels

    def label_index(self, label: str, where: str = "") -> int:
        """Index of ``label`` in :attr:`labels`; a BertkitError names the known ones."""
        if self.labels is None or label not in self.labels:
            raise BertkitError(f"{where}{self.name}: unknown label {label!r}; "
                               f"expected one of {', '.join(map(repr, self.labels or []))}")
        return self.labels.index(label)


def featurize(task: Task, examples, tokenizer, max_seq_length: int, train: bool, split: str,
              logger: RunLogger | None = None) -> FeatureSet:
    """``task.featurize`` plus the truncation warning (and a log record)."""
    if not examples:
        raise BertkitError(f"{task.name}: the {split} split has no examples")
    feats = task.featurize(examples, tokenizer, max_seq_length, train=train)
    if feats.num_truncated:
        share = feats.num_truncated / max(1, feats.num_examples)
        message = (f"{split}: {feats.num_truncated} of {feats.num_examples} examples "
                   f"({share:.1%}) were truncated to max_seq_length={max_seq_length}")
        warnings.warn(message, stacklevel=2)
        if logger:
            logger.log(event="truncation", split=split, truncated=feats.num_truncated,
                       examples=feats.num_examples, max_seq_length=max_seq_length)
    return feats
