"""``--precision auto`` for pre-training: bf16 on CPUs with native bf16, fp32 elsewhere."""

from pathlib import Path

import pytest
import torch

from bertkit.errors import BertkitError
from bertkit.training import precision as precision_mod
from bertkit.training.precision import (
    CpuBf16,
    cpu_bf16_support,
    cpu_flags,
    detect_cpu_bf16,
    resolve_pretrain_precision,
)

CPU, CUDA = torch.device("cpu"), torch.device("cuda")
X86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu sse2 avx2 avx512f {extra}\n\nprocessor\t: 1\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd {extra}\nCPU implementer\t: 0x41\n"


def test_cpu_flags_reads_x86_and_arm():
    assert {"avx512f", "avx512_bf16"} <= cpu_flags(X86.format(extra="avx512_bf16"))
    assert "bf16" in cpu_flags(ARM.format(extra="bf16 sve"))
    assert cpu_flags("nothing here") == set()


@pytest.mark.parametrize("cpuinfo, machine, onednn, native", [
    (X86.format(extra="avx512_bf16 avx512_vnni"), "x86_64", True, True),
    (X86.format(extra="amx_tile amx_bf16"), "x86_64", True, True),
    (X86.format(extra="avx512_vnni"), "x86_64", True, False),   # AVX-512 alone emulates bf16
    (X86.format(extra="avx512_bf16"), "x86_64", False, False),  # torch cannot use it
    (X86.format(extra=""), "x86_64", True, False),
    (ARM.format(extra="bf16 i8mm"), "aarch64", True, True),
    (ARM.format(extra="asimdhp"), "aarch64", True, False),
    (None, "arm64", True, False),                               # no /proc/cpuinfo (macOS)
])
def test_detect(cpuinfo, machine, onednn, native):
    result = detect_cpu_bf16(cpuinfo, machine, onednn, "AVX512")
    assert result.native is native
    assert result.reason


def test_this_machine_agrees_with_its_flags():
    path = Path("/proc/cpuinfo")
    if not path.exists():
        assert not cpu_bf16_support().native
        return
    flags = cpu_flags(path.read_text())
    if cpu_bf16_support().native:
        assert flags & {"avx512_bf16", "amx_bf16", "bf16"}
    elif "avx512_bf16" in flags or "amx_bf16" in flags:
        assert "oneDNN" in cpu_bf16_support().reason


@pytest.mark.parametrize("native, expected", [(True, "bf16"), (False, "fp32")])
def test_auto_on_the_cpu(monkeypatch, native, expected):
    monkeypatch.setattr(precision_mod, "cpu_bf16_support", lambda: CpuBf16(native, "flags"))
    resolved, why = resolve_pretrain_precision("auto", CPU)
    assert resolved == expected and "flags" in why


def test_explicit_choices_are_kept(monkeypatch):
    monkeypatch.setattr(precision_mod, "cpu_bf16_support", lambda: CpuBf16(True, "flags"))
    assert resolve_pretrain_precision("fp32", CPU)[0] == "fp32"
    assert resolve_pretrain_precision("bf16", CPU)[0] == "bf16"
    with pytest.raises(BertkitError, match="CUDA"):
        resolve_pretrain_precision("fp16", CPU)


def test_gpu_rule_unchanged(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert resolve_pretrain_precision("auto", CUDA)[0] == "fp16"
