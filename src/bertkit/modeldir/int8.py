"""INT8 inference: dynamic quantisation of the linear layers, and INT8 model directories.

``fp32`` runs the weights as they are; an engine that owns its model (loaded from a
directory) also packs them once for MKL's sgemm for inputs of a few rows where the CPU class
was measured faster (:func:`pack_fp32`). ``bf16`` keeps fp32 weights and runs under CPU/GPU
autocast (matrix products in bfloat16, LayerNorm and softmax in fp32), so the same loaded
model serves both. ``int8`` replaces every ``nn.Linear`` of the encoder and the heads (not the
masked-LM decoder, whose weight is tied to the word embeddings) by PyTorch's dynamically
quantised linear layer: int8 weights (symmetric, per output channel), activations quantised
per batch at run time, products on the CPU's int8 (VNNI) kernels. That route was chosen over
``torchao`` (its int8 dynamic-activation config ran slower than fp32 here without
``torch.compile``) and ONNX Runtime's quantiser (kept for ``export-onnx --int8``); the
measurements are in docs/serving.md. The layers are packed for PyTorch's ``onednn`` quantised
engine (:func:`int8_engine`; ``BERTKIT_INT8_ENGINE`` picks another), faster than the ``x86``
default on the Intel Xeon measured, with the same accuracy, for inputs of many rows (tokens
of a batch); for a few rows, as a server's lone short request, the ``x86`` engine's fbgemm
kernels are faster per layer. So each layer is packed twice (:class:`Int8Linear`): an input
of at most :func:`small_rows` rows (measured per CPU class) runs on fbgemm, a larger one on
onednn.

The precision names, the ``auto`` rule and the autocast context are
:mod:`bertkit.precision`'s, shared with training; this module holds what only INT8 needs.

INT8 save/load: :func:`save_int8` writes a model directory whose weights are
``model.int8.safetensors`` (int8 weight + per-channel scale for each quantised layer, float
tensors for the rest, under the model's own module names) and whose ``config.json`` says
``"bertkit_precision": "int8"``; :func:`load_model` rebuilds the quantised model from it
without re-quantising.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import os
import warnings
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bertkit.errors import BertkitError, CheckpointError
from bertkit.model.encoder import FeedForward
from bertkit.precision import RESOLVED, check

INT8_FILE = "model.int8.safetensors"
PRECISION_KEY = "bertkit_precision"
# Kernels the INT8 layers are packed for where this PyTorch has them: on the Intel Xeon of
# docs/serving-results.md, 6-21% faster than the x86 default on BERT-Base, with the same accuracy.
# BERTKIT_INT8_ENGINE picks another (x86, fbgemm) where that is faster.
INT8_ENGINE = os.environ.get("BERTKIT_INT8_ENGINE", "onednn")
# Inputs of at most this many rows (batch x tokens) run on SMALL_ENGINE's kernels, packed as
# a second copy of each layer's int8 weights; per CPU class (bertkit.cpu.cpu_class), as
# bench/int8_kernels.py measured it per layer (docs/serving-results.md, "The INT8 kernels"):
# * avx2 (AMD EPYC): x86 takes 0.28-0.53x onednn's time at 1-8 rows, 0.45-0.77x at 24-64,
#   0.74-0.94x at 128, even at 256, 1.02-1.13x at 1,024-4,096;
# * amx (Intel Xeon): onednn runs on AMX; x86 takes 0.40-0.82x its time at 1-8 rows, 0.40-1.00
#   at 16, 0.56-1.66 at 24, 0.69-1.31 at 32, 0.84-2.99 at 64 and 1.06-3.09 at 128-256;
# * avx512-vnni (Intel Xeon, no native bf16; 2 threads): x86 takes 0.41-0.75x onednn's time at
#   1-32 rows, 0.62-0.87 at 64, 0.74-1.25 at 128 (the 768 x 3072 layer slower), 0.87-1.12 at
#   256; BERT-Base end to end, 64 against no second copy: lone inputs of 16 / 32 / 64 tokens
#   15% / 20% / 7% faster, 1 x 128 level (a threshold of 128 made 1 x 128 7% slower).
# * avx512-bf16 (AMD EPYC, native bf16; 2 threads, 2026-12-01): x86 takes 0.39-0.76x onednn's
#   time at 1-24 rows, 0.51-0.91 at 64, 0.74-0.88 at 128 on all but the 768 x 3072 layer (1.05),
#   0.83-1.02 at 256, 0.96-1.14 at 1,024 and 1.11-2.99 at 4,096.
# A class not measured (another CPU) gets no second copy: every
# input runs on INT8_ENGINE, as PyTorch would, rather than a threshold measured on another
# class. BERTKIT_INT8_SMALL_ROWS overrides; 0 packs one copy only.
SMALL_ENGINE = "x86"
SMALL_ROWS_BY_CLASS = {"avx2": 256, "amx": 16, "avx512-vnni": 64, "avx512-bf16": 128}
UNMEASURED_ROWS = 0  # a class without a measured threshold: no second copy (INT8 or fp32)


def _rows_threshold(variable: str, by_class: dict[str, int]) -> int:
    """A rows threshold: the environment ``variable`` where set (a whole number; a bad value
    is a :class:`BertkitError` naming it), else ``by_class``'s value for this CPU's class
    (:func:`bertkit.cpu.cpu_class`), 0 for a class not measured."""
    from bertkit.cpu import cpu_class

    given = os.environ.get(variable, "").strip()
    if given:
        try:
            return max(0, int(given))
        except ValueError:
            raise BertkitError(f"{variable} must be a whole number of rows, got {given!r}") from None
    return by_class.get(cpu_class() or "", UNMEASURED_ROWS)


def small_rows() -> int:
    """Rows up to which an INT8 layer runs on :data:`SMALL_ENGINE`'s packing on this CPU:
    ``BERTKIT_INT8_SMALL_ROWS``, else its class's measured threshold."""
    return _rows_threshold("BERTKIT_INT8_SMALL_ROWS", SMALL_ROWS_BY_CLASS)


