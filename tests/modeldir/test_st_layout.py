"""sentence-transformers' layout: ``bertkit st-layout`` makes a directory that
``SentenceTransformer(dir)`` loads with bertkit's embeddings, and that ``bertkit serve`` (as TEI)
takes its pooling from."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bertkit.cli.main import main
from bertkit.errors import BertkitError
from bertkit.inference import load
from bertkit.modeldir.st_layout import read_st_pooling
from tests.task_models import make_task_model

TEXTS = ["the man went to the store .", "he is good", "she was bad , the night was good !"]


@pytest.mark.parametrize("pooling", ["cls", "mean", "max"])
def test_sentence_transformers_loads_bertkit_embeddings(tmp_path, pooling):
    st = pytest.importorskip("sentence_transformers")
    directory = make_task_model(tmp_path, "mlm")
    assert main(["st-layout", str(directory), "--pooling", pooling]) == 0
    assert read_st_pooling(directory) == pooling
    model = st.SentenceTransformer(str(directory), device="cpu")
    got = model.encode(TEXTS)
    want = load(directory).embed(TEXTS, pool=pooling)
    assert np.abs(got - want).max() < 1e-5
    assert main(["st-layout", str(directory), "--pooling", pooling, "--normalize"]) == 0
    unit = st.SentenceTransformer(str(directory), device="cpu").encode(TEXTS)
    assert np.abs(unit - want / np.linalg.norm(want, axis=1, keepdims=True)).max() < 1e-5


def test_the_server_takes_the_directorys_pooling(tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from bertkit.serve import ServeConfig, create_app

    directory = make_task_model(tmp_path, "mlm")
    assert main(["st-layout", str(directory), "--pooling", "mean"]) == 0
    with TestClient(create_app(ServeConfig(model=str(directory)))) as client:
        assert client.get("/info").json()["model_type"] == {"embedding": {"pooling": "mean"}}
        got = client.post("/embed", json={"inputs": "he is good", "normalize": False}).json()
    assert np.allclose(got, load(directory).embed(["he is good"], pool="mean"), atol=1e-5)
    (directory / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_lasttoken": True}))
    with pytest.raises(BertkitError, match="1_Pooling/config.json: a pooling"):
        read_st_pooling(directory)


def _prompted_model(tmp_path):
    """A tiny model in sentence-transformers' layout with two prompts, ``query`` the default."""
    directory = make_task_model(tmp_path, "mlm")
    assert main(["st-layout", str(directory), "--pooling", "mean", "--prompt", "query=the man : ",
                 "--prompt", "doc=she was ", "--default-prompt-name", "query"]) == 0
    return directory


def test_prompts_are_applied_as_sentence_transformers_applies_them(tmp_path):
    st = pytest.importorskip("sentence_transformers")
    directory = _prompted_model(tmp_path)
    assert main(["st-layout", str(directory), "--pooling", "mean"]) == 0  # the prompts are kept
    model = st.SentenceTransformer(str(directory), device="cpu")
    bert = load(directory)
    for name in ("doc", "query", None):  # None: the default prompt, query's
        got = model.encode(TEXTS, prompt_name=name)
        assert np.abs(got - bert.embed(TEXTS, pool="mean", prompt_name=name)).max() < 1e-5
    assert np.abs(bert.embed(TEXTS) - bert.embed(["the man : " + t for t in TEXTS], prompt_name="doc")).max() > 1e-3
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    assert main(["embed", str(directory), "--input", str(tmp_path / "texts.txt"), "--prompt-name", "doc",
                 "--pool", "mean", "--output", str(tmp_path / "v.npy")]) == 0
    assert np.abs(np.load(tmp_path / "v.npy") - model.encode(TEXTS, prompt_name="doc")).max() < 1e-5


def test_the_server_applies_the_prompts(tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from bertkit.serve import ServeConfig, create_app

    directory = _prompted_model(tmp_path)
    bert = load(directory)
    with TestClient(create_app(ServeConfig(model=str(directory)))) as client:
        doc = client.post("/embed", json={"inputs": TEXTS, "prompt_name": "doc", "normalize": False}).json()
        default = client.post("/embed", json={"inputs": TEXTS[0], "normalize": False}).json()
        openai = client.post("/v1/embeddings", json={"input": TEXTS[0]}).json()["data"][0]["embedding"]
        unknown = client.post("/embed", json={"inputs": "he", "prompt_name": "nope"})
        similarity = client.post("/similarity", json={"inputs": {"source_sentence": TEXTS[0], "sentences": [
            TEXTS[1]]}, "parameters": {"prompt_name": "doc"}}).json()
    assert np.abs(np.array(doc) - bert.embed(TEXTS, pool="mean", prompt_name="doc")).max() < 1e-5
    want = bert.embed(TEXTS[:1], pool="mean")  # the default prompt, as SentenceTransformer.encode applies it
    assert np.abs(np.array(default) - want).max() < 1e-5
    assert np.abs(np.array(openai) - want / np.linalg.norm(want)).max() < 1e-5
    assert unknown.status_code == 422 and "('query', 'doc')" in unknown.json()["error"]
    u, v = bert.embed(TEXTS[:2], pool="mean", prompt_name="doc")
    assert abs(similarity[0] - u @ v / np.linalg.norm(u) / np.linalg.norm(v)) < 1e-5


def test_a_default_prompt_must_name_a_prompt(tmp_path, capsys):
    directory = make_task_model(tmp_path, "mlm")
    assert main(["st-layout", str(directory), "--pooling", "cls", "--default-prompt-name", "query"]) != 0
    assert "--default-prompt-name 'query' names no prompt" in capsys.readouterr().err
    assert not (directory / "modules.json").exists()
    assert main(["st-layout", str(directory), "--pooling", "cls", "--prompt", "query"]) != 0
    assert "--prompt must be NAME=TEXT" in capsys.readouterr().err
    (directory / "config_sentence_transformers.json").write_text(json.dumps({"prompts": {"q": 1}}))
    with pytest.raises(BertkitError, match="prompts must map names to texts"):
        load(directory)
