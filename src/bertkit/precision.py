"""Precision: one vocabulary and one ``auto`` rule, for training and inference alike.

Names (:data:`PRECISIONS`):

* ``fp32`` - the weights as they are;
* ``bf16`` - matrix products in bfloat16 under autocast, LayerNorm and softmax accumulating in
  fp32; training keeps fp32 master weights, inference stores the linear layers' weights in
  bf16 once (:func:`bertkit.modeldir.int8.prepare`: no cast at every forward pass, the same
  answers);
* ``fp16`` - autocast in float16, on a CUDA device only (training adds a gradient scaler);
* ``int8`` - inference only, on the CPU: every linear layer of the encoder and the heads runs
  as a dynamically quantised INT8 layer (:mod:`bertkit.modeldir.int8`);
* ``auto`` - the rule below.

``auto``: on a GPU, bf16 where it supports bf16, else fp16; on the CPU, bf16 where the
processor computes bf16 natively (:func:`bertkit.cpu.cpu_bf16_support`: ``avx512_bf16``, AMX,
Arm ``bf16``; ``BERTKIT_CPU_CLASS`` overrides what the CPU is taken to have) **and** the model
is at least :func:`bf16_min_hidden` wide for the work at hand (:data:`BF16_MIN_HIDDEN`, or
its class's :data:`BF16_MIN_HIDDEN_BY_CLASS`), else fp32. Below that width
autocast's per-forward weight casts and oneDNN's per-shape bf16 set-up cost more than native
bf16 saves (bench/precision_crossover.py on the AMX Xeon, texts of 16-128 tokens, one thread;
docs/finetuning.md, "Precision"): a training step gained 1.47x at hidden 256 but BERT-Tiny
(128) fine-tuned slower in bf16 on inputs of 64-128 tokens (faster on SQuAD's 384:
:data:`BF16_LONG_INPUTS`); inference of one text at a time ran 0.35x (tiny), 0.73x (256),
0.96x (512) and 1.34x (768) of fp32's speed in bf16. Emulated bf16 is slower than
fp32 everywhere, hence the flag check. The rule is the same for pre-training, fine-tuning
and inference, and every inference door defaults to it (:data:`INFERENCE_DEFAULT`), so the
API, the CLI and the server answer alike on one machine.
``auto`` never picks ``int8``: INT8 changes the answers, so a user asks for it.

Contract: :func:`check` (a name of the allowed set, else a :class:`BertkitError` naming the
option), :func:`resolve` (``auto`` -> a concrete name and why), :func:`autocast` (the context
a forward pass runs in). CLI flags take their ``choices`` from :data:`TRAINING` or
:data:`INFERENCE`, never retyped.
"""

from __future__ import annotations

import contextlib
from typing import Any

from bertkit.errors import BertkitError, OptionError

PRECISIONS = ("auto", "fp32", "bf16", "fp16", "int8")
TRAINING = ("auto", "fp32", "bf16", "fp16")  # int8 is an inference format
INFERENCE = PRECISIONS
RESOLVED = PRECISIONS[1:]  # what resolve() returns: every name but auto
AUTOCAST_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}  # torch dtype names (torch loads lazily)
DTYPE_PRECISIONS = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}  # torch dtype names: the old --dtype, a tensor's
# auto's bf16 on the CPU starts at these hidden sizes (the crossovers measured by
# bench/precision_crossover.py; narrower models run faster in fp32 even where bf16 is native)
BF16_MIN_HIDDEN = {"training": 256, "inference": 768}
# ... on the CPU classes (bertkit.cpu.cpu_class) whose crossover lies elsewhere: the avx512_bf16
# EPYC's bf16 inference pays from hidden 256 (bench/precision_crossover.py, one thread, texts of
# 16-128 tokens, fp32 / bf16 time: mini (256) 1.29x one text at a time, 1.62-1.74x in batches of
# 8-32; small (512) 1.76-1.95x; tiny (128) 0.64x one at a time, so it stays fp32; 2026-12-01).
# Its training crossover agrees with the rule above (tiny 1.19x, mini 1.25x a step, as the AMX
# Xeon's tiny 1.09x step was while its real fine-tuning ran slower in bf16), so it is kept.
BF16_MIN_HIDDEN_BY_CLASS = {"avx512-bf16": {"training": 256, "inference": 256}}
# ... and in training, at this many tokens per input whatever the width: BERT-Tiny fine-tuned
# on SQuAD (384 tokens) 1.2-1.8x faster in bf16 in 5 of 6 paired runs (docs/finetuning.md)
BF16_LONG_INPUTS = 384
INFERENCE_DEFAULT = "auto"  # the one default of every inference door: API, CLI, server
HELP = ("auto: bf16 where the device computes it natively (CPU: avx512_bf16/AMX, for a model "
        f"of hidden size >= {BF16_MIN_HIDDEN['training']} in training (or inputs of "
        f">= {BF16_LONG_INPUTS} tokens), >= {BF16_MIN_HIDDEN['inference']} in inference "
        f"({BF16_MIN_HIDDEN_BY_CLASS['avx512-bf16']['inference']} on an avx512_bf16 CPU without AMX); GPU: "
        "bf16 support, else fp16), else fp32")