# fp32 inputs of at most this many rows run on a copy of each linear layer's weight packed
# once for MKL's sgemm (Fp32PackedLinear), larger ones on PyTorch's own product (MKL sgemm,
# which packs the weight again at every call), per CPU class as measured there (one thread,
# CPU clock, medians of 3 interleaved rounds, one-off script; docs/serving-results.md):
# * avx512-vnni (Intel Xeon, no native bf16): BERT-Base with the copy takes 0.48 / 0.58 /
#   0.70 / 0.76x the plain model's time at 1 x 8 / 16 / 64 / 128 tokens, 0.87x at 2 x 128,
#   0.96x at 4 x 128, 0.98x at 32 x 24 (768 rows), level from 1,024 (8 x 128 0.99, 32 x 64
#   1.01); BERT-Tiny 0.83-0.93x for a lone input of 8-128 tokens, 0.94-0.99x at 256-768 rows,
#   1.00-1.04x from 1,024. The logits are the plain layers' to 3e-7 (the same MKL kernels).
# A class not measured gets no copy (fp32 as PyTorch runs it). BERTKIT_FP32_PACKED_ROWS overrides.
FP32_PACKED_ROWS_BY_CLASS = {"avx512-vnni": 768}
# The row count the copy is packed for. MKL's packed format is made for one (m, n, k) and
# PyTorch's own op uses a copy only at that m; on the VNNI Xeon one copy packed for 128 rows
# gave the same answers (bit for bit from 16 rows) and about the same speed at 1-2,048 rows
# as a copy packed for each row count. Since MKL does not promise it, every layer shape is
# checked once per process and thread count before it is packed (:func:`_packing_answers_alike`).
FP32_PACK_ROWS = 128


def fp32_packed_rows() -> int:
    """Rows up to which an fp32 linear layer of a loaded model runs on its MKL-packed copy
    on this CPU: ``BERTKIT_FP32_PACKED_ROWS``, else its class's measured threshold (0: none)."""
    return _rows_threshold("BERTKIT_FP32_PACKED_ROWS", FP32_PACKED_ROWS_BY_CLASS)


def _quantisable(model: nn.Module) -> list[str]:
    """Names of the ``nn.Linear`` modules INT8 replaces (all but a tied MLM decoder)."""
    return [name for name, m in model.named_modules()
            if type(m) is nn.Linear and not name.endswith("mlm_head.decoder")]


