"""Long texts: window arithmetic, windowed classification / NER / embeddings, bad strides."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from bertkit.errors import BertkitError
from bertkit.tasks import get_task
from bertkit.tasks.formats.base import TextExample
from bertkit.tasks.formats.conll import TaggedSentence
from bertkit.tasks.tagging import featurize_tagging
from bertkit.tasks.windows import (
    LongText,
    check_stride,
    max_context_window,
    pool_rows,
    sliding_windows,
)
from bertkit.tokenizer import BertTokenizer
from tests.finetune_helpers import NOISE, make_model


@pytest.mark.parametrize("n, window, stride", [(0, 5, 2), (1, 5, 2), (5, 5, 2), (6, 5, 2),
                                               (37, 8, 3), (100, 10, 9), (13, 4, 1)])
def test_windows_cover_every_token_and_end_at_the_last(n, window, stride):
    spans = sliding_windows(n, window, stride)
    covered = {t for start, length in spans for t in range(start, start + length)}
    assert covered == set(range(n))
    assert all(length <= window for _, length in spans)
    assert spans[-1][0] + spans[-1][1] == n
    starts = [s for s, _ in spans]
    assert all(b - a == stride for a, b in zip(starts, starts[1:]))
    for t in range(n):  # one max-context window per token, and it holds the token
        w = max_context_window(spans, t)
        assert spans[w][0] <= t < spans[w][0] + spans[w][1]


def test_max_context_prefers_the_centred_window():
    spans = sliding_windows(20, 10, 5)  # (0,10) (5,10) (10,10)
    assert max_context_window(spans, 1) == 0
    assert max_context_window(spans, 9) == 1   # 4 left / 0 right in w0, 4 / 5 in w1
    assert max_context_window(spans, 15) == 2


@pytest.mark.parametrize("stride", [10, 11, 0])
def test_a_stride_not_smaller_than_the_window_names_the_option(stride):
    with pytest.raises(BertkitError, match="--stride"):
        check_stride(10, stride)
    if stride > 0:
        with pytest.raises(BertkitError, match=f"--stride={stride}"):
            LongText("window", stride).spans(30, 10)
    with pytest.raises(BertkitError, match="--stride"):
        LongText("window", -1)


def test_bad_long_text_choices_are_clear_errors():
    with pytest.raises(BertkitError, match="--long-text"):
        LongText("slide")
    with pytest.raises(BertkitError, match="--pool-windows"):
        LongText("window", pool="median")


def test_pool_rows_mean_max_and_single_window_identity():
    rows = [np.array([1.0, 5.0], np.float32), np.array([3.0, -1.0], np.float32),
            np.array([7.0, 7.0], np.float32)]
    mean = pool_rows([0, 0, 1], rows, 2, "mean")
    assert mean[0].tolist() == [2.0, 2.0] and mean[1] is rows[2]
    assert pool_rows([0, 0, 1], rows, 2, "max")[0].tolist() == [3.0, 5.0]


# ------------------------------------------------------------------ tasks
@pytest.fixture
def model_dir(tmp_path):
    return make_model(tmp_path / "m")


@pytest.fixture
def tok(model_dir):
    return BertTokenizer.from_pretrained(model_dir)


def _logits(model, feats):
    from bertkit.inference.features import run_model

    task = get_task("sst2")
    return run_model(task, model, feats, 8)


def test_windowed_classification_of_short_texts_equals_truncation(model_dir, tok):
    rng = random.Random(0)
    examples = [TextExample(str(i), " ".join(rng.choice(NOISE) for _ in range(rng.randint(1, 20))),
                            None, "1", i) for i in range(12)]
    plain = get_task("sst2")
    windowed = get_task("sst2", long_text="window", stride=4)
    torch.manual_seed(0)
    model = plain.build_model(model_dir)
    f_plain = plain.featurize(examples, tok, 32)
    f_win = windowed.featurize(examples, tok, 32)
    assert len(f_win) == len(f_plain) == 12
    out_plain, out_win = _logits(model, f_plain), _logits(model, f_win)
    assert np.array_equal(plain.example_logits(f_plain, out_plain),
                          windowed.example_logits(f_win, out_win))
    assert plain.predict(examples, f_plain, out_plain) == windowed.predict(examples, f_win, out_win)


def test_windowed_classification_covers_a_long_text_and_pools(model_dir, tok):
    words = [NOISE[i % len(NOISE)] for i in range(70)]
    ex = TextExample("0", " ".join(words), None, "1", 1)
    task = get_task("sst2", long_text="window", stride=10, pool_windows="max")
    feats = task.featurize([ex], tok, 32)
    pieces = tok.text_to_ids(ex.text_a)
    assert len(feats) == len(sliding_windows(len(pieces), 30, 10)) > 1
    seen = set()
    for f in feats.features:
        ids = f["input_ids"].tolist()
        assert len(ids) <= 32 and ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
        seen.add(tuple(ids[1:-1]))
    rebuilt = {p for window in seen for p in window}
    assert rebuilt == set(pieces) and feats.num_truncated == 0
    model = task.build_model(model_dir)
    outputs = _logits(model, feats)
    pooled = task.example_logits(feats, outputs)
    assert pooled.shape == (1, 2)
    assert np.allclose(pooled[0], np.max(np.stack(outputs["logits"]), axis=0))
    # truncation of the same text: one feature, counted as truncated
    assert get_task("sst2").featurize([ex], tok, 32).num_truncated == 1


def test_windowed_pairs_repeat_the_second_text(tok):
    task = get_task("mrpc", long_text="window", stride=8)
    ex = TextExample("0", " ".join(NOISE * 3), "the man went", "1", 1)
    feats = task.featurize([ex], tok, 24)
    second = tok.text_to_ids("the man went")
    for f in feats.features:
        ids, types = f["input_ids"].tolist(), f["token_type_ids"].tolist()
        assert len(ids) <= 24 and ids[-len(second) - 1:-1] == second
        assert types.count(1) == len(second) + 1


@pytest.mark.parametrize("options, pair", [({}, None), ({}, "the man went to the store"),
                                           ({"long_text": "window", "stride": 8}, None),
                                           ({"long_text": "window", "stride": 8}, " ".join(NOISE))])
def test_a_raw_input_plans_the_rows_its_features_hold(tok, options, pair):
    """``TextTask.plan`` (one raw input: the server, ``predict``) gives the rows ``featurize``
    (training, evaluation) gives the same example, and says it truncated exactly when the
    features lost tokens: a long text cut, or in window mode a long pair's second text."""
    from bertkit.errors import InputError
    from bertkit.tasks.base import PlanContext

    task = get_task("mrpc", **options)
    text = " ".join(NOISE * 3)
    feats = task.featurize([TextExample("0", text, pair, None)], tok, 24)
    plan = task.plan([text, pair] if pair else text, PlanContext(tok, 24, task.labels))
    assert [(r.input_ids, r.token_type_ids) for r in plan.rows] == [
        (f["input_ids"].tolist(), f["token_type_ids"].tolist()) for f in feats.features]
    cut = not options or len(tok.text_to_ids(pair or "")) > 10  # a window holds 21 pieces
    assert plan.truncated == cut == bool(feats.num_truncated)
    if cut:
        with pytest.raises(InputError, match="longer than the model's limit"):
            task.plan([text, pair] if pair else text, PlanContext(tok, 24, task.labels, on_overflow="error"))


