"""Raw-text task predictions (the API behind ``/predict``): answers equal a direct forward pass,
do not depend on batching, and carry correct character offsets."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from bertkit.errors import InputError
from bertkit.inference import load
from bertkit.inference.heads import cheapest_cuts, token_batches
from bertkit.tasks.tagging import group_entities
from tests.task_models import make_task_model

TEXTS = ["the man went to the store .", "he is good", "she was bad , the night was good !",
         "hello world", "a quick day , the man was running !"]


def direct_logits(bert, text, pair=None):
    enc = bert.tokenizer.encode(text, pair)
    with torch.no_grad():
        out = bert.model(torch.tensor([enc.input_ids]), torch.tensor([enc.token_type_ids]))
    return out


def test_classification_answers_match_a_direct_forward_pass(tmp_path):
    bert = load(make_task_model(tmp_path, "classify"))
    answers = bert.predict(TEXTS, max_batch_tokens=20)  # several small batches
    for text, answer in zip(TEXTS, answers):
        probs = direct_logits(bert, text).logits[0].softmax(-1).numpy()
        assert [a["label"] for a in answer] == [bert.labels[i] for i in np.argsort(-probs)]
        assert [a["score"] for a in answer] == pytest.approx(sorted(probs, reverse=True), abs=1e-5)
    single = bert.predict(TEXTS[0])  # a single input gives a single answer
    assert [a["label"] for a in single] == [a["label"] for a in answers[0]]
    assert [a["score"] for a in single] == pytest.approx([a["score"] for a in answers[0]], abs=1e-6)


def test_answers_do_not_depend_on_order_or_batching(tmp_path):
    bert = load(make_task_model(tmp_path, "classify"))
    reference = bert.predict(TEXTS)
    order = list(range(len(TEXTS)))
    random.Random(1).shuffle(order)
    shuffled = bert.predict([TEXTS[i] for i in order], max_batch_size=2)
    for position, i in enumerate(order):
        assert [a["label"] for a in shuffled[position]] == [a["label"] for a in reference[i]]
        assert [a["score"] for a in shuffled[position]] == pytest.approx([a["score"] for a in reference[i]], abs=1e-5)


def test_pair_and_regression_models(tmp_path):
    pair = load(make_task_model(tmp_path, "pair"))
    assert pair.pair_inputs
    one = pair.predict(["the man went", "he went"])  # one pair
    assert len(one) == 2 and {a["label"] for a in one} == {"not_equivalent", "equivalent"}  # MRPC's names, also for a dir saved with 0/1
    probs = direct_logits(pair, "the man went", "he went").logits[0].softmax(-1)
    assert one[0]["score"] == pytest.approx(probs.max().item(), abs=1e-5)
    many = pair.predict([["the man went", "he went"], ["a day", "a night"]])
    assert len(many) == 2 and many[0][0]["score"] == pytest.approx(one[0]["score"], abs=1e-6)
    reg = load(make_task_model(tmp_path, "regression"))
    value = reg.predict(["a good day", "a bad night"])
    assert value[0]["label"] == "LABEL_0"
    assert value[0]["score"] == pytest.approx(direct_logits(reg, "a good day", "a bad night").logits.item(), abs=1e-5)


def test_group_entities_bio_runs_and_offsets():
    text = "John Smith went to New York today"
    spans = [(0, 4), (5, 10), (11, 15), (16, 18), (19, 22), (23, 27), (28, 33)]
    tags = ["B-PER", "I-PER", "O", "O", "B-LOC", "I-LOC", "I-PER"]
    entities = group_entities(text, spans, tags, [0.9, 0.7, 0.9, 0.9, 0.8, 0.6, 0.5])
    assert [(e["entity_group"], e["word"], e["start"], e["end"]) for e in entities] == [
        ("PER", "John Smith", 0, 10), ("LOC", "New York", 19, 27), ("PER", "today", 28, 33)]
    assert entities[0]["score"] == pytest.approx(0.8)


def test_token_classification_offsets_point_into_the_text(tmp_path):
    bert = load(make_task_model(tmp_path, "tagging"))
    text = "Hello   world, the man went to the cafe!"
    entities = bert.predict(text)
    assert entities, "random weights tag something"
    for e in entities:
        assert text[e["start"]:e["end"]] == e["word"] and e["entity_group"] in ("PER", "LOC")
        assert 0 < e["score"] <= 1
    # the tag of a word is the argmax of its first wordpiece
    enc = bert.tokenizer.encode(["Hello", "world", ",", "the", "man", "went", "to", "the", "cafe", "!"])
    with torch.no_grad():
        tags = bert.model(torch.tensor([enc.input_ids])).logits[0].argmax(-1).tolist()
    first = tags[1]  # "hello" is one wordpiece right after [CLS]
    starts_hello = [e for e in entities if e["start"] == 0]
    assert (bert.labels[first] == "O") == (not starts_hello)


def test_question_answering_span_and_no_answer(tmp_path):
    bert = load(make_task_model(tmp_path, "qa"))
    context = "the man went to the store . she was good"
    answer = bert.predict({"question": "who went ?", "context": context})
    assert answer["answer"] and context[answer["start"]:answer["end"]] == answer["answer"]
    assert 0 < answer["score"] <= 1
    squad2 = load(make_task_model(tmp_path, "squad2"))
    assert squad2.family().version_2 and not bert.family().version_2
    real = squad2.predict({"question": "who went ?", "context": context})
    assert real["answer"] == answer["answer"]  # same weights (seed): the span wins here
    run_rows = squad2.run_rows

    def cls_wins(key, rows):  # the model's outputs with [CLS] (no answer) made the best span
        return [(s + np.eye(len(s))[0] * 100, e + np.eye(len(e))[0] * 100) for s, e in run_rows(key, rows)]

    squad2.run_rows = cls_wins
    none = squad2.predict({"question": "who went ?", "context": context})
    assert (none["answer"], none["start"], none["end"]) == ("", 0, 0) and none["score"] > 0.99
    bert.run_rows = cls_wins  # a SQuAD 1.1 model always answers with a span
    assert bert.predict({"question": "who went ?", "context": context})["answer"]


def test_multiple_choice_scores_every_choice(tmp_path):
    bert = load(make_task_model(tmp_path, "choice"))
    choices = ["went to the store", "was good", "is bad"]
    answer = bert.predict({"context": "the man", "choices": choices})
    assert sorted(a["index"] for a in answer) == [0, 1, 2]
    assert sum(a["score"] for a in answer) == pytest.approx(1.0)
    rows = [bert.tokenizer.encode("the man", c) for c in choices]
    with torch.no_grad():
        scores = [bert.model(torch.tensor([[r.input_ids]]), torch.tensor([[r.token_type_ids]])).logits.item()
                  for r in rows]
    assert answer[0]["index"] == int(np.argmax(scores)) and answer[0]["label"] == choices[answer[0]["index"]]


def test_fill_mask_and_embed_plans_match_the_existing_api(tmp_path):
    bert = load(make_task_model(tmp_path, "mlm"))
    plans = [bert.plan_fill_mask("the [MASK] went to the [MASK] .", top_k=3), bert.plan_fill_mask("he [MASK]", 3),
             bert.plan_embed("the man went", pool="mean"), bert.plan_embed("he is good", layers=(-1, -2))]
    masks, single, mean, cls = bert.run_plans(plans)
    reference = bert.fill_mask(["the [MASK] went to the [MASK] .", "he [MASK]"], top_k=3)
    assert [[c["token"] for c in m] for m in masks] == [[c["token"] for c in m] for m in reference[0]]
    assert [c["token"] for c in single] == [c["token"] for c in reference[1][0]]
    assert single[0]["sequence"] == "he " + single[0]["token_str"]
    assert np.allclose(mean, bert.embed("the man went", pool="mean"), atol=1e-5)
    assert np.allclose(cls, bert.embed("he is good", layers=(-1, -2)), atol=1e-5)


def test_bad_inputs_are_input_errors(tmp_path):
    bert = load(make_task_model(tmp_path, "classify"))
    for bad, message in [("", "empty"), (3, "must be a string"), ({"question": "q"}, "string")]:
        with pytest.raises(InputError, match=message):
            bert.predict(bad)
    with pytest.raises(InputError, match="no masked-LM head"):
        bert.plan_fill_mask("the [MASK]")
    with pytest.raises(InputError, match="limit of 64"):
        bert.plan_predict(" ".join(["the"] * 100), on_overflow="error")
    assert bert.plan_predict(" ".join(["the"] * 100)).truncated
    mlm = load(make_task_model(tmp_path, "mlm"))
    with pytest.raises(InputError, match="no task head"):
        mlm.predict("the man")
    with pytest.raises(InputError, match="no \\[MASK\\]"):
        mlm.plan_fill_mask("the man")
    with pytest.raises(InputError, match="layers"):
        mlm.plan_embed("the man", layers=(7,))


def test_token_batches_respect_the_budget():
    lengths = [9, 8, 8, 5, 3, 3, 2, 30]
    batches = token_batches(sorted(lengths, reverse=True), lambda n: n, 24, 3)
    assert sorted(n for b in batches for n in b) == sorted(lengths)
    assert batches[0] == [30]  # longer than the budget: alone
    assert all(len(b) <= 3 and (len(b) == 1 or len(b) * max(b) <= 24) for b in batches)


def test_cheapest_cuts_trade_padding_against_the_cost_of_a_pass():
    lengths = [50, 12, 11, 10, 4, 4]
    assert cheapest_cuts(lengths, 10_000) == [(0, 6)]  # a pass dearer than any padding: one batch
    assert cheapest_cuts(lengths, 0) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 6)]  # one per length
    # 40: 50 | 12 12 12 12 12 costs 50 + 60 + 80 = 190 against 300 + 40 whole, 190 is the least
    assert cheapest_cuts(lengths, 40) == [(0, 1), (1, 6)]
    assert cheapest_cuts([], 5) == []


def test_cheapest_cuts_are_the_cheapest_of_every_cut():
    import itertools
    import random

    rng = random.Random(0)
    for _ in range(200):
        lengths = sorted((rng.randint(2, 60) for _ in range(rng.randint(1, 7))), reverse=True)
        pass_tokens = rng.choice([0, 5, 30, 200])
        n = len(lengths)

        def cost(cuts, lengths=lengths, pass_tokens=pass_tokens):
            return sum((j - i) * lengths[i] + pass_tokens for i, j in cuts)

        every = []
        for k in range(n):
            for inner in itertools.combinations(range(1, n), k):
                bounds = [0, *inner, n]
                every.append(list(zip(bounds, bounds[1:])))
        got = cheapest_cuts(lengths, pass_tokens)
        assert [i for i, _ in got] == [0, *(j for _, j in got[:-1])] and got[-1][1] == n  # covers every row
        assert cost(got) == min(cost(c) for c in every)


def test_a_pair_sent_to_a_single_sentence_model_is_refused(tmp_path):
    """Report case 14: a pair to the SST-2 model was scored as an input it never saw."""
    sst2 = load(make_task_model(tmp_path, "sst2"))
    with pytest.raises(InputError, match="fine-tuned on single texts"):
        sst2.predict([["a fine film", "a dull one"]])  # a list holding one pair
    assert len(sst2.predict(["a fine film", "a dull one"])) == 2  # two texts, as before
    pair = load(make_task_model(tmp_path, "pair"))
    assert len(pair.predict(["the man went", "he went"])) == 2  # a pair model takes pairs


@pytest.mark.parametrize("kind", ["classify", "mlm", "choice"])
def test_classifier_rows_and_cls_embeddings_run_the_last_layer_at_cls_only(tmp_path, monkeypatch, kind):
    from bertkit.model import sparse_last_layer
    from bertkit.model.sparse_last_layer import encode_at_positions

    bert = load(make_task_model(tmp_path, kind))
    texts = [" ".join(TEXTS)] * 2 + TEXTS  # a batch with 48 positions besides the [CLS]s

    def answers():
        if kind == "mlm":
            return np.array(bert.embed(texts, pool="cls"))
        if kind == "choice":  # each choice a row of its own, scored by its [CLS]
            answer = bert.predict({"context": TEXTS[0], "choices": texts})
            return np.array([a["score"] for a in sorted(answer, key=lambda a: a["index"])])
        return np.array([[a["score"] for a in answer] for answer in bert.predict(texts)])

    calls = []  # every head reads [CLS] through sparse_last_layer.encode_cls
    monkeypatch.setattr(sparse_last_layer, "encode_at_positions",
                        lambda *args: calls.append(1) or encode_at_positions(*args))
    at_cls = answers()
    assert calls
    monkeypatch.setattr(sparse_last_layer, "cls_pays", lambda *args: False)
    np.testing.assert_allclose(at_cls, answers(), atol=1e-5)


@pytest.mark.parametrize("budget", [1, 12, 10_000])
def test_sparse_vectors_alike_whatever_rows_the_head_takes_at_once(tmp_path, monkeypatch, budget):
    """The masked-LM head runs on several rows' real tokens at once (up to a token budget, a
    longer row alone): every text's SPLADE terms are those of its own row run alone."""
    from bertkit.inference import heads

    bert = load(make_task_model(tmp_path, "mlm"))
    texts = TEXTS + [" ".join(TEXTS), "he"]
    alone = [bert.embed_sparse(t) for t in texts]
    monkeypatch.setattr(heads, "SPARSE_HEAD_TOKENS", budget)
    for got, want in zip(bert.embed_sparse(texts), alone):
        assert [t["index"] for t in got] == [t["index"] for t in want]
        np.testing.assert_allclose([t["value"] for t in got], [t["value"] for t in want], atol=1e-5)