@functools.cache
def _dynamic_linear():
    """:class:`Int8Linear` (made on first use: ``torch.ao`` is imported only for INT8)."""
    from torch.ao.nn.quantized.dynamic import Linear

    class Int8Linear(Linear):
        """PyTorch's dynamic INT8 linear layer, packed for :data:`INT8_ENGINE` and, where
        :func:`pack_small` ran, again for :data:`SMALL_ENGINE`: an input of at most
        ``small_rows`` rows (:func:`small_rows` when packed) runs on the second packing (same
        int8 weights and scales, activations quantised the same way). Activations are
        quantised to 7 bits (``reduce_range``, PyTorch's own layer always does) only on a CPU
        without VNNI, where u8 x s8 products summed in 16-bit pairs can saturate; with VNNI
        or AMX to 8 bits: BERT-Base's last hidden state then differs from fp32 by 0.11 at
        most (mean 0.019) instead of 0.19 (0.030), as OpenVINO's and ONNX Runtime's INT8."""

        small = None
        small_rows = 0
        reduce_range = True

        def pack_small(self) -> None:
            """Decide the activation range for this CPU, and pack the small-input copy."""
            from bertkit.cpu import cpu_has_vnni

            self.reduce_range = not cpu_has_vnni()
            quantized = torch.backends.quantized
            rows = small_rows()
            if rows <= 0 or SMALL_ENGINE == quantized.engine or SMALL_ENGINE not in quantized.supported_engines:
                return
            weight, bias = self._weight_bias()
            with _engine(SMALL_ENGINE):
                self.small = torch.ops.quantized.linear_prepack(weight, bias)
            self.small_rows = rows

        def forward(self, x):
            small = self.small is not None and x.numel() <= self.small_rows * x.shape[-1]
            packed = self.small if small else self._packed_params._packed_params
            return torch.ops.quantized.linear_dynamic(x, packed, reduce_range=self.reduce_range).to(x.dtype)

    return Int8Linear


@contextmanager
def _engine(name: str):
    quantized = torch.backends.quantized
    previous = quantized.engine
    quantized.engine = name
    try:
        yield name
    finally:
        quantized.engine = previous


@contextmanager
def int8_engine():
    """Within this context, quantised layers are packed for :data:`INT8_ENGINE` (if this
    PyTorch supports it; else its default engine). A layer keeps the kernels it was packed for
    whatever the process-wide engine is later, so only packing needs the context."""
    quantized = torch.backends.quantized
    if INT8_ENGINE in quantized.supported_engines:
        name = INT8_ENGINE
    elif "BERTKIT_INT8_ENGINE" in os.environ:
        raise BertkitError(f"BERTKIT_INT8_ENGINE={INT8_ENGINE!r} is not a quantised-kernel engine of "
                           f"this PyTorch ({', '.join(quantized.supported_engines)})")
    else:
        name = quantized.engine
    with _engine(name):
        yield name


def quantize_int8(model: nn.Module) -> nn.Module:
    """``model`` (fp32, CPU, eval) with its linear layers replaced by INT8 dynamic ones, in place.

    Per-output-channel symmetric int8 weights; see the module docstring for the route.
    """
    if next(model.parameters()).device.type != "cpu":
        raise BertkitError("int8 precision runs on the CPU only; use --device cpu")
    model = model.float().eval()
    qconfig = torch.ao.quantization.per_channel_dynamic_qconfig
    Linear = _dynamic_linear()
    with warnings.catch_warnings(), int8_engine():
        warnings.simplefilter("ignore")  # torch.ao.quantization's deprecation notice
        torch.ao.quantization.quantize_dynamic(
            model, {name: qconfig for name in _quantisable(model)}, dtype=torch.qint8,
            mapping={nn.Linear: Linear}, inplace=True)
        for module in model.modules():
            if isinstance(module, Linear):
                module.pack_small()
    model.bertkit_precision = "int8"
    return model


def is_int8(model: nn.Module) -> bool:
    return getattr(model, "bertkit_precision", None) == "int8"


