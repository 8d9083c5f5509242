"""The compiled route (bertkit.inference.compiled): when ``auto`` compiles, and that a compiled
engine answers as the eager one."""

import numpy as np
import pytest

from bertkit.config import BertConfig
from bertkit.errors import BertkitError
from bertkit.inference import compiled, load


@pytest.fixture
def with_compiler(monkeypatch):
    monkeypatch.setattr(compiled, "cxx_compiler", lambda: "/usr/bin/g++")


def test_auto_compiles_nowhere_until_measured_clearly_faster(cpu_class, with_compiler):
    assert compiled.decide("auto", "bf16", "cpu")[0] is False
    assert compiled.decide("auto", "fp32", "cpu")[0] is False


def test_auto_compiles_only_where_measured_faster(cpu_class, with_compiler, monkeypatch):
    monkeypatch.setattr(compiled, "MEASURED_FASTER", {("amx", "bf16")})
    on, why = compiled.decide("auto", "bf16", "cpu")
    assert on == (cpu_class == "amx"), why
    assert "amx" in why if on else "not measured" in why
    assert compiled.decide("auto", "fp32", "cpu")[0] is False  # fp32 was not measured faster


def test_off_never_compiles_and_int8_never_does(cpu_class, with_compiler):
    assert compiled.decide("off", "bf16", "cpu") == (False, "--compile off")
    on, why = compiled.decide("auto", "int8", "cpu")
    assert not on and "INT8" in why
    with pytest.raises(BertkitError, match="--compile on: INT8"):
        compiled.decide("on", "int8", "cpu")


def test_no_compiler_blocks_auto_and_on_says_why(monkeypatch):
    monkeypatch.setenv("BERTKIT_CPU_CLASS", "amx")
    monkeypatch.setattr(compiled, "cxx_compiler", lambda: None)
    on, why = compiled.decide("auto", "bf16", "cpu")
    assert not on and "C++ compiler" in why
    with pytest.raises(BertkitError, match="no C.. compiler"):
        compiled.decide("on", "fp32", "cpu")


def test_unpadded_attention_is_not_compiled(with_compiler):
    class Model:
        config = BertConfig(vocab_size=10, attention_impl="unpadded")

    with pytest.raises(BertkitError, match="unpadded"):
        compiled.decide("on", "fp32", "cpu", Model())


def test_an_unknown_mode_names_the_option():
    with pytest.raises(BertkitError, match="--compile must be one of auto, on, off"):
        compiled.decide("yes", "fp32", "cpu")


@pytest.mark.slow
@pytest.mark.skipif(compiled.cxx_compiler() is None, reason="no C++ compiler for inductor")
def test_a_compiled_engine_answers_as_the_eager_one(make_mlm_dir, monkeypatch):
    monkeypatch.setenv("BERTKIT_CPU_CLASS", "avx2")  # fp32: answers comparable within 1e-5
    directory = make_mlm_dir(32)
    eager = load(directory, precision="fp32")
    fast = load(directory, precision="fp32", compile="on")
    assert compiled.is_compiled(fast.model) and not compiled.is_compiled(eager.model)
    assert fast.compile_reason == "--compile on" and eager.compile_reason == "--compile off"
    texts = ["the man went to the store", "hello", "he is good , she is bad . the day was good"]
    for batch in (texts, texts[:1]):  # padded batch (mask kept in the graph), and a lone text
        np.testing.assert_allclose(fast.embed(batch, pool="mean"), eager.embed(batch, pool="mean"),
                                   atol=1e-5)
    # the hidden states of several layers run the eager forward, with the same answers
    np.testing.assert_allclose(fast.embed(texts, layers=(-1, -2)), eager.embed(texts, layers=(-1, -2)),
                               atol=1e-5)
    got, want = (b.fill_mask("the man went to the [MASK] .")[0] for b in (fast, eager))
    assert [r["token"] for r in got] == [r["token"] for r in want]
    np.testing.assert_allclose([r["score"] for r in got], [r["score"] for r in want], atol=1e-5)


