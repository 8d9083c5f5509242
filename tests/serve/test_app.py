"""``bertkit serve``: every endpoint, every bad request, batching under concurrency, the 503 path."""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from bertkit.inference import load  # noqa: E402
from bertkit.serve import ServeConfig, create_app  # noqa: E402

from ..task_models import make_task_model  # noqa: E402

TEXTS = ["the man went to the store .", "he is good", "she was bad , the night was good !",
         "hello world", "a quick day , the man was running !", "the cafe", "good night , world"]


def client_for(tmp_path, kind, bert=None, **options):
    directory = make_task_model(tmp_path, kind)
    config = ServeConfig(model=str(directory), **options)
    return TestClient(create_app(config, bert)), directory


@pytest.fixture
def classify(tmp_path):
    client, directory = client_for(tmp_path, "classify", max_wait_ms=20)
    with client:
        yield client, load(directory)


def labels_scores(answer):
    return [a["label"] for a in answer], [a["score"] for a in answer]


def test_predict_single_and_list_match_the_python_api(classify):
    client, bert = classify
    one = client.post("/predict", json={"inputs": TEXTS[0]})
    assert one.status_code == 200 and TRUNCATED_HEADER_ABSENT(one)
    expected = bert.predict(TEXTS)
    assert labels_scores(one.json())[0] == labels_scores(expected[0])[0]
    many = client.post("/predict", json={"inputs": TEXTS}).json()
    assert len(many) == len(TEXTS)
    for got, want in zip(many, expected):
        assert got[0]["label"] == want[0]["label"]
        assert labels_scores(got)[1] == pytest.approx(labels_scores(want)[1], abs=1e-5)
        assert labels_scores(got)[1] == sorted(labels_scores(got)[1], reverse=True)


def TRUNCATED_HEADER_ABSENT(response):
    return "x-bertkit-truncated" not in response.headers


def test_health_info_docs_and_page(classify):
    client, _ = classify
    assert client.get("/health").json() == {"status": "ok"}
    info = client.get("/info").json()
    assert info["task"] == "text-classification" and info["labels"] == ["negative", "positive", "neutral"]
    assert info["precision"] == "fp32" and info["max_length"] == 64
    assert client.get("/docs").status_code == 200
    schema = client.get("/openapi.json").json()
    assert {"/predict", "/embed", "/fill-mask", "/attention", "/health", "/info"} <= set(schema["paths"])
    page = client.get("/")
    assert page.status_code == 200 and "<form" in page.text and "http" not in page.text.split("<script>")[1]