HALF_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def prepare(model: nn.Module, precision: str) -> nn.Module:
    """The model to run (in eval) at ``precision``, changed in place: INT8-quantised for
    ``int8``; for ``bf16``/``fp16`` its linear layers' weights stored in that type
    (:func:`half_linears`), so autocast no longer casts them at every forward pass (the
    answers are the same: autocast rounds fp32 weights to the same values); unchanged for
    ``fp32``. A model stored in INT8 or half precision runs at that precision only."""
    check(precision, RESOLVED)
    stored = getattr(model, "bertkit_precision", None)
    if stored is not None and stored != precision:
        raise BertkitError(f"this model is stored in {stored.upper()}; it runs at precision {stored}, "
                           f"not {precision}")
    if precision == "int8" and stored is None:
        return quantize_int8(model)
    if precision in HALF_DTYPES and stored is None:
        return half_linears(model, precision)
    return model


def half_linears(model: nn.Module, precision: str) -> nn.Module:
    """``model`` with the weights and biases of its linear layers (not the masked-LM decoder,
    tied to the fp32 word embeddings) in ``precision``'s type, in place, for inference under
    autocast: embeddings, LayerNorm and the decoder stay fp32, LayerNorm and softmax still
    accumulate in fp32. Measured on the AMX Xeon: bench/precision_crossover.py.

    On a CPU whose oneDNN computes bf16 (:func:`can_pack_bf16`), each bf16 layer becomes a
    :class:`PackedLinear`: its weight reordered once into the blocked layout oneDNN's kernels
    (AMX, avx512_bf16) read, instead of at every call. The answers are the same bit for bit;
    on the Intel Xeon with AMX the products at 128 rows took 0.6-0.7x the time (BERT-Base 1.12-1.16x
    faster in all; docs/serving-results.md)."""
    dtype = HALF_DTYPES[precision]
    pack = dtype is torch.bfloat16 and _on_cpu(model) and can_pack_bf16()
    for name in _quantisable(model):
        layer = model.get_submodule(name).to(dtype)
        if pack:
            parent, _, child = name.rpartition(".")
            owner = model.get_submodule(parent) if parent else model
            # a feed-forward block's expansion applies the block's GELU in its product (oneDNN's
            # post-op: the (rows, 3072) output written once instead of twice)
            fused = getattr(owner, "hidden_act", None) if isinstance(owner, FeedForward) else None
            setattr(owner, child, PackedLinear(layer, fused if fused in PackedLinear.ACTIVATIONS else None))
    model.bertkit_precision = precision
    return model


def _on_cpu(model: nn.Module) -> bool:
    return next(model.parameters()).device.type == "cpu"


@functools.cache
def can_pack_bf16() -> bool:
    """Does this PyTorch's oneDNN run bf16 products on this CPU (the CPU itself, not
    ``BERTKIT_CPU_CLASS``'s: packing changes no answer, only where the work runs)?
    ``BERTKIT_BF16_PACK=0`` turns packing off."""
    if os.environ.get("BERTKIT_BF16_PACK", "").strip() == "0":
        return False
    try:
        if not (torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()):
            return False
        weight = torch.ops.mkldnn._reorder_linear_weight(torch.ones(8, 8, dtype=torch.bfloat16), None)
        torch.ops.mkldnn._linear_pointwise(torch.ones(2, 8, dtype=torch.bfloat16), weight, None, "none", [], "")
        return True
    except (AttributeError, RuntimeError):
        return False


def _plain_linear(weight: torch.Tensor, bias: torch.Tensor | None) -> nn.Linear:
    """A plain ``nn.Linear`` (eval) holding copies of ``weight`` and ``bias``, in their dtype:
    what a packed layer gives back (:func:`unpack_linears`, deep copies)."""
    out_features, in_features = weight.shape
    linear = nn.Linear(in_features, out_features, bias=bias is not None, dtype=weight.dtype)
    with torch.no_grad():
        linear.weight.copy_(weight)
        if bias is not None:
            linear.bias.copy_(bias)
    return linear.eval()


