"""GLUE tasks: cola, sst2, mrpc, stsb (regression), qqp, mnli (+ mismatched dev), qnli, rte, wnli.

Data: ``--data`` is the task's folder (or the GLUE root holding it) with the official TSVs
(:func:`~bertkit.tasks.formats.read_glue`); MRPC also reads the raw
``msr_paraphrase_{train,test}.txt`` (train / dev). Metrics are GLUE's
(:func:`~bertkit.metrics.glue_metrics`, main metric first). ``mnli`` scores the matched dev
set (selecting) and the mismatched one (``dev_mismatched.*`` metrics); ``mnli-mm`` is the
mismatched set alone. Labels are GLUE's label strings in registry order (STS-B: regression).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bertkit.errors import BertkitError
from bertkit.metrics import glue_metrics
from bertkit.tasks.formats import find_glue_file, get_glue_task, read_glue
from bertkit.tasks.text import TextTask
from bertkit.tasks.windows import LONG_TEXT_OPTIONS

__all__ = ["GlueTextTask", "create_task"]


class GlueTextTask(TextTask):
    """One GLUE task (registry entry :class:`~bertkit.tasks.formats.GlueTask`)."""

    def __init__(self, name: str, **options):
        self.spec = get_glue_task(name)
        super().__init__(self.spec.name, self.spec.labels, **options)
        self.pair = len(self.spec.text_columns) == 2
        first, *second = self.spec.text_columns
        self.input_fields = ((first, "text", "sentence", "text_a"),
                             (*second, "text_pair", "text_b"))
        self.label_fields = (self.spec.label_column, "label")

    @property
    def label_names(self) -> list[str] | None:
        """GLUE's meaning of each label (``negative``/``positive`` for SST-2's ``0``/``1``),
        written as the model's ``id2label``; the data keep their own strings."""
        names = self.spec.label_names
        return list(names) if names is not None and self.labels is not None else self.labels

    def eval_splits(self) -> tuple[str, ...]:
        return ("dev", "dev_mismatched") if self.spec.name == "mnli" else ("dev",)

    def read(self, data_dir: str | Path, split: str):
        task, file_split = self.spec, split
        if split == "dev_mismatched":
            task, file_split = get_glue_task("mnli-mm"), "dev"
        try:
            path = find_glue_file(task, data_dir, file_split)
        except ValueError as e:
            raise BertkitError(str(e)) from None
        return read_glue(task, path)

    @property
    def metric_names(self) -> tuple[str, ...]:
        return self.spec.metrics

    def score(self, predictions: np.ndarray, gold: np.ndarray) -> dict[str, float]:
        return glue_metrics(self.spec.name, predictions, gold)


def create_task(name: str, **options) -> GlueTextTask:
    """The GLUE task ``name``; its only options are the long-text ones (``long_text``,
    ``stride``, ``pool_windows``: :mod:`bertkit.tasks.windows`)."""
    other = set(options) - set(LONG_TEXT_OPTIONS)
    if other:
        raise BertkitError(f"{name}: GLUE tasks take no options but {', '.join(LONG_TEXT_OPTIONS)} "
                           f"(got {', '.join(sorted(other))})")
    return GlueTextTask(name, **options)
