"""``bertkit serve``: answers equal the Python API's, bad requests, batching under concurrency, the
full queue, long texts. TEI's contract route by route: test_tei_contract.py."""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
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
    client, directory = client_for(tmp_path, "classify")
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
    many = client.post("/predict", json={"inputs": [[t] for t in TEXTS]}).json()
    assert len(many) == len(TEXTS)
    for got, want in zip(many, expected):
        assert got[0]["label"] == want[0]["label"]
        assert labels_scores(got)[1] == pytest.approx(labels_scores(want)[1], abs=1e-5)
        assert labels_scores(got)[1] == sorted(labels_scores(got)[1], reverse=True)


def TRUNCATED_HEADER_ABSENT(response):
    return "x-bertkit-truncated" not in response.headers


def test_health_info_docs_and_page(classify):
    client, _ = classify
    health = client.get("/health")
    assert health.status_code == 200 and health.text == ""
    info = client.get("/info").json()["bertkit"]
    assert info["task"] == "text-classification" and info["labels"] == ["negative", "positive", "neutral"]
    assert info["precision"] == "fp32" and info["max_length"] == 64 and info["compiling"] is False
    docs = client.get("/docs")
    assert docs.status_code == 200 and "cdn" not in docs.text and "/docs-static/swagger-ui-bundle.js" in docs.text
    assert client.get("/docs-static/swagger-ui-bundle.js").status_code == 200
    schema = client.get("/openapi.json").json()
    assert {"/predict", "/attention", "/health", "/info", "/tokenize", "/decode", "/metrics", "/"} <= set(
        schema["paths"])  # a classifier's: not the routes that answer it 424 (/embed, /rerank, /fill-mask)
    assert not {"/embed", "/embed_all", "/v1/embeddings", "/rerank", "/fill-mask"} & set(schema["paths"])
    assert client.get("/api-doc/openapi.json").json() == schema  # TEI's path
    page = client.get("/", headers={"Accept": "text/html"})
    assert page.status_code == 200 and "<form" in page.text and "http" not in page.text.split("<script>")[1]


