"""``serve --model-process``: the forward passes in a process of their own, the same answers,
a killed model process started again, and nothing left behind at shutdown."""

from __future__ import annotations

import os
import signal

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from bertkit.inference import load  # noqa: E402
from bertkit.serve import ServeConfig, create_app  # noqa: E402

from ..task_models import make_task_model  # noqa: E402

TEXTS = ["the man went to the store .", "he is good", "hello world"]


def test_answers_as_in_one_process_and_outlives_its_model_process(tmp_path, capsys):
    directory = make_task_model(tmp_path, "classify")
    expected = load(directory).predict(TEXTS)
    app = create_app(ServeConfig(model=str(directory), model_process=True))
    assert "forward passes in a process of their own" in capsys.readouterr().err
    with TestClient(app) as client:
        pid = client.get("/info").json()["bertkit"]["model_process"]
        assert pid and pid != os.getpid()
        got = client.post("/predict", json={"inputs": [[t] for t in TEXTS]}).json()
        for mine, theirs in zip(got, expected):
            assert [a["label"] for a in mine] == [a["label"] for a in theirs]
            assert [a["score"] for a in mine] == pytest.approx([a["score"] for a in theirs], abs=1e-5)
        os.kill(pid, signal.SIGKILL)
        engine = app.state.service.engine
        engine._process.join(10)
        assert client.get("/health").status_code == 200  # the probe's batch starts it again
        again = client.post("/predict", json={"inputs": TEXTS[0]})
        assert again.status_code == 200 and again.json()[0]["label"] == expected[0][0]["label"]
        new_pid = client.get("/info").json()["bertkit"]["model_process"]
        assert new_pid not in (pid, None) and engine.starts == 2
    with pytest.raises(ProcessLookupError):  # shutdown ended it
        os.kill(new_pid, 0)


def test_a_batch_the_model_process_died_under_is_a_503_and_the_next_is_answered(tmp_path, monkeypatch):
    from bertkit.inference.process import EngineProcessEnded

    directory = make_task_model(tmp_path, "classify")
    app = create_app(ServeConfig(model=str(directory), model_process=True))
    with TestClient(app) as client:
        engine = app.state.service.engine
        run_rows = engine.run_rows

        def dies(key, rows):
            monkeypatch.setattr(engine, "run_rows", run_rows)  # started again for the next batch
            raise EngineProcessEnded("the model process ended during a forward pass (exit code -9)")

        monkeypatch.setattr(engine, "run_rows", dies)
        failed = client.post("/predict", json={"inputs": TEXTS[0]})
        assert failed.status_code == 503 and failed.headers["retry-after"] == "1"
        assert failed.json() == {"error": "the model process ended during a forward pass (exit code -9)",
                                 "error_type": "Unhealthy"}
        assert client.post("/predict", json={"inputs": TEXTS[0]}).status_code == 200


def test_off_by_default(tmp_path):
    directory = make_task_model(tmp_path, "classify")
    with TestClient(create_app(ServeConfig(model=str(directory)))) as client:
        assert client.get("/info").json()["bertkit"]["model_process"] is None
