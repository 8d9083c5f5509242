"""What this CPU can do and its run-time settings: native bf16 and VNNI read from the CPU's
flags; glibc malloc that keeps freed memory, a bounded oneDNN cache, torch's thread count for
a stretch of work.

Native bf16 (``cpu_bf16_support``): x86 ``avx512_bf16`` or AMX (``amx_bf16``), or the Arm
``bf16`` extension, and torch's oneDNN able to use it. It is read from the CPU's feature flags
(``/proc/cpuinfo``), not assumed: torch's own checks say less
(``torch.backends.cpu.get_cpu_capability()`` reports only the vector width, and oneDNN's bf16
check also passes on AVX-512 CPUs that merely emulate bf16, where bf16 autocast is slower than
fp32). :mod:`bertkit.precision`'s ``auto`` rule reads it.

``BERTKIT_CPU_CLASS`` (:data:`CPU_CLASSES`: ``avx2``, ``avx512-vnni``, ``avx512-bf16``, ``amx``)
makes bertkit take the CPU for one of the four classes its machines come in, whatever it is:
every decision read from the CPU's flags (``auto``'s bf16, VNNI's ``reduce_range``) is then
made as on that class. Native bf16 claimed by the override runs emulated on a CPU without it:
slower, with the same numbers. It exists so that every class's branch runs on every machine
(the test suite sets it per test; ``BERTKIT_CPU_CLASS=amx make test`` runs it all so).

By default glibc returns every large block (>= 128 KiB-32 MiB, adaptive) to the kernel on
``free`` and page-faults it back in on the next ``malloc``. A training step frees and
re-allocates the same activations and gradients each time, and so does every inference
batch: a CPU run can spend a third of its time in the kernel zeroing pages (BERT-Base INT8
inference at fixed length: up to 1.45x faster without it; docs/serving.md). ``keep_freed_memory()`` tunes glibc
with ``mallopt`` (no mmap'd blocks, no heap trimming) so those pages are reused: resident
memory stays at the peak instead of shrinking between steps. Returns False (and changes
nothing) where glibc's ``mallopt`` is not available. It is process-wide: pre-training and,
through :func:`loading_for_inference`, :func:`bertkit.inference.load` and the CLI's
``evaluate``/``predict`` call it on the CPU.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from bertkit.errors import BertkitError

# ------------------------------------------------------------------ what the CPU has
NATIVE_X86 = ("avx512_bf16", "amx_bf16")
NATIVE_ARM = ("bf16",)
CPUINFO = Path("/proc/cpuinfo")
CPU_CLASS_ENV = "BERTKIT_CPU_CLASS"
# the flags bertkit reads, as each class of machine shows them
CPU_CLASSES: dict[str, tuple[str, ...]] = {
    "avx2": ("avx2", "fma"),                                            # AMD EPYC, AVX2 only
    "avx512-vnni": ("avx2", "fma", "avx512f", "avx512_vnni"),           # Intel Xeon, no native bf16
    "avx512-bf16": ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16"),  # AMD EPYC (Zen 4)
    "amx": ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16",
            "amx_int8"),                                                # Intel Xeon with AMX
}


# CPU classes where a bf16 classifier's last layer at [CLS] only was measured to move an answer
# by no more than the door gap every class has (each sentence alone against the same sentence
# in a batch: 7.8e-3, a bf16 ulp, through attention's padded length), with no label flips
# (bench/cls_only_bf16.py, batches of 16 random SST-2 dev sentences). The avx512_bf16 EPYC,
# native bf16: 0.0 (BERT-Tiny SST-2, 256 sentences; a BERT-Base-sized model, 64; 2026-12-01;
# since its attention runs as two products, BF16_PRODUCTS_ATTENTION_CLASSES, 7.8e-3, no flips:
# 2026-12-02); the AMX Xeon: 0.0 on both models (2026-12-02), and one bf16 ulp on one score in
# 48 on the tests' random 768-wide two-layer models; the VNNI Xeon, emulated (2026-11-27).
BF16_ROWS_ALONE_CLASSES = frozenset({"avx512-bf16", "avx512-vnni", "amx"})
# CPU classes where a server's bf16 batches run on their real tokens only (the unpadded
# attention, what --attention-impl auto runs), with why that costs no agreement between doors:
# * the avx512_bf16 EPYC: the same batch unpadded gives every row the padded batch's numbers
#   (0.0 on both models above, 2026-12-01 and 2026-12-02);
# * the AMX Xeon: there padding keeps no row's numbers either. oneDNN's bf16 product rounds a
#   row by the row count of its batch (BERT-Base's four layer shapes, the same rows at 1-799
#   rows: up to 7.8e-3 apart; 2026-12-02), so a lone request, padded, already answers up to
#   1.9e-3 away from predict's batches (40 of 64 SST-2 dev sentences beyond 1e-4, base-sized
#   model; BERT-Tiny 12 of 64), and unpadded moves a row by the same bf16 rounding (one score
#   in 24 of the doors test's wide model, 3.9e-3); while a base-sized server answered 1.58x the
#   requests at concurrency 32 unpadded (106.7 against 67.4 a second, bench/serve.py).
# The VNNI Xeon is not measured.
BF16_UNPADDED_CLASSES: dict[str, str] = {
    "avx512-bf16": "bf16 keeps each row's numbers on CPU class avx512-bf16",
    "amx": "bf16 on CPU class amx rounds a row by its batch's row count, padded or not",
}
# CPU classes where bf16 attention in inference runs faster as two batched products
# (bertkit.model.attention.products_attention) than as torch's fused CPU kernel
# (scaled_dot_product_attention's flash kernel, 35-50 GFLOP/s there against 130-145 for the
# products alone). The avx512_bf16 EPYC (bench/attention_products.py, 12 heads of 64, one
# thread, 2026-12-02): 0.51-0.74x the kernel's time from 1 x 64 to 32 x 128 tokens on a quiet
# core (once 1.09x at 32 x 128 beside the test suite, the scores competing for the shared
# cache); a whole BERT-Base pass 0.92-0.97x at 8-32 x 128. The AMX Xeon (whose kernel runs its
# products on AMX) and the classes without native bf16 are not measured and keep the kernel.
BF16_PRODUCTS_ATTENTION_CLASSES = frozenset({"avx512-bf16"})


@dataclass(frozen=True)
class CpuBf16:
    native: bool
    reason: str


def cpu_flags(cpuinfo: str) -> set[str]:
    """The feature flags of the first processor in a ``/proc/cpuinfo`` text (x86 ``flags``,
    Arm ``Features``)."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("flags", "features"):
            return set(value.split())
    return set()