def test_glue_refuses_other_options():
    with pytest.raises(BertkitError, match="no options"):
        get_task("sst2", columns="x")


def test_windowed_tagging_labels_every_word_and_predicts_each_once(tok):
    words = [NOISE[i % len(NOISE)] for i in range(45)] + ["unwanted"] + ["he"] * 10
    tags = ["O"] * len(words)
    label2id = {"O": 0, "B-PER": 1}
    fs = featurize_tagging(tok, [words], [tags], label2id, max_seq_length=16,
                           long_sentences="window", stride=6)
    assert len(fs) > 1
    predicted = [w for m in fs.meta for w in m.word_index if w >= 0]
    assert sorted(predicted) == list(range(len(words)))  # each word from one window
    for f, m in zip(fs.features, fs.meta):
        assert len(f["input_ids"]) <= 16
        labelled = [i for i, lab in enumerate(f["labels"].tolist()) if lab != -100]
        assert set(i for i, w in enumerate(m.word_index) if w >= 0) <= set(labelled)


def test_windowed_tagging_of_a_short_sentence_equals_the_plain_features(tok):
    words, tags = ["the", "unwanted", "man"], ["O", "B-PER", "O"]
    label2id = {"O": 0, "B-PER": 1}
    plain = featurize_tagging(tok, [words], [tags], label2id, 16)
    win = featurize_tagging(tok, [words], [tags], label2id, 16, "window", 4)
    assert len(win) == 1
    for key in plain.features[0]:
        assert np.array_equal(plain.features[0][key], win.features[0][key])
    assert plain.meta[0].word_index == win.meta[0].word_index


