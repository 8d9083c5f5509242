"""ONNX export of a model directory (encoder + its task head), and running it under ONNX Runtime.

``export_onnx(model_dir, out)`` writes one ONNX graph with inputs ``input_ids``,
``attention_mask``, ``token_type_ids`` (int64; (batch, sequence), or (batch, choices,
sequence) for multiple choice) and the head's outputs under their :class:`ModelOutput` names:

===========================================  =========================================
model                                        outputs
===========================================  =========================================
BertForSequenceClassification / Token...     ``logits``
BertForQuestionAnswering                     ``start_logits``, ``end_logits``
BertForMultipleChoice                        ``logits`` (batch, choices)
BertForMaskedLM / BertForPreTraining         ``logits`` (masked-LM, batch x seq x vocab)
BertModel                                    ``last_hidden_state`` (+ ``pooled_output``)
===========================================  =========================================

Batch, choices and sequence axes are dynamic. The graph is traced (``torch.onnx.export``,
TorchScript route: ``torch.export`` stops at the encoder's data-dependent "is anything
padded?" branch) with a padded example, so the padding path is the one recorded; it is exact
for unpadded inputs too. ``int8=True`` then applies ONNX Runtime's dynamic quantisation
(int8 weights per channel, activations quantised at run time) to the graph.
:class:`OrtModel` runs a graph with the interface of a bertkit model (for evaluation and the
benchmarks).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from bertkit.errors import BertkitError
from bertkit.model.outputs import ModelOutput

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def output_names(model: nn.Module) -> tuple[str, ...]:
    name = type(model).__name__
    if name == "BertForQuestionAnswering":
        return ("start_logits", "end_logits")
    if name == "BertModel":
        return ("last_hidden_state", "pooled_output") if model.pooler is not None else ("last_hidden_state",)
    if name == "BertForPreTraining":
        return ("mlm_logits",)
    return ("logits",)


class _Graph(nn.Module):
    """The traced function: positional inputs in :data:`INPUTS` order, a tuple of outputs."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.names = output_names(model)

    def forward(self, input_ids, attention_mask, token_type_ids):
        out = self.model(input_ids, token_type_ids, attention_mask)
        return tuple(out[name] for name in self.names)


def example_inputs(model: nn.Module) -> tuple[torch.Tensor, ...]:
    """A padded batch (the second row shorter) in :data:`INPUTS` order."""
    vocab = model.config.vocab_size
    ids = torch.arange(14).remainder(max(vocab - 5, 1)).add(5).view(2, 7)
    mask = torch.ones_like(ids)
    mask[1, 4:] = 0
    types = torch.zeros_like(ids)
    types[:, 3:] = 1
    if type(model).__name__ == "BertForMultipleChoice":
        return tuple(t.unsqueeze(1).expand(2, 3, 7).contiguous() for t in (ids, mask, types))
    return ids, mask, types


def export_onnx(model_dir: str | Path, out: str | Path, int8: bool = False, opset: int = 17) -> Path:
    """Export ``model_dir`` (a float model directory) to ``out``; returns ``out``."""
    from bertkit.fileio import atomic_path
    from bertkit.modeldir.int8 import is_int8_dir, load_model

    if is_int8_dir(model_dir):
        raise BertkitError(f"{model_dir} holds a PyTorch INT8 model; export the float model "
                           "(export-onnx --int8 quantises the ONNX graph itself)")
    model = load_model(model_dir).float().eval()
    graph = _Graph(model).eval()
    choice = type(model).__name__ == "BertForMultipleChoice"
    axes = {0: "batch", 1: "choices", 2: "sequence"} if choice else {0: "batch", 1: "sequence"}
    dynamic = {name: dict(axes) for name in INPUTS}
    for name in graph.names:
        dynamic[name] = {0: "batch", 1: "choices" if choice else "sequence"} if _per_token(model, name) or choice \
            else {0: "batch"}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer notes
        fp32 = Path(str(tmp) + ".fp32.onnx") if int8 else Path(tmp)
        torch.onnx.export(graph, example_inputs(model), str(fp32), input_names=list(INPUTS),
                          output_names=list(graph.names), dynamic_axes=dynamic, opset_version=opset,
                          dynamo=False)
        if int8:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            from bertkit.cpu import cpu_has_vnni

            # Without VNNI, ORT's u8 x s8 kernels add products in 16-bit pairs that saturate
            # with full-range weights (BERT-Tiny logits off by 30% on an AVX2-only EPYC):
            # 7-bit weights there, as ONNX Runtime's quantisation guide advises.
            quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8, per_channel=True,
                             reduce_range=not cpu_has_vnni())
            fp32.unlink()
    return out


def _per_token(model: nn.Module, output: str) -> bool:
    """Has ``output`` a sequence axis (axis 1)?"""
    if output == "logits":
        return type(model).__name__ in ("BertForTokenClassification", "BertForMaskedLM")
    return output != "pooled_output"


class OrtModel(nn.Module):
    """An exported graph under ONNX Runtime, called like a bertkit model:
    ``model(input_ids, token_type_ids, attention_mask)`` -> :class:`ModelOutput` (CPU tensors)."""

    def __init__(self, path: str | Path, config=None, threads: int | None = None):
        super().__init__()
        import onnxruntime as ort

        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.names = [o.name for o in self.session.get_outputs()]
        self.config = config

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, **_ignored) -> ModelOutput:
        feeds = {"input_ids": input_ids.cpu().numpy().astype(np.int64),
                 "attention_mask": (torch.ones_like(input_ids) if attention_mask is None else attention_mask)
                 .cpu().numpy().astype(np.int64),
                 "token_type_ids": (torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids)
                 .cpu().numpy().astype(np.int64)}
        values = self.session.run(None, feeds)
        out = ModelOutput()
        for name, value in zip(self.names, values):
            setattr(out, name, torch.from_numpy(value))
        if out.mlm_logits is not None and out.logits is None:
            out.logits = out.mlm_logits
        return out
