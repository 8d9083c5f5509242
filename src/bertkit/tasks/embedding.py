"""Sentence embeddings trained as Sentence-BERT does: a shared (siamese) encoder plus pooling.

Task name ``embedding``. The model is the bare encoder (:class:`~bertkit.model.BertModel`,
no head; its pooler frozen, unused); an input's embedding is its last hidden states pooled by the one pooling
of bertkit (:func:`bertkit.model.pooling.pool_features`: ``mean`` by default, ``cls``,
``max``), so the saved directory embeds at every door (``bertkit embed``, ``load().embed``,
``POST /embed``) as it was trained.

Data (``--data DIR``; ``DIR/train.*`` and ``DIR/dev.*``, or ``--train-file``/``--dev-file``):
the layout is told by the file's header (:mod:`bertkit.tasks.formats.pairs`):

* **scored pairs** (``text_a, text_b, score``; GLUE STS-B's directory as it is): loss
  ``cosine`` (the default: mean squared error between the cosine of the two embeddings and
  the score divided by ``score_scale``, SBERT's CosineSimilarityLoss) or ``cosent`` (CoSENT:
  ``log(1 + sum exp(20 (cos_j - cos_i)))`` over the pairs of the batch whose gold scores
  order i above j); evaluated by the Spearman (main) and Pearson correlations of the
  embeddings' cosine with the gold score;
* **positive pairs** (``anchor, positive[, negative]``; the MRPC paraphrase files as they are):
  loss ``mnr`` (MultipleNegativesRanking: cross-entropy of each anchor's cosines to every
  positive and negative of the batch, divided by ``mnr_temperature``, 0.05 by default, its own
  positive the target); a candidate with the text of the anchor, of its positive, or from a
  row with the same anchor is never counted as its negative (it is masked out of the softmax,
  so a duplicate in the batch cannot teach the model to push a paraphrase away). Evaluated
  as retrieval over the dev pairs as a small corpus: each dev anchor queries every distinct
  dev positive; MRR@10 (main), recall@1 and recall@10 of its own positive(s).

**Matryoshka** (``matryoshka_dims``, e.g. ``128,64,32``): the loss is summed over those leading
widths of the embedding (each cut and compared on its own), so a prefix works alone and
``/embed``'s ``dimensions`` truncates well; dev adds each width's main metric
(``spearman@64`` ...).

Options: ``pooling``, ``loss`` (default ``cosine``; positive pairs need ``mnr``: the loss
fixes the metrics, which are known before the data are read), ``mnr_temperature``,
``score_scale`` (the largest gold score, found in the training file when not given: STS-B's 5), the generic column options ``text_column``/``pair_column``/
``label_column`` (default: the header's ``text_a``/``sentence1``, ``text_b``/``sentence2``,
``score``/``label``), ``train_file``, ``dev_file``, ``format``. They are saved with the model
(``config.json``, the pooling always), which is how every door finds the trained pooling
(:func:`bertkit.modeldir.st_layout.read_st_pooling`). Every saved model is also a
sentence-transformers model (:meth:`EmbeddingTask.write_model_files`: ``modules.json``,
``1_Pooling/`` with the trained pooling, ...), so ``SentenceTransformer(dir).encode`` and TEI give
bertkit's vectors; ``bertkit st-layout DIR`` rewrites those files (e.g. ``--normalize``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from bertkit.errors import BertkitError
from bertkit.metrics import pearson, spearman
from bertkit.model import BertModel, ModelOutput
from bertkit.model.pooling import POOLINGS, pool_features
from bertkit.model.unpadded import encode_packed
from bertkit.tasks.base import FeatureSet, Task
from bertkit.tasks.formats import find_glue_file
from bertkit.tasks.formats.pairs import PairExample, pair_columns, read_pairs
from bertkit.tasks.generic import find_split_file

__all__ = ["EmbeddingTask", "cosent_loss", "cosine_loss", "create_task", "mnr_loss", "retrieval_metrics"]

class RandomBatchFeatureSet(FeatureSet):
    """Training features whose batches are plain random samples of the data, whatever the
    loop's length buckets (``--bucket``): every feature reports the same length, so the loop's
    shuffled order is kept, and :meth:`collate` pads each batch to its own longest text.

    The embedding losses compare the pairs (or anchors) of a batch with each other: CoSENT
    orders every pair of the batch against every other, MNR takes the other rows as
    negatives. Length buckets make a batch one length class, and on STS-B length tells the
    source (MSRpar's news pairs are long, MSRvid's captions and the headlines short): the
    largest source in a bucketed batch averages 56% of it, against 38% in a random one. The
    model then learns to order pairs within a source much more than across, and the dev
    Spearman, taken over all sources, pays: BERT-Tiny, CoSENT, 5 seeds, 80.62 bucketed against
    80.85 random, where sentence-transformers' trainer (random batches) gives 81.06
    (``bench/results/embedding-cosent-amx-2026-11-26.md``). The padding that random batches
    bring costs little: training runs on the real tokens only (:meth:`EmbeddingTask.embed_batch`)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.lengths = np.zeros_like(self.widths)  # one length class: the buckets stay random


