"""CLI of the production commands: quantize, export-onnx, attention, serve --help, --precision."""

from __future__ import annotations

import json

import pytest

from bertkit.cli.main import main
from bertkit.inference import load

from ..task_models import make_task_model


def test_quantize_then_predict_and_api_load_the_int8_dir(tmp_path):
    directory = make_task_model(tmp_path, "pair")
    assert main(["quantize", str(directory), "--out", str(tmp_path / "q")]) == 0
    config = json.loads((tmp_path / "q" / "config.json").read_text())
    assert config["bertkit_precision"] == "int8" and config["bertkit_finetune"]["task"] == "mrpc"
    rows = [{"text": "the man went", "text_pair": "he went"}, {"text": "a day", "text_pair": "a night"}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    outputs = {}
    for name, model, extra in [("fp32", directory, []), ("int8", directory, ["--precision", "int8"]),
                               ("dir", tmp_path / "q", [])]:
        out = tmp_path / f"{name}.jsonl"
        assert main(["predict", "mrpc", "--model", str(model), "--input", str(tmp_path / "in.jsonl"),
                     "--output", str(out), "--no-progress", *extra]) == 0
        outputs[name] = [json.loads(line) for line in out.read_text().splitlines()]
    assert outputs["int8"] == outputs["dir"]  # the saved INT8 model is the quantised one
    assert len(outputs["fp32"]) == 2
    api = load(tmp_path / "q").predict([["the man went", "he went"], ["a day", "a night"]])
    assert [a[0]["label"] for a in api] == [o["label"] for o in outputs["dir"]]
    for o, a in zip(outputs["dir"], api):  # the server's answer = bertkit predict's probabilities
        assert {x["label"]: x["score"] for x in a} == pytest.approx(o["probabilities"], abs=1e-5)


def test_export_onnx_and_attention_png(tmp_path, capsys):
    directory = make_task_model(tmp_path, "tagging")
    assert main(["export-onnx", str(directory), "--out", str(tmp_path / "m.onnx")]) == 0
    assert main(["export-onnx", str(directory), "--out", str(tmp_path / "q.onnx"), "--int8"]) == 0
    assert (tmp_path / "m.onnx").stat().st_size > 0 and (tmp_path / "q.onnx").is_file()
    png = tmp_path / "attn.png"
    assert main(["attention", str(directory), "the man went to the cafe", "--layer", "1", "--head", "1",
                 "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["attention", str(directory), "the man", "--head", "5", "--out", str(png)]) == 1
    assert "head must be in 0..1" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["serve", "quantize", "export-onnx", "attention"])
def test_help_shows_defaults(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    assert "usage" in text and (command != "serve" or "(default: 8192)" in text)


def test_fill_mask_and_embed_take_a_precision(tmp_path, capsys):
    directory = make_task_model(tmp_path, "mlm")
    assert main(["fill-mask", str(directory), "the [MASK] went .", "--precision", "int8", "--json"]) == 0
    masks = json.loads(capsys.readouterr().out)["masks"]
    assert len(masks) == 1 and len(masks[0]) == 5
    assert main(["serve", str(tmp_path / "nowhere")]) == 1
    assert "not a model directory" in capsys.readouterr().err


def test_serve_passes_the_tei_options(tmp_path, monkeypatch, capsys):
    import bertkit.serve.app

    directory = make_task_model(tmp_path, "classify")
    seen = []
    monkeypatch.setattr(bertkit.serve.app, "run", seen.append)
    assert main(["serve", str(directory), "--api-key", "k", "--cors-allow-origin", "http://a.example",
                 "--payload-limit", "1000", "--max-queue", "8", "--max-items", "4"]) == 0
    config = seen[0]
    assert (config.api_key, config.cors_allow_origin, config.payload_limit) == ("k", "http://a.example", 1000)
    assert (config.max_queue, config.max_items) == (8, 4)
    with pytest.raises(SystemExit):
        main(["serve", str(directory), "--payload-limit", "0"])
    assert "--payload-limit: must be >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["serve", str(directory), "--max-wait-ms", "5"])  # gone: batching never waits


def test_predict_runs_static_int8_on_a_calibration_file_and_the_flag_needs_int8(tmp_path, capsys):
    """``predict --precision int8 --calibration FILE``: static INT8 (pairs, a tab between the
    two texts), answers close to fp32's; ``--calibration`` without int8 is refused by name."""
    from bertkit.inference import static_int8

    directory = make_task_model(tmp_path, "pair", hidden=32)
    words = ["the", "man", "went", "to", "store", "he", "is", "good", "bad", "day", "night", "she", "was"]
    lines = [" ".join(words[(i + j) % len(words)] for j in range(2 + i % 4)) + "\t" + words[(3 * i) % len(words)]
             for i in range(24)]
    (tmp_path / "pairs.txt").write_text("\n".join(lines) + "\n")
    assert main(["fill-mask", str(directory), "the [MASK]", "--calibration", str(tmp_path / "pairs.txt")]) == 1
    assert "fill-mask: --calibration is for --precision int8 only" in capsys.readouterr().err
    if static_int8.blocker():
        pytest.skip(static_int8.blocker())
    rows = [{"text": "the man went", "text_pair": "he went"}, {"text": "a day", "text_pair": "a night"}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    outputs = {}
    for name, extra in [("fp32", ["--precision", "fp32"]),
                        ("static", ["--precision", "int8", "--calibration", str(tmp_path / "pairs.txt")])]:
        out = tmp_path / f"{name}.jsonl"
        assert main(["predict", "mrpc", "--model", str(directory), "--input", str(tmp_path / "in.jsonl"),
                     "--output", str(out), "--no-progress", *extra]) == 0
        outputs[name] = [json.loads(line) for line in out.read_text().splitlines()]
    for got, expected in zip(outputs["static"], outputs["fp32"]):
        assert got["probabilities"] == pytest.approx(expected["probabilities"], abs=0.05)
