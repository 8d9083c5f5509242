"""``--runtime auto`` (``bertkit.inference.openvino.choose_runtime``): OpenVINO only where it was
measured faster (bf16 on the AMX class, batches of a few tokens), for a model whose task head it runs, with openvino
installed; PyTorch everywhere else, with the reason. Runs without openvino (its presence is
replaced where the test needs it); the serve test that runs OpenVINO skips without it."""

from __future__ import annotations

import pytest

from bertkit.inference import load
from bertkit.inference import openvino as bov

from ..task_models import make_task_model


@pytest.fixture
def openvino_here(monkeypatch):
    """openvino installed, its plugin computing bf16, whatever this machine has."""
    monkeypatch.setattr(bov, "installed", lambda: True)
    monkeypatch.setattr(bov, "native_bf16", lambda: True)


def test_auto_runs_openvino_for_bf16_on_the_amx_class(tmp_path, monkeypatch, openvino_here):
    monkeypatch.setenv("BERTKIT_CPU_CLASS", "amx")
    bert = load(make_task_model(tmp_path, "sst2"), precision="bf16")
    assert bov.choose_runtime(bert) == ("openvino", "auto: measured faster than PyTorch for bf16 on CPU class amx "
                                                    "in batches of at most 64 tokens; larger batches on PyTorch")


def test_auto_runs_small_batches_on_openvino_and_larger_ones_on_pytorch(tmp_path, monkeypatch, openvino_here):
    """Where OpenVINO was measured faster only for a few tokens (bf16 on AMX: lone short
    inputs), a batch of at most MEASURED_FASTER's padded tokens runs on its graph, a larger one
    on the PyTorch model at the same precision."""
    import torch

    from bertkit.model.outputs import ModelOutput

    calls = []

    class FakeGraph:  # OpenVINO's compiled graph, answering equal logits
        def __init__(self, xml, precision, threads, config=None):
            self.precision = precision

        def __call__(self, ids, types=None, mask=None):
            calls.append(tuple(ids.shape))
            return ModelOutput(logits=torch.zeros(ids.shape[0], 2))

    monkeypatch.setenv("BERTKIT_CPU_CLASS", "amx")
    monkeypatch.setattr(bov, "OvModel", FakeGraph)
    monkeypatch.setattr(bov, "convert", lambda *a, **k: tmp_path / "graph.xml")
    bert = load(make_task_model(tmp_path, "sst2"), precision="bf16")
    engine = bov.on_openvino(bert)
    limit = bov.MEASURED_FASTER["amx", "bf16"]
    assert engine.max_tokens == limit and f"at most {limit} tokens" in engine.runtime_reason
    assert [a[0]["score"] for a in engine.predict(["a good day"])] == [0.5]  # 5 tokens: OpenVINO
    assert calls == [(1, 5)]
    texts = ["the man went to the store , a good day"] * 8  # 8 x 12 tokens > limit: PyTorch
    assert engine.predict(texts) == bert.predict(texts) and calls == [(1, 5)]
    # PyTorch's batches may run on their real tokens (bf16 unpads on the AMX class); the graph's stay padded
    assert engine.unpad("auto") and engine.attention_impl == "unpadded"
    mixed = ["the man went to the store , a good day", "a day"] * 4
    padded = load(tmp_path / "sst2", precision="bf16")
    assert not padded.unpad("padded")
    def scores(answers):
        return [x["score"] for a in answers for x in a]

    assert scores(engine.predict(mixed)) == pytest.approx(scores(padded.predict(mixed)), abs=2e-2)
    assert calls == [(1, 5)]
    assert engine.predict(["a good day"])[0][0]["score"] == 0.5 and calls == [(1, 5), (1, 5)]


def test_openvino_alone_keeps_its_graphs_padded(tmp_path, monkeypatch):
    """--runtime openvino (no max_tokens): every task-head batch is the graph's, padded."""
    engine = bov.OpenVinoInference.__new__(bov.OpenVinoInference)
    assert engine.max_tokens is None and "runs its own graph" in engine._unpad_blocker()


@pytest.mark.parametrize("cls, precision", [("amx", "fp32"), ("amx", "int8"), ("avx512-bf16", "bf16"),
                                            ("avx512-vnni", "bf16"), ("avx2", "bf16")])