class PackedLinear(nn.Module):
    """A bf16 linear layer for CPU inference whose weight oneDNN has reordered once into its
    kernels' blocked layout (``torch.ops.mkldnn._reorder_linear_weight``, the packing
    inductor's freezing does), run by ``torch.ops.mkldnn._linear_pointwise``. Input of any
    float type is cast to bf16 (as autocast does); the output is bf16. ``weight`` gives the
    plain bf16 weight back (a copy), and the state dict holds it, so the layer saves and
    reads as an ``nn.Linear``. ``activation`` (a key of :data:`ACTIVATIONS`, a feed-forward
    block's ``hidden_act``): applied to the output within the product, and named by the
    layer's ``activation`` attribute so that its :class:`~bertkit.model.encoder.FeedForward`
    does not apply it again (a plain layer, :meth:`as_linear`, leaves it to the block).
    Measured on the avx512_bf16 EPYC (768 -> 3,072, one thread): 0.91-0.99x the time of the
    product then ``F.gelu``, from 8 rows to 4,096."""

    dtype = torch.bfloat16  # what its product computes in (sparse_last_layer.cls_pays reads it)
    # hidden_act names (bertkit.config.ACTIVATIONS) oneDNN applies in the product: (post-op, algorithm)
    ACTIVATIONS = {"gelu": ("gelu", "none"), "gelu_new": ("gelu", "tanh"), "gelu_pytorch_tanh": ("gelu", "tanh")}

    def __init__(self, linear: nn.Linear, activation: str | None = None):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.activation = activation  # applied to the output (FeedForward reads it), or None
        self._post_op = self.ACTIVATIONS[activation] if activation else ("none", "")
        self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach().to(torch.bfloat16), None)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().to(torch.bfloat16),
                                                                 requires_grad=False)

    @property
    def weight(self) -> torch.Tensor:
        return self.packed.to_dense()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype is not torch.bfloat16:
            x = x.to(torch.bfloat16)
        if x.numel() == 0:
            return x.new_zeros(*x.shape[:-1], self.out_features)
        attr, algorithm = self._post_op
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, attr, [], algorithm)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "weight"] = self.weight

    def __deepcopy__(self, memo):
        return PackedLinear(self.as_linear(), self.activation)

    def as_linear(self) -> nn.Linear:
        """The plain bf16 ``nn.Linear`` this layer was made from."""
        return _plain_linear(self.weight, self.bias)

    def extra_repr(self) -> str:
        fused = f", then {self.activation}" if self.activation else ""
        return f"in_features={self.in_features}, out_features={self.out_features}, bf16 packed for oneDNN{fused}"


