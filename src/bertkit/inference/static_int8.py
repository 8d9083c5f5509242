"""Static INT8 on the CPU through PyTorch 2's export route: the encoder exported with dynamic
batch and length (``torch.export``), quantised by ``torchao``'s ``X86InductorQuantizer``
(int8 weights per output channel; 8-bit activations with one scale each, fixed on calibration
batches of real text), and compiled by inductor with frozen weights, under bf16 autocast where
the CPU computes bf16 natively (the work between the INT8 products: attention, softmax, GELU,
LayerNorm in bf16, accumulating in fp32).

Unlike the dynamic INT8 of :mod:`bertkit.modeldir.int8`, which measures and quantises every
activation at run time in separate passes and leaves everything else in fp32, inductor fuses
each quantisation into the operation that produces its input and hands the products to
oneDNN's INT8 kernels (AMX on the Intel Xeon). On that CPU (BERT-Base, one thread, CPU
clock) it ran 1.30x / 1.44x / 1.45x the packed bf16 route at 1 / 8 / 32 x 128 tokens and 1.48x
on SST-2 dev batches, and 0.90x / 1.21x / 1.29x / 0.99x OpenVINO's static INT8
(docs/serving-results.md, "Packed bf16 weights and static INT8").

Costs and limits, as measured there: export and calibration take about a minute and the first
compilation two to four more per process (one graph for lone inputs, one for batches, every
length; no recompiling per request). The quantised encoder answers plain forward passes of at
least two tokens; a call asking for hidden states or attention probabilities, with gradients
on, or of one token runs the float model, kept beside it. The calibration inputs must be real
text of the model's task, never random ids.
Needs ``torchao`` (``pip install 'bertkit[int8-static]'``) and a C++ compiler.

Contract: :func:`blocker` (why this route cannot run here, or None), :func:`calibration_batches`
(padded ``(ids, types, mask)`` batches from rows of real text, at least 16 distinct), :func:`quantize_static` (the model's encoder routed
through the quantised graph, in place).
"""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Sequence

import torch

from bertkit import cpu
from bertkit.errors import BertkitError
from bertkit.inference.calibration import MIN_CALIBRATION_INPUTS, _field, padded_batches

MAX_BATCH = 4096  # the exported graph's bound on rows (its length bound is the model's positions)


def blocker() -> str | None:
    """Why static INT8 cannot run on this machine, or ``None``."""
    from bertkit.inference.compiled import cxx_compiler

    try:
        _torchao()
    except Exception as e:  # noqa: BLE001  (absent, or a release whose quantisation API moved)
        return f"static INT8 needs torchao (pip install 'bertkit[int8-static]'): {e}"
    if cxx_compiler() is None:
        return "static INT8 compiles with inductor, which needs a C++ compiler (g++ or clang++; set $CXX)"
    return None


