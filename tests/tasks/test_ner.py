"""NER / token classification: label alignment, long sentences, IOB1 input, a toy run."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from bertkit.cpu import torch_threads
from bertkit.finetuning.config import FinetuneConfig
from bertkit.finetuning.loop import finetune
from bertkit.runlog import RunLogger
from bertkit.tasks import get_task
from bertkit.tasks.tagging import featurize_tagging, label_list, word_predictions
from bertkit.tokenizer import BertTokenizer
from tests.finetune_helpers import make_model

# toy NER: he/she are persons, store/cafe locations, "hello world" an organisation
ENTITIES = [(["he"], "PER"), (["she"], "PER"), (["store"], "LOC"), (["cafe"], "LOC"),
            (["hello", "world"], "ORG")]
FILLER = ["the", "man", "went", "to", "a", "is", "was", "day", "night", "quick"]

LABELS = ["O", "B-PER", "I-PER", "B-LOC"]
L2I = {t: i for i, t in enumerate(LABELS)}


@pytest.fixture
def tok(tiny_vocab_file):
    return BertTokenizer.from_file(tiny_vocab_file)


def test_label_on_first_subtoken_only(tok):
    words = ["the", "unwanted", "man", "running"]
    tags = ["O", "B-PER", "I-PER", "B-LOC"]
    fs = featurize_tagging(tok, [words], [tags], L2I, max_seq_length=32)
    [feature], [meta] = fs.features, fs.meta
    pieces = tok.convert_ids_to_tokens(feature["input_ids"].tolist())
    assert pieces == ["[CLS]", "the", "un", "##want", "##ed", "man", "runn", "##ing", "[SEP]"]
    assert feature["labels"].tolist() == [-100, 0, 1, -100, -100, 2, 3, -100, -100]
    assert meta.word_index == [-1, 0, 1, -1, -1, 2, 3, -1, -1]
    assert feature["attention_mask"].tolist() == [1] * 9


def test_predictions_map_back_to_words_from_first_subtoken(tok):
    words = ["the", "unwanted", "man"]
    fs = featurize_tagging(tok, [words], None, None, max_seq_length=32)
    assert "labels" not in fs.features[0]
    # per-position predictions: only first sub-tokens (1, 2, 5) matter
    predicted = np.array([3, 0, 1, 3, 3, 2, 3])
    assert word_predictions(fs.meta, [predicted], [3], LABELS) == [["O", "B-PER", "I-PER"]]


def test_word_without_pieces_is_predicted_o(tok):
    fs = featurize_tagging(tok, [["the", "\u200b", "man"]], [["B-PER", "B-LOC", "O"]], L2I,
                           max_seq_length=16)
    assert fs.meta[0].word_index == [-1, 0, 2, -1]
    assert word_predictions(fs.meta, [[0, 1, 1, 0]], [3], LABELS) == [["B-PER", "O", "B-PER"]]


def test_long_sentence_is_split_into_windows_with_a_warning(tok):
    words = ["the", "unwanted", "man", "running", "to", "the", "store"]
    tags = ["O", "B-PER", "I-PER", "O", "O", "O", "B-LOC"]
    with pytest.warns(UserWarning, match="1 sentence.*split into windows"):
        fs = featurize_tagging(tok, [words, ["he"]], [tags, ["O"]], L2I, max_seq_length=6)
    assert all(len(f["input_ids"]) <= 6 for f in fs.features)
    assert [m.sentence for m in fs.meta] == [0, 0, 0, 1]
    seen = [w for m in fs.meta if m.sentence == 0 for w in m.word_index if w >= 0]
    assert seen == list(range(7))  # every word exactly once, in order
    assert fs.num_truncated == 0
    # perfect per-position predictions come back as the gold tags
    predicted = [np.where(f["labels"] < 0, 0, f["labels"]) for f in fs.features]
    assert word_predictions(fs.meta, predicted, [7, 1], LABELS) == [tags, ["O"]]


def test_long_sentence_truncate_mode_warns_and_counts(tok):
    words = ["the", "man", "went", "to", "the", "store"]
    with pytest.warns(UserWarning, match="truncated"):
        fs = featurize_tagging(tok, [words], [["O"] * 6], L2I, max_seq_length=5,
                               long_sentences="truncate")
    assert len(fs) == 1 and fs.num_truncated == 1
    assert word_predictions(fs.meta, [[1] * 5], [6], LABELS) == [["B-PER"] * 3 + ["O"] * 3]


def test_unknown_tag_and_bad_mode_are_errors(tok):
    with pytest.raises(ValueError, match="'B-XYZ' is not among the labels"):
        featurize_tagging(tok, [["the"]], [["B-XYZ"]], L2I)
    with pytest.raises(ValueError, match="long_sentences"):
        featurize_tagging(tok, [["the"]], None, None, long_sentences="drop")


def test_label_list_puts_o_first():
    assert label_list([["B-PER", "O"], ["I-LOC", "B-LOC"]]) == ["O", "B-LOC", "B-PER", "I-LOC"]


def one_thread():
    """Toy runs on one torch thread: tiny ops gain nothing from more, and on a shared
    machine extra threads only wait for each other (results are the same)."""
    return torch_threads(1)


def toy_conll_sentence(rng: random.Random) -> list[tuple[str, str]]:
    """(word, IOB1 tag) pairs: filler words with one or two entities (IOB1: I- opens a chunk)."""
    rows = [(rng.choice(FILLER), "O") for _ in range(rng.randint(2, 6))]
    for _ in range(rng.randint(1, 2)):
        words, kind = rng.choice(ENTITIES)
        at = rng.randint(0, len(rows))
        rows[at:at] = [(w, f"I-{kind}") for w in words]
    return rows


def write_toy_conll(directory, sizes=(("train.txt", 160, 1), ("dev.txt", 48, 2), ("test.txt", 48, 3))):
    """CoNLL-2003 layout: -DOCSTART-, ``word POS chunk tag`` rows, IOB1 tags."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, n, seed in sizes:
        rng = random.Random(seed)
        lines = ["-DOCSTART- -X- -X- O", ""]
        for _ in range(n):
            lines += [f"{w} NN I-NP {t}" for w, t in toy_conll_sentence(rng)] + [""]
        (directory / name).write_text("\n".join(lines), encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def ner_run(tmp_path_factory):
    model_dir = make_model(tmp_path_factory.mktemp("model"))
    data = write_toy_conll(tmp_path_factory.mktemp("conll"))
    out = tmp_path_factory.mktemp("out")
    cfg = FinetuneConfig(lr=3e-3, batch=16, epochs=4, max_seq_length=32, progress=False,
                         log_every=1000)
    task = get_task("conll2003")
    with one_thread():
        runs, best = finetune(task, model_dir, data, out, cfg,
                              logger=RunLogger(out / "log.jsonl", echo=False))
    return task, data, out, best


def test_toy_ner_run_learns_entities_from_iob1_files(ner_run):
    task, data, out, best = ner_run
    assert task.for_data(data).eval_splits() == ("dev", "test")  # the run scored test too
    assert best.metrics["f1"] > 0.7 and best.metrics["test.f1"] > 0.7
    records = [json.loads(line) for line in (out / "predictions_dev.jsonl").read_text().splitlines()]
    gold = task.read(data, "dev")
    assert len(records) == len(gold)
    assert all(len(r["tags"]) == len(g.words) == len(r["tokens"]) for r, g in zip(records, gold))
    assert any("B-ORG" in r["tags"] and "I-ORG" in r["tags"] for r in records)
    # the files are IOB1 (no B- at all); read as IOB2, every chunk opens with B-
    assert "B-" not in (data / "dev.txt").read_text()
    for g in gold:
        for prev, tag in zip(["O", *g.tags], g.tags):
            assert not tag.startswith("I-") or prev[2:] == tag[2:]


def test_saved_ner_model_reloads_with_same_scores(ner_run, tmp_path):
    from bertkit.finetuning.evaluate import evaluate_sets, load_eval_sets

    task, data, out, best = ner_run
    fresh = get_task("conll2003")
    model = fresh.build_model(out)
    tok = BertTokenizer.from_pretrained(out)
    metrics, _ = evaluate_sets(fresh, model, load_eval_sets(fresh, data, tok, 32, ["dev"]), 16)
    assert metrics["f1"] == pytest.approx(best.metrics["f1"])


def test_real_conll_dev_every_word_gets_one_label(shared):
    from bertkit.tasks.formats import read_conll

    tokenizer = BertTokenizer.from_pretrained(shared("models", "bert-tiny-splade"))
    sentences = read_conll(shared("conll2003", "dev.txt"), to_iob2=True)[:1000]
    l2i = {t: i for i, t in enumerate(label_list([s.tags for s in sentences]))}
    fs = featurize_tagging(tokenizer, [s.words for s in sentences], [s.tags for s in sentences],
                           l2i, max_seq_length=128)
    gold_ids = [np.where(f["labels"] < 0, 0, f["labels"]) for f in fs.features]
    back = word_predictions(fs.meta, gold_ids, [len(s.words) for s in sentences], list(l2i))
    assert back == [s.tags for s in sentences]


def test_tasks_are_not_changed_by_reading(tmp_path):
    """Labels and the test split come from for_data (a new task); reading changes nothing."""
    from bertkit.tasks import get_task

    rows = [{"tokens": ["a", "b"], "tags": ["X", "Y"]}, {"tokens": ["c"], "tags": ["Z"]}]
    for split in ("train", "dev", "test"):
        (tmp_path / f"{split}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    task = get_task("token-classification")
    task.read(tmp_path, "train")
    assert task.labels is None and task.options == {} and task.eval_splits() == ("dev",)
    ready = task.for_data(tmp_path)
    assert ready is not task and ready.labels == ["X", "Y", "Z"]
    assert ready.options == {"labels": ["X", "Y", "Z"]} and ready.eval_splits() == ("dev", "test")
    assert ready.for_data(tmp_path) is ready
    conll = get_task("ner")
    assert conll.for_data(tmp_path / "nowhere") is conll