@pytest.mark.parametrize("body, status, kind, words", [
    (b"{not json", 400, "Validation", "malformed JSON"),
    (b'{"input": "x"}', 422, "Validation", "inputs: Field required"),
    (b'{"inputs": 3}', 422, "Validation", "got int"),
    (b'{"inputs": ""}', 400, "Empty", "cannot be empty"),
    (b'{"inputs": "   "}', 400, "Empty", "cannot be empty"),
    (b'{"inputs": "\\u0000\\u0001"}', 400, "Empty", "no tokens"),
    (b'{"inputs": [["ok"], [""]]}', 400, "Empty", "inputs[1]: "),
    (b'{"inputs": []}', 422, "Validation", "empty list"),
    (b'{"inputs": null}', 422, "Validation", "null"),
    (b'{"inputs": [["ok"], 5]}', 422, "Validation", "inputs[1]"),
    (b'{"inputs": ["a", "b", "c"]}', 422, "Validation", "list of lists"),
    (b'{"inputs": "x", "truncate": "maybe"}', 422, "Validation", "truncate"),
    (b'{"inputs": "x", "truncation_direction": "up"}', 422, "Validation", "truncation_direction"),
    (b'[1, 2]', 422, "Validation", "body"),
])
def test_bad_requests_are_4xx_json(classify, body, status, kind, words):
    client, _ = classify
    response = client.post("/predict", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == status, response.text
    error = response.json()
    assert words in error["error"] and error["error_type"] == kind, error
    assert client.get("/health").status_code == 200  # the server lives on


def test_too_many_items_and_too_long_texts(tmp_path):
    client, _ = client_for(tmp_path, "classify", max_items=3, truncate=False)
    with client:
        response = client.post("/predict", json={"inputs": [["a"], ["b"], ["c"], ["d"]]})
        assert response.status_code == 422 and "--max-items" in response.json()["error"]  # TEI's code
        assert "batch size 4 > maximum allowed batch size 3" in response.json()["error"]
        long_text = " ".join(["the"] * 100)
        response = client.post("/predict", json={"inputs": long_text})
        assert response.status_code == 413 and "limit of 64" in response.json()["error"]
        truncated = client.post("/predict", json={"inputs": [["he is good"], [long_text]], "truncate": True})
        assert truncated.status_code == 200 and truncated.headers["x-bertkit-truncated"] == "1"


def test_unknown_task_for_the_model(classify, tmp_path):
    client, _ = classify
    response = client.post("/fill-mask", json={"inputs": "the [MASK]"})
    assert response.status_code == 424 and "no masked-LM head" in response.json()["error"]
    assert response.json()["error_type"] == "Backend"
    mlm, _ = client_for(tmp_path, "mlm")
    with mlm:
        response = mlm.post("/predict", json={"inputs": "the man"})
        assert response.status_code == 424 and "no task head" in response.json()["error"]


def test_embed_and_fill_mask_endpoints(tmp_path):
    client, directory = client_for(tmp_path, "mlm")
    bert = load(directory)
    with client:
        vectors = client.post("/embed", json={"inputs": ["the man went", "he is good"], "pooling": "mean",
                                              "normalize": False}).json()
        assert len(vectors) == 2 and len(vectors[0]) == 16
        assert vectors[1] == pytest.approx(bert.embed("he is good", pool="mean").tolist(), abs=1e-5)
        one = client.post("/embed", json={"inputs": "he is good", "layers": [-1, -2]}).json()
        assert len(one) == 1 and len(one[0]) == 32  # TEI: [[...]] for one input, normalised by default
        assert sum(x * x for x in one[0]) == pytest.approx(1.0, abs=1e-5)
        most = client.post("/embed", json={"inputs": "he is good", "pooling": "max", "normalize": False}).json()
        assert most[0] == pytest.approx(bert.embed("he is good", pool="max").tolist(), abs=1e-5)
        bad = client.post("/embed", json={"inputs": "he", "pooling": "splade"})  # a server's choice only
        assert bad.status_code == 422 and "pooling" in bad.json()["error"]
        fill = client.post("/fill-mask", json={"inputs": "the [MASK] went .", "top_k": 3}).json()
        reference = bert.fill_mask("the [MASK] went .", top_k=3)[0]
        assert [c["token"] for c in fill] == [c["token"] for c in reference]
        assert {"score", "token", "token_str", "sequence"} <= set(fill[0])
        two = client.post("/fill-mask", json={"inputs": ["[MASK] man [MASK]", "he [MASK]"]}).json()
        assert len(two) == 2 and len(two[0]) == 2 and len(two[1]) == 5
        nomask = client.post("/fill-mask", json={"inputs": "the man"})
        assert nomask.status_code == 422 and "[MASK]" in nomask.json()["error"]
        attention = client.post("/attention", json={"inputs": "the man went", "layer": 1, "head": 1}).json()
        assert attention["tokens"] == ["[CLS]", "the", "man", "went", "[SEP]"] and attention["segment_a"] == 5
        pair = client.post("/attention", json={"inputs": "the man", "pair": "he went", "head": 1}).json()
        assert pair["tokens"] == ["[CLS]", "the", "man", "[SEP]", "he", "went", "[SEP]"]
        assert pair["segment_a"] == 4 and len(pair["attention"]) == 7
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
            batch = [item, item] if isinstance(item, dict) else [item if isinstance(item, list) else [item]] * 2
            listed = client.post("/predict", json={"inputs": batch}).json()
            assert len(listed) == 2 and type(listed[0]) is type(answer)
    client, _ = client_for(tmp_path, "qa")
    with client:
        response = client.post("/predict", json={"inputs": {"question": "who"}})
        assert response.status_code == 422 and "question" in response.json()["error"]


def test_concurrent_shuffled_requests_each_get_their_own_answer(tmp_path):
    directory = make_task_model(tmp_path, "classify")
    bert = load(directory)
    run_rows = bert.run_rows

    def slow(key, rows):  # a forward pass long enough for the others to arrive meanwhile
        time.sleep(0.02)
        return run_rows(key, rows)

    bert.run_rows = slow
    client = TestClient(create_app(ServeConfig(model=str(directory), max_batch_tokens=256), bert))
    expected = {t: a for t, a in zip(TEXTS, load(directory).predict(TEXTS))}
    requests = [random.Random(seed).choice(TEXTS) for seed in range(60)]
    with client:
        with ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(lambda t: (t, client.post("/predict", json={"inputs": t})), requests))
        info = client.get("/info").json()["bertkit"]
    for text, response in answers:
        assert response.status_code == 200
        got, want = response.json(), expected[text]
        assert labels_scores(got)[0] == labels_scores(want)[0]
        assert labels_scores(got)[1] == pytest.approx(labels_scores(want)[1], abs=1e-5)
    assert info["rows_run"] == 60
    assert info["batches_run"] < 60  # some requests really shared a forward pass


