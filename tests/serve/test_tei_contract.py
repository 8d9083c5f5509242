"""text-embeddings-inference's contract, route by route: TEI's documented request bodies (its
README and docs/openapi.json examples), its answer shapes, headers, status codes and
``error_type`` values; answers compared with the Python API's."""

from __future__ import annotations

import base64
import threading

import numpy as np
import pytest
import torch

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from bertkit.inference import load  # noqa: E402
from bertkit.serve import ServeConfig, create_app  # noqa: E402
from bertkit.serve.app import Service  # noqa: E402

from ..task_models import make_task_model  # noqa: E402

TIMING = ("x-compute-time", "x-compute-characters", "x-compute-tokens", "x-total-time",
          "x-tokenization-time", "x-queue-time", "x-inference-time")
TEI_INFO = {"model_id", "model_sha", "model_dtype", "served_model_name", "model_type",
            "max_concurrent_requests", "max_input_length", "max_batch_tokens", "max_batch_requests",
            "max_client_batch_size", "auto_truncate", "tokenization_workers", "version", "sha",
            "docker_label"}
WORDS = "the man went to store a he she is was good bad day night cafe hello world quick".split()


def served(tmp_path, kind, **options):
    directory = make_task_model(tmp_path, kind)
    return TestClient(create_app(ServeConfig(model=str(directory), **options))), load(directory)


def unit(v):
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def has_timings(response):
    return all(response.headers[h].isdigit() for h in TIMING)


def error(response, status, kind):
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "error_type"} and body["error_type"] == kind, body
    return body["error"]


def scores(answer):
    return {a["label"]: a["score"] for a in answer}


def words(n, seed=0):
    rng = np.random.default_rng(seed)
    return " ".join(rng.choice(WORDS, n))


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    client, bert = served(tmp_path_factory.mktemp("tei"), "classify")
    with client:
        yield client, bert


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    client, bert = served(tmp_path_factory.mktemp("tei"), "mlm")
    with client:
        yield client, bert


# ---------------------------------------------------------------------- /predict
def test_predict_a_text_a_pair_and_a_batch(classifier):
    client, bert = classifier
    one = client.post("/predict", json={"inputs": "I like you."})  # TEI's README example
    assert one.status_code == 200 and has_timings(one)
    answer = one.json()
    want = bert.predict("I like you.")
    assert [a["label"] for a in answer] == [w["label"] for w in want]
    assert [a["score"] for a in answer] == pytest.approx([w["score"] for w in want], abs=1e-6)
    pair = client.post("/predict", json={"inputs": ["the man went", "he is good"]}).json()
    assert pair[0]["score"] == pytest.approx(bert.predict([["the man went", "he is good"]])[0][0]["score"], abs=1e-6)
    batch = client.post("/predict", json={"inputs": [["I like you."], ["I hate pineapples", "he is good"]]})
    assert batch.status_code == 200 and len(batch.json()) == 2
    assert scores(batch.json()[0]) == pytest.approx(scores(answer), abs=1e-6)


def test_predict_raw_scores_are_the_logits_and_hf_parameters_apply(classifier):
    client, bert = classifier
    raw = client.post("/predict", json={"inputs": "he is good", "raw_scores": True}).json()
    enc = bert.tokenizer.encode("he is good")
    with torch.no_grad():
        logits = bert.model(torch.tensor([enc.input_ids])).logits[0].numpy()
    assert {a["label"]: a["score"] for a in raw} == pytest.approx(dict(zip(bert.labels, logits.tolist())), abs=1e-5)
    top = client.post("/predict", json={"inputs": "he is good", "parameters": {"top_k": 1}}).json()
    assert len(top) == 1 and top[0]["label"] == raw[0]["label"]


def test_predict_truncation_direction_left_keeps_the_end(classifier):
    client, bert = classifier
    text = words(100)
    tail = " ".join(text.split()[-62:])  # one word = one token here: the last 62 of the 64
    left = client.post("/predict", json={"inputs": text, "truncation_direction": "left", "raw_scores": True})
    assert left.headers["x-bertkit-truncated"] == "0"
    whole = client.post("/predict", json={"inputs": tail, "raw_scores": True}).json()
    assert scores(left.json()) == pytest.approx(scores(whole), abs=1e-6)
    assert "x-bertkit-truncated" not in client.post("/predict", json={"inputs": tail}).headers
    error(client.post("/predict", json={"inputs": text, "truncate": False}), 413, "Validation")


