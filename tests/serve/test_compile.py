"""``serve --compile``: the engine's compiled route behind the server (bertkit.inference.compiled)."""

from __future__ import annotations

import numpy as np
import pytest

from bertkit.errors import OptionError
from bertkit.inference import compiled, load
from bertkit.serve.app import load_model
from bertkit.serve.config import ServeConfig


def test_compile_is_an_option_with_its_choices():
    assert ServeConfig(model="m").check().compile == "auto"
    with pytest.raises(OptionError, match="compile must be one of auto, on, off"):
        ServeConfig(model="m", compile="yes").check()


def test_auto_leaves_a_narrow_model_eager(make_mlm_dir, cpu_class, capsys):
    bert = load_model(ServeConfig(model=str(make_mlm_dir(32))))  # fp32 on every class: no compile
    assert not compiled.is_compiled(bert.model)
    assert "compile: auto:" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(compiled.cxx_compiler() is None, reason="no C++ compiler for inductor")
def test_the_server_engine_compiles_on_request_and_answers_as_eager(make_mlm_dir, capsys):
    directory = str(make_mlm_dir(32))
    bert = load_model(ServeConfig(model=directory, precision="fp32", compile="on"))
    assert compiled.is_compiled(bert.model)
    # the server answers at once: its graphs build in the background, the eager forward meanwhile
    assert "compile: --compile on, compiling in the background" in capsys.readouterr().err
    texts = ["the man went to the store", "hello"]
    want = load(directory, precision="fp32").embed(texts)
    np.testing.assert_allclose(bert.embed(texts), want, atol=1e-5)
    assert bert.model.bertkit_compiled.ready.wait(300) and not bert.compiling
    np.testing.assert_allclose(bert.embed(texts), want, atol=1e-5)


@pytest.mark.slow
def test_the_server_runs_static_int8_on_a_calibration_file(make_mlm_dir, tmp_path, capsys):
    """``serve --precision int8 --calibration FILE`` on the torch runtime: static INT8
    (bertkit.inference.static_int8), compiled by the server's warm-up, close to fp32."""
    from bertkit.inference import static_int8

    if static_int8.blocker():
        pytest.skip(static_int8.blocker())
    directory = str(make_mlm_dir(32))
    words = ["the", "man", "went", "to", "store", "he", "is", "good", "bad", "day", "night", "she", "was"]
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(" ".join(words[(i + j) % len(words)] for j in range(2 + i % 5)) for i in range(24)))
    bert = load_model(ServeConfig(model=directory, precision="int8", calibration=str(texts)).check())
    assert getattr(bert.model, "bertkit_static_int8", False)
    assert "precision int8 (int8: static, calibrated on 24 inputs)" in capsys.readouterr().err
    asked = ["the man went to the store", "hello"]
    fp32 = load(directory, precision="fp32").embed(asked)
    assert np.abs(bert.embed(asked) - fp32).max() < 0.1 * np.abs(fp32).max()


def test_an_int8_server_takes_the_inputs_a_fine_tuned_directory_saved(make_mlm_dir, monkeypatch, capsys):
    """``serve --precision int8`` of a directory with ``calibration.jsonl`` (``bertkit finetune``
    writes it): static INT8 on those inputs where the route can run, dynamic INT8 with a line
    saying why where it cannot; other precisions and an explicit file leave it alone."""
    from bertkit.inference import static_int8
    from bertkit.inference.calibration import save_calibration
    from bertkit.serve.app import serve_calibration

    directory = make_mlm_dir(32)
    assert serve_calibration(ServeConfig(model=str(directory), precision="int8")) is None  # nothing saved
    save_calibration(directory, [{"input_ids": np.array([2, 5 + k, 6, 3])} for k in range(20)])
    monkeypatch.setattr(static_int8, "blocker", lambda: None)
    rows = serve_calibration(ServeConfig(model=str(directory), precision="int8"))
    assert len(rows) == 20 and rows[0]["token_type_ids"] == [0, 0, 0, 0]
    assert serve_calibration(ServeConfig(model=str(directory), precision="fp32")) is None
    monkeypatch.setattr(static_int8, "blocker", lambda: "static INT8 needs torchao")
    assert serve_calibration(ServeConfig(model=str(directory), precision="int8")) is None
    assert "saved calibration inputs for static INT8, but static INT8 needs torchao; serving dynamic INT8" \
        in capsys.readouterr().err
    openvino = ServeConfig(model=str(directory), runtime="openvino", precision="int8").check()  # no file needed
    assert len(serve_calibration(openvino)) == 20


@pytest.mark.slow
def test_the_server_compiles_static_int8_from_the_saved_inputs(make_mlm_dir, capsys):
    from bertkit.inference import static_int8
    from bertkit.inference.calibration import save_calibration

    if static_int8.blocker():
        pytest.skip(static_int8.blocker())
    directory = make_mlm_dir(32)
    save_calibration(directory, [{"input_ids": np.array([2, 5 + k, 6 + k % 3, 3])} for k in range(20)])
    bert = load_model(ServeConfig(model=str(directory), precision="int8").check())
    assert getattr(bert.model, "bertkit_static_int8", False)
    assert "int8: static, calibrated on 20 inputs (its calibration.jsonl)" in capsys.readouterr().err
    route = bert.model.bertkit_static_int8_route
    assert route.package_batches or route.batches_ready.wait(600)  # no compile left running
