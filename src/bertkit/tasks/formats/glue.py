"""GLUE tasks: a registry describing each task, and a reader for the official TSV layouts.

GLUE TSVs are split on tabs only: their quote characters are text, not CSV quoting.
Columns are found by the header's names, so train/dev files (with a label column) and
test files (without one: labels come back ``None``) read alike. CoLA's train/dev files
have no header; their fixed columns are ``source, label, original_label, sentence``.
The raw MRPC files ``msr_paraphrase_{train,test}.txt`` share GLUE MRPC's header.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

from bertkit.errors import DataFormatError
from bertkit.metrics.classification import GLUE_METRICS
from bertkit.tasks.formats.base import TextExample, iter_tsv_rows, parse_label

__all__ = ["GLUE_TASKS", "GlueTask", "find_glue_file", "get_glue_task", "read_glue"]

_BINARY = ("0", "1")
_NLI = ("entailment", "not_entailment")


@dataclass(frozen=True)
class GlueTask:
    """What a GLUE task's files hold and how it is scored.

    ``text_columns``: header names of the one or two input texts; ``label_column``: the
    header name of the label; ``labels``: the label strings in index order (``None`` for
    the regression task STS-B), as the files write them; ``label_names``: what each label
    means, in the same order (the saved model's ``id2label``: ``negative``/``positive``
    rather than SST-2's ``0``/``1``; ``None``: the label strings are names already); ``metrics``: metric names for
    :func:`bertkit.metrics.glue_metrics`, main one first; ``files``: split name ->
    candidate file names inside ``directory`` (the first that exists is used).
    """

    name: str
    directory: str
    text_columns: tuple[str, ...]
    label_column: str
    labels: tuple[str, ...] | None
    files: dict[str, tuple[str, ...]]
    id_column: str = "index"
    fixed_columns: tuple[str, ...] | None = None
    label_names: tuple[str, ...] | None = None
    metrics: tuple[str, ...] = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "metrics", GLUE_METRICS[self.name])

    @property
    def main_metric(self) -> str:
        return self.metrics[0]

    @property
    def is_regression(self) -> bool:
        return self.labels is None

    @property
    def num_labels(self) -> int:
        """Number of classes; 1 for regression (one output)."""
        return 1 if self.labels is None else len(self.labels)

    def label_id(self, label: str) -> int:
        """Index of a label string in :attr:`labels`."""
        if self.labels is None or label not in self.labels:
            raise ValueError(f"{self.name}: unknown label {label!r}")
        return self.labels.index(label)


def _splits(train="train.tsv", dev="dev.tsv", test="test.tsv") -> dict[str, tuple[str, ...]]:
    """Split -> candidate file names (a single name or a tuple of them)."""
    files = {"train": train, "dev": dev, "test": test}
    return {k: (v,) if isinstance(v, str) else tuple(v) for k, v in files.items()}


_PAIR = ("sentence1", "sentence2")
_MNLI_LABELS = ("contradiction", "entailment", "neutral")

GLUE_TASKS: dict[str, GlueTask] = {
    task.name: task
    for task in [
        GlueTask("cola", "CoLA", ("sentence",), "label", _BINARY, _splits(),
                 fixed_columns=("source", "label", "original_label", "sentence"),
                 label_names=("unacceptable", "acceptable")),
        GlueTask("sst2", "SST-2", ("sentence",), "label", _BINARY, _splits(),
                 label_names=("negative", "positive")),
        GlueTask("mrpc", "MRPC", ("#1 String", "#2 String"), "Quality", _BINARY,
                 _splits(train=("train.tsv", "msr_paraphrase_train.txt"),
                         dev=("dev.tsv", "msr_paraphrase_test.txt")),
                 label_names=("not_equivalent", "equivalent")),
        GlueTask("stsb", "STS-B", _PAIR, "score", None, _splits()),
        GlueTask("qqp", "QQP", ("question1", "question2"), "is_duplicate", _BINARY, _splits(),
                 id_column="id", label_names=("not_duplicate", "duplicate")),
        GlueTask("mnli", "MNLI", _PAIR, "gold_label", _MNLI_LABELS,
                 _splits(dev="dev_matched.tsv", test="test_matched.tsv")),
        GlueTask("mnli-mm", "MNLI", _PAIR, "gold_label", _MNLI_LABELS,
                 _splits(dev="dev_mismatched.tsv", test="test_mismatched.tsv")),
        GlueTask("qnli", "QNLI", ("question", "sentence"), "label", _NLI, _splits()),
        GlueTask("rte", "RTE", _PAIR, "label", _NLI, _splits()),
        GlueTask("wnli", "WNLI", _PAIR, "label", _BINARY, _splits(),
                 label_names=("not_entailment", "entailment")),
    ]
}


def get_glue_task(name: str | GlueTask) -> GlueTask:
    """The registry entry for ``name`` (case-insensitive; ``sst-2``/``sts-b`` accepted)."""
    if isinstance(name, GlueTask):
        return name
    key = name.lower()
    key = key if key in GLUE_TASKS else key.replace("-", "")
    if key not in GLUE_TASKS:
        raise ValueError(f"unknown GLUE task {name!r}; known: {', '.join(GLUE_TASKS)}")
    return GLUE_TASKS[key]


def find_glue_file(task: str | GlueTask, data_dir: str | Path, split: str) -> Path:
    """The file of ``split`` in ``data_dir`` (or in ``data_dir/<task directory>``)."""
    task = get_glue_task(task)
    if split not in task.files:
        raise ValueError(f"{task.name} has no split {split!r}; known: {', '.join(task.files)}")
    for folder in (Path(data_dir), Path(data_dir) / task.directory):
        for name in task.files[split]:
            if (folder / name).is_file():
                return folder / name
    raise FileNotFoundError(f"{data_dir}: no {task.name} {split} file ({', '.join(task.files[split])})")


def _header(task: GlueTask, path, rows) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Column names and the rows still to read (the first row too when it is data)."""
    first = next(rows, None)
    if first is None:
        return [], []
    line, fields = first
    names = [f.strip() for f in fields]
    if all(column in names for column in task.text_columns):
        return names, []
    if task.fixed_columns is not None:
        return list(task.fixed_columns), [first]
    raise DataFormatError(path, f"{task.name}: header lacks column(s) "
                                f"{', '.join(task.text_columns)}; found {', '.join(names)}", line)


def _example(task: GlueTask, path, line: int, row: dict) -> TextExample:
    label = row.get(task.label_column)
    if label is not None:
        label = parse_label(path, line, label, task.labels, task.is_regression)
    texts = [row[column] for column in task.text_columns]
    return TextExample(
        guid=row.get(task.id_column, str(line)).strip(),
        text_a=texts[0],
        text_b=texts[1] if len(texts) > 1 else None,
        label=label,
        line=line,
    )


def read_glue(task: str | GlueTask, path: str | Path) -> list[TextExample]:
    """Every example of a GLUE TSV file; labels are ``None`` when the file has no label column.

    Raises DataFormatError (file + line) on a row whose field count differs from the
    header's, on an unknown label, or on a non-numeric STS-B score.
    """
    task = get_glue_task(task)
    rows = iter_tsv_rows(path)
    header, pending = _header(task, path, rows)
    examples = []
    for line, fields in chain(pending, rows):
        if len(fields) != len(header):
            raise DataFormatError(
                path, f"expected {len(header)} tab-separated fields, found {len(fields)}", line
            )
        examples.append(_example(task, path, line, dict(zip(header, fields))))
    return examples
