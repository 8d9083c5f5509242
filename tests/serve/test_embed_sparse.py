"""``POST /embed_sparse`` (TEI's route): SPLADE sparse vectors of a masked-LM model, the
non-zero terms ``{index, value}`` of ``max over tokens of log(1 + relu(logits))``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

from bertkit.errors import BertkitError  # noqa: E402
from bertkit.inference import load  # noqa: E402
from bertkit.serve import ServeConfig, create_app  # noqa: E402

from ..task_models import make_task_model  # noqa: E402

TEXTS = ["the man went to the store .", "he is good", "she was bad , the night was good !"]
SPLADE = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "models" / "bert-tiny-splade"


def splade_reference(bert, text: str) -> np.ndarray:
    """The dense SPLADE vector of one text, computed here from the engine's model."""
    enc = bert.tokenizer.encode(text, max_length=bert.max_length)
    ids = torch.tensor([enc.input_ids])
    with torch.inference_mode():
        logits = bert.model(ids, torch.zeros_like(ids), torch.ones_like(ids)).logits[0].float()
    return torch.log1p(torch.relu(logits)).max(0).values.numpy()


def as_dense(answer: list[dict], size: int) -> np.ndarray:
    vector = np.zeros(size, dtype=np.float64)
    vector[[t["index"] for t in answer]] = [t["value"] for t in answer]
    return vector


def test_embed_sparse_answers_the_nonzero_splade_terms(tmp_path):
    directory = make_task_model(tmp_path, "mlm")
    bert = load(directory)
    with TestClient(create_app(ServeConfig(model=str(directory)))) as client:
        answer = client.post("/embed_sparse", json={"inputs": TEXTS}).json()
        one = client.post("/embed_sparse", json={"inputs": TEXTS[1]}).json()
    # a lone text and the same text in a batch: the same terms, values to float rounding (a
    # matrix product's rows may round apart by the rows beside them: MKL on the AMD EPYC does)
    assert len(answer) == 3 and len(one) == 1
    assert [t["index"] for t in one[0]] == [t["index"] for t in answer[1]]
    np.testing.assert_allclose([t["value"] for t in one[0]], [t["value"] for t in answer[1]], atol=1e-6)
    for text, terms in zip(TEXTS, answer):
        indices = [t["index"] for t in terms]
        assert indices == sorted(indices) and all(t["value"] > 0 for t in terms)
        want = splade_reference(bert, text)
        assert set(indices) == set(np.flatnonzero(want))
        np.testing.assert_allclose(as_dense(terms, len(want)), want, atol=1e-5)


def test_a_model_without_a_masked_lm_head_is_refused(tmp_path):
    directory = make_task_model(tmp_path, "classify")
    with TestClient(create_app(ServeConfig(model=str(directory)))) as client:
        response = client.post("/embed_sparse", json={"inputs": "he is good"})
    assert response.status_code == 424 and "no masked-LM head" in response.json()["error"]


@pytest.mark.skipif(not SPLADE.is_dir(), reason="the shared SPLADE checkpoint is absent")
def test_the_shared_splade_checkpoint_equals_transformers():
    transformers = pytest.importorskip("transformers")
    texts = ["what is the capital of france?", "BERT is a bidirectional transformer encoder.",
             "A man is playing a flute."]
    with TestClient(create_app(ServeConfig(model=str(SPLADE)))) as client:
        answer = client.post("/embed_sparse", json={"inputs": texts}).json()
    tok = transformers.AutoTokenizer.from_pretrained(str(SPLADE))
    model = transformers.AutoModelForMaskedLM.from_pretrained(str(SPLADE)).eval()
    batch = tok(texts, padding=True, return_tensors="pt")
    with torch.inference_mode():
        logits = model(**batch).logits
    want = (torch.log1p(torch.relu(logits)) * batch["attention_mask"][..., None]).max(1).values.numpy()
    for terms, vector in zip(answer, want):
        np.testing.assert_allclose(as_dense(terms, len(vector)), vector, atol=1e-4)
        top = sorted(terms, key=lambda t: -t["value"])[:10]
        assert [t["index"] for t in top] == list(np.argsort(-vector, kind="stable")[:10])


