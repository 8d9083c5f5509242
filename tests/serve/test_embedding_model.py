"""A sentence-embedding model fine-tuned by bertkit, served: ``/embed`` answers with the pooling
it was trained with, as ``load().embed`` does."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

from bertkit.finetuning.config import FinetuneConfig  # noqa: E402
from bertkit.finetuning.loop import finetune  # noqa: E402
from bertkit.inference import load  # noqa: E402
from bertkit.serve import ServeConfig, create_app  # noqa: E402
from bertkit.tasks import get_task  # noqa: E402
from tests.finetune_helpers import FAST, make_model, one_thread  # noqa: E402,F401

TEXTS = ["the man went to the store", "good day", "she was bad , the night was good"]


def test_embed_serves_the_trained_pooling(tmp_path):
    model = make_model(tmp_path / "base")
    rows = ["text_a,text_b,score"] + [f"{a},{b},{s}" for a, b, s in [
        ("good day", "the good man", 1), ("good day", "bad night", 0), ("he is good", "a good cafe", 1),
        ("the bad store", "good world", 0)] * 4]
    (tmp_path / "data").mkdir()
    for split in ("train", "dev"):
        (tmp_path / "data" / f"{split}.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    finetune(get_task("embedding", pooling="max"), model, tmp_path / "data", out,
             FinetuneConfig(**{**FAST, "epochs": 1}))
    bert = load(out)
    with TestClient(create_app(ServeConfig(model=str(out)))) as client:
        served = client.post("/embed", json={"inputs": TEXTS, "normalize": False}).json()
        assert client.get("/info").json()["model_type"]["embedding"]["pooling"] == "max"
    np.testing.assert_allclose(np.array(served), bert.embed(TEXTS, pool="max"), atol=1e-5)
    assert not np.allclose(np.array(served), bert.embed(TEXTS, pool="cls"), atol=1e-3)
