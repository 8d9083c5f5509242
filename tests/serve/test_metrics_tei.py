"""``/metrics`` means what text-embeddings-inference's means: TEI's names (counters without
``_total``), types, labels and label values, counted where TEI counts them (its
``router/src/http/server.rs``, ``core/src/infer.rs``, ``core/src/queue.rs``; docs/serving.md,
"Metrics", has the table)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from bertkit.serve import ServeConfig, create_app  # noqa: E402
from bertkit.serve.errors import ApiError  # noqa: E402
from bertkit.serve.metrics import Metrics, method_of, tei_err  # noqa: E402

from ..task_models import make_task_model  # noqa: E402

# every family TEI registers (metrics::counter!/histogram!/gauge! in its source), by type
TEI = {
    "counter": {"te_request_count", "te_request_success", "te_request_failure", "te_embed_count",
                "te_embed_success", "te_predict_count", "te_predict_success"},
    "histogram": {"te_request_duration", "te_request_tokenization_duration", "te_request_queue_duration",
                  "te_request_inference_duration", "te_request_input_length", "te_batch_next_size",
                  "te_batch_next_tokens", "te_embed_duration", "te_embed_tokenization_duration",
                  "te_embed_queue_duration", "te_embed_inference_duration", "te_predict_duration",
                  "te_predict_tokenization_duration", "te_predict_queue_duration",
                  "te_predict_inference_duration"},
    "gauge": {"te_queue_size"},
}
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")


def samples(client) -> dict[tuple[str, frozenset], float]:
    out = {}
    for line in client.get("/metrics").text.splitlines():
        if line and not line.startswith("#"):
            name, labels, value = SAMPLE.match(line).groups()
            pairs = frozenset(re.findall(r'(\w+)="([^"]*)"', labels or ""))
            out[(name, pairs)] = float(value)
    return out


def value(snapshot, name: str, **labels) -> float:
    return snapshot.get((name, frozenset(labels.items())), 0.0)


def delta(before, after, name: str, **labels) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def served(tmp_path, kind, **options):
    directory = make_task_model(tmp_path, kind)
    return TestClient(create_app(ServeConfig(model=str(directory), **options)))


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    with served(tmp_path_factory.mktemp("metrics"), "mlm", max_items=3, max_queue=4) as client:
        yield client


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    with served(tmp_path_factory.mktemp("metrics"), "classify") as client:
        yield client


def test_the_exposition_has_teis_names_and_types_and_no_total(encoder):
    encoder.post("/embed", json={"inputs": "he is good"})
    text = encoder.get("/metrics").text
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    assert {n: t for n, t in types.items() if n.startswith("te_")} == {
        n: t for t, names in TEI.items() for n in names}
    assert "_total" not in text and "_created" not in text
    for line in ("# TYPE te_request_count counter", 'te_request_count{method="single"} ',
                 'te_request_success{method="single"} ', "te_embed_count ", "te_embed_success ",
                 "te_request_duration_bucket{le=", "te_request_duration_sum ", "te_request_duration_count ",
                 "te_embed_duration_count ", "te_queue_size 0.0", 'te_batch_next_size_bucket{le="4096.0"}'):
        assert line in text, line
    assert not re.search(r"^te_request_(count|success)\{[^}]*route=", text, re.M)  # TEI: method only


def test_a_request_failing_validation_is_counted_before_it(encoder):
    before = samples(encoder)
    assert encoder.post("/embed", json={"inputs": ["a", "b", "c", "d"]}).status_code == 422  # --max-items 3
    assert encoder.post("/embed", json={"inputs": ""}).status_code == 400
    assert encoder.post("/embed", json={"inputs": "good", "dimensions": 0}).status_code == 422
    after = samples(encoder)
    assert delta(before, after, "te_request_count", method="batch") == 1
    assert delta(before, after, "te_request_count", method="single") == 2
    assert delta(before, after, "te_request_failure", err="batch_size") == 1
    assert delta(before, after, "te_request_failure", err="validation") == 2
    assert delta(before, after, "te_request_success", method="batch") == 0
    assert delta(before, after, "te_request_success", method="single") == 0
    assert delta(before, after, "te_embed_count") == 1  # "" reached tokenisation (refused there), no other
    assert delta(before, after, "te_request_duration_count") == 0
    # bertkit's own counter keeps its error kinds
    assert delta(before, after, "bertkit_request_failure", error_type="Empty") == 1


def test_a_text_over_the_limit_and_a_full_queue_have_teis_err(encoder):
    before = samples(encoder)
    long = " ".join(["good"] * 100)  # the model reads 64 tokens
    assert encoder.post("/embed", json={"inputs": long, "truncate": False}).status_code == 413
    assert encoder.post("/embed_all", json={"inputs": [long, "good"], "truncate": False}).status_code == 413
    after = samples(encoder)
    assert delta(before, after, "te_request_failure", err="tokenization") == 2
    assert delta(before, after, "te_request_count", method="single") == 1
    assert delta(before, after, "te_request_count", method="batch") == 1


def test_what_tei_answers_before_its_handler_is_not_counted(encoder):
    before = samples(encoder)
    assert encoder.post("/embed", json={"inputs": 5}).status_code == 422  # ill-typed body
    assert encoder.post("/embed", json={"inputs": [["a"]]}).status_code == 422  # a shape TEI's Input refuses
    assert encoder.post("/embed", content=b"{", headers={"Content-Type": "application/json"}).status_code == 400
    assert encoder.post("/nowhere", json={}).status_code == 404
    after = samples(encoder)
    for name in ("te_request_count", "te_request_failure"):
        assert sum(v for (n, _), v in after.items() if n == name) == sum(
            v for (n, _), v in before.items() if n == name), name
    assert delta(before, after, "bertkit_request_failure", error_type="Validation") == 3
    assert delta(before, after, "bertkit_request_failure", error_type="NotFound") == 1


def test_a_successful_embed_counts_success_per_route_and_per_input(encoder):
    before = samples(encoder)
    answer = encoder.post("/embed", json={"inputs": ["he is good", "she was bad", "day"]})
    assert answer.status_code == 200
    tokens = int(answer.headers["x-compute-tokens"])
    after = samples(encoder)
    assert delta(before, after, "te_request_count", method="batch") == 1
    assert delta(before, after, "te_request_success", method="batch") == 1
    for name in ("te_request_duration", "te_request_tokenization_duration", "te_request_queue_duration",
                 "te_request_inference_duration"):
        assert delta(before, after, f"{name}_count") == 1, name  # one per request
    assert delta(before, after, "te_request_input_length_count") == 3  # one per input
    assert delta(before, after, "te_request_input_length_sum") == tokens
    assert delta(before, after, "te_embed_count") == 3 and delta(before, after, "te_embed_success") == 3
    for name in ("te_embed_duration", "te_embed_tokenization_duration", "te_embed_queue_duration",
                 "te_embed_inference_duration"):
        assert delta(before, after, f"{name}_count") == 3, name
    assert delta(before, after, "te_predict_count") == 0
    # te_batch_next_tokens: the batch's tokens, not padded (TEI's current_tokens)
    assert delta(before, after, "te_batch_next_tokens_sum") == tokens
    assert delta(before, after, "te_batch_next_size_sum") == 3


def test_similarity_is_counted_as_teis_embed_batch(encoder):
    before = samples(encoder)
    assert encoder.post("/similarity", json={"inputs": {"source_sentence": "good", "sentences": []}}
                        ).status_code == 400
    assert encoder.post("/similarity", json={"inputs": {"source_sentence": "good", "sentences": ["bad", "day"]}}
                        ).status_code == 200
    after = samples(encoder)
    assert delta(before, after, "te_request_failure", err="validation") == 1
    assert delta(before, after, "te_request_count", method="batch") == 1  # the empty one: before embed
    assert delta(before, after, "te_request_success", method="batch") == 1
    assert delta(before, after, "te_embed_success") == 3


def test_predict_counts_teis_predict_family_and_model_type(classifier):
    before = samples(classifier)
    assert classifier.post("/predict", json={"inputs": "he is good"}).status_code == 200
    assert classifier.post("/predict", json={"inputs": [["he is good"], ["bad"]]}).status_code == 200
    assert classifier.post("/embed", json={"inputs": "he is good"}).status_code == 424
    after = samples(classifier)
    assert delta(before, after, "te_request_count", method="single") == 2
    assert delta(before, after, "te_request_count", method="batch") == 1
    assert delta(before, after, "te_request_success", method="single") == 1
    assert delta(before, after, "te_request_success", method="batch") == 1
    assert delta(before, after, "te_predict_count") == 3 and delta(before, after, "te_predict_success") == 3
    assert delta(before, after, "te_predict_duration_count") == 3
    assert delta(before, after, "te_request_failure", err="model_type") == 1
    assert delta(before, after, "te_embed_count") == 0


def test_embed_sparse_on_a_model_without_an_mlm_head_counts_no_input(classifier):
    before = samples(classifier)
    assert classifier.post("/embed_sparse", json={"inputs": ["he is good", "day"]}).status_code == 424
    after = samples(classifier)
    assert delta(before, after, "te_request_count", method="batch") == 1  # TEI: before the model check
    assert delta(before, after, "te_request_failure", err="model_type") == 1
    assert delta(before, after, "te_embed_count") == 0  # TEI: after it


def test_rerank_counts_after_teis_two_checks(classifier):
    before = samples(classifier)
    assert classifier.post("/rerank", json={"query": "good", "texts": []}).status_code == 400
    assert classifier.post("/rerank", json={"query": "good", "texts": ["day"]}).status_code == 424  # 2 labels
    after = samples(classifier)
    assert delta(before, after, "te_request_failure", err="validation") == 1
    assert delta(before, after, "te_request_failure", err="model_type") == 1
    assert delta(before, after, "te_request_count", method="batch") == 0  # TEI counts /rerank after both


def test_a_failed_forward_pass_is_teis_inference_failure(classifier, monkeypatch):
    service = classifier.app.state.service

    def broken(key, rows):
        raise RuntimeError("the device fell over")

    monkeypatch.setattr(service.bert, "run_rows", broken)
    before = samples(classifier)
    with pytest.raises(RuntimeError):
        classifier.post("/predict", json={"inputs": "he is good"})
    after = samples(classifier)
    assert delta(before, after, "te_request_failure", err="inference") == 1
    assert delta(before, after, "te_request_count", method="single") == 1
    assert delta(before, after, "te_predict_count") == 1 and delta(before, after, "te_predict_success") == 0


def test_a_request_the_queue_cannot_hold_is_overloaded(tmp_path):
    with served(tmp_path, "mlm", max_queue=2) as client:
        assert client.post("/embed", json={"inputs": ["a", "b", "c"]}).status_code == 413
        assert value(samples(client), "te_request_failure", err="overloaded") == 1


def test_teis_err_and_method_labels():
    assert tei_err(ApiError("x", "Empty")) == "validation"
    assert tei_err(ApiError("x", "Overloaded")) == "overloaded"
    assert tei_err(ApiError("x", "Backend")) == "model_type"
    assert tei_err(ApiError("x", "Tokenizer")) == "tokenization"
    assert tei_err(ApiError("x", "Validation", 413)) == "tokenization"
    assert tei_err(ApiError("x", "NotFound")) is None and tei_err(ApiError("x", "Unhealthy")) is None
    assert [method_of(x) for x in ("a", [1, 2], ["a"], [[1], "b"], 5, [["a"]])] == [
        "single", "single", "batch", "batch", None, None]
    assert [method_of(x, pairs=True) for x in ("a", ["a", "b"], [["a", "b"], ["c"]], ["a", "b", "c"], [], {})] == [
        "single", "single", "batch", None, None, "single"]
    m = Metrics()
    m.failed(ApiError("x", "Empty"))
    assert b'te_request_failure{err="validation"} 1.0' in m.render()
