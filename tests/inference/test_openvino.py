"""OpenVINO runtime: outputs against bertkit fp32 (float graph and NNCF static INT8), and the
refusals (no calibration, bf16 without native bf16). Skipped without openvino / nncf."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("openvino")
pytest.importorskip("onnx")

from bertkit.checkpoint import load_tokenizer  # noqa: E402
from bertkit.errors import BertkitError  # noqa: E402
from bertkit.inference import openvino as bov  # noqa: E402
from bertkit.inference.calibration import pad_rows, read_calibration  # noqa: E402
from bertkit.modeldir.int8 import load_model  # noqa: E402
from tests.task_models import make_task_model  # noqa: E402

from .test_export import batch  # noqa: E402

TEXTS = ["the man went to the store", "a fine film", "he bought a gallon of milk",
         "the store was closed", "she went home", "a film about a man and a store"]


def test_float_graph_matches_bertkit_within_1e_2(tmp_path):
    """OpenVINO's CPU kernels (fused attention, approximated exp/erf) differ from PyTorch's by
    ~3e-3 on these logits of magnitude ~3 (large random weights); ONNX Runtime's by < 1e-4."""
    directory = make_task_model(tmp_path, "qa")
    model = load_model(directory)
    ov_model = bov.OvModel(bov.convert(directory, tmp_path / "ov"), threads=1)
    assert ov_model.names == ["start_logits", "end_logits"]
    for shape in [(5, 13), (1, 3), (2, 40)]:  # dynamic batch and length, padded rows
        ids, types, mask = batch(shape, model.config.vocab_size)
        with torch.no_grad():
            ref = model(ids, types, mask)
        got = ov_model(ids, types, mask)
        for name in ov_model.names:
            assert got[name].shape == ref[name].shape
            assert torch.allclose(got[name], ref[name], atol=1e-2, rtol=0), (name, shape)


def test_static_int8_is_quantised_and_close_to_fp32(tmp_path):
    pytest.importorskip("nncf")
    import openvino as ov

    directory = make_task_model(tmp_path, "classify")
    model = load_model(directory)
    tok = load_tokenizer(directory)
    rows = [e.input_ids for e in tok.encode_batch(TEXTS * 4)]
    xml = bov.convert(directory, tmp_path / "q", int8=True, calibration=bov.calibration_batches(rows, 2))
    graph = ov.Core().read_model(str(xml))
    assert sum(op.get_type_name() == "FakeQuantize" for op in graph.get_ops()) >= 8
    feeds = pad_rows([e.input_ids for e in tok.encode_batch(TEXTS[:4])])
    ids, types, mask = (torch.from_numpy(feeds[k]) for k in ("input_ids", "token_type_ids", "attention_mask"))
    with torch.no_grad():
        ref = model(ids, types, mask).logits
    got = bov.OvModel(xml, "int8", threads=1)(ids, types, mask).logits
    spread = float(ref.max() - ref.min())
    assert float((got - ref).abs().max()) <= 0.1 * spread
    assert not torch.equal(got, ref)  # the INT8 graph is not the float one


def test_int8_needs_real_calibration_and_bf16_needs_native(tmp_path, monkeypatch):
    directory = make_task_model(tmp_path, "classify")
    with pytest.raises(BertkitError, match="calibration"):
        bov.convert(directory, tmp_path / "q", int8=True)
    with pytest.raises(BertkitError, match="at least one"):
        bov.calibration_batches([])
    xml = bov.convert(directory, tmp_path / "f")
    monkeypatch.setattr(bov, "native_bf16", lambda: False)
    with pytest.raises(BertkitError, match="native bf16"):
        bov.OvModel(xml, "bf16")
    with pytest.raises(BertkitError, match="precision must be"):
        bov.OvModel(xml, "fp16")


def _scores(answers):
    """Every label's score of every answer (a list of {label, score} per text), label order."""
    return [c["score"] for answer in answers for c in sorted(answer, key=lambda c: c["label"])]