@pytest.mark.parametrize("body, status, words", [
    (b"{not json", 400, "malformed JSON"),
    (b'{"input": "x"}', 422, "inputs: Field required"),
    (b'{"inputs": 3}', 422, "must be a string"),
    (b'{"inputs": ""}', 422, "empty"),
    (b'{"inputs": "   "}', 422, "empty"),
    (b'{"inputs": []}', 422, "empty list"),
    (b'{"inputs": null}', 422, "null"),
    (b'{"inputs": ["ok", 5]}', 422, "must be a string"),
    (b'{"inputs": "x", "truncate": "maybe"}', 422, "truncate"),
    (b'[1, 2]', 422, "body"),
])
def test_bad_requests_are_4xx_json(classify, body, status, words):
    client, _ = classify
    response = client.post("/predict", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == status, response.text
    error = response.json()
    assert words in error["error"] and error["error_type"] == "validation"
    assert client.get("/health").status_code == 200  # the server lives on


def test_too_many_items_and_too_long_texts(tmp_path):
    client, _ = client_for(tmp_path, "classify", max_items=3, truncate=False)
    with client:
        response = client.post("/predict", json={"inputs": ["a", "b", "c", "d"]})
        assert response.status_code == 413 and "--max-items 3" in response.json()["error"]
        long_text = " ".join(["the"] * 100)
        response = client.post("/predict", json={"inputs": long_text})
        assert response.status_code == 413 and "limit of 64" in response.json()["error"]
        truncated = client.post("/predict", json={"inputs": ["he is good", long_text], "truncate": True})
        assert truncated.status_code == 200 and truncated.headers["x-bertkit-truncated"] == "1"


def test_unknown_task_for_the_model(classify, tmp_path):
    client, _ = classify
    response = client.post("/fill-mask", json={"inputs": "the [MASK]"})
    assert response.status_code == 400 and "no masked-LM head" in response.json()["error"]
    mlm, _ = client_for(tmp_path, "mlm")
    with mlm:
        response = mlm.post("/predict", json={"inputs": "the man"})
        assert response.status_code == 400 and "no task head" in response.json()["error"]


def test_embed_and_fill_mask_endpoints(tmp_path):
    client, directory = client_for(tmp_path, "mlm")
    bert = load(directory)
    with client:
        vectors = client.post("/embed", json={"inputs": ["the man went", "he is good"], "pooling": "mean"}).json()
        assert len(vectors) == 2 and len(vectors[0]) == 16
        assert vectors[1] == pytest.approx(bert.embed("he is good", pool="mean").tolist(), abs=1e-5)
        one = client.post("/embed", json={"inputs": "he is good", "layers": [-1, -2], "normalize": True}).json()
        assert len(one) == 32 and sum(x * x for x in one) == pytest.approx(1.0, abs=1e-5)
        bad = client.post("/embed", json={"inputs": "he", "pooling": "max"})
        assert bad.status_code == 422 and "pooling" in bad.json()["error"]
        fill = client.post("/fill-mask", json={"inputs": "the [MASK] went .", "top_k": 3}).json()
        reference = bert.fill_mask("the [MASK] went .", top_k=3)[0]
        assert [c["token"] for c in fill] == [c["token_id"] for c in reference]
        assert {"score", "token", "token_str", "sequence"} <= set(fill[0])
        two = client.post("/fill-mask", json={"inputs": ["[MASK] man [MASK]", "he [MASK]"]}).json()
        assert len(two) == 2 and len(two[0]) == 2 and len(two[1]) == 5
        nomask = client.post("/fill-mask", json={"inputs": "the man"})
        assert nomask.status_code == 422 and "[MASK]" in nomask.json()["error"]
        attention = client.post("/attention", json={"inputs": "the man went", "layer": 1, "head": 1}).json()
        assert attention["tokens"] == ["[CLS]", "the", "man", "went", "[SEP]"]
        assert all(sum(row) == pytest.approx(1.0, abs=1e-3) for row in attention["attention"])
        assert client.post("/attention", json={"inputs": "x", "head": 9}).status_code == 422


def test_tagging_qa_choice_and_pair_endpoints(tmp_path):
    for kind, item, check in [
        ("tagging", "Hello world, the man went to the cafe!",
         lambda a, item: all(item[e["start"]:e["end"]] == e["word"] for e in a)),
        ("qa", {"question": "who went ?", "context": "the man went to the store ."},
         lambda a, item: item["context"][a["start"]:a["end"]] == a["answer"]),
        ("choice", {"context": "the man", "choices": ["went", "is good", "was bad"]},
         lambda a, item: sorted(x["index"] for x in a) == [0, 1, 2]),
        ("pair", ["the man went", "he went"], lambda a, item: len(a) == 2),
    ]:
        client, directory = client_for(tmp_path, kind)
        with client:
            response = client.post("/predict", json={"inputs": item})
            assert response.status_code == 200, response.text
            answer = response.json()
            assert check(answer, item)
            expected = load(directory).predict(item)
            assert type(answer) is type(expected) and len(answer) == len(expected)
            listed = client.post("/predict", json={"inputs": [item, item]}).json()
            assert len(listed) == 2
    client, _ = client_for(tmp_path, "qa")
    with client:
        response = client.post("/predict", json={"inputs": {"question": "who"}})
        assert response.status_code == 422 and "question" in response.json()["error"]


def test_concurrent_shuffled_requests_each_get_their_own_answer(tmp_path):
    client, directory = client_for(tmp_path, "classify", max_wait_ms=50, max_batch_tokens=256)
    expected = {t: a for t, a in zip(TEXTS, load(directory).predict(TEXTS))}
    requests = [random.Random(seed).choice(TEXTS) for seed in range(60)]
    with client:
        with ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(lambda t: (t, client.post("/predict", json={"inputs": t})), requests))
        info = client.get("/info").json()
    for text, response in answers:
        assert response.status_code == 200
        got, want = response.json(), expected[text]
        assert labels_scores(got)[0] == labels_scores(want)[0]
        assert labels_scores(got)[1] == pytest.approx(labels_scores(want)[1], abs=1e-5)
    assert info["rows_run"] == 60
    assert info["batches_run"] < 60  # some requests really shared a forward pass


def test_full_queue_answers_503_at_once_and_in_flight_requests_finish(tmp_path):
    directory = make_task_model(tmp_path, "classify")
    bert = load(directory)
    entered, release = threading.Event(), threading.Event()
    run_rows = bert.run_rows

    def blocking(key, rows):
        entered.set()
        assert release.wait(60)
        return run_rows(key, rows)

    bert.run_rows = blocking
    client = TestClient(create_app(ServeConfig(model=str(directory), max_queue=2, max_wait_ms=0), bert))
    with client, ThreadPoolExecutor(2) as pool:
        first = pool.submit(client.post, "/predict", json={"inputs": "he is good"})
        assert entered.wait(60)  # the worker holds the first request's row
        second = pool.submit(client.post, "/predict", json={"inputs": ["the man", "a day"]})
        deadline = time.monotonic() + 60
        while client.app.state.service.batcher.queued < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        full = client.post("/predict", json={"inputs": "the night"})
        assert full.status_code == 503 and full.json()["error_type"] == "overloaded"
        assert "queue is full" in full.json()["error"] and full.headers["retry-after"] == "1"
        release.set()
        assert first.result(60).status_code == 200 and second.result(60).status_code == 200
        assert len(second.result().json()) == 2


def test_shutdown_drains_the_queue(tmp_path):
    client, _ = client_for(tmp_path, "classify", max_wait_ms=10)
    with client:
        batcher = client.app.state.service.batcher
        assert client.post("/predict", json={"inputs": "he is good"}).status_code == 200
    assert not batcher._thread.is_alive() and batcher.queued == 0
