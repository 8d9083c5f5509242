"""ONNX export: every head, dynamic batch/sequence axes, parity with PyTorch under onnxruntime."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from bertkit.inference.export import OrtModel, export_onnx, output_names  # noqa: E402
from bertkit.modeldir.int8 import load_model  # noqa: E402
from tests.task_models import make_task_model  # noqa: E402


def batch(shape, vocab):
    """Random ids; the first example padded at the end (when it is long enough)."""
    torch.manual_seed(sum(shape))
    ids = torch.randint(5, vocab, shape)
    mask = torch.ones_like(ids)
    pad = min(3, shape[-1] - 2)
    if pad > 0:
        mask[0, ..., -pad:] = 0
        ids[mask == 0] = 0
    types = torch.zeros_like(ids)
    types[..., shape[-1] // 2:] = 1
    return ids, types, mask


@pytest.mark.parametrize("kind", ["classify", "regression", "tagging", "qa", "choice", "mlm"])
def test_export_matches_pytorch_within_1e_4_on_new_shapes(tmp_path, kind):
    directory = make_task_model(tmp_path, kind)
    path = export_onnx(directory, tmp_path / f"{kind}.onnx")
    model = load_model(directory)
    ort = OrtModel(path)
    assert ort.names == list(output_names(model))
    vocab = model.config.vocab_size
    shapes = [(3, 4, 11), (1, 2, 5)] if kind == "choice" else [(5, 13), (1, 3), (2, 40)]
    for shape in shapes:  # other batch sizes and lengths than the traced example
        ids, types, mask = batch(shape, vocab)
        with torch.no_grad():
            ref = model(ids, types, mask)
        got = ort(ids, types, mask)
        for name in ort.names:
            assert got[name].shape == ref[name].shape
            assert torch.allclose(got[name], ref[name], atol=1e-4, rtol=0), (name, shape)


def test_bare_encoder_and_int8_graph(tmp_path):
    from bertkit.checkpoint import save_pretrained
    from bertkit.model import BertModel

    model = load_model(make_task_model(tmp_path, "classify"))
    save_pretrained(BertModel(model.config), tmp_path / "bare")
    encoder = OrtModel(export_onnx(tmp_path / "bare", tmp_path / "bare.onnx"))
    assert encoder.names == ["last_hidden_state", "pooled_output"]
    path = export_onnx(tmp_path / "classify", tmp_path / "int8.onnx", int8=True)
    import onnx

    graph = onnx.load(str(path))
    assert any(node.op_type in ("DynamicQuantizeLinear", "MatMulInteger", "DynamicQuantizeMatMul")
               for node in graph.graph.node)
    ids, types, mask = batch((4, 9), model.config.vocab_size)
    with torch.no_grad():
        ref = model(ids, types, mask).logits
    got = OrtModel(path)(ids, types, mask).logits
    assert got.shape == ref.shape and not torch.equal(got, ref)
    assert (got - ref).abs().max() < 0.1 * ref.abs().max()
