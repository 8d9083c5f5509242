"""Static INT8 on the CPU through PyTorch 2's export route: the encoder exported with dynamic
batch and length (``torch.export``), quantised by ``torchao``'s ``X86InductorQuantizer``
(int8 weights per output channel; 8-bit activations with one scale each, fixed on calibration
batches of real text), and compiled by inductor with frozen weights, under bf16 autocast where
the CPU computes bf16 natively (the work between the INT8 products: attention, softmax, GELU,
LayerNorm in bf16, accumulating in fp32; on the avx512_bf16 EPYC attention is traced as two
batched bf16 products, :func:`attention_as_products`).

Unlike the dynamic INT8 of :mod:`bertkit.modeldir.int8`, which measures and quantises every
activation at run time in separate passes and leaves everything else in fp32, inductor fuses
each quantisation into the operation that produces its input and hands the products to
oneDNN's INT8 kernels (AMX on the Intel Xeon). On that CPU (BERT-Base, one thread, CPU
clock) it ran 1.30x / 1.44x / 1.45x the packed bf16 route at 1 / 8 / 32 x 128 tokens and 1.48x
on SST-2 dev batches; with its package autotuned (:data:`AUTOTUNED_CLASSES`) 1.28-1.39x /
1.17-1.25x / 1.37-1.38x / 1.11-1.25x OpenVINO's static INT8 over two runs (docs/serving-results.md,
"Packed bf16 weights and static INT8").

The quantised graph is compiled ahead of time by AOTInductor into a package (one shared
library with the frozen, prepacked weights, for any batch and length: no recompiling per
request) and kept on disk (:func:`cache_dir`), keyed by everything the package depends on (the
encoder's weights and config, the calibration batches, bf16 or not, the intra-op thread count
it is built for, this CPU's flags, torch's and torchao's versions): the next process with the
same model and inputs loads it in a fraction of a second instead of exporting, calibrating and
compiling again (about a minute for BERT-Base's export and calibration, minutes for its
compilation). Every pass runs at a length of a short ladder (:func:`length_bucket`: a multiple
of 8 tokens up to 64, then coarser; :func:`pass_length`: unless the padding costs more than a
new shape, measured per CPU class), the padding masked out, so that the few matrix shapes
oneDNN builds its INT8 products for are reused across texts of every length (a lone BERT-Tiny
input 1.3 ms against 3.3 on the VNNI Xeon). The package is built, or loaded, at the first forward pass
(:func:`bertkit.inference.compiled.warm_up` does it ahead), in the thread count of that call.
Batches run on the same graph compiled by ``torch.compile``, or on the package too on the CPU
classes and thread counts where that was measured as fast (:data:`PACKAGE_BATCHES_CLASSES`).
A pooled classifier's head (and a ``[CLS]``-pooled vector) reads a second graph, quantised
and compiled the same way, whose last layer runs at ``[CLS]`` only
(:func:`bertkit.model.sparse_last_layer.encode_cls`: about 7% less work at 128 tokens); each
graph is built at the first call that needs it, and :func:`warm_up` builds the one the model's
head reads. The quantised encoder answers plain forward passes of at least two tokens; a call asking for
hidden states or attention probabilities, with gradients on, or of one token runs the float
model, kept beside it. The calibration inputs must be real text of the model's task, never
random ids.
Needs ``torchao`` (``pip install 'bertkit[int8-static]'``) and a C++ compiler.

Contract: :func:`blocker` (why this route cannot run here, or None), :func:`calibration_batches`
(padded ``(ids, types, mask)`` batches from rows of real text, at least 16 distinct),
:func:`quantize_static` (the model's encoder routed through the quantised graph, in place),
:func:`describe` (where its compiled package came from).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import math
import os
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass

from bertkit import cpu
from bertkit.errors import BertkitError
from bertkit.inference.calibration import MIN_CALIBRATION_INPUTS, _field, padded_batches
from bertkit.inference.compiled import TRACING as _TRACING
from bertkit.inference.compiled import example_inputs, in_background
from bertkit.inference.compiled import ordinary as _ordinary
from bertkit.model.attention import products_attention_traced
from bertkit.model.sparse_last_layer import at_cls, encode_at_positions, whole_projections

MAX_BATCH = 4096  # the exported graph's bound on rows (its length bound is the model's positions)
# the oldest torch the route was run on; torch 2.11.0+cu130 with torchao 0.18 died of a
# segmentation fault in aoti_load_package (an AMX Xeon, 2026-11-26), so older ones are refused
MIN_TORCH = (2, 13)
# CPU classes (bertkit.cpu.cpu_class) whose package is built with inductor's max-autotune, which
# times inductor's C++ INT8 GEMM templates (AMX micro-kernels) against oneDNN's kernel for each
# product and keeps the faster. Measured on the AMX Xeon (BERT-Base, one thread, CPU clock): the
# package ran 1 x 128 in 29.7 ms against 39.7, 1 x 40 in 16.2 against 22.5, 8 x 128 in 203 against
# 227, and built in 59 s against 37 (bench/results/inference-static-int8-autotune-amx-2026-11-26.md).
# On the avx512_bf16 EPYC the templates' micro-kernels are AVX-512 VNNI: the package (same
# model and clock, four interleaved rounds, one process) ran 1 x 16 in 12.6 ms against 14.2, 1 x 40
# in 25.5 against 26.8, 1 x 128 level (77.5 against 77.9) (2026-12-01, a one-off script;
# docs/serving-results.md, "On the AMD EPYC with avx512_bf16"). Other classes are not measured and
# build without it; the batch graph gained nothing (194 against 199 ms at 8 x 128 on AMX; 592
# against 596 on the EPYC) and stays as it is.
AUTOTUNED_CLASSES = frozenset({"amx", "avx512-bf16"})
# Inductor hands each INT8 product to oneDNN, which builds a primitive per matrix shape (0.2-0.25
# ms each for BERT-Tiny's products on the VNNI Xeon) and keeps them in a cache that bertkit bounds
# at 64 (bertkit.cpu.bound_onednn_cache: memory). Texts of every length missed it at nearly every
# pass: a lone BERT-Tiny SST-2 sentence took 3.3 ms against 0.7-0.8 for the package at one length,
# 16-row batches 8.2-8.6 ms a pass against 5.5. So every pass runs at a length of a short ladder
# (length_bucket): a lone input 1.23-1.30 ms, batches of 8-16 rows 594-604 us a row against
# 674-727, BERT-Base's lone input 26.1-27.0 ms against 28.1-28.2 (one thread, SST-2 dev). A bigger
# cache instead (256: lone 1.70-1.80 ms) costs ~0.45 MB a primitive (docs/serving-results.md).
BUCKET_STEPS = ((64, 8), (128, 16), (256, 32))  # (up to this length, round up to a multiple of)
BUCKET_STEP_BEYOND = 64
# CPU classes where a pass is padded to the ladder only while the padding costs less than a
# new shape's oneDNN primitives: at most this many multiply-adds of padding (rows x padded
# tokens x the encoder's product weights), else it runs at its own length. The avx512_bf16 EPYC
# (one thread, CPU clock, random weights calibrated on SST-2 train; 2026-12-07): a new length
# cost BERT-Tiny 0.6 ms on a lone input, 3.3-3.6 ms on 4-32 rows (passes of 0.4 / 1.7 / 7.0
# ms), BERT-Base 1.3 / 6.6 / ~10 ms (passes of 24.5 / 83.5 / 654 ms); the padding a base-sized
# token costs ~0.5 ms, so the ladder's padding of 32-row SST-2 dev batches (13-39 tokens, 11%
# of the tokens) cost more than it saved: exact lengths ran them in 0.90-0.95x the time. At
# 5e8 (about 4 ms of INT8 products here) BERT-Tiny keeps the ladder for up to 180 rows,
# BERT-Base pads a lone input up to 5 tokens, 4 rows 1 token, 32 rows none. Other classes are not
# measured and keep the ladder at every pass.
MOST_PADDING_BY_CLASS = {"avx512-bf16": 5e8}
# CPU classes whose batches run on the package too, no torch.compile graph beside it. On the
# avx512_bf16 EPYC (BERT-Base-sized classifier, random weights calibrated on 300 SST-2 train
# sentences, one thread, CPU clock, best of 3-8 passes, 2-3 interleaved rounds; 2026-12-07) the
# autotuned package took 0.86-0.91x the graph's time at 2 x 30, 0.97-0.99x at 8 x 24, 0.96-1.05x at
# 4 x 24, 16 x 28-40 and 32 x 21-24, 1.00-1.06x at 24 x 40 and 12 x 64, 1.02-1.08x at 8 x 128, 1.00-1.04x at
# 32 x 128: level, while the graph cannot be cached (inductor skips frozen graphs), so every
# start exported the model again and compiled it for 20-55 s idle, and for minutes behind a loaded
# server, whose batches meanwhile ran on the package anyway. On the AMX Xeon the package ran
# batches of 8-32 x 128 at 0.70x the graph's speed (2026-11-26): it keeps the graph, as do
# the classes not measured. On the AVX2 EPYC (no VNNI; the package not autotuned; BERT-Base, one
# thread, CPU clock, best of 3 rounds, bench/static_int8_forms.py; 2026-12-07) the package ran
# 1.08x the graph's rows a second at 8 x 32 tokens and 1.01x at 32 x 32, while a warm start of a
# base-sized server compiled the graph until 69.9 s (/health at 26.9 s; on the package alone
# /health at 17.2 s, nothing compiling after).
# All of that at one intra-op thread (the AVX2 EPYC is measured at no other count).
PACKAGE_BATCHES_CLASSES = frozenset({"avx512-bf16", "avx2"})
# CPU classes of PACKAGE_BATCHES_CLASSES where, at two or more intra-op threads, a batch pass of
# at least this many tokens (rows x padded length) runs on the torch.compile graph after all
# (predict, evaluate, load(): a server keeps every batch on the package, see _Route.warm_up);
# smaller ones stay on the package. The avx512_bf16 EPYC at two threads (its two cores;
# bench/static_int8_forms.py, BERT-Base, best of 3; 2026-12-07, fifth session), the package's
# rows a second / the graph's by the wall clock: 1.26 at 2 x 32 tokens, 1.01 at 8 x 32, 1.02 at
# 32 x 32, 0.97 at 8 x 128, 0.93 at 32 x 128; by the CPU clock 1.19, 1.06, 0.98, 0.93, 0.91, and
# 1.08 at 4 x 64, 1.03 at 16 x 64, 0.94 at 32 x 64 (the package's kernels parallelise long,
# big passes less well): the graph pays from about 2,048 tokens.
GRAPH_FROM_TOKENS_BY_CLASS = {"avx512-bf16": 2048}
ROUTE_VERSION = 4  # raised when the graph built here changes: packages cached before are not reused
CACHE_ENV = "BERTKIT_CACHE_DIR"


def length_bucket(length: int, limit: int) -> int:
    """The length a pass over ``length`` tokens runs at: rounded up to a multiple of 8 up to 64
    tokens, of 16 up to 128, 32 up to 256 and 64 beyond (:data:`BUCKET_STEPS`: at most 7 padded
    tokens below 64, 12.5% above), never past ``limit`` (the model's positions)."""
    step = next((step for bound, step in BUCKET_STEPS if length <= bound), BUCKET_STEP_BEYOND)
    return min(-(-length // step) * step, max(limit, length))


def pass_length(rows: int, length: int, limit: int, weights: int) -> int:
    """The length a pass of ``rows`` x ``length`` tokens runs at: :func:`length_bucket`'s,
    unless on this CPU's class (:data:`MOST_PADDING_BY_CLASS`) its padding (``rows`` x the
    padded tokens x ``weights``, the encoder's product weights: multiply-adds a token) costs
    more than building the products for a new shape; then ``length`` itself."""
    bucket = length_bucket(length, limit)
    most = MOST_PADDING_BY_CLASS.get(cpu.cpu_class())
    return length if most is not None and rows * (bucket - length) * weights > most else bucket


def product_weights(encoder) -> int:
    """Multiply-adds a token costs in ``encoder``'s (a ``BertModel``'s) layers: their matrices'
    weights."""
    return sum(p.numel() for p in encoder.encoder.parameters() if p.dim() == 2)


def cache_dir() -> Path:
    """Where compiled packages are kept: ``$BERTKIT_CACHE_DIR/static-int8``, else
    ``$XDG_CACHE_HOME/bertkit/static-int8``, else ``~/.cache/bertkit/static-int8``. Nothing
    removes old packages (BERT-Tiny's is 18 MB): delete the folder to reclaim them."""
    root = os.environ.get(CACHE_ENV) or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                     os.path.expanduser("~/.cache"), "bertkit")
    return Path(root) / "static-int8"


def blocker() -> str | None:
    """Why static INT8 cannot run on this machine, or ``None``. Cheap: torchao is looked up,
    not imported (its import takes seconds, and a cached package needs none of it)."""
    from bertkit.inference.compiled import cxx_compiler

    if _torchao_version() is None:
        return "static INT8 needs torchao (pip install 'bertkit[int8-static]')"
    if _torch_release() < MIN_TORCH:
        return (f"static INT8 needs torch >= {'.'.join(map(str, MIN_TORCH))} (this is {torch.__version__}: "
                "torch 2.11 with torchao 0.18 crashed loading the compiled package); pip install torch==2.13.0")
    if cxx_compiler() is None:
        return "static INT8 compiles with inductor, which needs a C++ compiler (g++ or clang++; set $CXX)"
    return None


def package_inductor_configs() -> dict:
    """The inductor settings the AOTInductor package is built with on this CPU: frozen weights,
    the sizes read from the inputs (:class:`SizesFromInputs`), and max-autotune's GEMM choice
    on the classes of :data:`AUTOTUNED_CLASSES`."""
    configs: dict = {"freezing": True, "joint_custom_pre_pass": SizesFromInputs()}
    if cpu.cpu_class() in AUTOTUNED_CLASSES:
        configs.update(max_autotune=True, max_autotune_gemm_backends="CPP,ATEN")
    return configs


class SizesFromInputs(CustomGraphPass):
    """An inductor graph pass: every symbolic size read from an intermediate tensor
    (``aten.sym_size.int``) read from a graph input of the same size instead.

    Traced with a dynamic length, the graph reads the length for its reshapes from whichever
    tensor last had it, often an INT8 product's output; that second user of the product stops
    inductor's INT8 fusions from matching (a product with its GELU and its output quantisation
    in one oneDNN call, a product with its residual add), which match with a fixed length.
    With the sizes read from the inputs every layer fuses as at a fixed length: BERT-Base's
    package 1.05x / 1.06x / 1.07x as fast at 1 / 8 / 32 x 128 tokens (avx512_bf16 EPYC, one
    thread, 2026-12-07). The sizes are the same numbers, so the graph computes the same thing."""

    def __call__(self, graph: torch.fx.Graph) -> None:
        sizes = {}
        for node in graph.nodes:
            value = node.meta.get("val")
            if node.op == "placeholder" and isinstance(value, torch.Tensor):
                for dim, size in enumerate(value.shape):
                    if isinstance(size, torch.SymInt):
                        sizes.setdefault(str(size.node.expr), (node, dim))
        for node in graph.nodes:
            if node.op != "call_function" or node.target is not torch.ops.aten.sym_size.int:
                continue
            value = node.meta.get("val")
            if node.args[0].op != "placeholder" and isinstance(value, torch.SymInt):
                node.args = sizes.get(str(value.node.expr), node.args)

    def uuid(self) -> str:
        return f"bertkit-sizes-from-inputs-{ROUTE_VERSION}"

    def __repr__(self) -> str:  # what the package's cache key reads (no address)
        return self.uuid()


def _torch_release() -> tuple[int, int]:
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def _torchao_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("torchao")
    except metadata.PackageNotFoundError:
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
    """The encoder's plain (eager) forward pass as a module of tensors in and out (what export
    takes); ``eager``: its forward as it was before :func:`quantize_static` routed it; ``cls``:
    its last layer at ``[CLS]`` only (:func:`bertkit.model.sparse_last_layer.encode_at_positions`:
    the last hidden state (B, 1, H))."""

    def __init__(self, encoder, eager, cls: bool = False):
        super().__init__()
        self.encoder = encoder
        self.eager = eager
        self.cls = cls

    def forward(self, input_ids, token_type_ids, attention_mask):
        if self.cls:
            out = encode_at_positions(self.encoder, input_ids, token_type_ids, attention_mask, at_cls(input_ids))
        else:
            out = self.eager(input_ids, token_type_ids, attention_mask)
        return out.last_hidden_state, out.pooled_output


def quantize_static(model, calibration: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
                    bf16: bool | None = None) -> None:
    """Route ``model``'s encoder through static INT8, in place. ``model``: an fp32 model in
    eval on the CPU, as loaded (not prepared for another precision); ``calibration``: from
    :func:`calibration_batches`; ``bf16``: run the non-INT8 work in bf16 (default: where the
    CPU computes bf16 natively, :func:`bertkit.cpu.cpu_bf16_support`).

    Two compiled forms of one quantised graph: the AOTInductor package (cached on disk, loaded
    in a second; the faster one for a lone input) answers single inputs, and every batch
    until the second form is ready: the graph compiled by ``torch.compile`` (not cacheable,
    minutes for BERT-Base; 1.4x the package on 8 and 32 x 128 on the AMX Xeon, where the
    package's dynamic-shape kernels lose); on the classes of :data:`PACKAGE_BATCHES_CLASSES`,
    at the thread counts where the package is level with it, batches run on the package and no
    graph is compiled.
    Both are built at the first calls that need them;
    :func:`warm_up` builds them ahead (the second in the background for a server). A
    :class:`BertkitError` where the route cannot run (:func:`blocker`)."""
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
    encoder = model.encoder_model()
    route = _Route(model, encoder, encoder.forward, calibration, bf16)
    encoder.forward = route.forward
    model.bertkit_compiled = True
    model.bertkit_static_int8 = True
    # the route the model's head reads (warm_up builds it): a pooled classifier's, [CLS] only;
    # a causal model pools its last token, which the [CLS] graph does not compute
    model.bertkit_static_int8_route = route
    if not encoder.encoder.causal:
        at_cls_only = _Route(model, encoder, route.eager, calibration, bf16, cls=True)
        encoder.bertkit_encode_cls = at_cls_only.forward_cls  # read by sparse_last_layer.encode_cls
        if getattr(model, "pooled", False) is True:
            model.bertkit_static_int8_route = at_cls_only


def warm_up(model, background: bool = False) -> None:
    """Build ``model``'s static-INT8 forms now: the package (for a lone input, and for
    batches until the other is ready), then, where every batch runs on the graph
    (:func:`graph_from_tokens` 0), the batches' compiled graph, in a thread of its own with
    ``background`` (a server answers meanwhile), in the caller's thread count. Where only big
    passes take the graph, it is compiled at the first of them, and never for a server
    (``background``), whose batches then all run on the package."""
    model.bertkit_static_int8_route.warm_up(background)


def describe(model) -> str:
    """Where ``model``'s compiled static-INT8 forms stand, for the line a server prints."""
    route = model.bertkit_static_int8_route
    package = "at the first forward pass"
    if route.package_done is not None:
        path, seconds, cached = route.package_done
        package = (f"loaded from the cache in {seconds:.1f} s" if cached else f"built in {seconds:.0f} s and cached")
        package += f" ({path})"
    graph = " (the classifier's graph: its last layer at [CLS] only)" if route.cls else ""
    if route.package_batches:
        return (f"static INT8{graph}: single inputs and batches on the AOTInductor package, {package} "
                f"(measured as fast for batches as a torch.compile graph on CPU class {cpu.cpu_class()})")
    batches = (f"compiled in {route.batches_seconds:.0f} s" if route.batches_ready.is_set()
               else f"not compiled ({route.batches_error}): the package answers them" if route.batches_error
               else "compiling in the background (the package answers them meanwhile)" if route.batches_started
               else "compiled at the first such batch")
    which = f"batches of {route.graph_from:.0f} tokens or more" if route.graph_from > 0 else "batches"
    smaller = " (smaller ones on the package)" if route.graph_from > 0 else ""
    return (f"static INT8{graph}: single inputs on the AOTInductor package, {package}; {which}: torch.compile, "
            f"{batches}{smaller}")


def graph_from_tokens(threads: int | None = None) -> float:
    """The fewest tokens (rows x padded length) a batch pass needs to run on the torch.compile
    graph rather than the package, on this CPU's class at ``threads`` intra-op threads (default:
    torch's now): 0 (every batch) on the classes not in :data:`PACKAGE_BATCHES_CLASSES`;
    there, infinity (no graph is compiled) at one thread, else
    :data:`GRAPH_FROM_TOKENS_BY_CLASS`'s bound where it was measured."""
    name = cpu.cpu_class()
    if name not in PACKAGE_BATCHES_CLASSES:
        return 0
    if (threads or torch.get_num_threads()) == 1:
        return math.inf
    return GRAPH_FROM_TOKENS_BY_CLASS.get(name, math.inf)


def compiling(model) -> bool:
    """Whether ``model``'s batch graph is being compiled in the background (a server's
    batches run on the slower package until it is done); False for a model not on this route."""
    route = getattr(model, "bertkit_static_int8_route", None)
    return route is not None and route.batches_started and not route.batches_ready.is_set() and route.batches_error is None


class _Route:
    """The quantised graph of one encoder and its two compiled forms (see :func:`quantize_static`);
    ``cls``: the graph whose last layer runs at ``[CLS]`` only (:meth:`forward_cls`)."""

    def __init__(self, model, encoder, eager, calibration, bf16: bool, cls: bool = False):
        self.model, self.encoder, self.eager = model, encoder, eager
        self.calibration, self.bf16, self.cls = calibration, bf16, cls
        self.lock = threading.RLock()
        self._graph = None
        self._package = None
        self.package_done: tuple[str, float, bool] | None = None  # (path, seconds, from the cache)
        self._batches = None
        self.batches_ready = threading.Event()
        self.batches_started = False
        self.batches_seconds = 0.0
        self.batches_error: str | None = None  # why the background compilation failed
        # the fewest tokens a batch runs on the graph with (:func:`graph_from_tokens`; infinity:
        # every batch on the package, no graph), decided when the package is built or loaded,
        # in the thread count it is built for
        self.graph_from = 0.0

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, output_hidden_states=False,
                output_attentions=False):
        from bertkit.model.outputs import ModelOutput

        if output_hidden_states or output_attentions or torch.is_grad_enabled() or input_ids.shape[-1] < 2:
            return self.eager(input_ids, token_type_ids, attention_mask, output_hidden_states, output_attentions)
        last, pooled = self._run(input_ids, token_type_ids, attention_mask)
        return ModelOutput(last_hidden_state=last[:, :input_ids.shape[-1]].float(),
                           pooled_output=None if pooled is None else pooled.float())

    def forward_cls(self, input_ids, token_type_ids=None, attention_mask=None):
        """The encoder's output at ``[CLS]`` only (``last_hidden_state`` (B, 1, H), the pooled
        vector), the last layer computed there alone; None where the graph does not answer
        (gradients on, one token): the caller runs the whole pass."""
        from bertkit.model.outputs import ModelOutput

        if torch.is_grad_enabled() or input_ids.shape[-1] < 2:
            return None
        last, pooled = self._run(input_ids, token_type_ids, attention_mask)
        return ModelOutput(last_hidden_state=last.float(), pooled_output=None if pooled is None else pooled.float())

    def _run(self, input_ids, token_type_ids, attention_mask):
        """The graph's ``(last hidden state, pooled)`` for a batch, at :func:`pass_length`."""
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        length = input_ids.shape[-1]
        padding = pass_length(input_ids.shape[0], length, self.model.config.max_position_embeddings,
                              self.weights) - length
        # ids, token types and the mask padded with zeros (the padding is masked out), as
        # ordinary tensors (see compiled.example_inputs), made in one block outside inference mode
        with torch.inference_mode(False):
            inputs = tuple(torch.nn.functional.pad(x, (0, padding)) if padding else _ordinary(x).contiguous()
                           for x in (input_ids, token_type_ids, attention_mask))
        if self.package_done is None:  # the rule at this call's thread count, until the package's
            self.graph_from = graph_from_tokens()
        on_graph = input_ids.shape[0] > 1 and input_ids.shape[0] * (length + padding) >= self.graph_from
        if on_graph and not self.batches_started:
            self.compile_batches()
        if on_graph and self.batches_ready.is_set():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
                last, pooled = self._batches(*inputs)
        else:
            last, pooled = self.package()(*inputs)
        return last, pooled

    @property
    def package_batches(self) -> bool:
        """Whether every batch runs on the package (no batch graph is compiled)."""
        return self.graph_from == math.inf

    @functools.cached_property
    def weights(self) -> int:
        """Multiply-adds a token costs (:func:`product_weights`, for :func:`pass_length`)."""
        return product_weights(self.encoder)

    def warm_up(self, background: bool = False) -> None:
        """:func:`warm_up` of this route."""
        self.package()
        if background and self.graph_from > 0:
            # a server whose big passes alone would take the graph: its batches (the batcher's
            # cuts of short requests) rarely reach the bound, while the graph would cost every
            # start an export before answering and minutes of compiling beside the requests
            self.graph_from = math.inf
        if self.package_batches:  # nothing more to build: a cached package needs no export either
            return
        if not background:
            if self.graph_from == 0:  # else at the first pass that reaches the bound (_run)
                self.compile_batches()
            return
        # export (the quantised graph) patches torch.nn.Module.__call__ process-wide while it
        # traces, so it must not run beside requests: here, before the server answers any;
        # only the compilation of the exported graph goes to the background
        self.graph()
        if not self._claim_batches():
            return

        def failed(why: str) -> None:  # the package goes on answering batches
            self.batches_error = why
            print(f"bertkit: static INT8: compiling the batch graph failed ({why}); batches run on the package",
                  file=sys.stderr, flush=True)

        in_background(self._compile_batches, failed, "bertkit-static-int8-batches")

    def graph(self):
        """The quantised graph (export and calibration, once)."""
        with self.lock:
            if self._graph is None:
                self._graph = quantised_graph(self.model, self.encoder, self.eager, self.calibration,
                                              attention_as_products(self.bf16), self.cls)
            return self._graph

    def package(self):
        """The package's runner: loaded from the cache, else built and cached (once; in the
        thread count of the first call)."""
        with self.lock:
            if self._package is None:
                self._package = self._load_or_build()
            return self._package

    def _load_or_build(self):
        started = time.perf_counter()
        threads = torch.get_num_threads()
        key = _package_key(self.encoder, self.calibration, self.bf16, threads, attention_as_products(self.bf16),
                           self.cls)
        path = cache_dir() / f"{key}.pt2"
        runner = _load(path)
        cached = runner is not None
        if not cached:
            _build(self.graph(), self.model, self.calibration, self.bf16, path)
            runner = _load(path)
            if runner is None:
                raise BertkitError(f"static INT8: the package just compiled does not load ({path})")
        self.package_done = (str(path), time.perf_counter() - started, cached)
        self.graph_from = graph_from_tokens(threads)
        return runner

    def compile_batches(self) -> None:
        """Compile the graph for batches (``torch.compile``, dynamic shapes, frozen weights)
        and run it once; until then batches go to the package."""
        if self._claim_batches():
            self._compile_batches()

    def _claim_batches(self) -> bool:
        """Mark the batch graph's compilation as started (so :func:`compiling` says so from
        now, before a background thread gets to it); False if it already was."""
        with self.lock:
            if self.batches_started:
                return False
            self.batches_started = True
            return True

    def _compile_batches(self) -> None:
        started = time.perf_counter()
        from torch._inductor import config as inductor

        graph = self.graph()
        # freezing set in the config, not as a compile option: torchao's INT8 lowering reads the
        # config (as an option, inductor meets onednn.qlinear_prepack unlowered and fails)
        compiled = inductor.patch(freezing=True, joint_custom_pre_pass=SizesFromInputs())(
            torch.compile(graph, dynamic=True))
        inputs = example_inputs(2, 16, self.model.config.vocab_size)
        with _TRACING, torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
            compiled(*inputs)
        self._batches = compiled
        self.batches_seconds = time.perf_counter() - started
        self.batches_ready.set()


def _load(path: Path):
    """The runner of the package at ``path``, or None where there is none or it does not
    load (a package of another build of torch, a damaged file): it is then built again."""
    if not path.is_file():
        return None
    try:
        return torch._inductor.aoti_load_package(str(path))
    except Exception:  # noqa: BLE001  (whatever the loader raises, the cure is a rebuild)
        return None


def attention_as_products(bf16: bool) -> bool:
    """Whether the quantised graph runs attention as two batched products
    (:func:`bertkit.model.attention.products_attention`) instead of torch's fused kernel: where
    its float work is bf16 on a class measured faster so (:func:`bertkit.cpu.bf16_products_attention`).
    On the avx512_bf16 EPYC (BERT-Base, 32 x 128, one thread, CPU clock): 0.89x the pass's time,
    the kernel having taken 19% of it (docs/serving-results.md)."""
    return bf16 and cpu.bf16_products_attention()


def _package_key(encoder, calibration, bf16: bool, threads: int, products: bool, cls: bool = False) -> str:
    """A hash of everything the compiled package depends on."""
    digest = hashlib.sha256()
    facts = {"route": ROUTE_VERSION, "cls_only": cls, "torch": torch.__version__, "torchao": _torchao_version(), "bf16": bf16,
             "products_attention": products, "threads": threads, "flags": sorted(cpu.cpu_flags(cpu._real_cpuinfo() or "")),
             "capability": torch.backends.cpu.get_cpu_capability(), "max_batch": MAX_BATCH,
             "inductor": package_inductor_configs(),
             "config": encoder.config.to_dict() if hasattr(encoder.config, "to_dict") else repr(encoder.config)}
    digest.update(json.dumps(facts, sort_keys=True, default=str).encode())
    for name, tensor in encoder.state_dict().items():
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
        digest.update(tensor.detach().contiguous().view(torch.uint8).numpy().tobytes())
    for inputs in calibration:
        for tensor in inputs:
            digest.update(tensor.contiguous().numpy().tobytes() + str(tuple(tensor.shape)).encode())
    return digest.hexdigest()[:32]


def _build(graph, model, calibration, bf16: bool, path: Path) -> None:
    """The quantised ``graph`` exported (the float work in bf16 where ``bf16``: :class:`_Autocast`)
    and compiled by AOTInductor, frozen weights, into ``path``, written whole (a temporary
    name, then renamed: a killed build or a second process never leaves half a package)."""
    program = export_quantised(graph, model, calibration, bf16)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=path.parent, prefix=f"{path.stem}.partial-", suffix=".pt2")
    os.close(fd)
    try:
        with _TRACING, torch.inference_mode(False), torch.no_grad(), _quiet_autotuning():
            torch._inductor.aoti_compile_and_package(program, package_path=partial,
                                                     inductor_configs=package_inductor_configs())
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