def test_a_padded_route_measures_what_a_pass_costs_and_answers_alike(tmp_path):
    """Batches padded to their longest row (``--attention-impl padded``): the batcher times a
    probe and the passes after it, /info gives the fixed cost of a pass in padded tokens (here
    about 100: a pass sleeps 50 ms, plus 0.5 ms a padded token), and every answer is still the
    Python API's."""
    directory = make_task_model(tmp_path, "classify")
    bert = load(directory)
    run_rows = bert.run_rows

    def slow(key, rows):
        time.sleep(0.05 + 0.0005 * len(rows) * max(len(r.input_ids) for r in rows))
        return run_rows(key, rows)

    bert.run_rows = slow
    client = TestClient(create_app(ServeConfig(model=str(directory), attention_impl="padded"), bert))
    expected = {t: a for t, a in zip(TEXTS, load(directory).predict(TEXTS))}
    requests = [random.Random(seed).choice(TEXTS) for seed in range(120)]
    with client:
        assert client.get("/info").json()["bertkit"]["pass_tokens"] is None  # nothing timed yet
        with ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(lambda t: (t, client.post("/predict", json={"inputs": t})), requests))
        info = client.get("/info").json()["bertkit"]
    for text, response in answers:
        assert response.status_code == 200
        assert labels_scores(response.json())[0] == labels_scores(expected[text])[0]
    assert info["attention_impl"] == "padded" and info["rows_run"] == 120
    assert info["pass_tokens"] is not None and info["pass_tokens"] > 20


def test_full_queue_answers_429_at_once_and_in_flight_requests_finish(tmp_path):
    directory = make_task_model(tmp_path, "classify")
    bert = load(directory)
    entered, release = threading.Event(), threading.Event()
    run_rows = bert.run_rows

    def blocking(key, rows):
        entered.set()
        assert release.wait(60)
        return run_rows(key, rows)

    bert.run_rows = blocking
    client = TestClient(create_app(ServeConfig(model=str(directory), max_queue=2), bert))
    with client, ThreadPoolExecutor(2) as pool:
        first = pool.submit(client.post, "/predict", json={"inputs": "he is good"})
        assert entered.wait(60)  # the worker holds the first request's row
        second = pool.submit(client.post, "/predict", json={"inputs": [["the man"], ["a day"]]})
        deadline = time.monotonic() + 60
        while client.app.state.service.batcher.queued < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        full = client.post("/predict", json={"inputs": "the night"})
        assert full.status_code == 429 and full.json() == {"error": "Model is overloaded",
                                                           "error_type": "Overloaded"}
        assert full.headers["retry-after"] == "1"
        never = client.post("/predict", json={"inputs": [["a"], ["b"], ["c"]]})  # 3 rows > --max-queue 2
        assert never.status_code == 413 and never.json()["error_type"] == "Validation"
        assert "--max-queue 2" in never.json()["error"] and "retry-after" not in never.headers
        release.set()
        assert first.result(60).status_code == 200 and second.result(60).status_code == 200
        assert len(second.result().json()) == 2