def _onednn_bf16() -> bool:
    try:
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def detect_cpu_bf16(cpuinfo: str | None, machine: str, onednn_bf16: bool, capability: str) -> CpuBf16:
    """The decision from its inputs (pure: tests give it other machines)."""
    if cpuinfo is None:
        return CpuBf16(False, f"no /proc/cpuinfo to read the CPU's flags from ({machine}): fp32")
    flags = cpu_flags(cpuinfo)
    wanted = NATIVE_ARM if machine.lower() in ("aarch64", "arm64") else NATIVE_X86
    found = sorted(f for f in wanted if f in flags)
    where = f"torch CPU capability {capability}, oneDNN bf16 {'yes' if onednn_bf16 else 'no'}"
    if not found:
        return CpuBf16(False, f"the CPU has no native bf16 ({' / '.join(wanted)} absent; {where})")
    if not onednn_bf16:
        return CpuBf16(False, f"the CPU has {', '.join(found)} but torch's oneDNN cannot use "
                              f"bf16 ({where})")
    return CpuBf16(True, f"native bf16 on the CPU: {', '.join(found)} ({where})")


def cpu_class_override() -> str | None:
    """The class ``BERTKIT_CPU_CLASS`` names (None when unset or empty); a
    :class:`BertkitError` naming the variable for a name that is not a class."""
    name = os.environ.get(CPU_CLASS_ENV, "").strip()
    if not name:
        return None
    if name not in CPU_CLASSES:
        raise BertkitError(f"{CPU_CLASS_ENV} must be one of {', '.join(CPU_CLASSES)} (or unset), "
                           f"got {name!r}")
    return name


def cpu_class() -> str | None:
    """Which of :data:`CPU_CLASSES` this CPU is (``BERTKIT_CPU_CLASS``'s when set), from its
    flags: AMX, else ``avx512_bf16``, else VNNI, else AVX2; None for another CPU (Arm, or x86
    without AVX2)."""
    return cpu_class_override() or _own_class()


@functools.cache
def _own_class() -> str | None:
    """This CPU's own class, read once a process (hot paths ask, and the flags never change)."""
    flags = cpu_flags(_real_cpuinfo() or "")
    for name in ("amx", "avx512-bf16", "avx512-vnni", "avx2"):
        if CPU_CLASSES[name][-1] in flags:
            return name
    return None


def bf16_rows_alone() -> bool:
    """Does bf16 on this CPU's class give a row the same numbers whatever rows are computed
    beside it (:data:`BF16_ROWS_ALONE_CLASSES`, as measured there)?"""
    return cpu_class() in BF16_ROWS_ALONE_CLASSES


