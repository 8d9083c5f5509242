"""Generic sentence-level tasks on your own CSV / TSV / JSON Lines files with named columns.

Task names: ``text-classification`` (one text), ``text-pair-classification`` (two texts),
``regression`` (one text -> a number), ``text-pair-regression``. Token classification from
JSON Lines (``token-classification``) lives with NER in :mod:`bertkit.tasks.ner`.

Options (CLI flags or ``-o``; saved with the model, so ``evaluate``/``predict`` reuse them):
``text_column`` ("text"), ``pair_column`` ("text_pair"), ``label_column`` ("label"),
``labels`` (label names in head order; default: the sorted labels of the training file),
``label_names`` (what each label means, in head order: the saved ``id2label``),
``id_column``, ``format`` (csv/tsv/jsonl; default from the suffix), ``train_file`` /
``dev_file`` (default ``DATA/train.*`` / ``DATA/dev.*``, a relative name is under DATA).
Metrics: accuracy and macro-F1 (classification, accuracy selects), Pearson and Spearman
(regression, Pearson selects). Unknown labels, missing columns and malformed rows are
:class:`~bertkit.errors.DataFormatError` naming file and line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bertkit.errors import BertkitError
from bertkit.metrics import accuracy, macro_f1, pearson, spearman
from bertkit.tasks.formats import read_text_classification
from bertkit.tasks.text import TextTask
from bertkit.tasks.windows import LONG_TEXT_OPTIONS

__all__ = ["GenericTextTask", "create_task", "find_split_file"]

_KINDS = {  # name -> (pair, regression)
    "text-classification": (False, False),
    "text-pair-classification": (True, False),
    "regression": (False, True),
    "text-pair-regression": (True, True),
}
_OPTIONS = ("text_column", "pair_column", "label_column", "labels", "label_names", "id_column", "format",
            "train_file", "dev_file", *LONG_TEXT_OPTIONS)
_SUFFIXES = (".csv", ".tsv", ".jsonl", ".json", ".ndjson")


def find_split_file(data_dir: str | Path, split: str, given: str | None = None) -> Path:
    """``given`` (relative names under ``data_dir``) or ``data_dir/<split>.<csv|tsv|jsonl|...>``."""
    data_dir = Path(data_dir)
    if given:
        path = Path(given)
        path = path if path.is_absolute() or path.exists() else data_dir / path
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such {split} file")
        return path
    for suffix in _SUFFIXES:
        if (data_dir / f"{split}{suffix}").is_file():
            return data_dir / f"{split}{suffix}"
    raise FileNotFoundError(f"{data_dir}: no {split} file ({split}.csv, .tsv or .jsonl); "
                            f"name it with --{split}-file")


def _sort_key(label: str):
    """Numbers in numeric order, then strings: labels 0,1,2,...,10 keep their natural order."""
    try:
        return (0, float(label), label)
    except ValueError:
        return (1, 0.0, label)


class GenericTextTask(TextTask):
    """Classification or regression of one text or a text pair from named columns."""

    def __init__(self, name: str, **options):
        unknown = sorted(set(options) - set(_OPTIONS))
        if unknown:
            raise BertkitError(f"{name}: unknown option(s) {', '.join(unknown)}; "
                               f"known: {', '.join(_OPTIONS)}")
        self.pair, self.is_regression = _KINDS[name]
        labels = options.pop("labels", None)
        if isinstance(labels, str):
            labels = [x for x in labels.split(",") if x]
        if labels is not None:
            if self.is_regression:
                raise BertkitError(f"{name}: a regression task has no labels")
            labels = [str(x) for x in labels]
            if len(set(labels)) != len(labels) or len(labels) < 2:
                raise BertkitError(f"{name}: labels must be at least two distinct names, got {labels}")
        names = options.pop("label_names", None)
        if isinstance(names, str):
            names = [x for x in names.split(",") if x]
        if names is not None:
            if self.is_regression:
                raise BertkitError(f"{name}: a regression task has no label names")
            names = [str(x) for x in names]
            if len(set(names)) != len(names):
                raise BertkitError(f"{name}: label_names must be distinct, got {names}")
        super().__init__(name, labels, **options)
        self._names = names
        if labels is not None:
            self.options["labels"] = labels
        if names is not None:
            self.options["label_names"] = names
            self.label_names  # noqa: B018 (checks the count against known labels)
        self.text_column = options.get("text_column", "text")
        self.pair_column = options.get("pair_column", "text_pair") if self.pair else None
        self.label_column = options.get("label_column", "label")
        self.input_fields = ((self.text_column, "text"), (self.pair_column or "text_pair", "text_pair"))
        self.label_fields = (self.label_column,)

    @property
    def regression(self) -> bool:
        return self.is_regression

    @property
    def label_names(self) -> list[str] | None:
        """``--label-names`` (one per label, in head order), else the labels themselves."""
        if self._names is None or self.labels is None:
            return self.labels
        if len(self._names) != len(self.labels):
            raise BertkitError(f"{self.name}: {len(self._names)} label_names ({', '.join(self._names)}) "
                               f"for {len(self.labels)} labels ({', '.join(self.labels)})")
        crossed = [(i, n) for i, n in enumerate(self._names) if n in self.labels and self.labels.index(n) != i]
        if crossed:  # a name that is another label's own string: every answer would be renamed crosswise
            i, n = crossed[0]
            raise BertkitError(
                f"{self.name}: --label-names {','.join(self._names)} names label {i} ({self.labels[i]!r} in the data) "
                f"{n!r}, the data's name of label {self.labels.index(n)}: the names go in the labels' order "
                f"({', '.join(self.labels)}); to choose that order, pass --labels")
        return self._names

    def for_data(self, data_dir: str | Path) -> GenericTextTask:
        """Without ``labels``, a classification task takes the sorted labels of the training
        file: a new task built with them (itself when the labels are known)."""
        if self.is_regression or self.labels is not None:
            return self
        path = self._split_file(data_dir, "train")
        examples = self._read_file(path)
        if not examples:
            raise BertkitError(f"{path}: no examples (the file is empty or holds only a header)")
        found = sorted({str(ex.label) for ex in examples}, key=_sort_key)
        if len(found) < 2:
            raise BertkitError(f"{path}: found {len(found)} distinct label(s); "
                               "classification needs at least two")
        return GenericTextTask(self.name, **{**self.options, "labels": found})

    def read(self, data_dir: str | Path, split: str):
        return self._read_file(self._split_file(data_dir, split))

    def _split_file(self, data_dir: str | Path, split: str) -> Path:
        return find_split_file(data_dir, split, self.options.get(f"{split}_file"))

    def _read_file(self, path: Path):
        return read_text_classification(
            path, text_column=self.text_column, pair_column=self.pair_column,
            label_column=self.label_column, labels=self.labels, regression=self.is_regression,
            id_column=self.options.get("id_column"), file_format=self.options.get("format"))

    @property
    def metric_names(self) -> tuple[str, ...]:
        return ("pearson", "spearman") if self.is_regression else ("accuracy", "macro_f1")

    def score(self, predictions: np.ndarray, gold: np.ndarray) -> dict[str, float]:
        if self.is_regression:
            return {"pearson": pearson(predictions, gold), "spearman": spearman(predictions, gold)}
        return {"accuracy": accuracy(predictions, gold), "macro_f1": macro_f1(predictions, gold)}

    def build_model(self, model_dir, config_overrides=None):
        if self.labels is None and not self.is_regression:
            raise BertkitError(f"{self.name}: no labels yet; give --labels or build the task "
                               "with for_data(DATA) (labels of the training file)")
        return super().build_model(model_dir, config_overrides)


def create_task(name: str, **options) -> GenericTextTask:
    """A generic task; see the module docstring for the options."""
    return GenericTextTask(name, **options)


def task_for_head(labels: list[str], regression: bool, max_positions: int, **options) -> GenericTextTask:
    """The family of a sequence-classification head never fine-tuned by bertkit: regression
    for one output, else classification with the head's labels (numbered when not distinct)."""
    if regression:
        return create_task("regression", **options)
    if len(set(labels)) != len(labels):
        labels = [f"LABEL_{i}" for i in range(len(labels))]
    return create_task("text-classification", labels=labels, **options)