# torch.compile of the encoder (bertkit.inference.compiled, which decides what auto means)
COMPILE_MODES = ("auto", "on", "off")
# what runs a task head's rows (bertkit.inference.openvino.choose_runtime decides what auto means)
RUNTIMES = ("torch", "openvino", "auto")
COMPILE_HELP = ("compile the encoder with torch.compile (a C++ compiler needed): auto (where "
                "measured clearly faster: no CPU class yet), on, or off")
# --calibration of the inference doors (bertkit.inference.calibration reads the file)
CALIBRATION_HELP = ("--precision int8: static INT8 calibrated on this UTF-8 text file of the model's "
                    "task inputs, one per line (a tab between the two texts of a pair), a few hundred, or "
                    "'saved': the training inputs bertkit finetune saved with the model (calibration.jsonl) "
                    "(--runtime torch: PyTorch 2's export route, pip install 'bertkit[int8-static]'; "
                    "without it, torch's INT8 is dynamic, except that serve takes 'saved' where it can)")


def check_calibration(path, precision: str, command: str) -> None:
    """``--calibration`` is for ``--precision int8`` only: a :class:`BertkitError` naming the
    flag otherwise (the rule of every door that takes it)."""
    if path is not None and precision != "int8":
        raise OptionError(f"{command}: --calibration is for --precision int8 only (static INT8 fixes its "
                          "activation scales from it; the float precisions need none)")


def check(precision: str, allowed: tuple[str, ...] = PRECISIONS, option: str = "--precision") -> str:
    """``precision`` if it is in ``allowed``, else a :class:`BertkitError` naming ``option``."""
    if precision not in allowed:
        raise BertkitError(f"{option} must be one of {', '.join(allowed)}, got {precision!r}")
    return precision


def resolve(precision: str, device: Any, allowed: tuple[str, ...] = PRECISIONS,
            option: str = "--precision", hidden_size: int | None = None,
            training: bool = False, seq_length: int | None = None) -> tuple[str, str]:
    """``(fp32|bf16|fp16|int8, why)``: ``auto`` by the rule of the module docstring for
    ``training`` (on inputs of ``seq_length`` tokens) or inference of a model of
    ``hidden_size`` (``None``: a runtime whose bf16 has no per-forward cast, OpenVINO's, where
    only the CPU decides); an explicit name is kept if the device can run it (fp16 needs
    CUDA, int8 the CPU)."""
    import torch

    check(precision, allowed, option)
    device = torch.device(device)
    if precision == "auto":
        if device.type == "cuda":
            chosen = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
            return chosen, f"auto on {device}: {'bf16 supported' if chosen == 'bf16' else 'no bf16'}"
        if device.type == "cpu":
            from bertkit.cpu import cpu_bf16_support

            support = cpu_bf16_support()
            work = "training" if training else "inference"
            least = bf16_min_hidden(work)
            long_inputs = training and (seq_length or 0) >= BF16_LONG_INPUTS
            if support.native and hidden_size is not None and hidden_size < least and not long_inputs:
                return "fp32", (f"auto: hidden size {hidden_size} < {least}, where fp32 {work} is "
                                f"faster than bf16 autocast ({support.reason})")
            return ("bf16" if support.native else "fp32"), f"auto: {support.reason}"
        return "fp32", f"auto on {device.type}"
    if precision == "fp16" and device.type != "cuda":
        raise BertkitError(f"{option} fp16 needs a CUDA device; use bf16 or fp32 on the {device.type}")
    if precision == "int8" and device.type != "cpu":
        raise BertkitError(f"{option} int8 runs on the CPU only; use --device cpu")
    return precision, "as asked"


def bf16_min_hidden(work: str) -> int:
    """The narrowest hidden size ``auto`` runs in bf16 for ``work`` (training, inference) on
    this CPU's class: :data:`BF16_MIN_HIDDEN_BY_CLASS`'s where measured apart, else
    :data:`BF16_MIN_HIDDEN`."""
    from bertkit.cpu import cpu_class

    return BF16_MIN_HIDDEN_BY_CLASS.get(cpu_class() or "", BF16_MIN_HIDDEN)[work]


def autocast(precision: str, device: Any = "cpu"):
    """The context a forward (and backward) pass runs in: autocast for ``bf16``/``fp16``,
    nothing for ``fp32`` and ``int8`` (whose layers take fp32 activations)."""
    if precision not in AUTOCAST_DTYPES:
        return contextlib.nullcontext()
    import torch

    return torch.autocast(torch.device(device).type, dtype=getattr(torch, AUTOCAST_DTYPES[precision]))


def from_dtype(dtype: str, option: str = "--dtype") -> str:
    """The precision the deprecated ``--dtype`` names (float32/bfloat16/float16 -> fp32/bf16/
    fp16: the weights stay fp32 and autocast does the rest)."""
    if dtype not in DTYPE_PRECISIONS:
        raise BertkitError(f"{option} must be one of {', '.join(DTYPE_PRECISIONS)}, got {dtype!r}")
    return DTYPE_PRECISIONS[dtype]
