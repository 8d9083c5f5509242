"""One precision vocabulary (bertkit.precision): ``auto`` is bf16 on CPUs with native bf16
(bertkit.cpu's flag reading, or the class BERTKIT_CPU_CLASS names) for a model wide enough
to gain from it, fp32 elsewhere, for training and inference alike."""

from pathlib import Path

import pytest
import torch

from bertkit import cpu as precision_mod
from bertkit.cpu import (
    CPU_CLASS_ENV,
    CPU_CLASSES,
    CpuBf16,
    cpu_bf16_support,
    cpu_flags,
    cpu_has_vnni,
    detect_cpu_bf16,
    this_cpuinfo,
)
from bertkit.errors import BertkitError
from bertkit.precision import (
    BF16_LONG_INPUTS,
    BF16_MIN_HIDDEN,
    BF16_MIN_HIDDEN_BY_CLASS,
    INFERENCE,
    RESOLVED,
    TRAINING,
    autocast,
    bf16_min_hidden,
    check,
    from_dtype,
    resolve,
)


def resolve_pretrain_precision(precision, device):
    return resolve(precision, device, TRAINING)

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


def test_this_machine_agrees_with_its_flags(monkeypatch):
    monkeypatch.delenv("BERTKIT_CPU_CLASS", raising=False)  # this machine itself
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


def test_one_vocabulary_for_training_and_inference():
    assert set(TRAINING) < set(INFERENCE) and "int8" not in TRAINING
    assert set(RESOLVED) == set(INFERENCE) - {"auto"}
    with pytest.raises(BertkitError, match="--precision must be one of"):
        check("fp8", TRAINING)
    with pytest.raises(BertkitError, match="--precision must be one of"):
        resolve("int8", CPU, TRAINING)


@pytest.mark.parametrize("native", [True, False])
def test_auto_is_the_same_rule_for_training_and_inference(monkeypatch, native):
    monkeypatch.setattr(precision_mod, "cpu_bf16_support", lambda: CpuBf16(native, "flags"))
    assert resolve("auto", CPU, TRAINING)[0] == resolve("auto", CPU, INFERENCE)[0]
    assert resolve("auto", CPU, INFERENCE)[0] == ("bf16" if native else "fp32")  # never int8


def test_int8_is_cpu_only_and_fp16_cuda_only():
    assert resolve("int8", CPU)[0] == "int8"
    with pytest.raises(BertkitError, match="CPU only"):
        resolve("int8", CUDA)
    with pytest.raises(BertkitError, match="CUDA"):
        resolve("fp16", CPU)


def test_autocast_takes_precision_then_device():
    with autocast("bf16", CPU):
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16 and torch.is_autocast_enabled("cpu")
    with autocast("fp32", CPU), autocast("int8", "cpu"):
        assert not torch.is_autocast_enabled("cpu")


def test_old_dtype_names_map_to_precisions():
    assert [from_dtype(d) for d in ("float32", "bfloat16", "float16")] == ["fp32", "bf16", "fp16"]
    with pytest.raises(BertkitError, match="--dtype must be one of"):
        from_dtype("int8")


def test_vnni_read_from_flags():
    assert cpu_has_vnni(X86.format(extra="avx512_vnni"))
    assert not cpu_has_vnni(X86.format(extra=""))


@pytest.mark.parametrize("name", list(CPU_CLASSES))
def test_each_cpu_class_can_be_taken_on_any_machine(monkeypatch, name):
    monkeypatch.setenv(CPU_CLASS_ENV, name)
    support = cpu_bf16_support()
    assert support.native is (name in ("avx512-bf16", "amx"))
    assert support.reason.startswith(f"{CPU_CLASS_ENV}={name}: ") and "this CPU itself" in support.reason
    assert cpu_has_vnni() is (name != "avx2")
    assert set(CPU_CLASSES[name]) == cpu_flags(this_cpuinfo())
    assert resolve("auto", CPU, INFERENCE, hidden_size=1024)[0] == ("bf16" if support.native else "fp32")


def test_an_unknown_cpu_class_names_the_variable(monkeypatch):
    monkeypatch.setenv(CPU_CLASS_ENV, "zen9")
    with pytest.raises(BertkitError, match=f"{CPU_CLASS_ENV} must be one of avx2, avx512-vnni"):
        resolve("auto", CPU, INFERENCE, hidden_size=768)
    monkeypatch.setenv(CPU_CLASS_ENV, "")  # empty: this machine's own flags
    assert cpu_bf16_support().reason == detect_cpu_bf16(
        this_cpuinfo(), __import__("platform").machine(), precision_mod._onednn_bf16(),
        torch.backends.cpu.get_cpu_capability()).reason


@pytest.mark.parametrize("training", [True, False])
def test_auto_picks_bf16_only_for_a_model_wide_enough(cpu_class, training):
    least = BF16_MIN_HIDDEN["training" if training else "inference"]
    native = cpu_class == "amx"
    narrow, why = resolve("auto", CPU, TRAINING if training else INFERENCE, hidden_size=least // 2,
                          training=training)
    wide = resolve("auto", CPU, TRAINING if training else INFERENCE, hidden_size=least,
                   training=training)[0]
    assert narrow == "fp32" and wide == ("bf16" if native else "fp32")
    assert (f"hidden size {least // 2} < {least}" in why) is native
    # an explicit choice is kept whatever the width
    assert resolve("bf16", CPU, hidden_size=16, training=training)[0] == "bf16"
    assert BF16_MIN_HIDDEN["training"] <= BF16_MIN_HIDDEN["inference"]
    # narrow, but trained on long inputs (SQuAD's 384 tokens): bf16 where native
    long = resolve("auto", CPU, TRAINING, hidden_size=128, training=training, seq_length=BF16_LONG_INPUTS)[0]
    assert long == ("bf16" if native and training else "fp32")


@pytest.mark.parametrize("name", list(CPU_CLASSES))
def test_auto_reads_the_bf16_width_measured_on_each_cpu_class(monkeypatch, name):
    """The avx512_bf16 EPYC's bf16 inference pays from hidden 256 (its own crossover); AMX
    keeps 768; classes without native bf16 run fp32 at any width."""
    monkeypatch.setenv(CPU_CLASS_ENV, name)
    own = BF16_MIN_HIDDEN_BY_CLASS.get(name, BF16_MIN_HIDDEN)
    assert bf16_min_hidden("inference") == own["inference"] and bf16_min_hidden("training") == own["training"]
    native = name in ("avx512-bf16", "amx")
    mini = resolve("auto", CPU, INFERENCE, hidden_size=256)
    assert mini[0] == ("bf16" if name == "avx512-bf16" else "fp32")
    assert ("hidden size 256 < 768" in mini[1]) is (name == "amx")
    assert resolve("auto", CPU, INFERENCE, hidden_size=128)[0] == "fp32"  # BERT-Tiny: fp32 everywhere
    assert resolve("auto", CPU, INFERENCE, hidden_size=768)[0] == ("bf16" if native else "fp32")
    assert resolve("auto", CPU, TRAINING, hidden_size=128, training=True)[0] == "fp32"