def test_ner_long_text_option_and_bad_stride(tok):
    task = get_task("ner", long_text="window", stride=40)
    sentence = TaggedSentence(["he"] * 60, ["B-PER"] * 60, 1)
    with pytest.raises(BertkitError, match="--stride=40"):
        task.featurize([sentence], tok, 32)
    assert get_task("ner", long_text="window").long_sentences == "window"


# ------------------------------------------------------------------ embeddings
def test_windowed_embeddings_of_short_texts_equal_the_plain_ones(model_dir):
    from bertkit.inference import load

    bert = load(model_dir)
    texts = ["the man went to the store", "hello world", "a quick day"]
    win = LongText("window", 3)
    for pool in ("cls", "mean"):
        assert np.array_equal(bert.embed(texts, pool=pool, max_length=16),
                              bert.embed(texts, pool=pool, max_length=16, long_text=win))
    plain_rows = bert.embed(texts, pool="none", max_length=16)
    win_rows, tokens = bert.embed(texts, pool="none", max_length=16, long_text=win,
                                  return_tokens=True)
    for a, b in zip(plain_rows, win_rows):
        assert np.array_equal(a, b)
    assert tokens[1] == ["[CLS]", "hello", "world", "[SEP]"]


def test_windowed_embeddings_of_a_long_text(model_dir):
    from bertkit.inference import load

    bert = load(model_dir)
    text = " ".join(NOISE * 4)  # 64 pieces
    rows, tokens = bert.embed([text], pool="none", max_length=16, long_text=LongText("window", 7),
                              return_tokens=True)
    assert rows[0].shape == (66, 32) and len(tokens[0]) == 66
    vec = bert.embed(text, pool="cls", max_length=16, long_text=LongText("window", 7))
    assert vec.shape == (32,) and np.isfinite(vec).all()
    # a piece's row is the one its max-context window gives it
    pieces = bert.tokenizer.text_to_ids(text)
    spans = sliding_windows(len(pieces), 14, 7)
    w = max_context_window(spans, 20)
    start, length = spans[w]
    ids = [bert.tokenizer.cls_token_id, *pieces[start:start + length], bert.tokenizer.sep_token_id]
    with torch.inference_mode():
        alone = bert.features(torch.tensor([ids]), torch.zeros(1, len(ids), dtype=torch.long),
                              torch.ones(1, len(ids), dtype=torch.long), [-1], "concat")[0]
    assert np.allclose(rows[0][1 + 20], alone[1 + 20 - start].numpy(), atol=1e-6)
    with pytest.raises(BertkitError, match="pairs"):
        bert.embed([text], ["x"], long_text=LongText("window", 7))