class Fp32PackedLinear(nn.Linear):
    """An fp32 ``nn.Linear`` (its own weight and bias, saved and read as usual) that runs an
    input of 1 to ``rows`` rows, in inference mode, on a copy of its weight packed once for
    MKL's sgemm (``cblas_sgemm_pack``, through ``torch.ops.mkl``): PyTorch's own fp32 product is
    the same MKL sgemm, but it packs the weight again at every call, which at a few rows is
    most of the work (:func:`fp32_packed_rows`). Any other call (more rows, gradients,
    another dtype) runs the plain product. The copy is made for a loaded model that is not
    trained further (:func:`pack_fp32`), and made again when torch's thread count changes: a
    copy packed on one thread ran 1.2-1.7x slower than the plain product on two (VNNI Xeon,
    BERT-Base's layers, 16-128 rows), one packed on two threads as fast on one as one packed
    there. It is never copied (MKL's packed buffer must stay at its address: a deep copy packs
    again). Under ``torch.compile`` it is one operator, :func:`fp32_packed_linear`, that makes
    the same choice when the graph runs. ``lazy``: the copy is made at the first product that
    uses it, not now (a layer a model may never run, such as a masked-LM decoder of 30,522 rows
    when only embeddings are asked for, then costs no memory or start-up)."""

    def __init__(self, linear: nn.Linear, rows: int, lazy: bool = False):
        nn.Module.__init__(self)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias  # the same parameters: a tied weight stays tied
        self.rows, self.lazy = rows, lazy
        self.packed, self.packed_threads = None, 0
        if not lazy:
            self.packed_for(torch.get_num_threads())
        self.handle = next(_HANDLES)
        _PACKED_LAYERS[self.handle] = self

    def packed_for(self, threads: int) -> torch.Tensor | None:
        """The copy packed under ``threads`` (torch's thread count now), packing it if the
        copy was packed under another count; ``None`` where this shape does not pack alike
        under that count (:func:`_packing_answers_alike`)."""
        if threads != self.packed_threads:
            alike = _packing_answers_alike(self.in_features, self.out_features, threads)
            self.packed = (torch.ops.mkl._mkl_reorder_linear_weight(self.weight.detach(), FP32_PACK_ROWS)
                           if alike else None)
            self.packed_threads = threads
        return self.packed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():  # one operator in the graph, choosing the copy as it runs
            return fp32_packed_linear(x, self.weight, self.bias, self.handle)
        return self.product(x)

    def product(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ weight.T + bias``: on the packed copy for 1 to ``rows`` rows of fp32 in
        inference mode, where this shape packs alike; else the plain product."""
        if (x.dtype is torch.float32 and torch.is_inference_mode_enabled()
                and 0 < x.numel() <= self.rows * self.in_features):  # 1 to rows rows
            packed = self.packed_for(torch.get_num_threads())
            if packed is not None:
                return _packed_product(x, packed, self.weight, self.bias)
        return nn.functional.linear(x, self.weight, self.bias)

    def __deepcopy__(self, memo):
        plain = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None, device="meta")
        plain.weight = copy.deepcopy(self.weight, memo)  # through memo: a weight tied elsewhere stays tied
        plain.bias = copy.deepcopy(self.bias, memo)
        return Fp32PackedLinear(plain, self.rows, self.lazy)

    def as_linear(self) -> nn.Linear:
        """A plain ``nn.Linear`` holding this layer's weight and bias (copies)."""
        return _plain_linear(self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, fp32 packed for MKL up to {self.rows} rows"


# The Fp32PackedLinear layers alive, by handle: a compiled graph names its layer by number
# (the packed copy is not a tensor a graph can hold: MKL's buffer has no storage to trace).
_PACKED_LAYERS: weakref.WeakValueDictionary[int, Fp32PackedLinear] = weakref.WeakValueDictionary()
_HANDLES = itertools.count()


@torch.library.custom_op("bertkit::fp32_packed_linear", mutates_args=())
def fp32_packed_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                       layer: int) -> torch.Tensor:
    """:meth:`Fp32PackedLinear.product` of the layer with handle ``layer``, as one operator.

    ``torch.compile`` traces an :class:`Fp32PackedLinear` to this instead of its plain product:
    inductor packs an fp32 weight itself only for a fixed row count, so with the compiled
    route's dynamic shapes its products were plain sgemm, which repacks the weight at every
    call (BERT-Base 1 x 16 on the VNNI Xeon: 94-103 ms compiled against 57 eager; 55-57 with
    this operator). ``weight`` and ``bias`` are the layer's own, passed so that the graph keeps them."""
    return _PACKED_LAYERS[layer].product(x)


@fp32_packed_linear.register_fake
def _(x, weight, bias, layer):
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


def _packed_product(x: torch.Tensor, packed: torch.Tensor, weight: torch.Tensor,
                    bias: torch.Tensor | None) -> torch.Tensor:
    """``x @ weight.T + bias`` on ``packed`` (``weight`` packed by MKL), for ``x`` of any rows."""
    rows = x.numel() // x.shape[-1]  # the op takes the packed copy only at the rows it is told
    return torch.ops.mkl._mkl_linear(x, packed, weight, bias, rows)


@functools.cache
def can_pack_fp32() -> bool:
    """Does this PyTorch run fp32 products on weights packed by MKL (an x86 build with MKL)?"""
    mkl = torch.backends.mkl.is_available()
    return mkl and hasattr(torch.ops.mkl, "_mkl_reorder_linear_weight") and hasattr(torch.ops.mkl, "_mkl_linear")


@functools.cache
def _packing_answers_alike(in_features: int, out_features: int, threads: int) -> bool:
    """Whether a weight of this shape packed for :data:`FP32_PACK_ROWS` rows under torch's
    thread count now (``threads``, the cache's key) gives the plain product's answers (to
    rounding) at other row counts on this machine: checked once per shape, thread count and
    process at 1, 2, 3, 17 and 301 rows on a random weight (MKL documents a packed copy for the
    row count it was packed for only)."""
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(out_features, in_features, generator=generator) / in_features ** 0.5
    bias = torch.randn(out_features, generator=generator)
    packed = torch.ops.mkl._mkl_reorder_linear_weight(weight, FP32_PACK_ROWS)
    with torch.inference_mode():
        for rows in (1, 2, 3, 17, 301):
            x = torch.randn(rows, in_features, generator=generator)
            got = _packed_product(x, packed, weight, bias)
            if not torch.allclose(got, nn.functional.linear(x, weight, bias), rtol=1e-5, atol=1e-5):
                return False
    return True


def pack_fp32(model: nn.Module) -> nn.Module:
    """``model`` (fp32, on the CPU, loaded for inference) with its fp32 linear layers as
    :class:`Fp32PackedLinear`, in place, where this CPU class has a measured threshold
    (:func:`fp32_packed_rows`) and this PyTorch has MKL (:func:`can_pack_fp32`); a layer whose
    shape does not pack alike here (:func:`_packing_answers_alike`) stays plain. The masked-LM
    decoder (its weight still the word embeddings') is packed lazily, at its first product of
    1 or more rows. The answers move by rounding only (BERT-Base logits within 3e-7 of the
    plain layers')."""
    rows = fp32_packed_rows()
    if rows <= 0 or not _on_cpu(model) or not can_pack_fp32():
        return model
    for name in _quantisable(model):
        layer = model.get_submodule(name)
        if (layer.weight.dtype is torch.float32
                and _packing_answers_alike(layer.in_features, layer.out_features, torch.get_num_threads())):
            parent, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent) if parent else model, child, Fp32PackedLinear(layer, rows))
    head = getattr(model, "mlm_head", None)
    if head is not None and type(head.decoder) is nn.Linear and head.decoder.weight.dtype is torch.float32:
        head.decoder = Fp32PackedLinear(head.decoder, rows, lazy=True)
    return model


