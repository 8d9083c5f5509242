"""The one rule for outputs, across the commands that write a model directory or file from an
input model (``quantize``, ``convert``, ``export-onnx``; ``finetune``, ``distill`` and ``prune``
in ``tests/finetuning``): an output never names or lies inside its input model, and never
replaces a directory that holds another model without ``--overwrite``; with it, the old model
goes as a whole (no torn directory)."""

from __future__ import annotations

import json

import pytest

from bertkit.cli.main import main

from ..task_models import make_task_model


def _finished(root):
    """A fine-tuned SST-2 model directory as ``finetune`` leaves it (results, log, predictions)."""
    model = make_task_model(root, "sst2")
    (model / "results.json").write_text(json.dumps({"task": "sst2"}))
    (model / "log.jsonl").write_text('{"event": "start"}\n')
    (model / "predictions_dev.jsonl").write_text('{"label": "1"}\n')
    return model


def _files(directory) -> dict:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def _visible(directory) -> set:
    return {p.name for p in directory.iterdir() if not p.name.startswith(".")}


COMMANDS = {  # (argv for SOURCE -> OUT, the option naming OUT, the one naming SOURCE)
    "quantize": (lambda src, out: ["quantize", str(src), "--out", str(out)], "--out", "MODEL_DIR"),
    "convert": (lambda src, out: ["convert", str(src), str(out)], "TARGET", "SOURCE"),
}


@pytest.mark.parametrize("command", COMMANDS)
def test_another_finished_model_is_replaced_only_with_overwrite_and_as_a_whole(command, tmp_path, capsys):
    """Cases 407 and 409: the new weights were written beside the old model's results.json."""
    argv, option, _ = COMMANDS[command]
    source = make_task_model(tmp_path, "regression")
    other = _finished(tmp_path)
    before = _files(other)
    assert main(argv(source, other)) == 1
    assert capsys.readouterr().err == (f"bertkit: error: {other} already holds a model: pass "
                                       f"--overwrite to replace it, or choose another {option}\n")
    assert _files(other) == before
    assert main([*argv(source, other), "--overwrite"]) == 0
    assert main(argv(source, tmp_path / "fresh")) == 0
    assert _visible(other) == _visible(tmp_path / "fresh")  # nothing of the SST-2 model is left
    assert json.loads((other / "config.json").read_text())["bertkit_finetune"]["task"] == "stsb"


@pytest.mark.parametrize("command", COMMANDS)
def test_an_output_in_its_own_model_is_refused(command, tmp_path, capsys):
    argv, option, input_option = COMMANDS[command]
    source = _finished(tmp_path)
    before = _files(source)
    for out, word in ((source, "would overwrite"), (source / "sub", "lies inside")):
        for extra in ([], ["--overwrite"]):
            assert main([*argv(source, out), *extra]) == 1
            assert capsys.readouterr().err == (f"bertkit: error: {option} {out} {word} the "
                                               f"{input_option} {source}: choose another {option}\n")
    assert _files(source) == before and not (source / "sub").exists()


def test_export_onnx_never_writes_into_its_model(tmp_path, capsys):
    """Case 408: ``--out D/model.safetensors`` replaced the weights by the ONNX graph."""
    model = make_task_model(tmp_path, "sst2")
    before = _files(model)
    out = model / "model.safetensors"
    assert main(["export-onnx", str(model), "--out", str(out)]) == 1
    assert capsys.readouterr().err == (f"bertkit: error: --out {out} lies inside the MODEL_DIR "
                                       f"{model}: choose another --out\n")
    assert _files(model) == before