@pytest.mark.slow
@pytest.mark.skipif(compiled.cxx_compiler() is None, reason="no C++ compiler for inductor")
def test_compiling_keeps_the_fp32_layers_packed_for_mkl(make_mlm_dir, monkeypatch):
    """Where fp32 layers are packed for MKL (the VNNI class), the compiled graph runs them as
    one operator each on their packed copy (inductor would run them unpacked under dynamic
    shapes), with the eager engine's answers; a length not seen before compiles nothing new."""
    from bertkit.modeldir import int8

    monkeypatch.setenv("BERTKIT_CPU_CLASS", "avx512-vnni")
    if not int8.can_pack_fp32():
        pytest.skip("this PyTorch has no MKL to pack fp32 weights for")
    directory = make_mlm_dir(32)
    eager = load(directory, precision="fp32", compile="off")
    fast = load(directory, precision="fp32", compile="on")
    packed = [m for m in fast.model.modules() if isinstance(m, int8.Fp32PackedLinear)]
    assert packed and compiled.is_compiled(fast.model)
    import torch._dynamo

    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]  # both forms, built by load()
    calls = []
    real = int8._packed_product
    monkeypatch.setattr(int8, "_packed_product", lambda *a: calls.append(1) or real(*a))
    texts = ["the man went to the store", "hello", "he is good , she is bad . the day was good"]
    for batch in (texts, texts[:1], ["the day was good and the man went to the store"]):
        np.testing.assert_allclose(fast.embed(batch, pool="mean"), eager.embed(batch, pool="mean"),
                                   atol=1e-5)
    assert calls, "the compiled graph did not run the packed copies"
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs  # no length compiled anew


@pytest.mark.slow
@pytest.mark.skipif(compiled.cxx_compiler() is None, reason="no C++ compiler for inductor")
def test_a_background_build_answers_eagerly_until_the_graphs_are_built(make_mlm_dir, monkeypatch):
    """``warm_up(background=True)`` (what ``serve`` does) returns at once; the eager forward
    answers while the graphs build, the graphs afterwards, with the same answers."""
    import threading

    monkeypatch.setenv("BERTKIT_CPU_CLASS", "avx2")
    directory = make_mlm_dir(32)
    eager = load(directory, precision="fp32")
    fast = load(directory, precision="fp32", compile="on", warm_up=False)
    state = fast.model.bertkit_compiled
    entered, release = threading.Event(), threading.Event()
    build = compiled._build

    def held(*args):  # the build waits until the test has asked a question meanwhile
        entered.set()
        assert release.wait(60)
        build(*args)

    monkeypatch.setattr(compiled, "_build", held)
    graph_calls = []
    monkeypatch.setattr(state, "compiled", lambda *a, _real=state.compiled: graph_calls.append(1) or _real(*a))
    fast.warm_up(background=True)
    assert entered.wait(60) and fast.compiling and "compiling in the background" in fast.compile_reason
    texts = ["the man went to the store", "hello"]
    want = eager.embed(texts, pool="mean")
    np.testing.assert_allclose(fast.embed(texts, pool="mean"), want, atol=1e-5)
    assert not graph_calls  # answered eagerly
    release.set()
    assert state.ready.wait(300) and state.error is None and not fast.compiling
    built = len(graph_calls)  # the two warm-up calls
    np.testing.assert_allclose(fast.embed(texts, pool="mean"), want, atol=1e-5)
    assert len(graph_calls) > built  # now the graphs answer
    assert "compiled in" in compiled.describe(fast.model)


def test_a_failed_background_build_leaves_the_eager_forward_answering(make_mlm_dir, monkeypatch, capsys):
    monkeypatch.setenv("BERTKIT_CPU_CLASS", "avx2")
    monkeypatch.setattr(compiled, "cxx_compiler", lambda: "/usr/bin/g++")
    directory = make_mlm_dir(32)
    fast = load(directory, precision="fp32", compile="on", warm_up=False)

    def broken(*args):
        raise RuntimeError("no space left on device")

    monkeypatch.setattr(compiled, "_build", broken)
    fast.warm_up(background=True)
    state = fast.model.bertkit_compiled
    assert state.ready.wait(60) and not fast.compiling
    assert "no space left on device" in capsys.readouterr().err
    assert "compiling failed" in compiled.describe(fast.model)
    calls = []
    monkeypatch.setattr(state, "compiled", lambda *a: calls.append(1))
    texts = ["the man went to the store", "hello"]
    np.testing.assert_allclose(fast.embed(texts, pool="mean"), load(directory, precision="fp32").embed(texts, pool="mean"),
                               atol=1e-6)
    assert not calls
