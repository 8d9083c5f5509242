"""Token classification: CoNLL-2003 NER (``ner`` / ``conll2003``) and user data
(``token-classification``), fine-tuned or feature-based.

Data (``read(data_dir, split)``):

* ``ner`` / ``conll2003``: CoNLL files ``word [POS [chunk]] tag`` (IOB1 or IOB2, optional
  ``-DOCSTART-``) named ``{split}.txt`` (or ``eng.train`` / ``eng.testa`` / ``eng.testb``,
  ``valid.txt`` for dev); tags are converted to IOB2. The labels are the nine CoNLL-2003
  tags (``labels=[...]`` replaces them). ``test`` is scored beside ``dev`` when present.
* ``token-classification``: ``{split}.jsonl`` / ``.json`` (``tokens`` and ``tags`` lists,
  field names set by ``tokens_field`` / ``tags_field``) or a CoNLL file ``{split}.txt`` /
  ``.conll`` (``train_file`` / ``dev_file`` / ``format`` override); labels are ``labels=[...]`` or every tag of the training file. Tags must
  be BIO-shaped only with ``bio=True`` (then also converted to IOB2).

Features and predictions follow :mod:`bertkit.tasks.tagging` (label on each word's first
sub-token, long sentences split into windows with a warning, or ``long_sentences=
"truncate"``; ``long_text="window"`` with ``stride``: overlapping windows, each word tagged
from the window where it has the most context). Metrics, fractions in [0, 1]: entity-level ``f1`` (main), ``precision``,
``recall`` as conlleval (:func:`bertkit.metrics.entity_scores`) and token ``accuracy``;
for non-BIO labels ``accuracy`` alone.

``feature_based=True`` trains :class:`~bertkit.tasks.feature_based.FeatureBasedTagger`
(frozen encoder; ``feature_layers`` e.g. ``"-1,-2,-3,-4"``, ``combine`` concat|sum,
``lstm_hidden``, ``lstm_layers``) instead of fine-tuning ``BertForTokenClassification``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bertkit.errors import BertkitError, DataFormatError
from bertkit.metrics import entity_scores, split_tag
from bertkit.model import BertForTokenClassification
from bertkit.tasks.base import FeatureSet, Plan, PlanContext, Task, softmax, text_of
from bertkit.tasks.formats import TaggedSentence, read_conll, read_token_classification
from bertkit.tasks.formats.base import iter_jsonl
from bertkit.tasks.formats.conll import iob1_to_iob2
from bertkit.tasks.tagging import (
    featurize_tagging,
    group_entities,
    label_list,
    split_words,
    word_predictions,
)
from bertkit.tasks.windows import LONG_TEXT_OPTIONS, LongText

__all__ = ["CONLL2003_LABELS", "TokenTask", "create_task"]

CONLL2003_LABELS = ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-ORG", "I-PER"]
_CONLL_FILES = {"train": ("train.txt", "eng.train", "train"),
                "dev": ("dev.txt", "valid.txt", "eng.testa", "dev"),
                "test": ("test.txt", "eng.testb", "test")}
_OPTIONS = {"labels", "long_sentences", "bio", "tokens_field", "tags_field", "train_file",
            "dev_file", "format", "feature_based", "feature_layers", "combine", "lstm_hidden",
            "lstm_layers", *LONG_TEXT_OPTIONS}


def _is_bio(tags: Sequence[str]) -> bool:
    try:
        for tag in tags:
            split_tag(tag)
    except ValueError:
        return False
    return True


class TokenTask(Task):
    """A token-classification task (see the module docstring for data, options, metrics)."""

    model_class = BertForTokenClassification
    head_tensor = "classifier.weight"
    output_names = ("logits",)
    token_outputs = True

    def __init__(self, name: str, *, has_test: bool = False, **options: Any):
        unknown = set(options) - _OPTIONS
        if unknown:
            raise BertkitError(f"{name}: unknown option(s) {', '.join(sorted(unknown))}; "
                               f"known: {', '.join(sorted(_OPTIONS))}")
        self.conll = name in ("ner", "conll2003")
        labels = options.get("labels") or (CONLL2003_LABELS if self.conll else None)
        super().__init__(name, labels, **{k: v for k, v in options.items() if k != "labels"})
        if options.get("labels") is not None:  # given or found in train: saved with the model
            self.options["labels"] = list(options["labels"])
        self.bio = bool(options.get("bio", self.conll))
        self.long_sentences = options.get("long_sentences", "split")
        self.long_text = LongText.from_options(options)
        if options.get("long_text"):  # --long-text truncate|window overrides long_sentences
            self.long_sentences = self.long_text.mode
        self.feature_based = bool(options.get("feature_based", False))
        self.has_test = has_test  # CoNLL's test split is scored beside dev (see for_data)

    # ------------------------------------------------------------ data
    def for_data(self, data_dir: str | Path) -> TokenTask:
        """A new task whose labels are the training file's tags (when none were given) and
        which also scores ``test`` when ``data_dir`` has it; itself when nothing changes."""
        data_dir = Path(data_dir)
        has_test = self._find(data_dir, "test") is not None
        options = dict(self.options)
        if self.labels is None:
            options["labels"] = label_list([s.tags for s in self.read(data_dir, "train")])
        if has_test == self.has_test and options == self.options:
            return self
        return TokenTask(self.name, has_test=has_test, **options)

    def eval_splits(self) -> tuple[str, ...]:
        return ("dev", "test") if self.has_test else ("dev",)

    def _find(self, data_dir: Path, split: str) -> Path | None:
        given = self.options.get(f"{split}_file")
        if given:
            return Path(given) if Path(given).is_file() else data_dir / given
        names = _CONLL_FILES.get(split, (split,)) if self.conll else (split,)
        suffixes = ("",) if self.conll else (".jsonl", ".json", ".txt", ".conll")
        for name in names:
            for suffix in suffixes:
                if (data_dir / (name + suffix)).is_file():
                    return data_dir / (name + suffix)
        return None

    def read(self, data_dir: str | Path, split: str) -> list[TaggedSentence]:
        path = self._find(Path(data_dir), split)
        if path is None:
            raise BertkitError(f"{self.name}: no {split} file in {data_dir}")
        if self.conll:
            sentences = read_conll(path, to_iob2=True)
        else:
            sentences = read_token_classification(
                path, self.options.get("tokens_field", "tokens"),
                self.options.get("tags_field", "tags"), bio=self.bio, to_iob2=self.bio,
                file_format=self.options.get("format"))
        if self.labels is not None and self.conll:
            _check_types(path, sentences, self.labels, self.name)
        return sentences

    def read_input(self, path: str | Path) -> list[TaggedSentence]:
        """JSON Lines records with ``tokens`` (a list of words) or ``text`` (split into words
        by :func:`~bertkit.tasks.tagging.split_words`, as the API and the server do), optionally
        ``tags``."""
        sentences = []
        for line, record in iter_jsonl(path):
            words = record.get("tokens", record.get("words"))
            if words is None and isinstance(record.get("text"), str):
                words = split_words(record["text"])[0]
            if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
                raise DataFormatError(path, "expected 'tokens' (list of strings) or 'text'", line)
            tags = record.get("tags") or []
            if tags and len(tags) != len(words):
                raise DataFormatError(path, f"{len(words)} tokens but {len(tags)} tags", line)
            sentences.append(TaggedSentence(words, iob1_to_iob2(tags) if self.bio else tags, line))
        return sentences

    def featurize(self, examples: Sequence[TaggedSentence], tokenizer, max_seq_length: int,
                  train: bool = False) -> FeatureSet:
        labelled = all(len(s.tags) == len(s.words) for s in examples)
        if train and not labelled:
            raise BertkitError(f"{self.name}: a training sentence has no tags")
        with warnings.catch_warnings():  # each split's long sentences are told, not only the first's
            warnings.filterwarnings("always", category=UserWarning)
            return self._features(examples, tokenizer, max_seq_length, labelled, warn=True)

    def plan_features(self, example: TaggedSentence, ctx) -> FeatureSet:
        return self._features([example], ctx.tokenizer, ctx.max_length, False, warn=False)

    def _features(self, examples, tokenizer, max_seq_length: int, labelled: bool, warn: bool) -> FeatureSet:
        label2id = {t: i for i, t in enumerate(self.labels or [])}
        try:
            return featurize_tagging(tokenizer, [s.words for s in examples],
                                     [s.tags for s in examples] if labelled else None,
                                     label2id, max_seq_length, self.long_sentences,
                                     self.long_text.stride, warn=warn)
        except ValueError as e:
            raise BertkitError(f"{self.name}: {e}") from None

    # ------------------------------------------------------------ scoring
    @property
    def metric_names(self) -> tuple[str, ...]:
        if self.labels is not None and not _is_bio(self.labels):
            return ("accuracy",)
        return ("f1", "precision", "recall", "accuracy")

    def word_tags(self, examples, features: FeatureSet, outputs) -> list[list[str]]:
        """Predicted tags, one per word of every sentence."""
        ids = [np.asarray(logits).argmax(axis=-1) for logits in outputs["logits"]]
        return word_predictions(features.meta, ids, [len(s.words) for s in examples], self.labels)

    def evaluate(self, examples, features, outputs) -> dict[str, float]:
        if any(len(s.tags) != len(s.words) for s in examples):
            raise BertkitError(f"{self.name}: the evaluation data has no tags to score against")
        predicted = self.word_tags(examples, features, outputs)
        gold = [s.tags for s in examples]
        if self.metric_names == ("accuracy",):
            pairs = [(g, p) for gs, ps in zip(gold, predicted) for g, p in zip(gs, ps)]
            return {"accuracy": sum(g == p for g, p in pairs) / max(1, len(pairs))}
        scores = entity_scores(gold, predicted)
        return {name: scores[name] for name in self.metric_names}

    def predict(self, examples, features, outputs) -> list[dict]:
        predicted = self.word_tags(examples, features, outputs)
        return [{"id": s.line, "tokens": s.words, "tags": tags} for s, tags in zip(examples, predicted)]

    # ------------------------------------------------------------ one raw input
    def plan(self, item, ctx: PlanContext) -> Plan:
        """A text: its words (:func:`~bertkit.tasks.tagging.split_words`), this family's
        features (long sentences split, windowed or truncated as its options say) and
        :meth:`word_tags`; entities by :func:`~bertkit.tasks.tagging.group_entities` with
        character offsets into the text, score = mean tag probability."""
        text = text_of(item, "the input")
        words, spans = split_words(text)
        example = TaggedSentence(words, [], None)
        rows, features = self.feature_rows(example, ctx)
        truncated = bool(features.num_truncated)
        ctx.check_overflow(truncated)

        def finish(outputs, aggregation_strategy: str = "first", ignore_labels=("O",)):
            """The entities; Hugging Face's parameters: ``aggregation_strategy`` ``none`` gives
            one ``{"entity", ...}`` per word, ``simple`` or ``first`` (the same here: a word is
            tagged by its first wordpiece) the B-/I- runs grouped; ``ignore_labels``: the tags
            or entity groups left out."""
            tags = self.word_tags([example], features, {"logits": outputs})[0]
            scores = [0.0] * len(words)
            for meta, logits in zip(features.meta, outputs):
                probs = softmax(logits)
                for position, w in enumerate(meta.word_index):
                    if w >= 0:
                        scores[w] = float(probs[position].max())
            if aggregation_strategy == "none":
                entities = [{"entity": tag, "score": score, "word": text[a:b], "start": a, "end": b}
                            for (a, b), tag, score in zip(spans, tags, scores)]
            else:
                entities = group_entities(text, spans, tags, scores)
            return [e for e in entities if e.get("entity", e.get("entity_group")) not in ignore_labels]

        return Plan(rows, (self,), finish, truncated, windows=len(rows))

    # ------------------------------------------------------------ model
    def _adopt_saved_tagger(self, model_dir: str | Path) -> None:
        from bertkit.modeldir.entry import FINETUNE_KEY, read_model_config

        saved = (read_model_config(model_dir).get(FINETUNE_KEY) or {}).get("options") or {}
        if saved.get("feature_based"):
            keys = ("feature_layers", "combine", "lstm_hidden", "lstm_layers")
            self.options.update({k: saved[k] for k in keys if k in saved}, feature_based=True)
            self.feature_based = True

    def feature_settings(self) -> dict[str, Any]:
        """Keyword arguments of the feature-based tagger from the options."""
        settings = {"layers": self.options.get("feature_layers", "-1,-2,-3,-4"),
                    "combine": self.options.get("combine", "concat")}
        for key in ("lstm_hidden", "lstm_layers"):
            if key in self.options:
                settings[key] = int(self.options[key])
        return settings

    def build_model(self, model_dir: str | Path, config_overrides: dict[str, Any] | None = None):
        """A fine-tuned directory saved by the feature-based tagger is always rebuilt as one,
        with its saved tagger options, whatever this task's options say."""
        self._adopt_saved_tagger(model_dir)
        if not self.feature_based:
            return super().build_model(model_dir, config_overrides)
        from bertkit.tasks.base import label_maps
        from bertkit.tasks.feature_based import build_feature_based

        overrides = {**(config_overrides or {}), **label_maps(self.labels)}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                model = build_feature_based(model_dir, self.num_labels, overrides,
                                            **self.feature_settings())
            except ValueError as e:
                raise BertkitError(f"{self.name}: {e}") from None
        self.load_notes = [str(w.message) for w in caught]
        return model


def _check_types(path, sentences: Sequence[TaggedSentence], labels: Sequence[str], task: str) -> None:
    """Every entity type of a CoNLL file must be one the task knows: an unknown one is named
    with its file and line (not later, as a converted tag of sentence N)."""
    known = {split_tag(label)[1] for label in labels if label != "O"}
    for sentence in sentences:
        for offset, tag in enumerate(sentence.tags):
            kind = split_tag(tag)[1] if tag != "O" else None
            if kind is not None and kind not in known:
                line = sentence.line + offset if sentence.line is not None else None
                raise DataFormatError(path, f"unknown entity type {kind!r} (in a tag ending "
                                            f"'-{kind}'); {task} knows {', '.join(sorted(known))}",
                                      line)


def create_task(name: str, **options: Any) -> TokenTask:
    """``ner`` / ``conll2003`` (CoNLL-2003 labels) or ``token-classification``."""
    return TokenTask(name, **options)


def task_for_head(labels: list[str], regression: bool, max_positions: int, **options: Any) -> TokenTask:
    """The family of a token-classification head never fine-tuned by bertkit."""
    return create_task("token-classification", labels=labels, **options)
