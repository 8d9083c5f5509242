"""Which autocast precision ``auto`` means for pre-training, by the hardware actually present.

On a GPU ``auto`` keeps :func:`bertkit.training.step.resolve_precision`'s rule (bf16 where
supported, else fp16). On the CPU it is ``bf16`` only where the processor computes bf16
natively - x86 ``avx512_bf16`` or AMX (``amx_bf16``), or the Arm ``bf16`` extension - and
torch's oneDNN backend can use it; everywhere else ``fp32``. Native support is read from
the CPU's feature flags (``/proc/cpuinfo``), not assumed: torch's own checks say less
(``torch.backends.cpu.get_cpu_capability()`` reports only the vector width, e.g.
``AVX512``, and oneDNN's bf16 check also passes on AVX-512 CPUs that merely emulate bf16,
where bf16 autocast is slower than fp32). Measured on an AVX-512 + avx512_bf16 machine:
docs/pretraining.md, "Precision".

Contract: ``cpu_bf16_support() -> CpuBf16`` (``native`` and a ``reason`` naming the flags
and torch's view); ``resolve_pretrain_precision(precision, device) -> (precision, reason)``.
"""

from __future__ import annotations

import functools
import platform
from dataclasses import dataclass
from pathlib import Path

import torch

from bertkit.training.step import resolve_precision

NATIVE_X86 = ("avx512_bf16", "amx_bf16")
NATIVE_ARM = ("bf16",)
CPUINFO = Path("/proc/cpuinfo")


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


@functools.cache
def cpu_bf16_support() -> CpuBf16:
    """This machine's answer (cached)."""
    try:
        cpuinfo = CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        cpuinfo = None
    return detect_cpu_bf16(cpuinfo, platform.machine(), _onednn_bf16(),
                           torch.backends.cpu.get_cpu_capability())


def resolve_pretrain_precision(precision: str, device: torch.device) -> tuple[str, str]:
    """``(fp32|bf16|fp16, why)``: ``auto`` on the CPU is bf16 where it is native, else fp32;
    explicit choices and GPUs follow :func:`~bertkit.training.step.resolve_precision`."""
    if precision == "auto" and device.type == "cpu":
        support = cpu_bf16_support()
        return ("bf16" if support.native else "fp32"), f"auto: {support.reason}"
    resolved = resolve_precision(precision, device)
    why = "as asked" if precision != "auto" else f"auto on {device.type}"
    return resolved, why
