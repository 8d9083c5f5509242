"""TEI's tolerance and the Hugging Face inference API's parameters: unknown fields ignored and
named in ``X-Bertkit-Ignored``; ``top_k``, ``max_answer_len``, ``handle_impossible_answer``,
``aggregation_strategy``, ``ignore_labels`` and fill-mask's ``parameters`` honoured by the
tasks that can, named as ignored by the others; TEI's 424 for an embedding route on a model
with a task head."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from bertkit.inference import load  # noqa: E402
from bertkit.serve import ServeConfig, create_app  # noqa: E402

from ..task_models import make_task_model  # noqa: E402

QUESTION = {"question": "who went to the store ?", "context": "the man went to the store . he is good ."}
IGNORED = "x-bertkit-ignored"


def served(tmp_path, kind):
    directory = make_task_model(tmp_path, kind)
    return TestClient(create_app(ServeConfig(model=str(directory)))), load(directory)


def test_unknown_fields_are_ignored_and_named(tmp_path):
    client, bert = served(tmp_path, "classify")
    with client:
        answer = client.post("/predict", json={"inputs": "he is good", "raw_score": True,
                                               "parameters": {"top_k": 1, "stride": 3}})
        assert answer.status_code == 200 and answer.headers[IGNORED] == "raw_score,parameters.stride"
        assert [x["label"] for x in answer.json()] == [bert.predict("he is good")[0]["label"]]  # top_k honoured
        plain = client.post("/predict", json={"inputs": "he is good"})
        assert IGNORED not in plain.headers
    encoder, _ = served(tmp_path, "mlm")
    with encoder:
        for encoding in ("float", "base64"):  # InferenceClient.feature_extraction sends it; TEI ignores it
            vectors = encoder.post("/embed", json={"inputs": "he is good", "encoding_format": encoding})
            assert vectors.status_code == 200 and vectors.headers[IGNORED] == "encoding_format"
            assert isinstance(vectors.json()[0][0], float)
        openai = encoder.post("/v1/embeddings", json={"input": "he", "extra_body_field": 1})
        assert openai.status_code == 200 and openai.headers[IGNORED] == "extra_body_field"


def test_an_embedding_route_on_a_model_with_a_task_head_is_tei_s_424(tmp_path):
    client, _ = served(tmp_path, "classify")
    with client:
        for route, body in (("/embed", {"inputs": "he"}), ("/embed_all", {"inputs": "he"}),
                            ("/v1/embeddings", {"input": "he"}),
                            ("/similarity", {"inputs": {"source_sentence": "he", "sentences": ["a"]}})):
            response = client.post(route, json=body)
            assert response.status_code == 424, route
            assert "Model is not an embedding model" in response.text, route


def test_token_classification_parameters(tmp_path):
    client, bert = served(tmp_path, "ner")
    text = "John went to the cafe in Paris ."
    with client:
        grouped = client.post("/predict", json={"inputs": text}).json()
        assert grouped == client.post("/predict", json={"inputs": text, "parameters": {
            "aggregation_strategy": "simple"}}).json() == bert.predict(text)
        words = client.post("/predict", json={"inputs": text, "parameters": {
            "aggregation_strategy": "none", "ignore_labels": []}}).json()
        assert [w["word"] for w in words] == text.split() and all("entity" in w for w in words)
        assert all(text[w["start"]:w["end"]] == w["word"] for w in words)
        tags = {w["entity"] for w in words}
        kept = client.post("/predict", json={"inputs": text, "parameters": {
            "aggregation_strategy": "none", "ignore_labels": sorted(tags)[:1]}}).json()
        assert [w for w in words if w["entity"] != sorted(tags)[0]] == kept
        default_none = client.post("/predict", json={"inputs": text, "parameters": {"aggregation_strategy": "none"}})
        assert all(w["entity"] != "O" for w in default_none.json())  # HF's default ignore_labels ["O"]
        ignored = client.post("/predict", json={"inputs": text, "raw_scores": True,
                                                "parameters": {"top_k": 2, "function_to_apply": "none"}})
        assert ignored.headers[IGNORED] == "parameters.function_to_apply,parameters.top_k,raw_scores"
        assert ignored.json() == grouped
        refused = client.post("/predict", json={"inputs": text, "parameters": {"aggregation_strategy": "max"}})
        assert refused.status_code == 422 and "aggregation_strategy" in refused.json()["error"]


@pytest.mark.parametrize("kind", ["qa", "squad2"])
def test_question_answering_parameters(tmp_path, kind):
    client, bert = served(tmp_path, kind)
    with client:
        best = client.post("/predict", json={"inputs": QUESTION}).json()
        assert best == pytest.approx(bert.predict(QUESTION))
        three = client.post("/predict", json={"inputs": QUESTION, "parameters": {"top_k": 3}})
        assert IGNORED not in three.headers
        answers = three.json()
        assert len(answers) == 3 and answers[0] == best
        assert len({a["answer"] for a in answers}) == 3
        assert all(QUESTION["context"][a["start"]:a["end"]] == a["answer"] for a in answers[1:])
        short = client.post("/predict", json={"inputs": QUESTION, "parameters": {"max_answer_len": 1}}).json()
        assert len(bert.tokenizer.text_to_ids(short["answer"])) <= 1
        never = client.post("/predict", json={"inputs": QUESTION, "parameters": {
            "handle_impossible_answer": False}}).json()
        assert never["answer"] != ""
        maybe = client.post("/predict", json={"inputs": QUESTION, "parameters": {
            "handle_impossible_answer": True}}).json()
        assert maybe["answer"] in ("", never["answer"])
        if kind == "squad2":  # a SQuAD 2.0 model abstains at its saved threshold by default
            assert maybe == best


def test_fill_mask_takes_the_hf_parameters(tmp_path):
    client, bert = served(tmp_path, "mlm")
    with client:
        text = "the man went to the [MASK] ."
        two = client.post("/fill-mask", json={"inputs": text, "parameters": {"top_k": 2, "targets": ["cafe"]}})
        assert two.status_code == 200 and two.headers[IGNORED] == "parameters.targets"
        assert [c["token"] for c in two.json()] == [c["token"] for c in bert.fill_mask(text, top_k=2)[0]]
