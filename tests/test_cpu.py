"""bertkit.cpu: the CPU run-time settings, and who applies them."""

import os
import sys

import pytest
import torch

import bertkit.cpu
from bertkit.cpu import bound_onednn_cache, keep_freed_memory, torch_threads
from bertkit.inference import load

from .task_models import make_task_model

CACHE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"


def test_keep_freed_memory_is_harmless():
    result = keep_freed_memory()
    assert isinstance(result, bool) and (result or not sys.platform.startswith("linux"))
    big = torch.ones(8 << 20)  # 32 MiB: allocation still works afterwards
    assert float(big.sum()) == float(8 << 20)


def test_the_onednn_bound_leaves_a_users_setting_alone(monkeypatch):
    monkeypatch.delenv(CACHE, raising=False)
    bound_onednn_cache()
    assert os.environ[CACHE] == "64"
    monkeypatch.setenv(CACHE, "7")
    bound_onednn_cache()
    assert os.environ[CACHE] == "7"


@pytest.fixture
def applied(monkeypatch):
    """What the inference entry points apply: malloc calls recorded, the oneDNN bound real."""
    calls = []
    monkeypatch.setattr(bertkit.cpu, "keep_freed_memory", lambda: calls.append("kept") or True)
    monkeypatch.delenv(CACHE, raising=False)
    return calls


def test_the_cache_is_bounded_before_loading_and_freed_memory_kept_after(applied):
    with bertkit.cpu.loading_for_inference():
        assert os.environ[CACHE] == "64" and applied == []  # the float weights still go back
    assert applied == ["kept"]


def test_nothing_is_set_for_a_gpu_load(applied):
    with bertkit.cpu.loading_for_inference(on_cpu=False):
        pass
    assert applied == [] and CACHE not in os.environ


def test_loading_a_model_on_the_cpu_applies_the_inference_settings(tmp_path, applied):
    bert = load(make_task_model(tmp_path, "classify"))
    assert applied == ["kept"]
    assert os.environ[CACHE] == "64"
    assert bert.predict("he is good")[0]["label"] in bert.labels


def test_cli_predict_on_the_cpu_applies_the_inference_settings(tmp_path, applied):
    from bertkit.cli.main import main

    model = make_task_model(tmp_path, "sst2")
    (tmp_path / "in.jsonl").write_text('{"sentence": "he is good"}\n', encoding="utf-8")
    assert main(["predict", "sst2", "--model", str(model), "--input", str(tmp_path / "in.jsonl"),
                 "--output", str(tmp_path / "p.jsonl"), "--no-progress"]) == 0
    assert applied == ["kept"]
    assert os.environ[CACHE] == "64"
    assert '"label"' in (tmp_path / "p.jsonl").read_text()


def test_torch_threads_sets_and_restores_the_count_even_on_error():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), torch_threads(1):
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before