def pack_now(model: nn.Module) -> None:
    """Every :class:`Fp32PackedLinear` of ``model`` with its copy made now, for torch's thread
    count in the calling thread: one packed lazily (the masked-LM decoder: about 1 s for
    BERT-Base's, its check included) or under another count (the server loads on one thread),
    so that the first requests do not pay for it."""
    threads = torch.get_num_threads()
    for module in model.modules():
        if isinstance(module, Fp32PackedLinear):
            module.packed_for(threads)


def unpack_linears(model: nn.Module, fp32: bool = True) -> nn.Module:
    """``model`` with every :class:`PackedLinear` back as a plain bf16 ``nn.Linear`` and, with
    ``fp32``, every :class:`Fp32PackedLinear` as a plain fp32 one, in place (``torch.compile``
    traces plain bf16 layers and packs them itself; the compiled route keeps the fp32 ones,
    :func:`fp32_packed_linear`)."""
    kinds = (PackedLinear, Fp32PackedLinear) if fp32 else (PackedLinear,)
    for name, module in list(model.named_modules()):
        if isinstance(module, kinds):
            parent, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent) if parent else model, child, module.as_linear())
    return model


# ------------------------------------------------------------------ INT8 model directories
def int8_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """Plain tensors of a quantised model: ``<layer>.qweight`` (int8), ``<layer>.qscale``,
    ``<layer>.qzero_point`` and ``<layer>.bias`` per quantised layer, float tensors otherwise."""
    Linear = _dynamic_linear()
    state: dict[str, torch.Tensor] = {}
    quantised = set()
    for name, module in model.named_modules():
        if isinstance(module, Linear):
            weight, bias = module._weight_bias()
            quantised.add(name)
            state[f"{name}.qweight"] = weight.int_repr().contiguous()
            if weight.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric):
                state[f"{name}.qscale"] = weight.q_per_channel_scales().float().contiguous()
                state[f"{name}.qzero_point"] = weight.q_per_channel_zero_points().contiguous()
            else:
                state[f"{name}.qscale"] = torch.tensor([weight.q_scale()], dtype=torch.float32)
                state[f"{name}.qzero_point"] = torch.tensor([weight.q_zero_point()])
            if bias is not None:
                state[f"{name}.bias"] = bias.detach().contiguous()
    seen: dict[int, str] = {}
    for key, value in model.state_dict().items():
        owner = key.rsplit(".", 1)[0]
        if owner in quantised or owner.rsplit(".", 1)[0] in quantised or not isinstance(value, torch.Tensor):
            continue
        if value.dtype.is_floating_point and value.data_ptr() not in seen:
            seen[value.data_ptr()] = key  # a tied tensor is stored once (safetensors refuses shares)
            state[key] = value.detach().contiguous()
    return state