LOSSES = {"scored": ("cosine", "cosent"), "positive": ("mnr",)}  # layout -> the losses it trains with
_OPTIONS = ("pooling", "loss", "mnr_temperature", "matryoshka_dims", "score_scale", "text_column",
            "pair_column", "label_column", "train_file", "dev_file", "format")
DEFAULT_TEMPERATURE = 0.05  # sentence-transformers' scale 20
COSENT_SCALE = 20.0  # CoSENT's scale (the paper's and sentence-transformers' default)


# ------------------------------------------------------------------ losses
def cosine_loss(u: torch.Tensor, v: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error between ``cos(u_i, v_i)`` and ``target_i`` (targets in [-1, 1])."""
    return F.mse_loss(F.cosine_similarity(u, v, dim=-1), target)


def cosent_loss(u: torch.Tensor, v: torch.Tensor, scores: torch.Tensor,
                scale: float = COSENT_SCALE) -> torch.Tensor:
    """CoSENT: ``log(1 + sum_{(i,j): s_i > s_j} exp(scale (cos_j - cos_i)))`` over the batch's
    pairs; only the order of the gold ``scores`` matters (no scale to choose)."""
    cos = F.cosine_similarity(u, v, dim=-1) * scale
    diff = cos[None, :] - cos[:, None]  # diff[i, j] = cos_j - cos_i
    ordered = scores[:, None] > scores[None, :]
    diff = diff.masked_fill(~ordered, float("-inf"))
    return torch.logsumexp(torch.cat([diff.new_zeros(1), diff.flatten()]), dim=0)


def mnr_loss(vectors: torch.Tensor, text_ids: torch.Tensor, temperature: float) -> torch.Tensor:
    """MultipleNegativesRanking over a batch of (B, K, H) ``vectors`` (anchor, positive[,
    negative]): cross-entropy of anchor i's cosines to the B(K-1) candidates / temperature,
    target its own positive. ``text_ids`` (B, K) identify texts: a candidate from another
    row whose text is anchor i's or its positive's, or whose row has anchor i's text, is
    masked out (a duplicate is not a negative)."""
    b, k, _ = vectors.shape
    anchors = F.normalize(vectors[:, 0], dim=-1)
    candidates = F.normalize(vectors[:, 1:].transpose(0, 1).reshape(b * (k - 1), -1), dim=-1)
    logits = anchors @ candidates.T / temperature  # column j: row j % b, text 1 + j // b
    ids = text_ids[:, 1:].transpose(0, 1).reshape(-1)  # candidates' text ids
    rows = torch.arange(b, device=vectors.device).repeat(k - 1)  # candidates' rows
    same_text = (ids[None, :] == text_ids[:, :2, None]).any(1)  # = anchor i's or positive i's text
    same_anchor = text_ids[rows, 0][None, :] == text_ids[:, 0, None]
    own = rows[None, :] == torch.arange(b, device=vectors.device)[:, None]
    duplicate = (same_text | same_anchor) & ~own
    logits = logits.masked_fill(duplicate, float("-inf"))
    return F.cross_entropy(logits, torch.arange(b, device=vectors.device))


def retrieval_metrics(examples: Sequence[PairExample], outputs: Sequence[np.ndarray]) -> dict[str, float]:
    """Each distinct anchor queries the distinct positives of ``examples`` (embeddings: the
    (K, H) ``outputs``); MRR@10, recall@1 and recall@10 of its positives, averaged."""
    corpus: dict[str, int] = {}
    vectors, relevant, queries = [], {}, {}
    for ex, out in zip(examples, outputs):
        if ex.texts[1] not in corpus:
            corpus[ex.texts[1]] = len(vectors)
            vectors.append(np.asarray(out[1], dtype=np.float64))
        queries.setdefault(ex.texts[0], np.asarray(out[0], dtype=np.float64))
        relevant.setdefault(ex.texts[0], set()).add(corpus[ex.texts[1]])
    docs = np.stack(vectors)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True).clip(min=1e-12)
    mrr, at1, at10 = [], [], []
    for text, query in queries.items():
        scores = docs @ (query / max(np.linalg.norm(query), 1e-12))
        top = np.argsort(-scores, kind="stable")[:10].tolist()
        ranks = [r for r, d in enumerate(top) if d in relevant[text]]
        mrr.append(1.0 / (ranks[0] + 1) if ranks else 0.0)
        at1.append(float(bool(ranks) and ranks[0] == 0))
        at10.append(len(ranks) / len(relevant[text]))
    return {"mrr@10": float(np.mean(mrr)), "recall@1": float(np.mean(at1)), "recall@10": float(np.mean(at10))}


def _cosines(outputs: Sequence[np.ndarray]) -> np.ndarray:
    """Cosine of the first two embeddings of every example's (K, H) output."""
    rows = np.stack([np.asarray(o, dtype=np.float64)[:2] for o in outputs])
    norms = np.linalg.norm(rows, axis=-1).clip(min=1e-12)
    return (rows[:, 0] * rows[:, 1]).sum(-1) / (norms[:, 0] * norms[:, 1])


class EmbeddingTask(Task):
    """Bi-encoder fine-tuning on pairs; see the module docstring."""

    head_answers = False  # a sentence encoder: its answers are embeddings, not /predict's

    model_class = BertModel
    head_tensor = None  # no head: any BERT directory fits
    output_names = ("pooled_output",)  # per example: (texts, hidden) pooled embeddings

    def __init__(self, name: str, **options: Any):
        unknown = sorted(set(options) - set(_OPTIONS))
        if unknown:
            raise BertkitError(f"{name}: unknown option(s) {', '.join(unknown)}; known: {', '.join(_OPTIONS)}")
        super().__init__(name, None, **options)
        self.pooling = options.get("pooling") or "mean"
        if self.pooling not in POOLINGS:
            raise BertkitError(f"{name}: --pooling must be one of {', '.join(POOLINGS)} (got {self.pooling!r})")
        self.options["pooling"] = self.pooling  # saved with the model: every door reads it
        self.loss = options.get("loss") or "cosine"
        known = sorted({loss for losses in LOSSES.values() for loss in losses})
        if self.loss not in known:
            raise BertkitError(f"{name}: --loss must be one of {', '.join(known)} (got {self.loss!r})")
        dims = options.get("matryoshka_dims")
        self.dims = sorted({int(d) for d in dims}, reverse=True) if dims else []
        if any(d < 1 for d in self.dims):
            raise BertkitError(f"{name}: --matryoshka-dims must be positive widths (got {dims})")
        if dims:
            self.options["matryoshka_dims"] = self.dims
        self.temperature = float(options.get("mnr_temperature") or DEFAULT_TEMPERATURE)
        if not self.temperature > 0:
            raise BertkitError(f"{name}: --mnr-temperature must be positive (got {self.temperature})")
        scale = options.get("score_scale")
        if scale is not None and not float(scale) > 0:
            raise BertkitError(f"{name}: --score-scale must be positive (got {scale})")
        self.score_scale = float(scale) if scale is not None else None

    # ------------------------------------------------------------ data
    def _split_file(self, data_dir: str | Path, split: str) -> Path:
        """``DATA/<split>.{csv,tsv,jsonl}`` (or the ``*_file`` option), else MRPC's files."""
        try:
            return find_split_file(data_dir, split, self.options.get(f"{split}_file"))
        except FileNotFoundError as missing:
            try:
                return find_glue_file("mrpc", data_dir, split)
            except (FileNotFoundError, ValueError):
                raise missing from None

    def _format(self, path: Path) -> str | None:
        return self.options.get("format") or ("tsv" if path.suffix == ".txt" else None)

    def _columns(self, path: Path) -> tuple[str, dict[str, str]]:
        """The layout of a pair file and its columns: the layout of the ``loss`` given, else
        the header's (then checked against the default loss); the column options name the
        columns."""
        loss = self.options.get("loss")
        layout = next((name for name, losses in LOSSES.items() if loss in losses), None)
        given = {"text": self.options.get("text_column"), "pair": self.options.get("pair_column"),
                 "score": self.options.get("label_column")}
        return pair_columns(path, self._format(path), given, layout)

    def _layout(self, path: Path) -> tuple[str, dict[str, str]]:
        layout, columns = self._columns(path)
        if self.loss not in LOSSES.get(layout, ()):
            raise BertkitError(f"{path}: a file of {layout} pairs trains with --loss "
                               f"{' or '.join(LOSSES[layout])}, not {self.loss}")
        return layout, columns

    def read(self, data_dir: str | Path, split: str) -> list[PairExample]:
        path = self._split_file(data_dir, split)
        layout, columns = self._layout(path)
        return read_pairs(path, layout, columns, self._format(path))

    def for_data(self, data_dir: str | Path) -> EmbeddingTask:
        """Without ``score_scale``, the cosine loss takes the largest absolute score of the
        training file (at least 1): a new task built with it."""
        if self.score_scale is not None or self.loss != "cosine":
            return self
        scores = [abs(ex.score) for ex in self.read(data_dir, "train") if ex.score is not None]
        return EmbeddingTask(self.name, **{**self.options, "score_scale": max([1.0, *scores])})

    def read_input(self, path: str | Path) -> list[PairExample]:
        """A ``predict`` JSON Lines file of pairs (``text_a``, ``text_b``, ``score`` optional)."""
        layout, columns = pair_columns(path, "jsonl")
        return read_pairs(path, layout, columns, "jsonl")

    def featurize(self, examples: Sequence[PairExample], tokenizer, max_seq_length: int,
                  train: bool = False) -> FeatureSet:
        """One feature per example: its K texts as rows of (K, L) ``input_ids`` /
        ``attention_mask`` (each text ``[CLS] text [SEP]``, padded to the longest of the K),
        ``text_ids`` (K,) (equal texts of the split share an id), plus ``labels`` (the score)
        for scored pairs."""
        counts = {len(ex.texts) for ex in examples}
        if len(counts) > 1:
            raise BertkitError(f"{self.name}: examples with {sorted(counts)} texts mixed in one split")
        features, meta, truncated = [], [], 0
        pad = tokenizer.pad_token_id or 0
        text_ids: dict[str, int] = {}  # equal texts share an id (mnr: duplicates are no negatives)
        for e, ex in enumerate(examples):
            encodings = [tokenizer.encode(text, max_length=max_seq_length) for text in ex.texts]
            truncated += any(enc.num_truncated > 0 for enc in encodings)
            width = max(len(enc.input_ids) for enc in encodings)
            ids = np.full((len(encodings), width), pad, dtype=np.int32)
            mask = np.zeros((len(encodings), width), dtype=np.int8)
            for row, enc in enumerate(encodings):
                ids[row, : len(enc.input_ids)] = enc.input_ids
                mask[row, : len(enc.input_ids)] = 1
            feature = {"input_ids": ids, "token_type_ids": np.zeros_like(mask), "attention_mask": mask,
                       "text_ids": np.array([text_ids.setdefault(t.strip(), len(text_ids)) for t in ex.texts],
                                            dtype=np.int64)}
            if ex.score is not None:
                feature["labels"] = np.asarray(ex.score, dtype=np.float32)
            elif train and self.loss in LOSSES["scored"]:
                raise BertkitError(f"{self.name}: training example at line {ex.line} has no score")
            features.append(feature)
            meta.append(e)
        kind = RandomBatchFeatureSet if train else FeatureSet  # in-batch losses: random batches
        return kind(features, meta, {"input_ids": pad, "token_type_ids": 0, "attention_mask": 0},
                    num_examples=len(examples), num_truncated=truncated)

    # ------------------------------------------------------------ model
    def model_kwargs(self) -> dict[str, Any]:
        return {}

    def write_model_files(self, directory: Path, model, max_seq_length: int) -> None:
        """sentence-transformers' layout with the trained pooling, unnormalised (the vectors
        of ``bertkit embed``): :func:`bertkit.modeldir.st_layout.write_st_layout`."""
        from bertkit.modeldir.st_layout import write_st_layout

        write_st_layout(directory, self.pooling, model.config.hidden_size, max_seq_length)

    def build_model(self, model_dir, config_overrides=None) -> BertModel:
        """The bare encoder of ``model_dir``. Its pooler (``tanh`` at ``[CLS]``) is kept as it
        is, frozen: no embedding reads it, but a directory with one loads everywhere without a
        missing-tensor warning."""
        model = super().build_model(model_dir, config_overrides)
        model.pooler.requires_grad_(False)
        if self.dims and self.dims[0] > model.config.hidden_size:
            raise BertkitError(f"{self.name}: --matryoshka-dims {self.dims[0]} is wider than the model's "
                               f"embeddings ({model.config.hidden_size})")
        return model

    def embed_batch(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """(B, K, H) embeddings of a collated batch of (B, K, L) rows. In training, a bare
        :class:`BertModel` runs on the real tokens only (:func:`bertkit.model.unpadded.encode_packed`,
        whatever its ``attention_impl``; the same values to float rounding): random batches
        (:class:`RandomBatchFeatureSet`) are padded to their longest text. A wrapped model
        (DDP, compiled) runs its own forward."""
        ids = batch["input_ids"]
        b, k, length = ids.shape
        mask = batch["attention_mask"].reshape(b * k, length)
        types = batch["token_type_ids"].reshape(b * k, length)
        if model.training and isinstance(model, BertModel) and bool((mask == 0).any()):
            packed, packing, _ = encode_packed(model, ids.reshape(b * k, length), types, mask.bool())
            if self.pooling == "mean":  # each text's mean over its packed tokens
                rows = packing.indices // length
                sums = packed.new_zeros(b * k, packed.shape[-1]).index_add_(0, rows, packed)
                counts = mask.sum(1, keepdim=True).clamp(min=1).to(packed.dtype)
                return (sums / counts).reshape(b, k, -1)
            hidden = packing.unpack(packed)
        else:
            hidden = model(ids.reshape(b * k, length), types, mask).last_hidden_state
        return pool_features(hidden, mask, self.pooling).reshape(b, k, -1)

    def compute(self, model, batch: dict[str, torch.Tensor]) -> ModelOutput:
        """The batch's embeddings (``pooled_output``, (B, K, H)) and, with targets, the loss."""
        vectors = self.embed_batch(model, batch)
        loss = None
        if self.loss == "mnr" or "labels" in batch:
            widths = self.dims or [vectors.shape[-1]]  # Matryoshka: each leading width alone
            loss = sum(self.batch_loss(vectors[..., :d].float(), batch) for d in widths)
        return ModelOutput(loss=loss, pooled_output=vectors)

    def batch_loss(self, vectors: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The chosen loss of a batch's (B, K, D) embeddings."""
        if self.loss == "mnr":
            return mnr_loss(vectors, batch["text_ids"], self.temperature)
        return self.pair_loss(vectors, batch["labels"].float())

    def pair_loss(self, vectors: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """The chosen loss of scored pairs ``vectors[:, 0]``, ``vectors[:, 1]``."""
        u, v = vectors[:, 0], vectors[:, 1]
        if self.loss == "cosent":
            return cosent_loss(u, v, scores)
        return cosine_loss(u, v, scores / (self.score_scale or 1.0))

    # ------------------------------------------------------------ scoring
    @property
    def metric_names(self) -> tuple[str, ...]:
        names = ("mrr@10", "recall@1", "recall@10") if self.loss == "mnr" else ("spearman", "pearson")
        return names + tuple(f"{names[0]}@{d}" for d in self.dims)

    def evaluate(self, examples, features, outputs) -> dict[str, float]:
        """Scored pairs: Spearman and Pearson correlation of the cosine of each pair's
        embeddings with the gold score (x100 is how STS figures are usually written; these are
        in [-1, 1]). Positive pairs: :func:`retrieval_metrics`."""
        vectors = outputs["pooled_output"]
        metrics = self._metrics(examples, vectors)
        main = self.metric_names[0]
        for d in self.dims:  # Matryoshka: each width's main metric
            metrics[f"{main}@{d}"] = self._metrics(examples, [v[:, :d] for v in vectors])[main]
        return metrics

    def _metrics(self, examples, vectors) -> dict[str, float]:
        if self.loss == "mnr":
            return retrieval_metrics(examples, vectors)
        if any(ex.score is None for ex in examples):
            raise BertkitError(f"{self.name}: the evaluation data has no scores to score against")
        cos, gold = _cosines(vectors), np.array([ex.score for ex in examples])
        return {"spearman": spearman(cos, gold), "pearson": pearson(cos, gold)}

    def predict(self, examples, features, outputs) -> list[dict]:
        """``{"id", "cosine"}`` per example: the cosine of its first two texts' embeddings."""
        cos = _cosines(outputs["pooled_output"])
        return [{"id": ex.guid, "cosine": round(float(c), 6)} for ex, c in zip(examples, cos)]


def create_task(name: str, **options) -> EmbeddingTask:
    """The sentence-embedding task; see the module docstring for the options."""
    return EmbeddingTask(name, **options)
