"""Word-level tagging on WordPiece models: features in, word tags out (NER and friends).

Contract (paper section 5.3, "we use the representation of the first sub-token as the
input to the token-level classifier"):

* every word of a sentence is split into WordPieces; the word's tag id goes on its first
  sub-token, every other position (later sub-tokens, ``[CLS]``, ``[SEP]``, padding) gets
  ``-100`` (ignored by the loss);
* a sentence longer than ``max_seq_length - 2`` sub-tokens is never silently cut:
  ``long_sentences="split"`` (default) cuts it into consecutive windows at word
  boundaries, each its own feature, so every word is still labelled and predicted exactly
  once; ``"truncate"`` keeps the first window only (the cut-off words are predicted ``O``).
  ``"window"`` cuts the sub-token sequence into overlapping windows whose starts are
  ``stride`` sub-tokens apart (:mod:`bertkit.tasks.windows`, default half the window): every window
  carries the labels of the words starting in it (training), and each word is predicted
  from the one window where its first sub-token has the most context on both sides.
  Either way a warning says how many sentences were affected. A single word with more
  pieces than fit keeps its first ``max_seq_length - 2`` pieces;
* a word that yields no WordPiece at all (e.g. a lone zero-width character) has no
  position; it is predicted ``O`` (the ``default_tag``);
* :func:`word_predictions` maps per-token logits back to one tag per word, taking the
  arg-max at each word's first sub-token;
* raw text becomes words by :func:`split_words` (runs of word characters, and each other
  non-space character alone, with their character spans), and word tags become entities by
  :func:`group_entities`: the one rule for ``bertkit predict``'s ``text`` records, the
  Python API and the server.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bertkit.tasks.base import IGNORE_INDEX, FeatureSet
from bertkit.tasks.windows import LongText, max_context_flags

LONG_SENTENCE_MODES = ("split", "truncate", "window")
WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)

__all__ = [
    "IGNORE_INDEX",
    "LONG_SENTENCE_MODES",
    "TaggingMeta",
    "featurize_tagging",
    "group_entities",
    "label_list",
    "split_words",
    "word_predictions",
]


@dataclass
class TaggingMeta:
    """Side information of one feature: ``[CLS] pieces [SEP]`` of (part of) sentence
    ``sentence``; ``word_index[i]`` is the word whose *first* sub-token sits at position
    ``i`` (``-1`` elsewhere, where the label is -100)."""

    sentence: int
    word_index: list[int]


def label_list(tag_sequences: Sequence[Sequence[str]]) -> list[str]:
    """The sorted set of tags with ``O`` first (when present): a stable label order."""
    tags = {tag for seq in tag_sequences for tag in seq}
    return (["O"] if "O" in tags else []) + sorted(tags - {"O"})


def _word_pieces(tokenizer, words: Sequence[str]) -> list[list[int]]:
    """WordPiece ids of every word (empty list for a word that yields none)."""
    enc = tokenizer.encode(list(words), add_special_tokens=False)
    pieces: list[list[int]] = [[] for _ in words]
    for token_id, word in zip(enc.input_ids, enc.word_ids):
        pieces[word].append(token_id)
    return pieces


def _windows(pieces: list[list[int]], budget: int) -> list[tuple[int, int]]:
    """Consecutive ``(first word, end word)`` ranges whose pieces fit ``budget`` each."""
    windows, start, used = [], 0, 0
    for w, p in enumerate(pieces):
        n = min(len(p), budget)
        if used + n > budget and w > start:
            windows.append((start, w))
            start, used = w, 0
        used += n
    windows.append((start, len(pieces)))
    return windows


def featurize_tagging(
    tokenizer,
    sentences: Sequence[Sequence[str]],
    tags: Sequence[Sequence[str]] | None,
    label2id: dict[str, int] | None,
    max_seq_length: int = 128,
    long_sentences: str = "split",
    stride: int | None = None,
    warn: bool = True,
) -> FeatureSet:
    """A :class:`FeatureSet` of every sentence (lists of words), ``meta`` a
    :class:`TaggingMeta` per feature; ``tags=None`` gives features without labels.

    Features hold ``input_ids``, ``attention_mask`` and, with ``tags``, ``labels`` (numpy
    int64). A tag
    unknown to ``label2id`` raises ``ValueError`` naming it. See the module docstring for
    long sentences (``num_truncated`` counts the sentences that lost words to "truncate");
    ``warn=False`` drops the warning (the server says so in its response instead).
    """
    if long_sentences not in LONG_SENTENCE_MODES:
        raise ValueError(f"long_sentences must be one of {LONG_SENTENCE_MODES}, got {long_sentences!r}")
    budget = max_seq_length - 2
    if budget < 1:
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room for a word")
    features, meta, affected, longest = [], [], 0, 0
    for s, words in enumerate(sentences):
        pieces = _word_pieces(tokenizer, words)
        windows = _windows(pieces, budget)
        if len(windows) > 1 or any(len(p) > budget for p in pieces):
            affected += 1
            longest = max(longest, sum(map(len, pieces)) + 2)
        if long_sentences == "window":
            for feature, index in _overlapping(tokenizer, pieces, tags[s] if tags is not None else None,
                                               label2id, s, budget, stride):
                features.append(feature)
                meta.append(TaggingMeta(s, index))
            continue
        if long_sentences == "truncate":
            windows = windows[:1]
        for first, end in windows:
            ids, labels, index = [tokenizer.cls_token_id], [IGNORE_INDEX], [-1]
            for w in range(first, end):
                word_ids = pieces[w][:budget]
                if not word_ids:
                    continue
                tag_id = _tag_id(tags[s] if tags is not None else None, label2id, s, w)
                ids += word_ids
                labels += [tag_id] + [IGNORE_INDEX] * (len(word_ids) - 1)
                index += [w] + [-1] * (len(word_ids) - 1)
            features.append(_feature(tokenizer, ids, labels, index, labelled=tags is not None))
            meta.append(TaggingMeta(s, index))
    if affected and warn:
        action = {"split": "split into windows at word boundaries",
                  "window": "cut into overlapping windows",
                  "truncate": "truncated (the words cut off are predicted 'O')"}[long_sentences]
        warnings.warn(f"{affected} sentence(s) longer than max_seq_length={max_seq_length} "
                      f"WordPieces (longest {longest}) were {action}", stacklevel=2)
    pad = {"input_ids": tokenizer.pad_token_id, "attention_mask": 0, "labels": IGNORE_INDEX}
    return FeatureSet(features, meta, pad, num_examples=len(sentences),
                      num_truncated=affected if long_sentences == "truncate" else 0)


def _tag_id(tags, label2id, s: int, w: int) -> int:
    if tags is None:
        return IGNORE_INDEX
    if tags[w] not in label2id:
        raise ValueError(f"sentence {s}: tag {tags[w]!r} is not among the labels {sorted(label2id)}")
    return label2id[tags[w]]


def _overlapping(tokenizer, pieces, tags, label2id, s: int, budget: int, stride: int | None):
    """``(feature, word_index)`` of each overlapping window of sentence ``s`` (``"window"``
    mode): labels on every word's first sub-token in every window, ``word_index`` only in
    the word's max-context window."""
    flat, first_of = [], {}  # flat position -> word starting there
    for w, word_ids in enumerate(pieces):
        if word_ids:
            first_of[len(flat)] = w
            flat += word_ids
    spans = LongText("window", stride).spans(len(flat), budget)
    out = []
    for k, (start, length) in enumerate(spans):
        best = max_context_flags(spans, k)
        ids, labels, index = [tokenizer.cls_token_id], [IGNORE_INDEX], [-1]
        for offset, p in enumerate(range(start, start + length)):
            ids.append(flat[p])
            w = first_of.get(p, -1)
            labels.append(_tag_id(tags, label2id, s, w) if w >= 0 else IGNORE_INDEX)
            index.append(w if w >= 0 and best[offset] else -1)
        out.append((_feature(tokenizer, ids, labels, index, labelled=tags is not None), index))
    return out