def bf16_unpadded() -> str | None:
    """Why a server's bf16 batches on this CPU's class run on their real tokens only
    (:data:`BF16_UNPADDED_CLASSES`, as measured there), or None: they stay padded."""
    return BF16_UNPADDED_CLASSES.get(cpu_class())


def bf16_products_attention() -> bool:
    """Does bf16 attention on this CPU's class run faster as two batched products
    (:data:`BF16_PRODUCTS_ATTENTION_CLASSES`, as measured there)?"""
    return cpu_class() in BF16_PRODUCTS_ATTENTION_CLASSES


def this_cpuinfo() -> str | None:
    """``/proc/cpuinfo`` as bertkit reads it: the CPU's own, or a ``flags`` line of the class
    ``BERTKIT_CPU_CLASS`` names; None where there is none (macOS, Windows)."""
    override = cpu_class_override()
    if override:
        return f"processor\t: 0\nflags\t\t: {' '.join(CPU_CLASSES[override])}\n"
    return _real_cpuinfo()


def cpu_bf16_support() -> CpuBf16:
    """This machine's answer, or the overriding class's (``BERTKIT_CPU_CLASS``)."""
    return _bf16_support(cpu_class_override())


@functools.cache
def _bf16_support(override: str | None) -> CpuBf16:
    capability = torch.backends.cpu.get_cpu_capability()
    if override is None:
        return detect_cpu_bf16(this_cpuinfo(), platform.machine(), _onednn_bf16(), capability)
    actual = detect_cpu_bf16(_real_cpuinfo(), platform.machine(), _onednn_bf16(), capability)
    # torch runs bf16 on any CPU (emulated where it is not native): the class decides alone
    decided = detect_cpu_bf16(this_cpuinfo(), "x86_64", True, capability)
    return CpuBf16(decided.native, f"{CPU_CLASS_ENV}={override}: {decided.reason}; this CPU "
                                   f"itself: {actual.reason}")


def _real_cpuinfo() -> str | None:
    try:
        return CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def cpu_has_vnni(cpuinfo: str | None = None) -> bool:
    """Does the CPU (``cpuinfo``'s, else :func:`this_cpuinfo`'s) have 8-bit dot-product
    instructions (x86 ``avx512_vnni`` / ``avx_vnni``)? Without them, INT8 kernels that multiply
    unsigned by signed 8-bit values in 16-bit pairs can saturate, so 8-bit activations must
    keep to 7 bits (``reduce_range``)."""
    if cpuinfo is None:
        cpuinfo = this_cpuinfo()
        if cpuinfo is None:
            return False
    return bool(cpu_flags(cpuinfo) & {"avx512_vnni", "avx_vnni", "amx_int8"})


# ------------------------------------------------------------------ run-time settings
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4


def keep_freed_memory() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    # no mmap'd blocks (glibc caps the mmap threshold at 32 MiB, below a batch's logits),
    # and no trimming of the heap top: freed pages stay mapped for the next step
    return mallopt(_M_MMAP_MAX, 0) == 1 and mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(2**31 - 1)) == 1


def bound_onednn_cache(capacity: int = 64) -> None:
    """Bound oneDNN's primitive cache (unless the user set ``ONEDNN_PRIMITIVE_CACHE_CAPACITY``).

    oneDNN keeps one compiled primitive per distinct matrix shape, 1,024 by default, with
    its buffers. Training batches of varying length (fine-tuning buckets, the ltr
    objective's labelled-token count) give a new shape almost every step, so resident memory
    grew by megabytes per step until the cache filled (a 300-step ``mini`` ltr run reached
    7 GB). 64 entries keep the reuse of steady shapes at no measured cost in speed. Takes
    effect when called before the process's first oneDNN matrix product.
    """
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(capacity))


@contextlib.contextmanager
def loading_for_inference(on_cpu: bool = True):
    """Load a model for CPU inference inside this block: the process-wide settings every
    inference entry point applies (none when ``on_cpu`` is false).

    Before loading, oneDNN's primitive cache is bounded: texts of every length make a new
    matrix shape per batch, and 400 variable-length ``predict`` calls on BERT-Base INT8
    grew resident memory from 552 to 1,197 MB unbounded, flat at 800-880 MB bounded (the
    bound takes effect only if no matrix product ran in the process before; INT8 packing may
    be one). After loading, glibc keeps freed memory, since each batch re-allocates its
    activations; not before, so the float weights that INT8 packing frees go back to the
    system (set during loading, they stayed resident: 862 MB instead of 552 at the start)."""
    if on_cpu:
        bound_onednn_cache()
    yield
    if on_cpu:
        keep_freed_memory()


@contextlib.contextmanager
def torch_threads(count: int):
    """Run the enclosed torch work on ``count`` intra-op threads, then restore the count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