@functools.cache
def _torchao():
    # its import warns about its CUDA kernels on a CPU build and about its Enum registrations
    # (torch's pytree): nothing a user of this route can act on, so kept off their screen
    loggers = [logging.getLogger(name) for name in ("torchao", "torch.utils._pytree")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
    return xiq, prepare_pt2e, convert_pt2e


def calibration_batches(rows: Sequence, batch_size: int = 8) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """``(input_ids, token_type_ids, attention_mask)`` batches of ``batch_size`` rows (token-id
    lists of real text, ``[CLS] ... [SEP]``, encodings, or task feature dicts), each padded
    to its longest row. A :class:`BertkitError` for fewer than
    :data:`~bertkit.inference.calibration.MIN_CALIBRATION_INPUTS` distinct rows: one
    activation scale per tensor is fixed from them."""
    distinct = {_key(r) for r in rows}
    if len(distinct) < MIN_CALIBRATION_INPUTS:
        raise BertkitError(f"static INT8 calibration needs at least {MIN_CALIBRATION_INPUTS} distinct inputs "
                           f"of real text, got {len(distinct)}")
    names = ("input_ids", "token_type_ids", "attention_mask")
    return [tuple(torch.from_numpy(feeds[n]) for n in names) for feeds in padded_batches(rows, batch_size)]


def _key(row) -> tuple:
    """A row's token ids and token types (lists or arrays) as one hashable tuple."""
    types = _field(row, "token_type_ids")
    return tuple(int(i) for i in _field(row, "input_ids")) + tuple(int(t) for t in (() if types is None else types))


def make_quantizer():
    """torchao's ``X86InductorQuantizer`` with its default static config, activations kept to
    7 bits (``reduce_range``) on a CPU without VNNI, where u8 x s8 products summed in 16-bit
    pairs can saturate (the rule of :mod:`bertkit.modeldir.int8`'s dynamic layers too)."""
    xiq = _torchao()[0]
    quantizer = xiq.X86InductorQuantizer()
    quantizer.set_global(xiq.get_default_x86_inductor_quantization_config(reduce_range=not cpu.cpu_has_vnni()))
    return quantizer


class _Plain(torch.nn.Module):
    """The encoder's plain forward pass as a module of tensors in and out (what export takes)."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids, token_type_ids, attention_mask):
        out = self.encoder(input_ids, token_type_ids, attention_mask)
        return out.last_hidden_state, out.pooled_output


def quantize_static(model, calibration: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
                    bf16: bool | None = None) -> None:
    """Route ``model``'s encoder through a static INT8 graph, in place. ``model``: an fp32 model
    in eval on the CPU, as loaded (not prepared for another precision); ``calibration``: from
    :func:`calibration_batches`; ``bf16``: run the non-INT8 work in bf16 (default: where the
    CPU computes bf16 natively, :func:`bertkit.cpu.cpu_bf16_support`). Compiles on the first
    call of each kind (one input, several): :func:`bertkit.inference.compiled.warm_up` does it
    ahead. A :class:`BertkitError` where the route cannot run (:func:`blocker`)."""
    from bertkit.model.outputs import ModelOutput

    why = blocker()
    if why:
        raise BertkitError(why)
    parameter = next(model.parameters())
    stored = getattr(model, "bertkit_precision", None)
    if parameter.device.type != "cpu" or parameter.dtype is not torch.float32 or stored is not None:
        raise BertkitError("static INT8 quantises an fp32 model on the CPU"
                           + (f", not one prepared for {stored}" if stored else ""))
    if bf16 is None:
        bf16 = cpu.cpu_bf16_support().native
    _, prepare_pt2e, convert_pt2e = _torchao()
    # inductor's INT8 lowering copy-constructs tensors; its advice is for torch, not the user
    warnings.filterwarnings("ignore", message="To copy construct from a tensor", category=UserWarning)
    encoder = model.encoder_model()
    eager = encoder.forward
    batch = torch.export.Dim("batch", min=1, max=MAX_BATCH)
    length = torch.export.Dim("length", min=2, max=model.config.max_position_embeddings)
    quantizer = make_quantizer()
    with torch.no_grad():
        graph = torch.export.export(_Plain(encoder), tuple(calibration[0]),
                                    dynamic_shapes=({0: batch, 1: length},) * 3).module()
        observed = prepare_pt2e(graph, quantizer)
        for inputs in calibration:
            observed(*inputs)
        quantised = convert_pt2e(observed)
    from torch._inductor import config as inductor

    # freezing set in the config, not as a compile option: torchao's INT8 lowering reads the
    # config (as an option, inductor meets onednn.qlinear_prepack unlowered and fails)
    compiled = inductor.patch(freezing=True)(torch.compile(quantised, dynamic=True))
    dtype = torch.bfloat16 if bf16 else None

    def forward(input_ids, token_type_ids=None, attention_mask=None, output_hidden_states=False,
                output_attentions=False):
        if output_hidden_states or output_attentions or torch.is_grad_enabled() or input_ids.shape[-1] < 2:
            return eager(input_ids, token_type_ids, attention_mask, output_hidden_states, output_attentions)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        with torch.autocast("cpu", dtype=dtype, enabled=bf16):
            last, pooled = compiled(input_ids, token_type_ids, attention_mask)
        return ModelOutput(last_hidden_state=last.float(), pooled_output=None if pooled is None else pooled.float())

    encoder.forward = forward
    model.bertkit_compiled = True
    model.bertkit_static_int8 = True
