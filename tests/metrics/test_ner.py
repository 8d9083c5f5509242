"""Entity-level scores against seqeval (default, conlleval-like mode) on random tags.

seqeval's default mode reads chunks with conlleval's rules (plus E-/S- handling), so it
accepts IOB1 and IOB2 alike: ``I-X`` after ``O`` or another type opens a chunk. We check
IOB1 both raw and after :func:`iob1_to_iob2`, and against seqeval's strict IOB1/IOB2 modes
on well-formed sequences.
"""

from __future__ import annotations

import random
import warnings

import pytest
from seqeval.metrics.sequence_labeling import get_entities as seqeval_entities
from seqeval.metrics.sequence_labeling import precision_recall_fscore_support
from seqeval.metrics.v1 import precision_recall_fscore_support as strict_prfs
from seqeval.scheme import IOB1, IOB2

from bertkit.metrics import entity_scores, get_entities
from bertkit.tasks.formats import iob1_to_iob2, read_conll

TYPES = ["PER", "LOC", "ORG"]


def _random_tags(rng: random.Random, prefixes: str, n: int) -> list[str]:
    """Arbitrary (often malformed) tag sequences."""
    return [
        "O" if rng.random() < 0.35 else f"{rng.choice(prefixes)}-{rng.choice(TYPES)}"
        for _ in range(n)
    ]


def _random_corpus(seed: int, prefixes: str):
    rng = random.Random(seed)
    lengths = [rng.randint(0, 12) for _ in range(rng.randint(1, 8))]
    gold = [_random_tags(rng, prefixes, n) for n in lengths]
    pred = [_random_tags(rng, prefixes, n) for n in lengths]
    return gold, pred


def _seqeval(gold, pred, scheme=None):
    """seqeval's micro and per-type scores: default mode, or strict mode with ``scheme``."""
    score = precision_recall_fscore_support if scheme is None else strict_prfs
    mode = {} if scheme is None else {"scheme": scheme}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        micro = score(gold, pred, average="micro", **mode)
        per_type = score(gold, pred, average=None, **mode)
    return micro[:3], per_type


def _assert_matches_seqeval(gold, pred, scheme=None):
    ours = entity_scores(gold, pred)
    (p, r, f), (tp, tr, tf, ts) = _seqeval(gold, pred, scheme)
    assert (ours["precision"], ours["recall"], ours["f1"]) == pytest.approx((p, r, f), abs=1e-12)
    assert list(ours["per_type"]) == sorted(ours["per_type"])
    rows = list(ours["per_type"].values())
    assert [x["precision"] for x in rows] == pytest.approx(list(tp), abs=1e-12)
    assert [x["recall"] for x in rows] == pytest.approx(list(tr), abs=1e-12)
    assert [x["f1"] for x in rows] == pytest.approx(list(tf), abs=1e-12)
    assert [x["support"] for x in rows] == list(ts)


@pytest.mark.parametrize("seed", range(150))
def test_random_bio_tags_match_seqeval(seed):
    gold, pred = _random_corpus(seed, "BI")
    _assert_matches_seqeval(gold, pred)
    for sentence in gold:
        assert get_entities(sentence) == seqeval_entities(sentence)


@pytest.mark.parametrize("seed", range(100))
def test_random_iobes_tags_match_seqeval(seed):
    gold, pred = _random_corpus(seed, "BIES")
    _assert_matches_seqeval(gold, pred)


def _valid_iob1(rng: random.Random, n: int) -> tuple[list[str], list[tuple[str, int, int]]]:
    """A well-formed IOB1 sentence and its true chunks."""
    tags, chunks, prev_type = [], [], None
    while len(tags) < n:
        if rng.random() < 0.4:
            tags.append("O")
            prev_type = None
            continue
        kind, length = rng.choice(TYPES), rng.randint(1, 3)
        start = len(tags)
        tags += [f"{'B' if kind == prev_type else 'I'}-{kind}"] + [f"I-{kind}"] * (length - 1)
        chunks.append((kind, start, len(tags) - 1))
        prev_type = kind
    return tags, chunks


@pytest.mark.parametrize("seed", range(60))
def test_iob1_raw_and_converted_agree_with_seqeval(seed):
    rng = random.Random(1000 + seed)
    gold, pred = [], []
    for _ in range(rng.randint(1, 6)):
        n = rng.randint(1, 12)
        tags, chunks = _valid_iob1(rng, n)
        assert get_entities(tags) == chunks
        gold.append(tags)
        pred.append(_valid_iob1(rng, len(tags))[0][: len(tags)])
    gold2, pred2 = [iob1_to_iob2(s) for s in gold], [iob1_to_iob2(s) for s in pred]
    raw, converted = entity_scores(gold, pred), entity_scores(gold2, pred2)
    del raw["accuracy"], converted["accuracy"]  # token accuracy sees the rewritten tags
    assert raw == converted
    _assert_matches_seqeval(gold, pred)
    _assert_matches_seqeval(gold, pred, scheme=IOB1)
    _assert_matches_seqeval(gold2, pred2, scheme=IOB2)


def test_malformed_sequences_conlleval_way():
    # I- after O opens a chunk; I-X after B-Y closes Y and opens X; B-X B-X is two chunks.
    assert get_entities(["O", "I-PER", "I-PER"]) == [("PER", 1, 2)]
    assert get_entities(["B-LOC", "I-PER", "I-PER"]) == [("LOC", 0, 0), ("PER", 1, 2)]
    assert get_entities(["B-PER", "B-PER"]) == [("PER", 0, 0), ("PER", 1, 1)]
    assert get_entities(["I-PER", "B-PER", "I-PER"]) == [("PER", 0, 0), ("PER", 1, 2)]


def test_hand_counted_scores_and_report_fields():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O"]]
    scores = entity_scores(gold, pred)
    assert (scores["num_gold"], scores["num_pred"], scores["num_correct"]) == (3, 3, 2)
    assert scores["f1"] == pytest.approx(2 / 3)
    assert scores["accuracy"] == pytest.approx(5 / 6)
    assert scores["per_type"]["LOC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                         "support": 1, "predicted": 0}
    assert scores["per_type"]["ORG"]["precision"] == 0.5


def test_bad_tags_and_shapes_are_errors():
    with pytest.raises(ValueError, match="unknown tag 'PER'"):
        get_entities(["PER"])
    with pytest.raises(ValueError, match="sentence 0: 2 gold tags but 1 predicted"):
        entity_scores([["O", "O"]], [["O"]])


def test_real_conll_dev_with_corrupted_predictions_matches_seqeval(shared):
    sentences = read_conll(shared("conll2003", "dev.txt"))
    gold = [s.tags for s in sentences]
    rng = random.Random(0)
    pred = [[t if rng.random() < 0.9 else rng.choice(["O", "B-PER", "I-LOC", "I-ORG"]) for t in s]
            for s in gold]
    _assert_matches_seqeval(gold, pred)
    assert entity_scores(gold, gold)["num_gold"] == 5942
