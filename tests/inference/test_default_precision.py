"""One default precision at every inference door: ``bertkit predict``, ``bertkit evaluate``,
``load().predict`` and ``POST /predict`` resolve ``auto`` alike and answer alike, run as a
CPU without native bf16 (``auto`` = fp32) and as one with it (``auto`` = bf16 for a model of
BERT-Base's width), whatever this machine is (``BERTKIT_CPU_CLASS``)."""

from __future__ import annotations

import json
import random

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from bertkit.cli.main import main  # noqa: E402
from bertkit.cpu import BF16_UNPADDED_CLASSES  # noqa: E402
from bertkit.inference import load  # noqa: E402
from bertkit.precision import INFERENCE_DEFAULT  # noqa: E402
from bertkit.serve.app import create_app  # noqa: E402
from bertkit.serve.config import ServeConfig  # noqa: E402

from ..task_models import WIDE, make_task_model  # noqa: E402

# how far two doors' scores may lie apart at one precision: their batches differ in shape (seen:
# 5e-7 in fp32 and in bf16, on the AMX Xeon); fp32 against bf16: bf16 keeps 8 significant bits
TOLERANCE = {"fp32": 1e-5, "bf16": 1e-4}
FP32_VS_BF16 = 2e-2
# the server against the other doors in bf16 where it runs its batches on their real tokens
# (bertkit.cpu.BF16_UNPADDED_CLASSES): on the AMX Xeon, whose bf16 rounds a row by its batch's
# row count, a logit's bf16 ulp through the softmax at most (seen: 3.9e-3, one score in 24)
BF16_OTHER_ROW_COUNT = 1e-2
WORDS = ["the", "man", "went", "to", "store", "a", "unwanted", "running", "he", "she", "is",
         "was", "good", "bad", "day", "night", "cafe", "hello", "world", "quick", ",", "."]


def texts(n: int = 24) -> list[str]:
    rng = random.Random(0)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 30))) for _ in range(n)]


def cli_predict(tmp_path, task, model, records) -> list[dict]:
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["predict", task, "--model", str(model), "--input", str(tmp_path / "in.jsonl"),
                 "--output", str(tmp_path / "out.jsonl"), "--no-progress"]) == 0
    return [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]


def test_every_door_defaults_to_the_one_declared():
    import inspect

    from bertkit.cli.main import build_parser
    from bertkit.inference.engine import BertInference

    assert inspect.signature(load).parameters["precision"].default == INFERENCE_DEFAULT
    assert inspect.signature(BertInference).parameters["precision"].default == INFERENCE_DEFAULT
    assert ServeConfig().precision == INFERENCE_DEFAULT
    parser = build_parser()
    for command in (["predict", "sst2", "--model", "m", "--input", "i", "--output", "o"],
                    ["evaluate", "sst2", "--model", "m", "--data", "d"],
                    ["embed", "m", "--input", "i", "--output", "o"], ["fill-mask", "m", "x"],
                    ["attention", "m", "x"], ["serve", "m"]):
        assert parser.parse_args(command).precision == INFERENCE_DEFAULT, command[0]


@pytest.mark.parametrize("kind, task", [("sst2", "sst2"), ("regression", "stsb")])
def test_defaults_give_one_answer_at_every_door(tmp_path, cpu_class, kind, task):
    model = make_task_model(tmp_path, kind, hidden=WIDE, layers=1)
    expected = "bf16" if cpu_class == "amx" else "fp32"
    bert = load(model)
    assert bert.precision == expected, bert.precision_reason
    pairs = kind == "regression"  # STS-B: sentence pairs
    items = [[a, b] for a, b in zip(texts(), texts()[::-1])] if pairs else texts()
    api = bert.predict(items)
    with TestClient(create_app(ServeConfig(model=str(model)))) as client:
        assert client.get("/info").json()["bertkit"]["precision"] == expected
        response = client.post("/predict", json={"inputs": items if pairs else [[t] for t in items],
                                                 "raw_scores": pairs})
        assert response.status_code == 200, response.text
        served = response.json()
    records = [{"text": a, "text_pair": b} for a, b in items] if pairs else [{"text": t} for t in items]
    cli = cli_predict(tmp_path, task, model, records)
    tolerance = TOLERANCE[expected]
    # the server unpads bf16 there (bertkit.cpu.bf16_unpadded); the CLI batches as the API does
    by_server = BF16_OTHER_ROW_COUNT if expected == "bf16" and cpu_class in BF16_UNPADDED_CLASSES else tolerance
    if kind == "regression":
        scores = [a[0]["score"] for a in api]
        assert scores == pytest.approx([s[0]["score"] for s in served], abs=by_server)
        assert scores == pytest.approx([c["score"] for c in cli], abs=tolerance)
        assert max(scores) - min(scores) > 10 * tolerance  # the inputs get different answers
        return
    assert [a[0]["label"] for a in api] == [s[0]["label"] for s in served] == [c["label"] for c in cli]
    for a, s, c in zip(api, served, cli):
        assert {x["label"]: x["score"] for x in a} == pytest.approx(
            {x["label"]: x["score"] for x in s}, abs=by_server)
        assert {x["label"]: x["score"] for x in a} == pytest.approx(c["probabilities"], abs=tolerance)
    assert len({a[0]["label"] for a in api}) == 2  # both labels occur: the comparison says something


def test_a_narrow_model_stays_fp32_at_every_door(tmp_path, cpu_class):
    """BERT-Tiny's width and below: fp32 is faster there even with native bf16."""
    model = make_task_model(tmp_path, "sst2")
    bert = load(model)
    assert bert.precision == "fp32"
    assert ("hidden size 16" in bert.precision_reason) is (cpu_class == "amx")


def test_explicit_precisions_agree_across_doors(tmp_path, cpu_class):
    """Asked for, bf16 is bf16 everywhere (native or emulated), and answers as fp32 nearly."""
    model = make_task_model(tmp_path, "sst2", hidden=WIDE, layers=1)
    items = texts(8)
    fp32 = load(model, precision="fp32").predict(items)
    bf16 = load(model, precision="bf16").predict(items)
    for a, b in zip(fp32, bf16):
        assert {x["label"]: x["score"] for x in a} == pytest.approx(
            {x["label"]: x["score"] for x in b}, abs=FP32_VS_BF16)
    cli = cli_predict(tmp_path, "sst2", model, [{"text": t} for t in items])
    assert [c["label"] for c in cli] == [a[0]["label"] for a in load(model).predict(items)]


def test_int8_through_a_task_keeps_the_tasks_head_check(tmp_path):
    """load(task=...) at int8 builds the task's model (its head checked) and then quantises
    it, as at the other precisions: a head of another size is refused, not loaded."""
    from bertkit.errors import CheckpointError
    from bertkit.modeldir.int8 import is_int8
    from bertkit.tasks import get_task

    model = make_task_model(tmp_path, "sst2")
    assert is_int8(load(model, precision="int8", task=get_task("sst2")).model)
    with pytest.raises(CheckpointError, match="needs 3"):
        load(model, precision="int8", task=get_task("mnli"))
