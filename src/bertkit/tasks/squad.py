"""SQuAD v1.1 (``squad``) and v2.0 (``squad2``) extractive question answering.

Data: ``read(data_dir, split)`` reads the official JSON ``{split}-v1.1.json`` /
``{split}-v2.0.json`` (or ``{split}.json``) under ``data_dir``; an answer that is not at
its ``answer_start`` is a DataFormatError (the reader checks). Windows and training
labels: :mod:`bertkit.tasks.squad_features` (question = segment A, ``max_seq_length``
384, ``doc_stride`` 128, ``max_query_length`` 64); answers: :mod:`bertkit.tasks.squad_postprocess`
(``n_best_size`` 20, ``max_answer_length`` 30, text cut from the original passage).

Metrics (percent, as the official scripts, :func:`bertkit.metrics.squad_evaluate`):
v1.1 (by the v1.1 script's rules): ``f1`` (main), ``exact`` (its ``exact_match``).
v2.0: ``best_f1`` (main; F1 at the best null threshold on this data), ``best_exact``, ``best_f1_thresh`` (that threshold, on ``null_odds``),
then ``f1`` / ``exact`` / ``HasAns_*`` / ``NoAns_*`` at the threshold in use
(``null_score_diff_threshold``, default 0.0). The threshold tuned on the last scored
evaluation is saved with the model (its ``null_score_diff_threshold`` option), so
``evaluate`` / ``predict`` with the saved model apply it.

Outputs: :meth:`SquadTask.predict` records ``{"id", "prediction", "best_non_null",
"null_odds" (v2.0), "nbest"}``; :meth:`SquadTask.write_outputs` writes the original
``predictions.json``, ``nbest_predictions.json`` and (v2.0) ``null_odds.json``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bertkit.errors import BertkitError, DataFormatError, InputError
from bertkit.fileio import atomic_write
from bertkit.metrics import squad_evaluate
from bertkit.model import BertForQuestionAnswering
from bertkit.tasks.base import FeatureSet, Plan, PlanContext, Task, text_of
from bertkit.tasks.formats import SquadExample, read_squad
from bertkit.tasks.formats.base import iter_jsonl
from bertkit.tasks.squad_features import check_window_settings, featurize_squad
from bertkit.tasks.squad_postprocess import (
    SquadPredictions,
    apply_null_threshold,
    postprocess_squad,
    usable_threshold,
    write_prediction_files,
)
from bertkit.tasks.task_options import SQUAD_DEFAULTS

# F1 points over abstaining on every question below which a v2.0 model has not learned to answer
NO_GAIN = 1.0

__all__ = ["SquadTask", "create_task", "dataset_json", "split_articles", "usable_threshold"]

_DEFAULTS = SQUAD_DEFAULTS


class SquadTask(Task):
    """SQuAD v1.1 or v2.0 (see the module docstring)."""

    model_class = BertForQuestionAnswering
    head_tensor = "qa_outputs.weight"
    output_names = ("start_logits", "end_logits")
    token_outputs = True
    default_max_seq_length = 384

    def __init__(self, name: str, **options: Any):
        unknown = set(options) - set(_DEFAULTS)
        if unknown:
            raise BertkitError(f"{name}: unknown option(s) {', '.join(sorted(unknown))}; "
                               f"known: {', '.join(_DEFAULTS)}")
        super().__init__(name, None, **options)
        self.version_2 = name == "squad2"
        self.settings = {k: type(v)(options.get(k, v)) for k, v in _DEFAULTS.items()}

    @property
    def num_labels(self) -> int:
        return 2  # start and end

    def model_kwargs(self) -> dict[str, Any]:
        return {}

    # ------------------------------------------------------------ data
    def read(self, data_dir: str | Path, split: str) -> list[SquadExample]:
        version = "v2.0" if self.version_2 else "v1.1"
        for name in (f"{split}-{version}.json", f"{split}.json"):
            path = Path(data_dir) / name
            if path.is_file():
                return read_squad(path)
        raise BertkitError(f"{self.name}: no {split}-{version}.json or {split}.json in {data_dir}")

    def read_input(self, path: str | Path) -> list[SquadExample]:
        """JSON Lines records ``{"id" (optional), "question", "context"}``."""
        examples = []
        for line, record in iter_jsonl(path):
            fields = [record.get(k) for k in ("question", "context")]
            if not all(isinstance(v, str) for v in fields):
                raise DataFormatError(path, "expected string fields 'question' and 'context'", line)
            examples.append(SquadExample(str(record.get("id", line)), *fields))
        return examples

    def featurize(self, examples: Sequence[SquadExample], tokenizer, max_seq_length: int,
                  train: bool = False) -> FeatureSet:
        s = self.settings
        try:
            check_window_settings(max_seq_length, s["doc_stride"], s["max_query_length"])
        except ValueError as e:
            raise BertkitError(f"{self.name}: {e} (SQuAD uses --max-seq-length "
                               f"{self.default_max_seq_length} with doc_stride {_DEFAULTS['doc_stride']} "
                               f"and max_query_length {_DEFAULTS['max_query_length']})") from None
        labelled = train or any(ex.answers for ex in examples)
        return featurize_squad(tokenizer, examples, max_seq_length, s["doc_stride"],
                               s["max_query_length"], with_positions=labelled)

    # ------------------------------------------------------------ answers and scores
    def answers(self, examples, features: FeatureSet, outputs, n_best_size: int | None = None,
                max_answer_length: int | None = None, no_answer: bool | None = None) -> SquadPredictions:
        """Post-processed answers at the threshold in use; the arguments, when given, replace
        the saved settings (``no_answer``: whether "" may be answered; a model that is not a
        v2.0 one then answers it when the null score beats the best span's, threshold 0)."""
        s = self.settings
        no_answer = self.version_2 if no_answer is None else no_answer
        return postprocess_squad(examples, features.meta, outputs["start_logits"],
                                 outputs["end_logits"], n_best_size or s["n_best_size"],
                                 max_answer_length or s["max_answer_length"], no_answer,
                                 s["null_score_diff_threshold"] if self.version_2 else 0.0)

    @property
    def metric_names(self) -> tuple[str, ...]:
        if self.version_2:
            return ("best_f1", "best_exact", "best_f1_thresh", "f1", "exact", "HasAns_f1",
                    "HasAns_exact", "NoAns_f1", "answered", "best_answered", "abstain_f1")
        return ("f1", "exact")

    def evaluate(self, examples, features, outputs) -> dict[str, float]:
        predictions = self.answers(examples, features, outputs)
        dataset = dataset_json(examples)
        if not self.version_2:
            result = squad_evaluate(dataset, predictions.answers, version="v1.1")
            return {"f1": result["f1"], "exact": result["exact_match"]}
        result = squad_evaluate(dataset, predictions.best_non_null, predictions.null_odds,
                                self.settings["null_score_diff_threshold"], version="v2.0")
        result["best_f1_thresh"] = usable_threshold(dataset, predictions, result)
        # F1 of answering nothing; percent of the questions answered at the threshold in use / the tuned one
        result["abstain_f1"] = 100.0 * sum(not ex.answers for ex in examples) / max(1, len(examples))
        for name, threshold in (("answered", self.settings["null_score_diff_threshold"]),
                                ("best_answered", result["best_f1_thresh"])):
            answers = apply_null_threshold(predictions, threshold)
            result[name] = 100.0 * sum(map(bool, answers.values())) / max(1, len(answers))
        return {name: result[name] for name in self.metric_names if name in result}

    # ------------------------------------------------------------ one raw input
    structured_inputs = True

    def plan(self, item, ctx: PlanContext) -> Plan:
        """``{"question": Q, "context": C}``: SQuAD's windows (doc stride, max query length)
        and its post-processing (max-context rule, n-best, the saved no-answer threshold of a
        v2.0 model), exactly as ``bertkit predict``: ``{"answer", "score", "start", "end"}``."""
        if not isinstance(item, dict) or "question" not in item or "context" not in item:
            raise InputError('question answering takes {"question": Q, "context": C}')
        question, context = text_of(item["question"], "question"), text_of(item["context"], "context")
        example = SquadExample("0", question, context)
        rows, features = self.feature_rows(example, ctx)

        def finish(outputs, top_k: int | None = None, max_answer_len: int | None = None,
                   handle_impossible_answer: bool | None = None):
            """The answer; Hugging Face's parameters: ``top_k`` > 1 gives a list of up to that
            many, best first; ``max_answer_len`` (tokens) and ``handle_impossible_answer`` (may
            "" be answered) replace the saved settings (:meth:`answers`)."""
            logits = {"start_logits": [o[0] for o in outputs], "end_logits": [o[1] for o in outputs]}
            found = self.answers([example], features, logits, max(top_k or 1, self.settings["n_best_size"]),
                                 max_answer_len, handle_impossible_answer)
            probability = {x["text"]: x["probability"] for x in found.nbest["0"]}
            answer = found.answers["0"]
            start, end = found.spans.get("0", (0, 0)) if answer else (0, 0)
            best = {"answer": answer, "score": float(probability.get(answer, 0.0)), "start": int(start),
                    "end": int(end)}
            if not top_k or top_k == 1:
                return best
            others = [{"answer": text, "score": float(probability[text]), "start": int(a), "end": int(b)}
                      for text, (a, b) in found.candidate_spans["0"].items() if text != answer]
            return [best, *others][:top_k]

        return Plan(rows, (self,), finish, False, windows=len(rows))

    def findings(self, metrics: dict[str, float], saved: bool = False) -> list[str]:
        """v2.0: a model whose answers gain less than :data:`NO_GAIN` F1 points over abstaining
        on every question (``abstain_f1``, the share of unanswerable questions), or that
        answers none, has not learned to answer: its F1 is the no-answer share, not a score
        of answers. A finding, not a result."""
        if not self.version_2:
            return []
        answered = metrics.get("answered" if saved else "best_answered")
        f1, abstain = metrics.get("f1" if saved else "best_f1"), metrics.get("abstain_f1")
        if answered is None or f1 is None or abstain is None or (answered > 0 and f1 - abstain >= NO_GAIN):
            return []
        threshold = self.settings["null_score_diff_threshold"] if saved else metrics.get("best_f1_thresh")
        which = "its saved" if saved else "the tuned"
        return [f"{self.name}: the model has not learned to answer: at {which} no-answer threshold "
                f"({threshold:.4g}) it answers {answered:.1f}% of the questions, and its F1 "
                f"{f1:.2f} is {f1 - abstain:+.2f} over abstaining on every question ({abstain:.2f}, "
                "the share of unanswerable ones). Train longer, on more data or from a larger "
                "model; its best non-null answers are in the predictions (best_non_null)."]

    def predict(self, examples, features, outputs) -> list[dict]:
        predictions = self.answers(examples, features, outputs)
        records = []
        for ex in examples:
            record = {"id": ex.qid, "prediction": predictions.answers[ex.qid],
                      "best_non_null": predictions.best_non_null[ex.qid]}
            if self.version_2:
                record["null_odds"] = predictions.null_odds[ex.qid]
            record["nbest"] = predictions.nbest[ex.qid]
            records.append(record)
        return records

    def write_outputs(self, directory: str | Path, split: str, examples, features: FeatureSet,
                      outputs) -> list[Path]:
        """The original run_squad files for ``examples`` in ``directory`` (``split`` unused:
        one split per directory, as the original)."""
        return write_prediction_files(self.answers(examples, features, outputs), directory)

    def config_entries(self, metrics: dict[str, float] | None = None) -> dict[str, Any]:
        """Also saves the null threshold tuned on dev (v2.0: ``metrics["best_f1_thresh"]``)
        as the model's threshold option."""
        entries = super().config_entries(metrics)
        tuned = (metrics or {}).get("best_f1_thresh")
        if self.version_2 and tuned is not None:
            options = {**entries["bertkit_finetune"]["options"], "null_score_diff_threshold": tuned}
            entries["bertkit_finetune"] = {**entries["bertkit_finetune"], "options": options}
            entries["null_score_diff_threshold"] = tuned
        return entries


def dataset_json(examples: Sequence[SquadExample]) -> dict:
    """The minimal official-layout dataset the scorer needs for exactly these examples."""
    qas = [{"id": ex.qid, "answers": [{"text": a.text, "answer_start": a.answer_start}
                                      for a in ex.answers]} for ex in examples]
    return {"data": [{"paragraphs": [{"qas": qas}]}]}




def split_articles(path: str | Path, out_dir: str | Path, eval_fraction: float = 1 / 3,
                   version: str | None = None) -> tuple[int, int]:
    """Split a SQuAD file by article into ``train-<v>.json`` (first articles) and
    ``dev-<v>.json`` (the last ``eval_fraction`` of them), so no passage is in both.

    ``version`` (``v1.1`` / ``v2.0``) defaults to the file's ``version`` field. Returns the
    article counts (train, dev).
    """
    read_squad(path)  # validate every answer before splitting
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    version = version or str(data.get("version", "v1.1"))
    version = version if version.startswith("v") else f"v{version}"
    articles = data["data"]
    n_dev = max(1, round(len(articles) * eval_fraction))
    parts = {"train": articles[: len(articles) - n_dev], "dev": articles[len(articles) - n_dev:]}
    for split, chosen in parts.items():
        with atomic_write(Path(out_dir) / f"{split}-{version}.json") as f:
            json.dump({"version": version, "data": chosen}, f, ensure_ascii=False)
    return len(parts["train"]), len(parts["dev"])


def task_for_head(labels: list[str], regression: bool, max_positions: int, **options: Any) -> SquadTask:
    """The family of a span head never fine-tuned by bertkit: SQuAD v1.1 with its windows
    (384 tokens, query 64, stride 128) fitted to a model with fewer positions."""
    length = min(SquadTask.default_max_seq_length, max_positions)
    query = min(_DEFAULTS["max_query_length"], (length - 3) // 2)
    stride = min(_DEFAULTS["doc_stride"], max(1, (length - query - 3) // 2))
    return create_task("squad", max_query_length=query, doc_stride=stride)


def create_task(name: str, **options: Any) -> SquadTask:
    """``squad`` (v1.1) or ``squad2`` (v2.0); options: doc_stride, max_query_length,
    n_best_size, max_answer_length, null_score_diff_threshold."""
    return SquadTask(name, **options)