@contextlib.contextmanager
def _quiet_autotuning():
    """max-autotune writes a table of its timings for every product to stderr (hundreds of lines
    for BERT-Base), nothing a user of this route can act on: kept off their screen while the
    package builds."""
    from torch._inductor import config, select_algorithm

    printing = select_algorithm.PRINT_AUTOTUNE
    select_algorithm.PRINT_AUTOTUNE = False
    try:
        with config.patch(max_autotune_report_choices_stats=False):
            yield
    finally:
        select_algorithm.PRINT_AUTOTUNE = printing


def _shapes(model):
    batch = torch.export.Dim("batch", min=1, max=MAX_BATCH)
    length = torch.export.Dim("length", min=2, max=model.config.max_position_embeddings)
    return ({0: batch, 1: length},) * 3


class _Autocast(torch.nn.Module):
    """``inner`` run under bf16 autocast, the context inside the forward pass: export records
    it there (an autocast around the ``export`` call is not part of the program, and the
    package then ran attention, softmax, GELU and LayerNorm in fp32)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, input_ids, token_type_ids, attention_mask):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return self.inner(input_ids, token_type_ids, attention_mask)


def quantised_graph(model, encoder, eager, calibration, products: bool = False, cls: bool = False):
    """The encoder exported (dynamic batch and length) and quantised on the calibration
    batches (torchao's ``prepare_pt2e`` / ``convert_pt2e``). ``eager``: its own forward pass;
    ``products``: its attention traced as two batched products (:func:`attention_as_products`);
    ``cls``: its last layer at ``[CLS]`` only (calibrated there)."""
    try:
        _, prepare_pt2e, convert_pt2e = _torchao()
    except ImportError as e:  # a torchao release whose quantisation API moved
        raise BertkitError(f"static INT8: this torchao ({_torchao_version()}) lacks PyTorch 2's x86 "
                           f"quantisation API ({e}); pip install 'bertkit[int8-static]'") from e
    # inductor's INT8 lowering copy-constructs tensors; its advice is for torch, not the user
    warnings.filterwarnings("ignore", message="To copy construct from a tensor", category=UserWarning)
    # the first forward pass may run under inference_mode, whose tensors export cannot trace
    traced = products_attention_traced() if products else contextlib.nullcontext()
    with _TRACING, torch.inference_mode(False), torch.no_grad(), traced, whole_projections():
        graph = torch.export.export(_Plain(encoder, eager, cls), tuple(calibration[0]),
                                    dynamic_shapes=_shapes(model)).module()
        observed = prepare_pt2e(graph, make_quantizer())
        for inputs in calibration:
            observed(*inputs)
        return convert_pt2e(observed)


def export_quantised(graph, model, calibration, bf16: bool):
    """The quantised ``graph`` exported again, the work between the INT8 products in bf16
    where ``bf16``: the program AOTInductor compiles."""
    with _TRACING, torch.inference_mode(False), torch.no_grad():
        return torch.export.export(_Autocast(graph) if bf16 else graph, tuple(calibration[0]),
                                   dynamic_shapes=_shapes(model))
