"""Static INT8 through PyTorch 2's export route (bertkit.inference.static_int8): close to fp32
for any batch and length, the float model for what the graph does not answer, and clear
errors where it cannot run."""

import copy
import math
import time

import pytest
import torch

from bertkit import cpu
from bertkit.errors import BertkitError
from bertkit.inference import compiled, static_int8
from bertkit.modeldir.int8 import load_model, prepare
from tests.task_models import make_task_model


def rows(count: int, vocab: int) -> list[list[int]]:
    """``count`` (at most ``vocab - 5``) distinct [CLS] ... [SEP] rows of 3-12 word ids."""
    return [[2] + [5 + (i + j * (1 + i % 3)) % (vocab - 5) for j in range(3 + i % 10)] + [3] for i in range(count)]


@pytest.fixture(scope="module")
def float_and_static(tmp_path_factory):
    why = static_int8.blocker()
    if why:
        pytest.skip(why)
    model = load_model(make_task_model(tmp_path_factory.mktemp("static"), "classify", hidden=32))
    quantised = copy.deepcopy(model)
    static_int8.quantize_static(quantised, static_int8.calibration_batches(rows(30, model.config.vocab_size)))
    compiled.warm_up(quantised, "fp32")
    return model, quantised


@pytest.mark.parametrize("shape", [(1, 4), (1, 11), (3, 9), (5, 30)])
def test_static_int8_stays_close_to_fp32_at_any_batch_and_length(float_and_static, shape):
    model, quantised = float_and_static
    batch, length = shape
    ids = torch.randint(5, model.config.vocab_size, (batch, length), generator=torch.Generator().manual_seed(length))
    ids[:, 0], ids[:, -1] = 2, 3
    mask = torch.ones_like(ids)
    mask[0, length // 2 :] = 0  # the first row padded: the key-padding mask is part of the graph
    with torch.inference_mode():
        expected = model(ids, None, mask).logits
        got = quantised(ids, None, mask).logits
    assert got.dtype == torch.float32 and got.shape == expected.shape
    spread = float(expected.max() - expected.min())
    assert float((got - expected).abs().max()) <= max(0.1 * spread, 0.02)


def test_a_classifier_reads_a_graph_whose_last_layer_runs_at_cls_only(float_and_static):
    """A pooled classifier's head (every door's rows: head_logits), and a [CLS]-pooled vector,
    run the graph quantised and compiled with its last layer at [CLS] only (the one the warm-up
    builds): close to fp32 and to the whole graph; where that graph does not answer (gradients
    on) the whole pass runs."""
    from bertkit.inference.heads import pooled_vectors

    model, quantised = float_and_static
    encoder = quantised.encoder_model()
    route = quantised.bertkit_static_int8_route
    # the batch graph built too, unless no batch takes it or only big ones do (compiled at the first)
    assert route.cls and route.package_done is not None
    assert route.package_batches or route.batches_ready.is_set() or route.graph_from > 0
    ids = torch.randint(5, model.config.vocab_size, (4, 12), generator=torch.Generator().manual_seed(3))
    ids[:, 0], ids[:, -1] = 2, 3
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    calls = []
    forward_cls = route.forward_cls
    route.forward_cls = lambda *x: calls.append(x[0].shape) or forward_cls(*x)
    encoder.bertkit_encode_cls = route.forward_cls
    try:
        with torch.inference_mode():
            expected = model(ids, None, mask).logits
            whole = quantised(ids, None, mask).logits
            got = quantised.head_logits(ids, None, mask)
            lone = quantised.head_logits(ids[:1], None, mask[:1])
            vectors = pooled_vectors(encoder, ids, None, mask, [-1], "cls")
            at_cls = encoder.bertkit_encode_cls(ids, None, mask)
    finally:
        route.forward_cls = forward_cls
        encoder.bertkit_encode_cls = forward_cls
    assert calls == [(4, 12), (1, 12), (4, 12), (4, 12)]  # head_logits twice, the vectors, by hand
    spread = float(expected.max() - expected.min())
    for answer in (got, whole):
        assert float((answer - expected).abs().max()) <= max(0.1 * spread, 0.02)
    assert float((lone - got[:1]).abs().max()) <= max(0.1 * spread, 0.02)
    assert at_cls.last_hidden_state.shape == (4, 1, model.config.hidden_size)
    assert torch.equal(vectors, at_cls.last_hidden_state[:, 0])
    with torch.enable_grad():
        assert route.forward_cls(ids, None, mask) is None
        assert torch.allclose(quantised.head_logits(ids, None, mask), model(ids, None, mask).logits, atol=1e-5)


def test_a_causal_classifier_reads_the_whole_graph(tmp_path):
    """A causal model pools its last token, which a [CLS] graph does not compute: no [CLS]
    route is given to its encoder, and its head reads the whole graph (nothing is built here)."""
    if static_int8.blocker():
        pytest.skip(static_int8.blocker())
    model = load_model(make_task_model(tmp_path, "classify"))
    model.encoder_model().encoder.causal = True
    static_int8.quantize_static(model, static_int8.calibration_batches(rows(20, model.config.vocab_size)))
    assert not hasattr(model.encoder_model(), "bertkit_encode_cls")
    assert model.bertkit_static_int8_route.cls is False


def test_what_the_graph_does_not_answer_runs_the_float_model(float_and_static):
    model, quantised = float_and_static
    ids = torch.tensor([[2, 5, 6, 7, 3]])
    with torch.inference_mode():
        expected = model(ids, output_hidden_states=True)
        got = quantised(ids, output_hidden_states=True)
    assert all(torch.equal(a, b) for a, b in zip(got.hidden_states, expected.hidden_states))
    with torch.inference_mode():  # one token is below the graph's shortest length
        assert torch.equal(quantised(ids[:, :1]).logits, model(ids[:, :1]).logits)


def test_every_pass_runs_at_a_length_of_the_ladder(float_and_static):
    """oneDNN builds each INT8 product per matrix shape and bertkit keeps 64 of them, so texts
    of every length rebuilt them at nearly every pass: the route pads each pass to a length of
    a short ladder (never past the model's positions), masks the padding out and gives the
    hidden states back at the input's length."""
    assert [static_int8.length_bucket(n, 512) for n in (2, 8, 9, 64, 65, 128, 129, 257, 500)] == \
        [8, 8, 16, 64, 80, 128, 160, 320, 512]
    assert static_int8.length_bucket(35, 36) == 36 and static_int8.length_bucket(30, 36) == 32
    model, quantised = float_and_static
    encoder = quantised.encoder_model()
    ids = torch.tensor([[2] + list(range(5, 14)) + [3]])  # 11 tokens
    padded = torch.nn.functional.pad(ids, (0, 5))
    for route, answer in ((encoder.forward.__self__, lambda *x: quantised(*x).logits),  # the whole graph
                          (quantised.bertkit_static_int8_route, quantised.head_logits)):  # [CLS] only
        package, widths = route.package(), []
        route._package = lambda *inputs, package=package, widths=widths: widths.append(inputs[0].shape[-1]) or package(*inputs)
        try:
            with torch.inference_mode():
                out = encoder.bertkit_encode_cls(ids) if route.cls else encoder(ids)
                logits = answer(ids)
                by_hand = answer(padded, None, (padded > 0).long())
        finally:
            route._package = package
        assert widths == [16, 16, 16] and out.last_hidden_state.shape[1] == (1 if route.cls else 11)
        assert torch.equal(logits, by_hand)


def test_every_layer_fuses_its_int8_products_post_ops_at_a_dynamic_length(tmp_path):
    """Exported with a dynamic length, the graph reads the length from the products' outputs,
    and that second user stopped inductor's INT8 fusions (the FFN's GELU and output
    quantisation inside its product, the residual adds inside theirs) in every layer but the
    [CLS] one; with the sizes read from the inputs (SizesFromInputs) every layer fuses."""
    from torch._dynamo.utils import counters

    why = static_int8.blocker()
    if why:
        pytest.skip(why)
    layers = 3
    model = load_model(make_task_model(tmp_path, "classify", hidden=32, layers=layers))
    static_int8.quantize_static(model, static_int8.calibration_batches(rows(30, model.config.vocab_size)))
    counters.clear()
    model.bertkit_static_int8_route.package()  # built here: its own model, nothing cached
    fused = counters["inductor"]
    assert fused["qlinear_unary_matcher_count"] == layers  # each layer's FFN product with its GELU
    assert fused["qlinear_binary_matcher_count"] == 2 * layers  # each layer's two residual adds


def test_the_compiled_package_is_cached_keyed_and_rebuilt_when_damaged(float_and_static):
    """A second model with the same weights and calibration loads the package the first one
    built (no export, calibration or compilation); another thread count is another package; a
    damaged package is built again, and its answers are the same."""
    model, quantised = float_and_static
    path, _, cached = quantised.bertkit_static_int8_route.package_done
    assert not cached and path.endswith(".pt2") and str(static_int8.cache_dir()) in path
    calibration = static_int8.calibration_batches(rows(30, model.config.vocab_size))
    ids = torch.tensor([[2, 5, 6, 7, 8, 3]])  # one input: the package answers
    with torch.inference_mode():
        expected = quantised.head_logits(ids)
    again = copy.deepcopy(model)
    static_int8.quantize_static(again, calibration)
    with torch.inference_mode():
        assert torch.equal(again.head_logits(ids), expected)
    assert again.bertkit_static_int8_route.package_done[0] == path and again.bertkit_static_int8_route.package_done[2]
    assert again.bertkit_static_int8_route._graph is None  # no export, no calibration
    assert "loaded from the cache" in static_int8.describe(again)
    with open(path, "r+b") as f:  # damaged: its runner does not load
        f.truncate(100)
    rebuilt = copy.deepcopy(model)
    static_int8.quantize_static(rebuilt, calibration)
    with torch.inference_mode():
        assert torch.equal(rebuilt.head_logits(ids), expected)
    assert rebuilt.bertkit_static_int8_route.package_done[0] == path
    assert not rebuilt.bertkit_static_int8_route.package_done[2]
    other = static_int8._package_key(model.encoder_model(), calibration, False, 3, False)
    assert other != static_int8._package_key(model.encoder_model(), calibration, False, 1, False)
    assert other != static_int8._package_key(model.encoder_model(), calibration[:-1], False, 3, False)
    assert other != static_int8._package_key(model.encoder_model(), calibration, False, 3, True)
    assert other != static_int8._package_key(model.encoder_model(), calibration, False, 3, False, cls=True)


def test_batches_run_on_the_package_until_their_graph_is_compiled_in_the_background(float_and_static, monkeypatch):
    """A server answers at once: single inputs and batches on the package while the batch
    graph compiles in a thread of its own, then batches on that graph, compiled once; both
    close to fp32."""
    from torch._dynamo.utils import counters

    monkeypatch.setattr(static_int8, "graph_from_tokens", lambda threads=None: 0)  # a class that compiles the graph
    model, _ = float_and_static
    quantised = copy.deepcopy(model)
    static_int8.quantize_static(quantised, static_int8.calibration_batches(rows(30, model.config.vocab_size)))
    static_int8.warm_up(quantised, background=True)
    route = quantised.bertkit_static_int8_route
    assert route.package_done is not None and route.batches_started
    # said from the start, not once the thread gets going (a server's /info said "compiling":
    # false for a moment, and a benchmark waiting on it measured batches beside the compilation)
    assert static_int8.compiling(quantised) or route.batches_ready.is_set()
    ids = torch.tensor([[2, 5, 6, 7, 8, 3], [2, 9, 10, 11, 3, 0], [2, 12, 3, 0, 0, 0]])
    mask = (ids > 0).long()
    with torch.inference_mode():
        expected = model(ids, None, mask).logits
        early = quantised.head_logits(ids, None, mask)  # the package, or the graph if already done
        assert route.batches_ready.wait(600)
        compilations = counters["frames"]["ok"]
        late = quantised.head_logits(ids, None, mask)
    # the first batch after the warm-up runs on the graph it built, not on one compiled again
    # (warmed up on inference-mode tensors, the graph's guards failed on the engine's ordinary ones)
    assert counters["frames"]["ok"] == compilations
    spread = float(expected.max() - expected.min())
    for got in (early, late):
        assert float((got - expected).abs().max()) <= max(0.1 * spread, 0.02)
    assert "compiled in" in static_int8.describe(quantised)
    assert not static_int8.compiling(quantised)


def test_where_batches_run_on_the_package_no_graph_is_exported_or_compiled(float_and_static, monkeypatch):
    """On a class of PACKAGE_BATCHES_CLASSES a server's warm-up loads the cached package and
    builds nothing more: no export (the graph is not needed when the package is cached), no
    compile thread, never "compiling"; batches answer on the package, close to fp32."""
    from torch._dynamo.utils import counters

    monkeypatch.setattr(static_int8, "graph_from_tokens", lambda threads=None: math.inf)
    model, _ = float_and_static
    quantised = copy.deepcopy(model)
    static_int8.quantize_static(quantised, static_int8.calibration_batches(rows(30, model.config.vocab_size)))
    route = quantised.bertkit_static_int8_route
    frames = counters["frames"]["ok"]
    static_int8.warm_up(quantised, background=True)  # the fixture's model built the same package
    assert route.package_done is not None and route.package_done[2] is True  # loaded from the cache
    assert route._graph is None and not route.batches_started and not static_int8.compiling(quantised)
    ids = torch.tensor([[2, 5, 6, 7, 8, 3], [2, 9, 10, 11, 3, 0], [2, 12, 3, 0, 0, 0]])
    mask = (ids > 0).long()
    with torch.inference_mode():
        expected = model(ids, None, mask).logits
        got = quantised.head_logits(ids, None, mask)
    assert not route.batches_started and counters["frames"]["ok"] == frames  # nothing compiled for the batch
    spread = float(expected.max() - expected.min())
    assert float((got - expected).abs().max()) <= max(0.1 * spread, 0.02)
    assert "single inputs and batches on the AOTInductor package, loaded from the cache" in static_int8.describe(quantised)


@pytest.mark.parametrize("cls, one_thread, two_threads", [("amx", 0, 0), ("avx512-bf16", math.inf, 2048),
                                                         ("avx512-vnni", 0, 0), ("avx2", math.inf, math.inf)])
def test_batches_run_on_the_package_only_on_the_measured_cpu_classes_and_thread_counts(monkeypatch, cls, one_thread,
                                                                                      two_threads):
    """Every batch on the package at one thread on the two EPYC classes, as measured there; at
    two the avx512_bf16 EPYC's graph ran big passes faster, so they go to it; the AVX2 EPYC,
    measured at one thread only, keeps its rule; the other classes compile the graph for all."""
    monkeypatch.setenv("BERTKIT_CPU_CLASS", cls)
    assert static_int8.graph_from_tokens(1) == one_thread and static_int8.graph_from_tokens(2) == two_threads
    with cpu.torch_threads(1):
        assert static_int8.graph_from_tokens() == one_thread


def test_where_batches_run_is_decided_at_the_thread_count_the_package_is_built_for(tmp_path, monkeypatch):
    """A server loads its model in one thread and runs it in more: the rule reads the count the
    package is built (or loaded) for, the one its passes run in."""
    monkeypatch.setenv("BERTKIT_CPU_CLASS", "avx512-bf16")
    monkeypatch.setenv(static_int8.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(static_int8, "_package_key", lambda *args, **kwargs: "key")
    monkeypatch.setattr(static_int8, "_load", lambda path: "the package")
    route = static_int8._Route(None, None, None, None, bf16=False)
    for threads, graph_from in ((2, 2048), (1, math.inf)):
        with cpu.torch_threads(threads):
            assert route._load_or_build() == "the package"
        assert route.graph_from == graph_from and route.package_batches is (graph_from == math.inf)


def test_where_big_passes_run_on_the_graph_small_ones_stay_on_the_package(float_and_static, monkeypatch):
    """A bound of 20 tokens: a 2 x 6 batch (its pass at the ladder's 8: 16 tokens) answers on
    the package, nothing compiled; a 3 x 6 batch (24) compiles the graph and runs on it;
    both close to fp32. The server's line says which batches take which form."""
    monkeypatch.setattr(static_int8, "graph_from_tokens", lambda threads=None: 20)
    model, _ = float_and_static
    quantised = copy.deepcopy(model)
    static_int8.quantize_static(quantised, static_int8.calibration_batches(rows(30, model.config.vocab_size)))
    static_int8.warm_up(quantised)  # the package (cached by the fixture), no graph yet
    route = quantised.bertkit_static_int8_route
    assert route.graph_from == 20 and not route.batches_started
    calls = []
    real_compile = route._compile_batches

    def compile_and_watch():
        real_compile()
        graph = route._batches
        route._batches = lambda *inputs: calls.append(tuple(inputs[0].shape)) or graph(*inputs)
    route._compile_batches = compile_and_watch
    ids = torch.tensor([[2, 5, 6, 7, 8, 3], [2, 9, 10, 11, 3, 0], [2, 12, 3, 0, 0, 0]])
    mask = (ids > 0).long()
    with torch.inference_mode():
        for n in (2, 3):
            expected = model(ids[:n], None, mask[:n]).logits
            got = quantised.head_logits(ids[:n], None, mask[:n])
            spread = float(expected.max() - expected.min())
            assert float((got - expected).abs().max()) <= max(0.1 * spread, 0.02)
            assert route.batches_started is (n == 3)  # compiled at the first pass past the bound
    assert [rows_ for rows_, _ in calls] == [3]
    assert "batches of 20 tokens or more: torch.compile, compiled in" in static_int8.describe(quantised)
    assert "(smaller ones on the package)" in static_int8.describe(quantised)


def test_a_server_keeps_every_batch_on_the_package_where_only_big_passes_would_take_the_graph(float_and_static,
                                                                                             monkeypatch):
    """A server's warm-up (background) where big passes alone would take the graph: no export
    before answering, no compile thread; every batch answers on the package."""
    monkeypatch.setattr(static_int8, "graph_from_tokens", lambda threads=None: 20)
    model, _ = float_and_static
    quantised = copy.deepcopy(model)
    static_int8.quantize_static(quantised, static_int8.calibration_batches(rows(30, model.config.vocab_size)))
    static_int8.warm_up(quantised, background=True)
    route = quantised.bertkit_static_int8_route
    assert route.graph_from == math.inf and route.package_batches
    assert route._graph is None and not route.batches_started and not static_int8.compiling(quantised)
    ids = torch.tensor([[2, 5, 6, 7, 8, 3]] * 4)
    with torch.inference_mode():
        quantised.head_logits(ids, None, torch.ones_like(ids))  # 4 x 8 = 32 tokens, past the bound
    assert not route.batches_started


def test_a_failed_background_compilation_leaves_batches_on_the_package_and_says_why(capsys, monkeypatch):
    """The batch graph's compilation fails in its thread: nothing is left "compiling" (a
    client waiting for it would wait for ever), the reason is printed and described."""
    monkeypatch.setattr(static_int8, "graph_from_tokens", lambda threads=None: 0)
    route = static_int8._Route(None, None, None, None, bf16=False)
    route.package, route.graph = (lambda: None), (lambda: None)

    def broken():
        raise RuntimeError("no compiler")

    route._compile_batches = broken
    holder = torch.nn.Module()
    holder.bertkit_static_int8_route = route
    route.warm_up(background=True)
    for _ in range(500):
        if route.batches_error:
            break
        time.sleep(0.01)
    assert route.batches_error == "RuntimeError: no compiler" and not static_int8.compiling(holder)
    assert "not compiled (RuntimeError: no compiler)" in static_int8.describe(holder)
    assert "compiling the batch graph failed (RuntimeError: no compiler)" in capsys.readouterr().err


@pytest.mark.parametrize("bf16", [True, False])
def test_the_compiled_program_runs_the_float_work_in_bf16_where_asked(tmp_path, bf16):
    """The autocast is part of the exported program (one around the export call is not: the
    package then ran attention, softmax, GELU and LayerNorm in fp32, slower than the
    torch.compile route at 32 x 128 on the AMX Xeon)."""
    if static_int8.blocker():
        pytest.skip(static_int8.blocker())
    model = load_model(make_task_model(tmp_path, "classify", hidden=32))
    encoder = model.encoder_model()
    calibration = static_int8.calibration_batches(rows(20, model.config.vocab_size))
    graph = static_int8.quantised_graph(model, encoder, encoder.forward, calibration)
    program = static_int8.export_quantised(graph, model, calibration, bf16).run_decompositions()
    casts = [n for n in program.graph.nodes
             if n.op == "call_function" and "to_copy" in str(n.target) and n.kwargs.get("dtype") == torch.bfloat16]
    assert bool(casts) == bf16


def test_calibration_needs_sixteen_distinct_texts():
    with pytest.raises(BertkitError, match="at least 16 distinct inputs of real text, got 1"):
        static_int8.calibration_batches([[2, 5, 3]] * 40)
    batches = static_int8.calibration_batches(rows(20, 40), batch_size=8)
    assert [b[0].shape[0] for b in batches] == [8, 8, 4]
    ids, types, mask = batches[0]
    assert torch.equal(mask.sum(1), torch.tensor([len(r) for r in rows(8, 40)]))
    assert not types.any()
    import numpy as np  # task features: dicts of arrays, token types included

    features = [{"input_ids": np.array(r), "token_type_ids": np.array([0] * (len(r) - 2) + [1, 1])} for r in rows(20, 40)]
    assert torch.equal(static_int8.calibration_batches(features)[0][1][0, :8], torch.tensor([0, 0, 0, 1, 1, 0, 0, 0]))


def test_a_prepared_model_or_a_missing_torchao_is_refused_with_the_reason(tmp_path, monkeypatch):
    model = load_model(make_task_model(tmp_path, "classify"))
    calibration = static_int8.calibration_batches(rows(20, model.config.vocab_size))
    if static_int8.blocker() is None:
        with pytest.raises(BertkitError, match="fp32 model on the CPU"):
            static_int8.quantize_static(prepare(copy.deepcopy(model), "bf16"), calibration)

    with monkeypatch.context() as patch:  # an older torch than the route was run on
        patch.setattr(static_int8, "_torchao_version", lambda: "0.18.0")
        patch.setattr(torch, "__version__", "2.11.0+cu130")
        assert "needs torch >= 2.13 (this is 2.11.0+cu130" in static_int8.blocker()
    monkeypatch.setattr(static_int8, "_torchao_version", lambda: None)
    assert "pip install 'bertkit[int8-static]'" in static_int8.blocker()
    with pytest.raises(BertkitError, match="needs torchao"):
        static_int8.quantize_static(model, calibration)


def test_load_with_calibration_texts_runs_static_int8_behind_the_engine(tmp_path):
    """``load(dir, precision="int8", calibration=texts)``: the engine's answers come from the
    static route, close to fp32's; calibration asks for int8 of a float directory, texts of
    one kind, and 16 distinct."""
    from bertkit.inference import load

    directory = make_task_model(tmp_path, "classify", hidden=32)
    words = ["the", "man", "went", "to", "store", "he", "is", "good", "bad", "day", "night", "she", "was"]
    texts = [" ".join(words[(i + j) % len(words)] for j in range(2 + i % 5)) for i in range(24)]
    with pytest.raises(BertkitError, match="calibration is for precision int8"):
        load(directory, precision="fp32", calibration=texts)
    with pytest.raises(BertkitError, match="mixes single texts"):
        load(directory, precision="int8", calibration=texts[:20] + [("the man", "went")])
    with pytest.raises(BertkitError, match="at least 16 distinct"):
        load(directory, precision="int8", calibration=texts[:3] * 10)
    if static_int8.blocker():
        pytest.skip(static_int8.blocker())
    engine = load(directory, precision="int8", calibration=texts)
    assert engine.precision == "int8" and "static" in engine.precision_reason
    assert getattr(engine.model, "bertkit_static_int8", False)
    fp32 = load(directory, precision="fp32")
    asked = ["the man went to the store", "she was bad , the night was good !"]
    got = [{d["label"]: d["score"] for d in row} for row in engine.predict(asked)]
    expected = [{d["label"]: d["score"] for d in row} for row in fp32.predict(asked)]
    assert all(abs(g[k] - e[k]) < 0.05 for g, e in zip(got, expected) for k in e)


def test_activations_keep_8_bits_where_the_cpu_has_vnni(cpu_class):
    """7-bit activations (reduce_range) only without VNNI (the AVX2 EPYC), as the dynamic route."""
    if static_int8.blocker():
        pytest.skip(static_int8.blocker())
    config = static_int8.make_quantizer().global_config
    assert config.input_activation.quant_max == (127 if cpu_class == "avx2" else 255)


@pytest.mark.parametrize("cls, autotuned", [("amx", True), ("avx512-bf16", True), ("avx512-vnni", False),
                                            ("avx2", False)])
def test_the_package_autotunes_only_on_the_measured_cpu_classes(monkeypatch, cls, autotuned):
    monkeypatch.setenv("BERTKIT_CPU_CLASS", cls)
    configs = static_int8.package_inductor_configs()
    assert configs["freezing"] is True
    assert configs.get("max_autotune", False) is autotuned
    assert (configs.get("max_autotune_gemm_backends") == "CPP,ATEN") is autotuned


def test_the_package_key_changes_with_the_autotuning(tmp_path, monkeypatch):
    model = load_model(make_task_model(tmp_path, "classify"))
    calibration = static_int8.calibration_batches(rows(20, model.config.vocab_size))
    keys = {}
    for cls in ("amx", "avx2"):
        monkeypatch.setenv("BERTKIT_CPU_CLASS", cls)
        keys[cls] = static_int8._package_key(model.encoder_model(), calibration, False, 1, False)
    assert keys["amx"] != keys["avx2"]  # a package built one way is never loaded for the other


@pytest.mark.parametrize("cls", ["amx", "avx512-bf16", "avx512-vnni", "avx2"])
def test_attention_runs_as_products_in_the_bf16_graph_only_on_the_measured_class(monkeypatch, cls):
    monkeypatch.setenv("BERTKIT_CPU_CLASS", cls)
    assert static_int8.attention_as_products(True) is (cls == "avx512-bf16")
    assert static_int8.attention_as_products(False) is False


@pytest.mark.parametrize("cls", ["amx", "avx512-bf16", "avx512-vnni", "avx2"])
def test_a_pass_leaves_the_ladder_only_where_its_padding_was_measured_to_cost_more(monkeypatch, cls):
    """On the avx512_bf16 EPYC a pass whose padding to the ladder costs more multiply-adds than
    MOST_PADDING_BY_CLASS runs at its own length (a 32-row BERT-Base batch); a small model or a
    lone input keeps the ladder; the classes not measured pad every pass as before."""
    monkeypatch.setenv("BERTKIT_CPU_CLASS", cls)
    base, tiny = 12 * 12 * 768 * 768, 2 * 12 * 128 * 128  # their layers' matrices' weights
    measured = cls in static_int8.MOST_PADDING_BY_CLASS
    assert static_int8.pass_length(32, 28, 512, base) == (28 if measured else 32)
    assert static_int8.pass_length(32, 28, 512, tiny) == 32
    assert static_int8.pass_length(1, 28, 512, base) == 32  # 4 tokens of padding: cheaper than a new shape
    assert static_int8.pass_length(1, 25, 512, base) == (25 if measured else 32)  # 7 tokens: dearer
    assert static_int8.pass_length(32, 32, 512, base) == 32  # already on the ladder
    assert static_int8.pass_length(4, 30, 31, tiny) == 31  # never past the model's positions


def test_a_tokens_cost_counts_the_weights_of_the_layers_products(tmp_path):
    model = load_model(make_task_model(tmp_path, "classify", hidden=32))  # 2 layers, FFN of 64
    assert static_int8.product_weights(model.encoder_model()) == 2 * (4 * 32 * 32 + 2 * 32 * 64)


def test_a_graph_traced_with_products_attention_holds_products_not_the_fused_kernel(tmp_path):
    """Traced within products_attention_traced, the quantised graph's attention is two batched
    products at every shape (no fused kernel, no guard on the length), and answers as the float
    model does within INT8's error; traced without, the fused kernel."""
    why = static_int8.blocker()
    if why:
        pytest.skip(why)
    model = load_model(make_task_model(tmp_path, "classify"))
    encoder = model.encoder_model()
    calibration = static_int8.calibration_batches(rows(20, model.config.vocab_size))
    targets = {}
    for products in (True, False):
        graph = static_int8.quantised_graph(model, encoder, encoder.forward, calibration, products)
        targets[products] = {str(node.target) for node in graph.graph.nodes}
        ids, types, mask = calibration[0]
        with torch.no_grad():
            last, _ = graph(ids, types, mask)
            expected = encoder(ids, types, mask).last_hidden_state
        real = mask.bool()
        assert (last - expected)[real].abs().max() < 0.25 * expected[real].abs().max()
    assert any("bmm" in t for t in targets[True]) and not any("scaled_dot_product" in t for t in targets[True])
    assert any("scaled_dot_product" in t for t in targets[False]) and not any("bmm" in t for t in targets[False])