def test_auto_stays_on_pytorch_where_openvino_was_not_measured_faster(tmp_path, monkeypatch, openvino_here,
                                                                      cls, precision):
    monkeypatch.setenv("BERTKIT_CPU_CLASS", cls)
    bert = load(make_task_model(tmp_path, "sst2"), precision=precision)
    assert bov.choose_runtime(bert) == (
        "torch", f"auto: OpenVINO was not measured faster than PyTorch for {precision} on CPU class {cls}")
    assert bov.on_openvino(bert) is bert and bert.runtime_reason.startswith("auto: OpenVINO was not measured")


def test_auto_precision_of_a_narrow_model_is_fp32_so_it_stays_on_pytorch(tmp_path, monkeypatch, openvino_here):
    monkeypatch.setenv("BERTKIT_CPU_CLASS", "amx")
    bert = load(make_task_model(tmp_path, "sst2"))  # hidden 16: auto is fp32 even with native bf16
    assert bert.precision == "fp32" and bov.choose_runtime(bert)[0] == "torch"


@pytest.mark.parametrize("kind, why", [("mlm", "fill-mask"), ("choice", "multiple-choice")])
def test_auto_stays_on_pytorch_for_routes_openvino_does_not_run(tmp_path, monkeypatch, openvino_here, kind, why):
    monkeypatch.setenv("BERTKIT_CPU_CLASS", "amx")
    runtime, reason = bov.choose_runtime(load(make_task_model(tmp_path, kind), precision="bf16"))
    assert runtime == "torch" and "OpenVINO runs a task head's rows" in reason and why in reason


def test_auto_without_openvino_or_its_bf16_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("BERTKIT_CPU_CLASS", "amx")
    bert = load(make_task_model(tmp_path, "sst2"), precision="bf16")
    monkeypatch.setattr(bov, "installed", lambda: False)
    assert bov.choose_runtime(bert) == ("torch", "auto: openvino is not installed (pip install 'bertkit[openvino]')")
    monkeypatch.setattr(bov, "installed", lambda: True)
    monkeypatch.setattr(bov, "native_bf16", lambda: False)
    assert bov.choose_runtime(bert) == ("torch", "auto: OpenVINO's CPU plugin does not compute bf16 on this CPU")


def test_serve_runtime_auto_on_pytorch_says_why(tmp_path, monkeypatch, capsys):
    pytest.importorskip("fastapi")
    from bertkit.serve.app import load_model
    from bertkit.serve.config import ServeConfig

    monkeypatch.setenv("BERTKIT_CPU_CLASS", "avx2")
    bert = load_model(ServeConfig(model=str(make_task_model(tmp_path, "sst2")), runtime="auto").check())
    assert bert.runtime == "torch"
    assert "runtime torch (auto: OpenVINO was not measured faster than PyTorch for fp32 on CPU class avx2)" in (
        capsys.readouterr().err)


def test_serve_runtime_auto_on_openvino(tmp_path, monkeypatch, capsys):
    """Where auto picks OpenVINO: /predict from OpenVINO's graph, close to PyTorch bf16's; the
    routes it does not run (embeddings) on the PyTorch model at the same bf16, not fp32."""
    pytest.importorskip("fastapi")
    pytest.importorskip("openvino")
    pytest.importorskip("onnx")
    if not bov.native_bf16():
        pytest.skip("OpenVINO computes bf16 only on a CPU with native bf16")
    from fastapi.testclient import TestClient

    from bertkit.serve import ServeConfig, create_app
    from bertkit.serve.app import load_model

    monkeypatch.setenv("BERTKIT_CPU_CLASS", "amx")
    directory = make_task_model(tmp_path, "sst2")
    config = ServeConfig(model=str(directory), runtime="auto", precision="bf16")
    texts = ["the man went to the store", "a good day", "she was bad"]
    with TestClient(create_app(config)) as client:
        info = client.get("/info").json()["bertkit"]
        assert info["runtime"] == "openvino" and info["precision"] == "bf16"
        got = client.post("/predict", json={"inputs": [[t] for t in texts]}).json()
    assert "runtime openvino (auto: measured faster than PyTorch for bf16 on CPU class amx in batches" in (
        capsys.readouterr().err)
    ours = load(directory, precision="bf16").predict(texts)
    for a, b in zip(got, ours):
        assert a[0]["label"] == b[0]["label"] and abs(a[0]["score"] - b[0]["score"]) < 0.05
    engine = load_model(config, warm=False)
    assert isinstance(engine, bov.OpenVinoInference) and engine.model.bertkit_precision == "bf16"