def test_a_regression_model_reranks(tmp_path):
    client, bert = served(tmp_path, "regression")
    texts = ["Deep Learning is ...", "he is good", "the man went to the store ."]
    with client:
        response = client.post("/rerank", json={"query": "What is Deep Learning?", "texts": texts})
        assert response.status_code == 200 and has_timings(response)
        ranks = response.json()
        raw = [bert.predict([["What is Deep Learning?", t]])[0][0]["score"] for t in texts]
        assert sorted(r["index"] for r in ranks) == [0, 1, 2] and "text" not in ranks[0]
        assert [r["score"] for r in ranks] == sorted((r["score"] for r in ranks), reverse=True)
        for r in ranks:
            assert r["score"] == pytest.approx(1 / (1 + np.exp(-raw[r["index"]])), abs=1e-6)  # sigmoid
        raw_ranks = client.post("/rerank", json={"query": "What is Deep Learning?", "texts": texts,
                                                 "raw_scores": True, "return_text": True}).json()
        assert all(r["score"] == pytest.approx(raw[r["index"]], abs=1e-5) and r["text"] == texts[r["index"]]
                   for r in raw_ranks)
        error(client.post("/rerank", json={"query": "q", "texts": []}), 400, "Empty")
        assert client.post("/", json={"query": "q", "texts": ["he"]}).status_code == 200  # the model route


def test_rerank_on_a_classifier_is_424_backend(classifier):
    client, _ = classifier
    assert "not a re-ranker" in error(client.post("/rerank", json={"query": "a", "texts": ["b"]}), 424, "Backend")


# ---------------------------------------------------------------------- /embed and friends
def test_embed_is_a_list_of_unit_vectors_as_tei(encoder):
    client, bert = encoder
    one = client.post("/embed", json={"inputs": "What is Deep Learning?"})  # TEI's README example
    assert one.status_code == 200 and has_timings(one)
    assert np.allclose(one.json(), unit(bert.embed(["What is Deep Learning?"])), atol=1e-6)
    two = client.post("/embed", json={"inputs": ["he is good", "the man"], "normalize": False}).json()
    assert np.allclose(two, bert.embed(["he is good", "the man"]), atol=1e-5)
    ids = bert.tokenizer.encode("he is good").input_ids
    by_ids = client.post("/embed", json={"inputs": ids}).json()  # TEI: token ids are an input
    assert np.allclose(by_ids, unit(bert.embed(["he is good"])), atol=1e-6)
    mixed = client.post("/embed", json={"inputs": ["he is good", ids]}).json()
    assert np.allclose(mixed[0], mixed[1], atol=1e-6)
    cut = client.post("/embed", json={"inputs": "he is good", "dimensions": 4}).json()
    assert np.allclose(cut, unit(bert.embed(["he is good"])[:, :4]), atol=1e-6)
    error(client.post("/embed", json={"inputs": "he", "dimensions": 99}), 422, "Validation")
    error(client.post("/embed", json={"inputs": [ids[0], 999]}), 422, "Tokenizer")
    error(client.post("/embed", json={"inputs": []}), 400, "Empty")
    error(client.post("/embed", json={"inputs": "he", "prompt_name": "query"}), 422, "Validation")
    mean = client.post("/embed", json={"inputs": "he is good", "pooling": "mean", "layers": [-1, -2],
                                       "normalize": False}).json()  # bertkit's extras
    assert np.allclose(mean, bert.embed(["he is good"], pool="mean", layers=(-1, -2)), atol=1e-5)
    assert np.allclose(client.post("/", json={"inputs": "What is Deep Learning?"}).json(), one.json())


def test_embed_all_is_every_tokens_last_hidden_state(encoder):
    client, bert = encoder
    response = client.post("/embed_all", json={"inputs": "he is good"})
    assert response.status_code == 200 and has_timings(response)
    states = np.asarray(response.json())
    want = bert.embed(["he is good"], pool="none")[0]
    assert states.shape == (1, 5, 16) and np.allclose(states[0], want, atol=1e-5)
    assert len(client.post("/embed_all", json={"inputs": ["he", "the man"]}).json()) == 2


