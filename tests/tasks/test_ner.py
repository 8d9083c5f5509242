"""NER / token classification: label alignment, long sentences, IOB1 input, a toy run."""

from __future__ import annotations

import numpy as np
import pytest

from bertkit.tasks.tagging import featurize_tagging, label_list, word_predictions
from bertkit.tokenizer import BertTokenizer

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
    assert (fs.features[0]["labels"] == -100).all()
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
