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