def test_shutdown_drains_the_queue(tmp_path):
    client, _ = client_for(tmp_path, "classify")
    with client:
        batcher = client.app.state.service.batcher
        assert client.post("/predict", json={"inputs": "he is good"}).status_code == 200
    assert not any(t.is_alive() for t in batcher._threads) and batcher.queued == 0


# ---------------------------------------------------------------- texts longer than the limit
def long_text(n=130, seed=1):
    words = ["the", "man", "went", "to", "store", "a", "unwanted", "running", "he", "she", "is", "was",
             "good", "bad", "day", "night", "cafe", "hello", "world", "quick", ",", ".", "!"]
    rng = random.Random(seed)
    return " ".join(rng.choice(words) for _ in range(n))


def predict_cli(tmp_path, task, directory, records, *flags):
    """``bertkit predict`` records (JSON Lines in, out)."""
    import json

    from bertkit.cli.main import main

    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out.jsonl"
    assert main(["predict", task, "--model", str(directory), "--input", str(tmp_path / "in.jsonl"),
                 "--output", str(out), "--no-progress", *flags]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


WINDOW = {"long_text": "window", "stride": 20}


@pytest.mark.parametrize("kind, task, pool", [("sst2", "sst2", "mean"), ("sst2", "sst2", "max"),
                                              ("pair", "mrpc", "mean"), ("regression", "stsb", "mean")])
def test_a_long_text_is_windowed_as_bertkit_predict_does(tmp_path, cpu_class, kind, task, pool):
    from bertkit.tasks.windows import LongText

    text = long_text()
    client, directory = client_for(tmp_path, kind, long_text={**WINDOW, "pool_windows": pool})
    item = text if kind == "sst2" else [text, "the man went to the cafe"]
    record = {"text": text} if kind == "sst2" else {"text": text, "text_pair": "the man went to the cafe"}
    with client:
        batch = [[text], ["he is good"]] if kind == "sst2" else [item, ["he is good", "she was bad"]]
        response = client.post("/predict", json={"inputs": batch, "raw_scores": kind == "regression"})
        assert response.status_code == 200
        windows = response.headers["x-bertkit-windows"]
        assert windows.startswith("0:") and int(windows[2:]) >= 3 and "," not in windows  # 1: one window
        assert "x-bertkit-truncated" not in response.headers
        answer = response.json()[0]
        info = client.get("/info").json()["bertkit"]["long_text"]
        assert info == {"mode": "window", "stride": 20, "pool_windows": pool}
    cli = predict_cli(tmp_path, task, directory, [record], "--long-text", "window", "--stride", "20",
                      "--pool-windows", pool)[0]
    if kind == "regression":
        assert answer[0]["score"] == pytest.approx(cli["score"], abs=1e-5)
    else:
        assert {a["label"]: a["score"] for a in answer} == pytest.approx(cli["probabilities"], abs=1e-5)
        truncated = predict_cli(tmp_path, task, directory, [record])[0]["probabilities"]
        assert truncated != pytest.approx(cli["probabilities"], abs=1e-4)  # windows changed the answer
    api = load(directory).predict(item, long_text=LongText("window", 20, pool))
    assert [a["score"] for a in api] == pytest.approx([a["score"] for a in answer], abs=1e-6)


def test_a_long_text_is_tagged_in_windows_as_bertkit_predict_does(tmp_path):
    from bertkit.tasks.tagging import WORD, group_entities

    text = long_text(150, seed=3)
    client, directory = client_for(tmp_path, "ner", long_text=WINDOW)
    with client:
        response = client.post("/predict", json={"inputs": text})
        assert response.status_code == 200 and int(response.headers["x-bertkit-windows"][2:]) >= 3
        entities = response.json()
    matches = list(WORD.finditer(text))
    cli = predict_cli(tmp_path, "ner", directory, [{"tokens": [m.group() for m in matches]}],
                      "--long-text", "window", "--stride", "20")[0]
    expected = group_entities(text, [m.span() for m in matches], cli["tags"], [0.0] * len(matches))
    strip = [{k: e[k] for k in ("entity_group", "word", "start", "end")} for e in entities]
    assert strip == [{k: e[k] for k in ("entity_group", "word", "start", "end")} for e in expected]
    assert entities and max(e["end"] for e in entities) > len(text) * 0.6  # beyond the first window
    assert all(text[e["start"]:e["end"]] == e["word"] for e in entities)  # offsets into the whole text


@pytest.mark.parametrize("kind", ["sst2", "ner", "mlm"])
def test_a_text_shorter_than_one_window_is_unchanged(tmp_path, kind):
    endpoint, body = ("/embed", {"pooling": "mean"}) if kind == "mlm" else ("/predict", {})
    answers, directory = {}, make_task_model(tmp_path, kind)
    for mode in ("truncate", "window"):
        config = ServeConfig(model=str(directory), long_text={"long_text": mode, "stride": 5})
        with TestClient(create_app(config)) as client:
            inputs = TEXTS if endpoint == "/embed" else [[t] for t in TEXTS]
            response = client.post(endpoint, json={"inputs": inputs, **body})
            assert response.status_code == 200 and "x-bertkit-windows" not in response.headers
            answers[mode] = response.json()
    assert answers["window"] == answers["truncate"]  # exactly: the same rows, pooled from one


def test_embed_windows_a_long_text_as_the_python_api(tmp_path):
    from bertkit.tasks.windows import LongText

    text = long_text(100)
    client, directory = client_for(tmp_path, "mlm", long_text={**WINDOW, "pool_windows": "max"})
    bert = load(directory)
    with client:
        for pooling in ("cls", "mean"):
            response = client.post("/embed", json={"inputs": [text, "he is good"], "pooling": pooling,
                                                   "normalize": False})
            assert response.headers["x-bertkit-windows"].startswith("0:")
            want = bert.embed([text, "he is good"], pool=pooling, long_text=LongText("window", 20, "max"))
            assert np.allclose(response.json(), want, atol=1e-5)
        pair = client.post("/embed", json={"inputs": [[text, "he is good"]]})  # TEI's /embed has no pairs
        assert pair.status_code == 422 and "inputs[0]" in pair.json()["error"]


def test_a_stride_not_smaller_than_the_window_is_refused(tmp_path, capsys):
    from bertkit.cli.main import main
    from bertkit.errors import BertkitError

    directory = make_task_model(tmp_path, "sst2")  # max_seq_length 48: windows of 46 pieces
    with pytest.raises(BertkitError, match="--stride=46"):
        create_app(ServeConfig(model=str(directory), long_text={"long_text": "window", "stride": 46}))
    assert main(["serve", str(directory), "--long-text", "window", "--stride", "60"]) == 1
    assert "--stride=60 must be" in capsys.readouterr().err


def test_the_main_thread_loads_the_model_on_one_thread(tmp_path, monkeypatch):
    # the forward passes run in the batcher's thread; a main thread that had run parallel work
    # of its own slowed them 1.4-1.6x (docs/serving.md), so loading runs on one thread
    import torch

    import bertkit.inference

    directory = make_task_model(tmp_path, "classify")
    seen = []
    real_load = bertkit.inference.load

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real_load(*args, **kwargs)

    monkeypatch.setattr(bertkit.inference, "load", spy)
    before = torch.get_num_threads()
    create_app(ServeConfig(model=str(directory)))
    assert seen == [1]
    assert torch.get_num_threads() == before


def test_a_latin1_body_and_a_taken_port_say_what_is_wrong(classify):
    """Report cases 20 and 59: 'There was an error parsing the body' and uvicorn's
    'Application shutdown complete' did not say what to change."""
    import socket

    from bertkit.errors import BertkitError
    from bertkit.serve.app import check_port

    client, _ = classify
    response = client.post("/predict", content='{"inputs": "café"}'.encode("latin-1"),
                           headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and "not UTF-8" in response.json()["error"]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(BertkitError, match=f"--port {port}: cannot listen"):
            check_port("127.0.0.1", port)


@pytest.mark.parametrize("kind, through_head", [("classify", True), ("regression", True), ("tagging", False),
                                                ("mlm", False)])
def test_health_probes_a_text_scorer_through_its_own_head(tmp_path, kind, through_head):
    """/health's two-token pass takes the route a text scorer's requests take (its head: a
    static-INT8 classifier reads a [CLS]-only graph, and the whole encoder's package was loaded,
    or built for 45 s on a cold start, for the probe alone); other models' passes read every
    position, as their requests do."""
    from bertkit.inference.heads import STATES
    from bertkit.serve.app import Service

    directory = make_task_model(tmp_path, kind)
    bert = load(directory)
    service = Service(ServeConfig(model=str(directory)), bert)
    keys, run_rows = [], bert.run_rows
    bert.run_rows = lambda key, rows: keys.append(key) or run_rows(key, rows)
    client = TestClient(create_app(ServeConfig(model=str(directory)), bert))
    with client:
        assert client.get("/health").status_code == 200
    assert keys and keys[-1] == ((bert.family(),) if through_head else (STATES,))
    assert service.health_probe().rows[0].input_ids == [bert.tokenizer.cls_token_id, bert.tokenizer.sep_token_id]


def test_a_route_handler_runs_alone_without_an_app(tmp_path):
    """Each route is a top-level handler of bertkit.serve.routes: callable with a Service."""
    import asyncio

    from bertkit.serve import routes
    from bertkit.serve import schemas as s
    from bertkit.serve.app import Service

    directory = make_task_model(tmp_path, "classify")
    service = Service(ServeConfig(model=str(directory)), load(directory))
    info = asyncio.run(routes.info(service))
    assert info["bertkit"]["task"] == "text-classification" and info["bertkit"]["labels"] == [
        "negative", "positive", "neutral"]
    tokens = asyncio.run(routes.tokenize(s.TokenizeRequest(inputs="he is good"), service))
    assert [t["text"] for t in tokens[0]] == ["[CLS]", "he", "is", "good", "[SEP]"]


def test_inputs_that_broke_the_server_get_a_4xx_and_it_lives_on(tmp_path):
    """The faults report's tracebacks and amplification: a lone surrogate (/tokenize, /rerank),
    100,000-deep JSON on the model's own route, 5,000 layers on /embed."""
    client, _ = client_for(tmp_path, "regression")
    with client:
        lone = '{"inputs": "a \\ud800 b"}'
        for route, body in (("/tokenize", lone),
                            ("/rerank", '{"query": "he is good", "texts": ["a \\ud800 b"], "return_text": true}')):
            response = client.post(route, content=body, headers={"content-type": "application/json"})
            assert response.status_code == 422 and "lone surrogate" in response.json()["error"], route
        deep = "[" * 100_000 + "]" * 100_000
        response = client.post("/", content=deep, headers={"content-type": "application/json"})
        assert response.status_code == 400 and "nested too deeply" in response.json()["error"]
        assert client.get("/health").status_code == 200
    encoder, _ = client_for(tmp_path, "mlm")
    with encoder:
        response = encoder.post("/embed", json={"inputs": "he is good", "layers": [0] * 5000})
        assert response.status_code == 422 and "layers: at most 3" in response.json()["error"]


def test_the_api_key_can_come_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("BERTKIT_API_KEY", "s3cret")
    client, _ = client_for(tmp_path, "classify")
    with client:
        assert client.post("/predict", json={"inputs": "he is good"}).status_code == 401
        assert client.post("/predict", json={"inputs": "he is good"},
                           headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_fill_mask_and_attention_refuse_a_lone_surrogate_as_every_route_does(tmp_path):
    """2026-11-25 faults #166, #170: /fill-mask and /attention answered 200 after dropping
    the character, where every other route gives the 422 naming it."""
    client, _ = client_for(tmp_path, "mlm")
    with client:
        for route, body in (("/fill-mask", '{"inputs": "he \\ud800 [MASK] good"}'),
                            ("/fill-mask", '{"inputs": ["he is [MASK]", "a \\udfff [MASK]"]}'),
                            ("/attention", '{"inputs": "he \\ud800 is good"}'),
                            ("/attention", '{"inputs": "he is good", "pair": "x \\ud83d"}')):
            response = client.post(route, content=body, headers={"content-type": "application/json"})
            assert response.status_code == 422 and "lone surrogate" in response.json()["error"], (route, body)
        assert client.post("/fill-mask", json={"inputs": "he is [MASK]"}).status_code == 200


def test_fill_mask_inputs_that_are_not_texts_are_a_422(tmp_path):
    """schemathesis, 2026-11-26: {"inputs": [{}]} on /fill-mask was a 500 (the Unicode check
    read an object as a text)."""
    client, _ = client_for(tmp_path, "mlm")
    with client:
        for inputs, said in (([{}], "inputs[0]: expected a string, got dict"),
                             (5, "inputs: expected a string or a list of strings, got int"),
                             (["he is [MASK]", None], "inputs[1]: expected a string, got null")):
            response = client.post("/fill-mask", json={"inputs": inputs})
            assert response.status_code == 422 and said in response.json()["error"], (inputs, response.text)


def test_validation_messages_name_fields_as_the_schema_does(tmp_path):
    """The strict integers' validator leaked into messages: 'ids.list[function-before[_whole(),
    int]].0: Input should be a valid integer' (2026-11-25 faults #26, #30, #31 re-run)."""
    client, _ = client_for(tmp_path, "classify")
    with client:
        response = client.post("/decode", content=b'{"ids": [1e999]}', headers={"content-type": "application/json"})
        message = response.json()["error"]
        assert response.status_code == 422 and "function-before" not in message, message
        assert message.startswith("ids.list[int].0: "), message


def test_similarity_over_max_items_says_the_source_sentence_counts(tmp_path):
    """2026-11-25 faults #232: with --max-items 1, /similarity of one sentence said 'batch
    size 2 > maximum allowed batch size 1', a 2 the client never sent."""
    client, _ = client_for(tmp_path, "mlm", max_items=1)
    with client:
        response = client.post("/similarity", json={"inputs": {"source_sentence": "he", "sentences": ["is good"]}})
        assert response.status_code == 422
        assert "the source_sentence is embedded with the 1 sentence" in response.json()["error"]


def test_a_worker_that_cannot_load_the_model_says_so_in_one_line(tmp_path):
    """2026-11-25 faults #229: with --workers 2 and the model directory removed, each worker
    uvicorn started again printed a 40-line traceback of the factory."""
    import os
    import subprocess
    import sys

    from bertkit.serve.config import ENV_VAR

    env = {**os.environ, ENV_VAR: ServeConfig(model=str(tmp_path / "gone")).to_json()}
    done = subprocess.run([sys.executable, "-c", "from bertkit.serve.app import app_from_env; app_from_env()"],
                          env=env, capture_output=True, text=True, timeout=300)
    # 1, not uvicorn's 3 (a startup failure, which stops the parent and every worker still serving)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"cannot start: {tmp_path / 'gone'}" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_tei_scores_are_best_first_with_ties_in_label_order():
    """TEI's /predict order: highest score first, equal scores in the labels' order; softmax
    over several labels, sigmoid over one, ``top_k`` keeps the best k."""
    from bertkit.serve.app import tei_scores

    raw = tei_scores(np.array([1.0, 3.0, 3.0, -2.0]), ["a", "b", "c", "d"], raw=True)
    assert [x["label"] for x in raw] == ["b", "c", "a", "d"] and raw[0]["score"] == 3.0
    best = tei_scores(np.array([0.0, 2.0]), ["neg", "pos"], raw=False, top_k=1)
    assert [x["label"] for x in best] == ["pos"] and abs(best[0]["score"] - 1 / (1 + np.exp(-2.0))) < 1e-12
    one = tei_scores(np.array([0.5]), ["score"], raw=False)
    assert abs(one[0]["score"] - 1 / (1 + np.exp(-0.5))) < 1e-12 and isinstance(one[0]["score"], float)
    # extremes: no overflow, the scores numpy's float64 formulas give
    far = tei_scores(np.array([-800.0, 750.0], dtype=np.float32), ["a", "b"], raw=False, function="sigmoid")
    assert [(x["label"], x["score"]) for x in far] == [("b", 1.0), ("a", 0.0)]
    big = tei_scores(np.array([1000.0, 999.0, -1000.0]), ["a", "b", "c"], raw=False)
    e = np.exp(np.array([0.0, -1.0, -2000.0]))
    assert [x["score"] for x in big] == pytest.approx((e / e.sum()).tolist(), rel=1e-12, abs=1e-300)
    rows = np.array([[0.25, -1.5]], dtype=np.float32)  # a row of a batch's (1, labels) logits
    assert [x["label"] for x in tei_scores(rows[0], ["neg", "pos"], raw=False)] == ["neg", "pos"]


TIMING = ("x-compute-time", "x-total-time", "x-tokenization-time", "x-queue-time", "x-inference-time",
          "date", "content-length")


@pytest.mark.parametrize("path, body, direct", [
    ("/predict", b'{"inputs": "the man went to the store ."}', True),
    ("/predict", b'{"inputs": [["he is good"], ["hello world", "the cafe"]], "raw_scores": true, "x": 1}', True),
    ("/predict", b'{"inputs": "good night", "parameters": {"top_k": 1}, "truncate": true}', True),
    ("/predict", b'{"inputs": "' + b"the man " * 80 + b'", "truncate": false}', True),  # the route's 413
    ("/predict", b'{"inputs": 3}', True),  # a valid body the route refuses (422)
    ("/predict", b'{"inputs": ', False),  # bad JSON
    ("/predict", b'{"raw_scores": "maybe"}', False),
    ("/predict", b'', False),
    ("/predict", b'[' * 100_000 + b']' * 100_000, False),  # deeper than json.loads goes
    ("/predict", '{"inputs": "café"}'.encode("latin-1"), False),
    ("/attention", b'{"inputs": "he is good", "layer": 1, "head": 0}', True),
    ("/attention", b'{"inputs": "he is good", "layer": "first"}', False),
])
def test_the_direct_route_answers_as_the_fastapi_route(classify, path, body, direct):
    """A model route's request skips FastAPI's request handling when its body is valid
    (``routes.Direct``), and is FastAPI's route's otherwise: either way the answer, its status and
    its headers are those of the FastAPI route alone (timings aside)."""
    from bertkit.serve.routes import Direct

    client, _ = classify
    routes = client.app.router.routes
    route = next(r.endpoint for r in routes if isinstance(r.endpoint, Direct) and r.path == path)
    handed_on = []
    fallback = route.fallback

    async def recorded(scope, receive, send):
        handed_on.append(scope["path"])
        await fallback(scope, receive, send)

    route.fallback = recorded
    headers = {"Content-Type": "application/json"}
    got = client.post(path, content=body, headers=headers)
    kept = list(routes)
    routes[:] = [r for r in routes if not isinstance(getattr(r, "endpoint", None), Direct)]
    try:
        want = client.post(path, content=body, headers=headers)
    finally:
        routes[:] = kept
    assert (got.status_code, got.content) == (want.status_code, want.content)
    assert {k: v for k, v in got.headers.items() if k not in TIMING} == {
        k: v for k, v in want.headers.items() if k not in TIMING}
    assert handed_on == ([] if direct else [path])