def test_engine_answers_like_bertkit_and_falls_back_to_pytorch(tmp_path):
    from bertkit.inference import load

    directory = make_task_model(tmp_path, "sst2")
    ours, theirs = load(directory), bov.load_openvino(directory, threads=1)
    assert theirs.runtime == "openvino" and theirs.ov_precision == "fp32"
    want, got = ours.predict(TEXTS), theirs.predict(TEXTS)
    assert [a[0]["label"] for a in got] == [a[0]["label"] for a in want]
    assert max(abs(a - b) for a, b in zip(_scores(got), _scores(want))) < 1e-3
    mlm = make_task_model(tmp_path, "mlm")  # fill-mask is not in the graph: PyTorch answers
    assert bov.load_openvino(mlm).fill_mask("the [MASK] went home") == load(mlm).fill_mask("the [MASK] went home")


def test_engine_int8_calibrated_on_task_text(tmp_path):
    pytest.importorskip("nncf")
    from bertkit.inference import load

    directory = make_task_model(tmp_path, "sst2")
    with pytest.raises(BertkitError, match="calibration"):
        bov.load_openvino(directory, "int8")
    engine = bov.load_openvino(directory, "int8", calibration=TEXTS * 4, out_dir=tmp_path / "q", threads=1)
    assert (tmp_path / "q" / bov.XML).is_file() and engine.ov_precision == "int8"
    want, got = load(directory).predict(TEXTS), engine.predict(TEXTS)
    assert max(abs(a - b) for a, b in zip(_scores(got), _scores(want))) < 0.1


def test_read_calibration_texts_pairs_and_bad_files(tmp_path):
    from bertkit.errors import DataFormatError

    texts = tmp_path / "texts.txt"
    texts.write_text("a fine film\n\nthe store was closed\n", encoding="utf-8")
    assert read_calibration(texts) == ["a fine film", "the store was closed"]
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("who went ?\tthe man went home\nwhat closed ?\tthe store\n", encoding="utf-8")
    assert read_calibration(pairs) == [("who went ?", "the man went home"), ("what closed ?", "the store")]
    for name, text, where in [("tabs.txt", "a\tb\tc\n", "tabs.txt:1: one text"),
                              ("mixed.txt", "a\tb\nc\n", "mixed.txt:2: mixes"),
                              ("empty.txt", "\n\n", "empty.txt: no calibration input")]:
        (tmp_path / name).write_text(text, encoding="utf-8")
        with pytest.raises(DataFormatError, match=where):
            read_calibration(tmp_path / name)
    with pytest.raises(BertkitError, match="cannot read"):
        read_calibration(tmp_path / "absent.txt")


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_serve_runtime_openvino(tmp_path, precision):
    """``bertkit serve --runtime openvino``: /predict from OpenVINO (close to PyTorch's), /info
    names the runtime and its precision, and /embed refused as TEI refuses it for a classifier
    (424), whatever the runtime."""
    pytest.importorskip("fastapi")
    if precision == "int8":
        pytest.importorskip("nncf")
    from fastapi.testclient import TestClient

    from bertkit.inference import load
    from bertkit.serve import ServeConfig, create_app

    directory = make_task_model(tmp_path, "sst2")
    calibration = None
    if precision == "int8":
        calibration = tmp_path / "calibration.txt"
        calibration.write_text("\n".join(f"{a} {b}" for a in TEXTS for b in TEXTS) + "\n", encoding="utf-8")  # >= 16 distinct
    config = ServeConfig(model=str(directory), runtime="openvino", precision=precision,
                         calibration=str(calibration) if calibration else None)
    ours = load(directory)
    with TestClient(create_app(ServeConfig(model=str(directory)))) as torch_client:
        torch_embedded = torch_client.post("/embed", json={"inputs": TEXTS[0]})
    with TestClient(create_app(config)) as client:
        info = client.get("/info").json()
        assert info["bertkit"]["runtime"] == "openvino" and info["bertkit"]["precision"] == precision
        got = client.post("/predict", json={"inputs": [[t] for t in TEXTS]}).json()
        assert max(abs(a - b) for a, b in zip(_scores(got), _scores(ours.predict(TEXTS)))) < (
            1e-3 if precision == "fp32" else 0.1)
        embedded = client.post("/embed", json={"inputs": TEXTS[0]})
        assert embedded.status_code == torch_embedded.status_code == 424
        assert embedded.json() == torch_embedded.json()
