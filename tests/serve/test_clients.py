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


def test_llama_index_text_embeddings_inference(encoder):
    # llama-index's TEI class posts {"inputs": [...], "truncate": ...} to /embed and reads the JSON
    # without looking at the status; it sends no "normalize", so TEI's default (unit vectors) holds
    tei = pytest.importorskip("llama_index.embeddings.text_embeddings_inference")
    import asyncio

    import httpx

    url, bert = encoder
    want = unit(bert.embed(TEXTS))
    keys = []
    model = tei.TextEmbeddingsInference(base_url=url, model_name="bertkit", embed_batch_size=2,
                                        auth_token=lambda base: keys.append(base) or "s3cret")
    one = np.asarray(model.get_text_embedding(TEXTS[1]))
    assert one.shape == (16,) and np.allclose(one, want[1], atol=1e-5)
    assert np.linalg.norm(one) == pytest.approx(1.0, abs=1e-5)
    assert np.allclose(model.get_query_embedding(TEXTS[0]), want[0], atol=1e-5)
    batch = np.asarray(model.get_text_embedding_batch(TEXTS))  # batches of 2: two requests
    assert np.allclose(batch, want, atol=1e-5)
    assert np.allclose(asyncio.run(model.aget_text_embedding_batch(TEXTS)), want, atol=1e-5)
    assert np.allclose(asyncio.run(model.aget_query_embedding(TEXTS[2])), want[2], atol=1e-5)
    assert keys and set(keys) == {url}  # the key callable is asked with the base URL
    instructed = tei.TextEmbeddingsInference(base_url=url, model_name="bertkit", auth_token="s3cret",
                                             query_instruction="query:", text_instruction="passage:")
    assert np.allclose(instructed.get_query_embedding("he is good"), unit(bert.embed("query: he is good")), atol=1e-5)
    assert np.allclose(instructed.get_text_embedding("he is good"), unit(bert.embed("passage: he is good")), atol=1e-5)
    long = " ".join(["the man went to the store ."] * 20)  # past the model's 64 positions
    with pytest.warns(UserWarning, match="truncated"):  # the Python API's truncation, as the server's
        cut = unit(bert.embed("passage: " + long))
    assert np.allclose(instructed.get_text_embedding(long), cut, atol=1e-5)
    strict = tei.TextEmbeddingsInference(base_url=url, model_name="bertkit", auth_token="s3cret", truncate_text=False)
    refused = (KeyError, httpx.HTTPStatusError)  # it indexes the error body ([0] of a dict): KeyError
    with pytest.raises(refused):  # 413, TEI's answer to a long input with "truncate": false
        strict.get_text_embedding(long)
    for token in (None, "wrong"):  # 401
        with pytest.raises(refused):
            tei.TextEmbeddingsInference(base_url=url, model_name="bertkit", auth_token=token).get_text_embedding("x")


def langchain_embeddings(url, **options):
    """langchain's ``HuggingFaceEndpointEmbeddings`` on a TEI URL. Its versions before 1.2.2 take the
    URL as ``model``; later ones refuse a URL there, so the clients it made are swapped for ones
    on the URL (huggingface_hub's, as it builds them, with its token)."""
    lc = pytest.importorskip("langchain_huggingface")
    try:
        return lc.HuggingFaceEndpointEmbeddings(model=url, **options)
    except ValueError as error:
        assert "not a URL" in str(error)
    embeddings = lc.HuggingFaceEndpointEmbeddings(model="bertkit/test", **options)
    token = embeddings.huggingfacehub_api_token
    embeddings.client = hub.InferenceClient(model=url, token=token)
    embeddings.async_client = hub.AsyncInferenceClient(model=url, token=token)
    return embeddings


def test_langchain_huggingface_endpoint_embeddings(encoder, monkeypatch):
    # langchain's class calls huggingface_hub's feature_extraction on the model URL (POST /)
    pytest.importorskip("langchain_huggingface")
    import asyncio

    for name in ("HF_TOKEN", "HUGGINGFACEHUB_API_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    url, bert = encoder
    want = unit(bert.embed(TEXTS))
    embeddings = langchain_embeddings(url, huggingfacehub_api_token="s3cret")
    query = np.asarray(embeddings.embed_query(TEXTS[1]))
    assert query.shape == (16,) and np.allclose(query, want[1], atol=1e-5)
    assert np.linalg.norm(query) == pytest.approx(1.0, abs=1e-5)
    assert np.allclose(embeddings.embed_documents(TEXTS), want, atol=1e-5)
    assert np.allclose(embeddings.embed_documents(["he is\ngood"]), unit(bert.embed(["he is good"])), atol=1e-5)

    async def both():  # one loop: the async client keeps its connections on the loop it began on
        try:
            return await embeddings.aembed_documents(TEXTS), await embeddings.aembed_query(TEXTS[0])
        finally:
            await embeddings.async_client.close()

    documents, query = asyncio.run(both())
    assert np.allclose(documents, want, atol=1e-5) and np.allclose(query, want[0], atol=1e-5)
    raw = langchain_embeddings(url, huggingfacehub_api_token="s3cret", model_kwargs={"normalize": False})
    assert np.allclose(raw.embed_documents(TEXTS), bert.embed(TEXTS), atol=1e-5)
    monkeypatch.setenv("HUGGINGFACEHUB_API_TOKEN", "s3cret")  # the key from the environment
    assert np.allclose(langchain_embeddings(url).embed_query(TEXTS[2]), want[2], atol=1e-5)
    monkeypatch.delenv("HUGGINGFACEHUB_API_TOKEN")
    with pytest.raises(Exception) as error:
        langchain_embeddings(url, huggingfacehub_api_token="wrong").embed_query("x")
    assert "401" in str(error.value)