def test_an_answer_over_max_answer_values_is_refused_before_any_forward_pass(tmp_path):
    client, _ = served(tmp_path, "mlm", max_answer_values=100)  # hidden 16: 6 tokens hold 96
    with client:
        assert client.post("/embed_all", json={"inputs": "he is good day"}).status_code == 200  # 6 tokens
        before = client.app.state.service.batcher.batches_run
        message = error(client.post("/embed_all", json={"inputs": ["he is good", "the man"]}), 413, "Validation")
        assert "would hold 144 numbers (9 tokens x 16)" in message and "--max-answer-values 100" in message
        assert client.app.state.service.batcher.batches_run == before  # refused before the model ran


def test_similarity_and_the_openai_route(encoder):
    client, bert = encoder
    sims = client.post("/similarity", json={"inputs": {"source_sentence": "What is Deep Learning?",
                                                       "sentences": ["What is Machine Learning?", "he is good"]}})
    v = unit(bert.embed(["What is Deep Learning?", "What is Machine Learning?", "he is good"]))
    assert sims.json() == pytest.approx([v[0] @ v[1], v[0] @ v[2]], abs=1e-6)
    answer = client.post("/v1/embeddings", json={"input": ["he is good", "the man"], "model": "m",
                                                 "encoding_format": "base64"})
    body = answer.json()
    assert body["object"] == "list" and [d["index"] for d in body["data"]] == [0, 1] and has_timings(answer)
    decoded = [np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4") for d in body["data"]]
    assert np.allclose(decoded, unit(bert.embed(["he is good", "the man"])), atol=1e-6)
    assert body["usage"] == {"prompt_tokens": 9, "total_tokens": 9}
    empty = client.post("/v1/embeddings", json={"input": []})
    assert empty.status_code == 400 and empty.json() == {"message": "`input` cannot be empty", "code": 400,
                                                         "type": "Empty"}


# ---------------------------------------------------------------------- tokenizer routes
def test_tokenize_gives_byte_offsets_and_decode_inverts_it(encoder):
    client, bert = encoder
    tokens = client.post("/tokenize", json={"inputs": "café hello"}).json()
    assert [t["id"] for t in tokens[0]] == bert.tokenizer.encode("café hello").input_ids
    assert tokens[0][0] == {"id": 2, "text": "[CLS]", "special": True, "start": None, "stop": None}
    assert tokens[0][1] == {"id": 29, "text": "café", "special": False, "start": 0, "stop": 5}  # bytes
    assert tokens[0][2] == {"id": 36, "text": "hello", "special": False, "start": 6, "stop": 11}
    bare = client.post("/tokenize", json={"inputs": ["he", "the man"], "add_special_tokens": False}).json()
    assert [[t["text"] for t in x] for x in bare] == [["he"], ["the", "man"]]
    error(client.post("/tokenize", json={"inputs": ""}), 400, "Empty")
    assert client.post("/decode", json={"ids": [2, 21, 23, 25, 3]}).json() == ["he is good"]
    assert client.post("/decode", json={"ids": [[2, 21, 3], [6]], "skip_special_tokens": False}).json() == \
        ["[CLS] he [SEP]", "man"]
    error(client.post("/decode", json={"ids": [5, 400]}), 422, "Tokenizer")


# ---------------------------------------------------------------------- /info, /health, /metrics
def test_info_has_teis_fields_and_bertkits(classifier):
    client, _ = classifier
    info = client.get("/info").json()
    assert TEI_INFO <= set(info) and info["model_dtype"] == "float32" and info["max_input_length"] == 64
    assert info["model_type"] == {"classifier": {"id2label": {"0": "negative", "1": "positive", "2": "neutral"},
                                                 "label2id": {"negative": 0, "positive": 1, "neutral": 2}}}
    assert info["bertkit"]["num_heads"] == 2


def test_info_counts_the_heads_a_pruned_model_kept(tmp_path):
    from bertkit.checkpoint import save_pretrained
    from bertkit.model.pruning import prune_heads

    bert = load(make_task_model(tmp_path, "classify"))
    prune_heads(bert.model, {0: [1]})
    directory = save_pretrained(bert.model, tmp_path / "pruned", tokenizer=bert.tokenizer)
    with TestClient(create_app(ServeConfig(model=str(directory)))) as client:
        info = client.get("/info").json()["bertkit"]
    assert info["heads_per_layer"] == [1, 2] and info["num_heads"] == 2


def test_health_runs_the_model_and_says_unhealthy_when_it_cannot(classifier, tmp_path):
    client, _ = classifier
    before = client.app.state.service.batcher.rows_run
    health = client.get("/health")
    assert health.status_code == 200 and health.text == ""
    assert client.app.state.service.batcher.rows_run == before + 1  # the probe ran through the model
    assert client.get("/ping").status_code == 200 and client.get("/").text == ""  # TEI's health aliases
    sick, _ = served(tmp_path, "classify")
    with sick:
        sick.app.state.service.batcher.close()
        error(sick.get("/health"), 503, "Unhealthy")


def test_metrics_count_requests_batches_and_the_queue(classifier):
    client, _ = classifier
    client.post("/predict", json={"inputs": "he is good"})
    client.post("/predict", json={"inputs": ""})
    text = client.get("/metrics").text
    for line in ('te_request_count{method="single"}', 'te_request_failure{err="validation"}',
                 "te_request_duration_bucket", "te_request_queue_duration_bucket", "te_batch_next_size_bucket",
                 "te_batch_next_tokens_bucket", "te_queue_size 0.0", "te_request_input_length_bucket"):
        assert line in text, line


# ---------------------------------------------------------------------- every error status
def test_every_http_error_has_the_json_shape(tmp_path):
    client, _ = served(tmp_path, "classify", api_key="k", payload_limit=200,
                       cors_allow_origin="http://ok.example")
    auth = {"Authorization": "Bearer k"}
    with client:
        assert "Bearer" in error(client.post("/predict", json={"inputs": "he"}), 401, "Unauthorized")
        error(client.post("/predict", json={"inputs": "he"}, headers={"Authorization": "Bearer x"}), 401,
              "Unauthorized")
        assert client.post("/predict", json={"inputs": "he"}, headers=auth).status_code == 200
        assert client.get("/health").status_code == 200 and client.get("/metrics").status_code == 200
        error(client.get("/nowhere", headers=auth), 404, "NotFound")
        error(client.get("/predict", headers=auth), 405, "MethodNotAllowed")
        error(client.post("/predict", content=b'{"inputs": "he"}', headers={**auth, "Content-Type": "text/plain"}),
              415, "UnsupportedMediaType")
        error(client.post("/predict", json={"inputs": "he " * 100}, headers=auth), 413, "PayloadTooLarge")
        error(client.post("/predict", content=b"{oops", headers={**auth, "Content-Type": "application/json"}),
              400, "Validation")
        ok = client.options("/predict", headers={"Origin": "http://ok.example", "Access-Control-Request-Method": "POST"})
        assert ok.headers["access-control-allow-origin"] == "http://ok.example"
        other = client.options("/predict", headers={"Origin": "http://evil.example",
                                                    "Access-Control-Request-Method": "POST"})
        assert "access-control-allow-origin" not in other.headers


def test_a_5mb_text_does_not_stall_health(tmp_path, monkeypatch):
    # about 4.4 MB of text: tokenised and cut into windows in a worker thread, then refused (413:
    # more windows than --max-queue ever holds). How many /health answers fit into that time
    # depends on the machine, so the planning is held open (after its real work) until /health
    # has answered once: were it run on the event loop, /health could not answer and the hold
    # would run out instead.
    text = words(1_000_000, seed=2)
    client, _ = served(tmp_path, "mlm", long_text={"long_text": "window", "stride": 32},
                       payload_limit=10_000_000)
    planning, health_answered = threading.Event(), threading.Event()
    plan = Service.embed_plan

    def held_plan(self, *args, **kwargs):
        try:
            return plan(self, *args, **kwargs)
        finally:
            planning.set()
            health_answered.wait(timeout=30)

    monkeypatch.setattr(Service, "embed_plan", held_plan)
    answers = []
    with client:
        def long_request():
            answers.append(client.post("/embed", json={"inputs": text}))

        worker = threading.Thread(target=long_request)
        worker.start()
        assert planning.wait(timeout=60)
        if client.get("/health").status_code == 200 and worker.is_alive():
            health_answered.set()
        answered = health_answered.is_set()
        health_answered.set()
        worker.join()
    assert answered, "/health did not answer while a long text was being planned"
    (response,) = answers
    assert response.status_code == 413 and "--max-queue 1024" in response.json()["error"]
