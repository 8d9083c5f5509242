"""The compiled route: the encoder's forward pass through ``torch.compile`` (inductor).

With ``freezing`` the weights become constants of the graph and inductor fuses the
element-wise work around the matrix products (GELU, the residual adds, LayerNorm, the
casts). The products themselves stay oneDNN's (``aten::addmm``, AMX on the Intel Xeon), and
they are about 70% of a BERT-Base bf16 forward pass there (``bench/profile_routes.py``), so
the gain is bounded: on the 2-core Intel Xeon with AMX, one thread, other jobs running, the
compiled bf16 route ran at a median 1.03x / 1.08x / 1.00x / 1.01x the eager bf16 route at
1 x 128, 8 x 128, 32 x 128 and 32 x 24 (6 interleaved rounds each), and 1.04x / 1.05x /
0.97x / 1.04x on the quiet machine; compiling BERT-Base took 22-85 s, once per process
(inductor's on-disk cache of the generated code saves about a third of it on a second start:
on the VNNI Xeon 61-63 s cold, 36-41 s warm; the tracing and freezing are done again). A
server does not wait for it: :func:`warm_up` ``background=True`` builds the graphs in a thread
of its own while the eager forward answers. That is not a clear win, so ``auto`` compiles nowhere yet
(:data:`MEASURED_FASTER` is empty); ``on`` is there for long batch jobs and for measuring
(docs/serving-results.md, "The compiled route").

Shapes are dynamic: one graph for batches of one input and one for larger batches, each for
every sequence length, so real traffic never recompiles per request. Calls asking for the
hidden states or attention probabilities, or made with gradients on, run the eager forward
(each combination would otherwise compile a graph of its own on first use).

``compile`` choices (:data:`bertkit.precision.COMPILE_MODES`, declared once for every door):
* ``auto``: compile where it was measured clearly faster, :func:`decide`;
* ``on``: compile (an error if this machine cannot);
* ``off``: the eager forward pass.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable

import torch

from bertkit import cpu
from bertkit.errors import BertkitError
from bertkit.precision import COMPILE_MODES as MODES

# (CPU class, precision) pairs (bertkit.cpu.cpu_class) where compiling was measured clearly
# faster; none yet (the module's docstring gives the figures). No class compiles under auto
# until measured there.
MEASURED_FASTER: set[tuple[str, str]] = set()
INDUCTOR_OPTIONS = {"freezing": True}
# export and dynamo are not thread-safe: two graphs traced at once (static INT8's batch graph
# compiling in the background while another model is exported or compiled) fail inside the
# tracer. Every compile in the process takes this lock.
TRACING = threading.Lock()


def cxx_compiler() -> str | None:
    """The C++ compiler inductor would use (``$CXX``, else ``g++``, ``c++``, ``clang++`` on
    the PATH), or ``None``: without one, ``torch.compile`` fails on the CPU."""
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def decide(mode: str, precision: str, device: torch.device | str, model=None,
           option: str = "--compile") -> tuple[bool, str]:
    """``(compile?, why)`` for a model run at ``precision`` on ``device``. ``auto`` compiles
    only on the CPU, at a precision measured faster on this CPU class (:data:`MEASURED_FASTER`),
    with a C++ compiler, and for the padded attention (``attention_impl="unpadded"`` gathers
    the real tokens with data-dependent shapes). ``on`` raises :class:`BertkitError` where
    compiling cannot work (INT8's quantised layers, no C++ compiler on the CPU)."""
    if mode not in MODES:
        raise BertkitError(f"{option} must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "off":
        return False, f"{option} off"
    on_cpu = torch.device(device).type == "cpu"
    blocker = _blocker(precision, on_cpu, model)
    if mode == "on":
        if blocker:
            raise BertkitError(f"{option} on: {blocker}")
        return True, f"{option} on"
    klass = cpu.cpu_class() if on_cpu else None
    if blocker:
        return False, f"auto: {blocker}"
    if (klass, precision) not in MEASURED_FASTER:
        return False, f"auto: compiling was not measured faster for {precision} on CPU class {klass or 'unknown'}"
    return True, f"auto: measured faster for {precision} on CPU class {klass}"


def _blocker(precision: str, on_cpu: bool, model) -> str | None:
    """Why this model cannot be compiled here, or ``None``."""
    if precision == "int8":
        return ("INT8's dynamic layers do not compile (use bf16 or fp32; --calibration FILE gives static "
                "INT8, which is compiled)")
    if on_cpu and cxx_compiler() is None:
        return "no C++ compiler found (inductor needs g++ or clang++ on the CPU; set $CXX)"
    if model is not None and getattr(model.config, "attention_impl", "padded") == "unpadded":
        return "attention_impl 'unpadded' has data-dependent shapes"
    return None


def compile_encoder(model) -> None:
    """Route ``model``'s encoder (:meth:`encoder_model`) through ``torch.compile``, in place
    (bf16 layers packed by :func:`bertkit.modeldir.int8.half_linears` become plain again;
    fp32 layers packed for MKL stay packed, one operator each in the graph:
    :func:`bertkit.modeldir.int8.fp32_packed_linear`): its plain forward pass (input ids,
    token types, attention mask) is compiled with dynamic shapes and frozen weights; a call
    asking for hidden states or attentions, or with gradients on, runs eagerly."""
    from bertkit.modeldir.int8 import unpack_linears

    # inductor's freezing packs bf16 layers itself, for any row count; fp32 ones only for a
    # fixed count, so under dynamic shapes they would run unpacked
    unpack_linears(model, fp32=False)
    encoder = model.encoder_model()
    eager = encoder.forward
    state = _State(torch.compile(eager, dynamic=True, options=INDUCTOR_OPTIONS))

    def forward(input_ids, token_type_ids=None, attention_mask=None, output_hidden_states=False,
                output_attentions=False):
        if output_hidden_states or output_attentions or torch.is_grad_enabled() or state.answers_eagerly():
            return eager(input_ids, token_type_ids, attention_mask, output_hidden_states, output_attentions)
        # ordinary tensors, as the graphs were built on (example_inputs): embed's batches
        # are made in inference mode, and each door's first call compiled its forms again
        return state.compiled(*(None if x is None else ordinary(x) for x in (input_ids, token_type_ids, attention_mask)))

    encoder.forward = forward
    model.bertkit_compiled = state


class _State:
    """A compiled model's graphs: built at the first calls, or by :func:`warm_up` (in the
    background: the eager forward answers until both are built, or for good if that fails)."""

    def __init__(self, compiled):
        self.compiled = compiled  # the graphs' entry: ids, token types, mask
        self.started = False  # a background build was started
        self.ready = threading.Event()  # ... and has ended, built or failed
        self.seconds = 0.0
        self.error: str | None = None

    def answers_eagerly(self) -> bool:
        """Whether calls go to the eager forward: a background build is under way, or failed."""
        return self.started and not self.ready.is_set() or self.error is not None


def is_compiled(model) -> bool:
    return bool(getattr(model, "bertkit_compiled", False))


def compiling(model) -> bool:
    """Whether ``model``'s graphs are being built in the background (its eager forward
    answers meanwhile); False for a model not compiled, or whose graphs are built."""
    state = getattr(model, "bertkit_compiled", None)
    return isinstance(state, _State) and state.started and not state.ready.is_set()


def describe(model) -> str | None:
    """Where a background build of ``model``'s graphs stands, for the server's line; None if
    none was started."""
    state = getattr(model, "bertkit_compiled", None)
    if not isinstance(state, _State) or not state.started:
        return None
    if not state.ready.is_set():
        return "compiling in the background (the eager forward answers meanwhile)"
    if state.error is not None:
        return f"compiling failed ({state.error}): the eager forward answers"
    return f"compiled in {state.seconds:.0f} s"


def warm_up(model, precision: str, device: torch.device | str = "cpu", length: int = 16,
            background: bool = False) -> None:
    """Compile both graphs (one input, several) now rather than at the first requests (static
    INT8's two forms: :func:`bertkit.inference.static_int8.warm_up`). ``background``: in a
    thread of its own, at this thread's thread count; this returns at once and the eager
    forward answers until both graphs are built (:func:`compiling`), or for good where
    building fails (said on stderr): a server answers in seconds instead of after the build
    (14-41 s warm, 33-63 s cold for BERT-Tiny and BERT-Base on the 2-core VNNI Xeon)."""
    route = getattr(model, "bertkit_static_int8_route", None)
    if route is not None:
        route.warm_up()
        return
    if not background:
        _build(model, precision, device, length)
        return
    state = model.bertkit_compiled
    if state.started:
        return
    state.started = True
    started = time.perf_counter()

    def failed(why: str) -> None:
        state.error = why
        print(f"bertkit: compiling the encoder failed ({why}); the eager forward answers", file=sys.stderr,
              flush=True)

    def done() -> None:
        state.seconds = time.perf_counter() - started
        state.ready.set()

    in_background(lambda: _build(model, precision, device, length), failed, "bertkit-compile-graphs", done)


def in_background(work: Callable[[], None], failed: Callable[[str], None], name: str,
                  done: Callable[[], None] | None = None) -> None:
    """Run ``work`` in a daemon thread of its own at this thread's torch thread count (the
    count compiled kernels are built for; a new thread starts with the default one); an
    exception is given to ``failed`` as ``"Type: message"`` (a slower form goes on answering,
    so a failed build is said, never fatal); then ``done``, either way."""
    threads = torch.get_num_threads()

    def run():
        torch.set_num_threads(threads)
        try:
            work()
        except Exception as e:  # noqa: BLE001  (whatever the compiler raises, the caller says it)
            failed(f"{type(e).__name__}: {e}")
        finally:
            if done is not None:
                done()

    threading.Thread(target=run, name=name, daemon=True).start()


def _build(model, precision: str, device, length: int) -> None:
    from bertkit.precision import autocast

    for batch in (2, 1):
        inputs = example_inputs(batch, length, model.config.vocab_size, device)
        with TRACING, torch.inference_mode(), autocast(precision, device):
            model.bertkit_compiled.compiled(*inputs)


def example_inputs(batch: int, length: int, vocab_size: int, device: torch.device | str = "cpu") -> tuple:
    """``(ids, types, mask)`` to warm a graph up on, made as the engine makes a batch's
    (:meth:`~bertkit.inference.heads.TaskInference.run_rows`): ordinary tensors, not
    inference-mode ones. A compiled graph guards on its inputs' dispatch keys, and inference
    tensors lack autograd's: a graph warmed up on them was compiled again at the first real
    batch (static INT8's BERT-Base batch graph: 24 s on the VNNI Xeon)."""
    with torch.inference_mode(False):
        ids = torch.full((batch, length), vocab_size - 1, dtype=torch.long, device=device)
        return ids, torch.zeros_like(ids), torch.ones_like(ids)


def ordinary(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``, or an ordinary copy of an inference-mode one (see :func:`example_inputs`)."""
    if not tensor.is_inference():
        return tensor
    with torch.inference_mode(False):
        return tensor.clone()