def test_cli_flags_become_saved_task_options(model_dir, tmp_path):
    from bertkit.cli.main import build_parser
    from bertkit.tasks.task_options import task_options_from as task_options

    args = build_parser().parse_args(["evaluate", "sst2", "--model", "m", "--data", "d",
                                      "--long-text", "window", "--stride", "12",
                                      "--pool-windows", "max"])
    assert task_options(args, {"long_text": "truncate"}) == {
        "long_text": "window", "stride": 12, "pool_windows": "max"}
    task = get_task("sst2", **task_options(args))
    assert task.long_text == LongText("window", 12, "max")
    assert task.config_entries()["bertkit_finetune"]["options"]["stride"] == 12


def test_embed_cli_windows_a_long_input(model_dir, tmp_path):
    from bertkit.cli.main import main

    (tmp_path / "in.txt").write_text(" ".join(NOISE * 4) + "\nhello world\n", encoding="utf-8")
    out = tmp_path / "out.npy"
    assert main(["embed", str(model_dir), "--input", str(tmp_path / "in.txt"), "--output", str(out),
                 "--max-length", "16", "--long-text", "window", "--stride", "5"]) == 0
    assert np.load(out).shape == (2, 32)
    assert main(["embed", str(model_dir), "--input", str(tmp_path / "in.txt"), "--output", str(out),
                 "--max-length", "16", "--long-text", "window", "--stride", "14"]) == 1


@pytest.mark.parametrize("command", ["predict", "evaluate", "distill"])
def test_a_stride_not_smaller_than_the_window_is_a_clear_cli_error(command, tmp_path, capsys):
    """Every command with --long-text window names --stride (and the window) when the stride
    does not fit, instead of failing later or silently skipping tokens."""
    import json

    from bertkit.cli.main import main
    from tests.finetune_helpers import write_sst2
    from tests.task_models import make_task_model

    model = make_task_model(tmp_path, "sst2")  # fine-tuned at max_seq_length 48: windows of 46
    data = write_sst2(tmp_path / "data")
    (tmp_path / "in.jsonl").write_text(json.dumps({"text": "the man went"}) + "\n")
    args = {"predict": ["--model", str(model), "--input", str(tmp_path / "in.jsonl"),
                        "--output", str(tmp_path / "out.jsonl")],
            "evaluate": ["--model", str(model), "--data", str(data)],
            "distill": ["--teacher", str(model), "--student-layers", "1", "--data", str(data),
                        "--out", str(tmp_path / "d"), "--max-seq-length", "48"]}[command]
    assert main([command, "sst2", *args, "--long-text", "window", "--stride", "46", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "--stride=46 must be at least 1 and smaller than the window of 46 tokens" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("task_name, options, item", [
    ("ner", {"long_sentences": "truncate"}, " ".join(NOISE * 3)),
    ("squad", {"max_query_length": 8, "doc_stride": 4},
     {"question": "where did he go", "context": " ".join(NOISE * 3)}),
    ("swag", {}, {"context": " ".join(NOISE * 3), "choices": ["he left", "she stayed"]}),
])
def test_planning_a_long_input_leaves_the_warning_filters_alone(tok, monkeypatch, recwarn, task_name,
                                                               options, item):
    """A server plans long inputs in another thread than the event loop: planning must not
    change the process-wide warning filters (``warnings.catch_warnings``, which two threads
    interleaved leave changed) and must warn nothing (the answer says ``truncated``)."""
    import warnings

    from bertkit.tasks.base import PlanContext

    def process_wide(*args, **kwargs):
        raise AssertionError("warnings.catch_warnings on a plan's path")

    task = get_task(task_name, **options)
    labels = task.labels or ["0", "1"]
    with monkeypatch.context() as patched:
        patched.setattr(warnings, "catch_warnings", process_wide)
        plan = task.plan(item, PlanContext(tok, 24, labels))
    assert plan.rows and all(len(r.input_ids) <= 24 for r in plan.rows)
    assert task_name == "squad" or plan.truncated  # SQuAD windows a long context: nothing is cut
    assert not recwarn.list