def _feature(tokenizer, ids: list[int], labels: list[int], index: list[int], labelled: bool) -> dict:
    """Close a window with ``[SEP]`` (``ids``, ``labels`` and ``index`` grow in place) and
    lay it out as a feature; ``labels`` only for labelled data."""
    ids.append(tokenizer.sep_token_id)
    labels.append(IGNORE_INDEX)
    index.append(-1)
    feature = {"input_ids": np.array(ids, dtype=np.int64),
               "attention_mask": np.ones(len(ids), dtype=np.int64)}
    if labelled:
        feature["labels"] = np.array(labels, dtype=np.int64)
    return feature


def word_predictions(
    meta: Sequence[TaggingMeta],
    token_label_ids: Sequence[Sequence[int]],
    sentence_lengths: Sequence[int],
    id2label: Sequence[str],
    default_tag: str = "O",
) -> list[list[str]]:
    """One tag per word for every sentence, from each feature's per-position label ids.

    ``token_label_ids[k]`` holds the predicted label id of every position of feature ``k``
    (described by ``meta[k]``; positions beyond it are ignored). Words without a position
    get ``default_tag``.
    """
    out = [[default_tag] * n for n in sentence_lengths]
    for feature, predicted in zip(meta, token_label_ids):
        for position, word in enumerate(feature.word_index):
            if word >= 0:
                out[feature.sentence][word] = id2label[int(predicted[position])]
    return out


def split_words(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """The words of raw text (runs of word characters; every other non-space character is a
    word of its own, as BERT's basic tokenizer splits punctuation) and their character spans."""
    matches = list(WORD.finditer(text))
    return [m.group() for m in matches], [m.span() for m in matches]


def group_entities(text: str, spans: Sequence[tuple[int, int]], tags: Sequence[str],
                   scores: Sequence[float]) -> list[dict]:
    """Entities of word-level BIO (or IOB1) tags: runs of ``B-X I-X ...`` of one type."""
    entities: list[dict] = []
    current: dict | None = None
    for (start, end), tag, score in zip(spans, tags, scores):
        prefix, _, kind = tag.partition("-") if "-" in tag else ("O", "", "")
        if tag == "O" or not kind:
            current = None
            continue
        if current is not None and prefix == "I" and current["entity_group"] == kind:
            current["end"], current["_scores"] = end, current["_scores"] + [score]
            continue
        current = {"entity_group": kind, "start": start, "end": end, "_scores": [score]}
        entities.append(current)
    for e in entities:
        e["score"] = float(np.mean(e.pop("_scores")))
        e["word"] = text[e["start"]:e["end"]]
    return [{k: e[k] for k in ("entity_group", "score", "word", "start", "end")} for e in entities]