def save_int8(model: nn.Module, directory: str | Path, tokenizer: Any = None,
              extra_config: dict[str, Any] | None = None) -> Path:
    """Write an INT8 model (from :func:`quantize_int8`) as a model directory; returns it."""
    from safetensors.torch import save_file

    from bertkit.checkpoint import CONFIG_FILE, hf_config_dict
    from bertkit.fileio import atomic_path, atomic_write

    if not is_int8(model):
        raise BertkitError("save_int8 needs a model quantised with quantize_int8")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with atomic_path(directory / INT8_FILE) as tmp:
        save_file(int8_state(model), str(tmp), metadata={"format": "bertkit-int8"})
    if tokenizer is not None:
        tokenizer.save_pretrained(directory)
    config = hf_config_dict(model, {**(extra_config or {}), PRECISION_KEY: "int8"})
    with atomic_write(directory / CONFIG_FILE) as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    return directory


def is_int8_dir(directory: str | Path) -> bool:
    return (Path(directory) / INT8_FILE).is_file()


def _load_int8(directory: Path, model_class) -> nn.Module:
    from safetensors.torch import load_file

    from bertkit.checkpoint import default_model_class, load_config

    config = load_config(directory)
    model_class = model_class or default_model_class(config)
    model = model_class(config).eval()
    state = load_file(str(directory / INT8_FILE))
    names = _quantisable(model)
    floats = {k: v for k, v in state.items() if k.rsplit(".", 1)[0] not in names}
    missing, unexpected = model.load_state_dict(floats, strict=False)
    missing = [k for k in missing if k.rsplit(".", 1)[0] not in names and not k.endswith("decoder.weight")]
    if missing or unexpected:
        raise CheckpointError(f"{directory / INT8_FILE}: missing tensors {missing[:5]}, "
                              f"unexpected {unexpected[:5]}")
    Linear = _dynamic_linear()
    with int8_engine():
        for name in names:
            _set_int8_linear(model, name, state, directory, Linear)
    model.bertkit_precision = "int8"
    return model.eval()


def _set_int8_linear(model: nn.Module, name: str, state: dict, directory: Path, Linear) -> None:
    """Replace the float linear layer ``name`` by the quantised one stored in ``state``."""
    if f"{name}.qweight" not in state:
        raise CheckpointError(f"{directory / INT8_FILE}: no tensor {name}.qweight")
    float_linear = model.get_submodule(name)
    qweight, scale, zero_point = (state[f"{name}.{k}"] for k in ("qweight", "qscale", "qzero_point"))
    if scale.numel() == 1:
        weight = torch._make_per_tensor_quantized_tensor(qweight, float(scale), int(zero_point))
    else:
        weight = torch._make_per_channel_quantized_tensor(qweight, scale.double(), zero_point, 0)
    layer = Linear(float_linear.in_features, float_linear.out_features, dtype=torch.qint8)
    layer.set_weight_bias(weight, state.get(f"{name}.bias"))
    layer.pack_small()
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, child, layer)


def load_model(directory: str | Path, model_class=None, precision: str = "fp32") -> nn.Module:
    """The model of ``directory`` ready to run at ``precision`` (see :func:`prepare`).

    An INT8 directory (from :func:`save_int8`) loads as INT8 whatever ``precision`` says
    ``int8`` or ``fp32`` (its float weights are gone); ``bf16`` is then an error.
    """
    from bertkit.checkpoint import load_pretrained

    check(precision, RESOLVED)
    directory = Path(directory)
    if is_int8_dir(directory):
        if precision in ("bf16", "fp16"):
            raise BertkitError(f"{directory} holds an INT8 model; use --precision int8")
        return _load_int8(directory, model_class)
    return prepare(load_pretrained(directory, model_class), precision)
