"""bertkit.cpu: the glibc malloc setting, and who applies it."""

import sys

import torch

import bertkit.inference
from bertkit.inference import load
from bertkit.training import keep_freed_memory

from .task_models import make_task_model


def test_keep_freed_memory_is_harmless():
    result = keep_freed_memory()
    assert isinstance(result, bool) and (result or not sys.platform.startswith("linux"))
    big = torch.ones(8 << 20)  # 32 MiB: allocation still works afterwards
    assert float(big.sum()) == float(8 << 20)


def test_loading_a_model_on_the_cpu_keeps_freed_memory(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(bertkit.inference, "keep_freed_memory", lambda: calls.append("kept") or True)
    bert = load(make_task_model(tmp_path, "classify"))
    assert calls == ["kept"]
    assert bert.predict("he is good")[0]["label"] in bert.labels


def test_cli_predict_on_the_cpu_keeps_freed_memory(tmp_path, monkeypatch):
    import bertkit.cpu
    from bertkit.cli.main import main

    calls = []
    monkeypatch.setattr(bertkit.cpu, "keep_freed_memory", lambda: calls.append("kept") or True)
    model = make_task_model(tmp_path, "sst2")
    (tmp_path / "in.jsonl").write_text('{"sentence": "he is good"}\n', encoding="utf-8")
    assert main(["predict", "sst2", "--model", str(model), "--input", str(tmp_path / "in.jsonl"),
                 "--output", str(tmp_path / "p.jsonl"), "--no-progress"]) == 0
    assert calls == ["kept"]
    assert '"label"' in (tmp_path / "p.jsonl").read_text()
