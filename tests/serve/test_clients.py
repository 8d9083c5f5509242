"""Clients no one here wrote, against a real ``bertkit serve``: Hugging Face's ``InferenceClient``
(its text-embeddings-inference calls) and OpenAI's ``embeddings.create``; answers compared with
the Python API's."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("uvicorn")
hub = pytest.importorskip("huggingface_hub")

from bertkit.inference import load  # noqa: E402
from bertkit.serve import ServeConfig, create_app  # noqa: E402

from ..task_models import make_task_model  # noqa: E402
from .server import running  # noqa: E402

TEXTS = ["the man went to the store .", "he is good", "she was bad , the night was good !"]


def unit(v):
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    directory = make_task_model(tmp_path_factory.mktemp("clients"), "classify")
    with running(create_app(ServeConfig(model=str(directory)))) as url:
        yield url, load(directory)


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    directory = make_task_model(tmp_path_factory.mktemp("clients"), "mlm")
    with running(create_app(ServeConfig(model=str(directory), api_key="s3cret"))) as url:
        yield url, load(directory)


def test_inference_client_text_classification(classifier):
    url, bert = classifier
    client = hub.InferenceClient(base_url=url)
    for text in TEXTS:
        got = client.text_classification(text)
        want = bert.predict(text)
        got = got if isinstance(got, list) else [got]  # TEI's flat answer: the client keeps the best
        assert got[0].label == want[0]["label"]
        assert got[0].score == pytest.approx(want[0]["score"], abs=1e-5)
    endpoint = hub.InferenceClient(model=url, provider="hf-inference")  # health: TEI's endpoint calls
    assert endpoint.health_check()
    info = endpoint.get_endpoint_info()
    assert info["model_type"]["classifier"]["id2label"] == {"0": "negative", "1": "positive", "2": "neutral"}


def test_inference_client_embeddings_and_similarity_with_an_api_key(encoder):
    url, bert = encoder
    refused = hub.InferenceClient(base_url=url)
    with pytest.raises(Exception) as error:
        refused.feature_extraction("he is good")
    assert "401" in str(error.value)
    client = hub.InferenceClient(base_url=url, api_key="s3cret")
    got = np.asarray(client.feature_extraction("he is good"))
    assert got.shape == (1, 16)
    assert np.allclose(got[0], unit(bert.embed("he is good")), atol=1e-5)  # TEI: cls pooling, normalised
    raw = np.asarray(client.feature_extraction("he is good", normalize=False))
    assert np.allclose(raw[0], bert.embed("he is good"), atol=1e-5)
    sims = client.sentence_similarity("the man went to the store .", ["he is good", "the man went"])
    vectors = unit(bert.embed(["the man went to the store .", "he is good", "the man went"]))
    assert sims == pytest.approx([float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])], abs=1e-5)


def test_openai_client_embeddings(encoder):
    openai = pytest.importorskip("openai")
    url, bert = encoder
    client = openai.OpenAI(base_url=url + "/v1", api_key="s3cret")
    answer = client.embeddings.create(input=TEXTS, model="bertkit")
    assert [d.index for d in answer.data] == [0, 1, 2]
    got = np.asarray([d.embedding for d in answer.data])
    assert np.allclose(got, unit(bert.embed(TEXTS)), atol=1e-5)
    assert answer.usage.prompt_tokens == sum(len(bert.tokenizer.encode(t).input_ids) for t in TEXTS)
    floats = client.embeddings.create(input="he is good", model="bertkit", encoding_format="float")
    assert np.allclose(floats.data[0].embedding, unit(bert.embed("he is good")), atol=1e-5)
    cut = client.embeddings.create(input="he is good", model="bertkit", dimensions=4, encoding_format="float")
    assert np.allclose(cut.data[0].embedding, unit(bert.embed("he is good")[:4]), atol=1e-5)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=url + "/v1", api_key="wrong").embeddings.create(input="x", model="m")


@pytest.mark.parametrize("kind", ["ner", "qa"])
def test_inference_client_bertkit_heads_on_the_model_route(tmp_path, kind):
    # TEI serves no tagger or QA model; bertkit answers InferenceClient's calls for them on POST /
    directory = make_task_model(tmp_path, kind)
    bert = load(directory)
    with running(create_app(ServeConfig(model=str(directory)))) as url:
        client = hub.InferenceClient(base_url=url)
        if kind == "ner":
            text = "John went to the cafe in Paris ."
            got = client.token_classification(text)
            want = bert.predict(text)
            assert [(e.entity_group, e.start, e.end, e.word) for e in got] == \
                [(e["entity_group"], e["start"], e["end"], e["word"]) for e in want]
        else:
            got = client.question_answering(question="who went ?", context="the man went to the store .")
            want = bert.predict({"question": "who went ?", "context": "the man went to the store ."})
            assert (got.answer, got.start, got.end) == (want["answer"], want["start"], want["end"])
            assert got.score == pytest.approx(want["score"], abs=1e-5)


def test_inference_client_feature_extraction_with_encoding_format_and_fill_mask(encoder):
    url, bert = encoder
    client = hub.InferenceClient(base_url=url, api_key="s3cret")
    want = unit(bert.embed("he is good"))
    for encoding in ("float", "base64"):  # TEI ignores the field and answers floats; so does bertkit
        got = np.asarray(client.feature_extraction("he is good", encoding_format=encoding))
        assert np.allclose(got[0], want, atol=1e-5)
    masks = hub.InferenceClient(base_url=url + "/fill-mask", api_key="s3cret")  # the client sends parameters
    text = "the man went to the [MASK] ."
    got = masks.fill_mask(text, top_k=2)
    assert [(c.token, c.token_str) for c in got] == [(c["token"], c["token_str"]) for c in bert.fill_mask(text, top_k=2)[0]]


def test_inference_client_token_classification_and_qa_parameters(tmp_path):
    ner, qa = make_task_model(tmp_path, "ner"), make_task_model(tmp_path, "squad2")
    text = "John went to the cafe in Paris ."
    with running(create_app(ServeConfig(model=str(ner)))) as url:
        client = hub.InferenceClient(base_url=url)
        words = client.token_classification(text, aggregation_strategy="none", ignore_labels=[])
        assert [(w.word, w.start, w.end) for w in words] == [(w, text.index(w), text.index(w) + len(w))
                                                               for w in text.split()]
        assert all(w.entity and w.entity_group is None for w in words)
        grouped = client.token_classification(text, aggregation_strategy="simple")
        assert [(e.entity_group, e.start, e.end) for e in grouped] == \
            [(e["entity_group"], e["start"], e["end"]) for e in load(ner).predict(text)]
    question = {"question": "who went to the store ?", "context": "the man went to the store . he is good ."}
    with running(create_app(ServeConfig(model=str(qa)))) as url:
        client = hub.InferenceClient(base_url=url)
        best = client.question_answering(**question)
        three = client.question_answering(**question, top_k=3)
        assert len(three) == 3 and (three[0].answer, three[0].start) == (best.answer, best.start)
        answered = client.question_answering(**question, handle_impossible_answer=False, max_answer_len=2)
        assert answered.answer and len(load(qa).tokenizer.text_to_ids(answered.answer)) <= 2