def test_pooling_splade_serves_the_dense_vector_on_embed_as_tei(tmp_path, capsys):
    directory = make_task_model(tmp_path, "mlm")
    bert = load(directory)
    with TestClient(create_app(ServeConfig(model=str(directory), pooling="splade"))) as client:
        dense = client.post("/embed", json={"inputs": TEXTS, "normalize": False}).json()
        sparse = client.post("/embed_sparse", json={"inputs": TEXTS}).json()
        cut = client.post("/embed", json={"inputs": TEXTS[0], "normalize": False, "dimensions": 7}).json()
        normalized = client.post("/embed", json={"inputs": "he is good"})
        every_token = client.post("/embed_all", json={"inputs": "he is good"})
        layers = client.post("/embed", json={"inputs": "he is good", "normalize": False, "layers": [-2]})
        mean = client.post("/embed", json={"inputs": TEXTS[0], "normalize": False, "pooling": "mean"}).json()
        info = client.get("/info").json()
    size = bert.model.config.vocab_size
    for vector, terms, text in zip(dense, sparse, TEXTS):
        assert len(vector) == size
        np.testing.assert_allclose(vector, as_dense(terms, size), atol=1e-6)
        np.testing.assert_allclose(vector, splade_reference(bert, text), atol=1e-5)
    assert len(cut) == 1 and len(cut[0]) == 7
    np.testing.assert_allclose(cut[0], dense[0][:7], atol=1e-6)  # lone vs in a batch: rounding
    assert normalized.status_code == 424 and "`normalize` is not available for SPLADE" in normalized.json()["error"]
    assert every_token.status_code == 424 and "`embed_all` is not available" in every_token.json()["error"]
    assert layers.status_code == 422 and "layers" in layers.json()["error"]
    assert len(mean[0]) == bert.model.config.hidden_size  # a request's own pooling still wins
    assert info["model_type"] == {"embedding": {"pooling": "splade"}}
    assert "pooled by splade (--pooling)" in capsys.readouterr().err


def test_pooling_splade_needs_a_masked_lm_head(tmp_path):
    directory = make_task_model(tmp_path, "classify")
    with pytest.raises(BertkitError, match="--pooling splade: .*no masked-LM head"):
        create_app(ServeConfig(model=str(directory), pooling="splade"))


@pytest.mark.parametrize("pooling", ["cls", "mean", "max"])
def test_pooling_chooses_the_embed_default(tmp_path, pooling, capsys):
    directory = make_task_model(tmp_path, "mlm")
    bert = load(directory)
    with TestClient(create_app(ServeConfig(model=str(directory), pooling=pooling))) as client:
        answer = client.post("/embed", json={"inputs": TEXTS, "normalize": False}).json()
        info = client.get("/info").json()
    np.testing.assert_allclose(answer, bert.embed(TEXTS, pool=pooling), atol=1e-5)
    assert info["model_type"] == {"embedding": {"pooling": pooling}}
    assert f"pooled by {pooling} (--pooling)" in capsys.readouterr().err


def test_a_directory_naming_no_pooling_says_which_it_uses(tmp_path, capsys):
    directory = make_task_model(tmp_path, "mlm")
    create_app(ServeConfig(model=str(directory)))
    line = capsys.readouterr().err
    assert "pooled by cls (the model directory names no pooling; --pooling chooses" in line


def test_pooling_on_a_classifier_is_ignored_with_a_line(tmp_path, capsys):
    directory = make_task_model(tmp_path, "classify")
    create_app(ServeConfig(model=str(directory), pooling="mean"))
    assert "--pooling mean ignored: the model is a classifier" in capsys.readouterr().err


def test_the_engine_and_the_route_give_the_same_terms(tmp_path):
    directory = make_task_model(tmp_path, "mlm")
    bert = load(directory)
    with TestClient(create_app(ServeConfig(model=str(directory)))) as client:
        answer = client.post("/embed_sparse", json={"inputs": TEXTS}).json()
    library = bert.embed_sparse(TEXTS, batch_size=2)
    assert [[t["index"] for t in terms] for terms in library] == [[t["index"] for t in terms] for terms in answer]
    for mine, theirs in zip(library, answer):
        np.testing.assert_allclose([t["value"] for t in mine], [t["value"] for t in theirs], atol=1e-6)
    assert bert.embed_sparse(TEXTS[1]) == library[1]


def test_a_directory_declaring_its_pooling_is_served_with_it(tmp_path, capsys):
    from bertkit.modeldir.st_layout import write_st_layout

    directory = make_task_model(tmp_path, "mlm")
    bert = load(directory)
    write_st_layout(directory, "max", bert.model.config.hidden_size, bert.max_length, False)
    with TestClient(create_app(ServeConfig(model=str(directory)))) as client:
        answer = client.post("/embed", json={"inputs": TEXTS, "normalize": False}).json()
    np.testing.assert_allclose(answer, bert.embed(TEXTS, pool="max"), atol=1e-5)
    assert "pooled by max (the model directory's: its 1_Pooling/config.json" in capsys.readouterr().err
