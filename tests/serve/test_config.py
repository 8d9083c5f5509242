"""``ServeConfig.check``: the runtime options' rules, each refused with the flag named."""

from __future__ import annotations

import pytest

from bertkit.errors import OptionError
from bertkit.serve.config import ServeConfig


@pytest.mark.parametrize("options, words", [
    ({"runtime": "onnx"}, "runtime must be one of torch, openvino"),
    ({"runtime": "openvino", "device": "cuda"}, "runs on the CPU"),
    ({"runtime": "openvino", "precision": "fp16"}, "fp32, bf16, int8 or auto"),
    ({"runtime": "openvino", "precision": "int8"}, "needs --calibration FILE"),
    ({"calibration": "texts.txt"}, "--calibration is for --runtime openvino --precision int8"),
    ({"runtime": "openvino", "calibration": "texts.txt"}, "--calibration is for"),
])
def test_runtime_options_refused_by_name(options, words):
    with pytest.raises(OptionError, match=words.replace("(", r"\(")):
        ServeConfig(model="m", **options).check()


@pytest.mark.parametrize("options", [
    {}, {"runtime": "openvino"}, {"runtime": "openvino", "precision": "auto"},
    {"runtime": "openvino", "precision": "int8", "calibration": "texts.txt"},
])
def test_runtime_options_accepted(options):
    config = ServeConfig(model="m", **options).check()
    assert ServeConfig.from_json(config.to_json()) == config  # --workers hands it on as JSON
