"""Entity-level precision / recall / F1 as CoNLL's ``conlleval`` script computes them.

Tags are ``O`` or ``P-TYPE`` with prefix ``P`` in ``B I E S``. Chunks are found with
conlleval's start/end-of-chunk rules, extended with ``E-``/``S-`` exactly as seqeval's
default (non-strict) mode extends them; for B/I/O tags both agree. This accepts IOB1
and IOB2 alike and treats malformed sequences the conlleval way: ``I-X`` after ``O`` or
after a chunk of another type starts a new chunk, ``I-X`` after ``B-Y`` ends the ``Y``
chunk and starts an ``X`` chunk. Sentence boundaries end every chunk. An entity counts
as correct only when its type, first and last token all match.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

__all__ = ["entity_scores", "get_entities", "split_tag"]

_PREFIXES = ("B", "I", "E", "S")


def split_tag(tag: str) -> tuple[str, str]:
    """``"B-PER" -> ("B", "PER")``, ``"O" -> ("O", "")``; any other shape is a ValueError."""
    if tag == "O":
        return "O", ""
    prefix, dash, kind = tag.partition("-")
    if prefix not in _PREFIXES or not dash or not kind:
        raise ValueError(f"unknown tag {tag!r}: expected 'O' or B-/I-/E-/S- followed by a type")
    return prefix, kind


def _chunk_ends(prev: str, prev_type: str, tag: str, kind: str) -> bool:
    """Whether the chunk open at the previous token ends before the current token."""
    if prev in ("E", "S"):
        return True
    if prev in ("B", "I") and tag in ("B", "S", "O"):
        return True
    return prev != "O" and prev_type != kind


def _chunk_starts(prev: str, prev_type: str, tag: str, kind: str) -> bool:
    """Whether a new chunk starts at the current token."""
    if tag in ("B", "S"):
        return True
    if tag in ("I", "E") and prev in ("E", "S", "O"):
        return True
    return tag != "O" and prev_type != kind


def get_entities(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """Chunks of one sentence as ``(type, first, last)`` token indices (inclusive), in order."""
    entities = []
    prev, prev_type, begin = "O", "", 0
    for i, tag in enumerate([*tags, "O"]):
        prefix, kind = split_tag(tag)
        if _chunk_ends(prev, prev_type, prefix, kind):
            entities.append((prev_type, begin, i - 1))
        if _chunk_starts(prev, prev_type, prefix, kind):
            begin = i
        prev, prev_type = prefix, kind
    return entities


def _prf(correct: int, predicted: int, gold: int) -> tuple[float, float, float]:
    """Precision, recall, F1 from counts; each 0.0 when its denominator is 0."""
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    total = precision + recall
    return precision, recall, (2 * precision * recall / total if total else 0.0)


def _sentence_pairs(gold_sentences, pred_sentences):
    """Yield (gold, pred) tag lists, checking that every sentence pair has one length."""
    if len(gold_sentences) != len(pred_sentences):
        raise ValueError(f"{len(gold_sentences)} gold sentences but {len(pred_sentences)} predicted")
    for i, (gold, pred) in enumerate(zip(gold_sentences, pred_sentences)):
        if len(gold) != len(pred):
            raise ValueError(f"sentence {i}: {len(gold)} gold tags but {len(pred)} predicted")
        yield gold, pred


def entity_scores(
    gold_sentences: Sequence[Sequence[str]], pred_sentences: Sequence[Sequence[str]]
) -> dict:
    """Micro-averaged entity precision/recall/F1 (fractions in [0, 1]) plus a per-type table.

    Returns ``{"precision", "recall", "f1", "accuracy" (token-level, as conlleval),
    "num_tokens", "num_gold", "num_pred", "num_correct", "per_type": {type: {"precision", "recall",
    "f1", "support", "predicted"}}}``; ``per_type`` covers every type seen in gold or
    predictions, sorted by name; ``support`` / ``predicted`` count that type's gold /
    predicted entities.
    """
    gold_count, pred_count, correct_count = Counter(), Counter(), Counter()
    tokens = correct_tokens = 0
    for gold, pred in _sentence_pairs(gold_sentences, pred_sentences):
        gold_entities, pred_entities = set(get_entities(gold)), set(get_entities(pred))
        gold_count.update(e[0] for e in gold_entities)
        pred_count.update(e[0] for e in pred_entities)
        correct_count.update(e[0] for e in gold_entities & pred_entities)
        tokens += len(gold)
        correct_tokens += sum(g == p for g, p in zip(gold, pred))
    totals = [sum(c.values()) for c in (correct_count, pred_count, gold_count)]
    precision, recall, f1 = _prf(*totals)
    per_type = {}
    for kind in sorted(gold_count.keys() | pred_count.keys()):
        p, r, f = _prf(correct_count[kind], pred_count[kind], gold_count[kind])
        per_type[kind] = {"precision": p, "recall": r, "f1": f, "support": gold_count[kind],
                          "predicted": pred_count[kind]}
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "accuracy": correct_tokens / tokens if tokens else 0.0,
        "num_tokens": tokens,
        "num_gold": totals[2],
        "num_pred": totals[1],
        "num_correct": totals[0],
        "per_type": per_type,
    }
