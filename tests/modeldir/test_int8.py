"""INT8 / bf16 inference precision and INT8 model directories."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from bertkit.errors import BertkitError
from bertkit.inference import load
from bertkit.modeldir.int8 import (
    INT8_ENGINE,
    INT8_FILE,
    int8_engine,
    is_int8,
    load_model,
    prepare,
    quantize_int8,
    save_int8,
)
from tests.task_models import make_task_model

TEXTS = ["the man went to the store .", "he is good", "she was bad , the night was good !"]


@pytest.mark.parametrize("kind", ["classify", "tagging", "qa", "mlm"])
def test_int8_and_bf16_stay_close_to_fp32(tmp_path, kind):
    directory = make_task_model(tmp_path, kind)
    ids = torch.tensor([[2, 5, 6, 7, 8, 5, 9, 16, 3]])
    fp32 = load_model(directory)
    with torch.no_grad():
        ref = fp32(ids)
        field = "start_logits" if kind == "qa" else "logits"
        q = quantize_int8(load_model(directory))(ids)[field]
        with torch.autocast("cpu", torch.bfloat16):
            b = fp32(ids)[field].float()
    scale = ref[field].abs().max().item()
    assert (q - ref[field]).abs().max().item() < 0.1 * scale
    assert (b - ref[field]).abs().max().item() < 0.1 * scale
    assert not torch.equal(q, ref[field])  # really a different computation


def test_int8_quantises_every_linear_but_the_tied_decoder(tmp_path):
    model = quantize_int8(load_model(make_task_model(tmp_path, "mlm")))
    linear = [n for n, m in model.named_modules() if type(m) is torch.nn.Linear]
    assert linear == ["mlm_head.decoder"]
    assert model.mlm_head.decoder.weight is model.bert.embeddings.word_embeddings.weight


@pytest.mark.parametrize("kind", ["classify", "mlm", "qa"])
def test_int8_directory_round_trip_is_exact(tmp_path, kind):
    directory = make_task_model(tmp_path, kind)
    model = quantize_int8(load_model(directory))
    bert = load(directory)
    out = save_int8(model, tmp_path / "int8", tokenizer=bert.tokenizer)
    assert (out / INT8_FILE).is_file() and not (out / "model.safetensors").exists()
    again = load_model(out)
    assert is_int8(again)
    ids = torch.tensor([[2, 5, 6, 7, 8, 3], [2, 21, 23, 25, 3, 0]])
    mask = (ids != 0).long()
    field = "start_logits" if kind == "qa" else "logits"
    with torch.no_grad():
        assert torch.equal(model(ids, None, mask)[field], again(ids, None, mask)[field])
    served = load(out)  # the API takes the INT8 directory at its own precision
    assert served.precision == "int8"
    if kind == "classify":
        assert served.predict(TEXTS) == load(directory, precision="int8").predict(TEXTS)
    with pytest.raises(BertkitError, match="INT8"):
        load(out, precision="bf16")


def test_int8_packs_for_its_engine_and_restores_the_process_setting(tmp_path, monkeypatch):
    quantized = torch.backends.quantized
    if INT8_ENGINE not in quantized.supported_engines:
        pytest.skip(f"this PyTorch has no {INT8_ENGINE} engine")
    other = next(e for e in quantized.supported_engines if e not in (INT8_ENGINE, "qnnpack"))
    monkeypatch.setattr(quantized, "engine", other)
    seen = []
    Linear = torch.ao.nn.quantized.dynamic.Linear
    original = Linear.set_weight_bias

    def spy(self, weight, bias):
        seen.append(quantized.engine)
        return original(self, weight, bias)

    monkeypatch.setattr(Linear, "set_weight_bias", spy)
    directory = make_task_model(tmp_path, "classify")
    model = quantize_int8(load_model(directory))
    assert quantized.engine == other
    save_int8(model, tmp_path / "int8")
    load_model(tmp_path / "int8")
    assert quantized.engine == other
    assert seen and set(seen) == {INT8_ENGINE}  # quantising and loading both packed for it
    with int8_engine() as engine:
        assert engine == quantized.engine == INT8_ENGINE
    assert quantized.engine == other


def test_few_rows_run_on_the_second_packing_with_the_same_weights(tmp_path, monkeypatch):
    import bertkit.modeldir.int8 as int8

    quantized = torch.backends.quantized
    if not {INT8_ENGINE, int8.SMALL_ENGINE} <= set(quantized.supported_engines) or INT8_ENGINE == int8.SMALL_ENGINE:
        pytest.skip("needs both INT8 engines")
    monkeypatch.setenv("BERTKIT_CPU_CLASS", "avx2")  # a class measured with a second packing
    monkeypatch.delenv("BERTKIT_INT8_SMALL_ROWS", raising=False)
    directory = make_task_model(tmp_path, "classify")
    model = quantize_int8(load_model(directory))
    layers = [m for m in model.modules() if isinstance(m, int8._dynamic_linear())]
    assert layers and all(m.small is not None for m in layers)
    save_int8(model, tmp_path / "int8")
    loaded = load_model(tmp_path / "int8")
    assert all(m.small is not None for m in loaded.modules() if isinstance(m, int8._dynamic_linear()))
    small_calls, smalls = [], {id(m.small) for m in loaded.modules() if isinstance(m, int8._dynamic_linear())}
    real = torch.ops.quantized.linear_dynamic

    def spy(x, packed, reduce_range=True):
        small_calls.append((x.numel() // x.shape[-1], id(packed) in smalls))
        return real(x, packed, reduce_range=reduce_range)

    ids = torch.tensor([[2, 5, 6, 7, 8, 5, 9, 16, 3]])

    def set_rows(rows):
        for m in loaded.modules():
            if isinstance(m, int8._dynamic_linear()):
                m.small_rows = rows

    with torch.no_grad():
        set_rows(0)  # everything on INT8_ENGINE's packing
        one = loaded(ids)["logits"]
        set_rows(256)
        monkeypatch.setattr(torch.ops.quantized, "linear_dynamic", spy)
        two = loaded(ids)["logits"]
        assert small_calls and all(small for _, small in small_calls)
        set_rows(4)  # 9 token rows: the big packing, 1 pooled row: small
        small_calls.clear()
        loaded(ids)
    assert {rows for rows, small in small_calls if small} == {1}  # the pooler's and the head's row
    assert {rows for rows, small in small_calls if not small} == {9}
    # same int8 weights, same activation quantisation: the kernels differ in rounding only
    np.testing.assert_allclose(one.numpy(), two.numpy(), atol=2e-2)
    assert one.argmax(-1).tolist() == two.argmax(-1).tolist()


def test_an_unknown_int8_engine_is_a_clear_error(monkeypatch):
    import bertkit.modeldir.int8 as precision

    monkeypatch.setenv("BERTKIT_INT8_ENGINE", "nope")
    monkeypatch.setattr(precision, "INT8_ENGINE", "nope")
    with pytest.raises(BertkitError, match="BERTKIT_INT8_ENGINE='nope'"):
        with int8_engine():
            pass


def test_precision_errors(tmp_path):
    directory = make_task_model(tmp_path, "classify")
    with pytest.raises(BertkitError, match="--precision must be one of"):
        load(directory, precision="int4")
    model = prepare(load_model(directory), "int8")
    with pytest.raises(BertkitError, match="int8"):
        prepare(model, "fp32")


def test_api_precisions_agree_on_predictions(tmp_path):
    directory = make_task_model(tmp_path, "classify")
    answers = {p: load(directory, precision=p).predict(TEXTS) for p in ("fp32", "bf16", "int8")}
    for p in ("bf16", "int8"):
        for a, b in zip(answers["fp32"], answers[p]):
            assert {x["label"]: x["score"] for x in a} == pytest.approx(
                {x["label"]: x["score"] for x in b}, abs=0.05)
    emb32 = load(directory).embed(TEXTS, pool="mean")
    emb8 = load(directory, precision="int8").embed(TEXTS, pool="mean")
    assert np.abs(emb32 - emb8).max() < 0.1 * np.abs(emb32).max()


@pytest.mark.parametrize("cpu_class", ["avx2", "amx", "avx512-vnni", "avx512-bf16"])
def test_the_small_row_threshold_is_the_cpu_classs_own(tmp_path, monkeypatch, cpu_class):
    """fbgemm's copy takes up to 256 rows on the AVX2 EPYC, 16 on the AMX Xeon (where onednn
    runs on AMX), 64 on the VNNI Xeon: each class gets the threshold measured on it, and a class not measured gets
    none from another (one packing); the variable overrides."""
    import bertkit.modeldir.int8 as int8

    monkeypatch.setenv("BERTKIT_CPU_CLASS", cpu_class)
    monkeypatch.delenv("BERTKIT_INT8_SMALL_ROWS", raising=False)
    expected = {"avx2": 256, "amx": 16, "avx512-vnni": 64, "avx512-bf16": 128}[cpu_class]
    assert int8.small_rows() == expected
    quantized = torch.backends.quantized
    if {INT8_ENGINE, int8.SMALL_ENGINE} <= set(quantized.supported_engines) and INT8_ENGINE != int8.SMALL_ENGINE:
        model = quantize_int8(load_model(make_task_model(tmp_path, "classify")))
        assert {m.small_rows for m in model.modules() if isinstance(m, int8._dynamic_linear())} == {expected}
    monkeypatch.setenv("BERTKIT_INT8_SMALL_ROWS", "0")
    assert int8.small_rows() == 0
    monkeypatch.setenv("BERTKIT_INT8_SMALL_ROWS", "many")
    with pytest.raises(BertkitError, match="BERTKIT_INT8_SMALL_ROWS"):
        int8.small_rows()


@pytest.fixture(params=["packed", "plain"])
def bf16_packing(request, monkeypatch):
    """Run a test with bf16 layers packed for oneDNN (skipped where this CPU's oneDNN has no
    bf16) and with plain bf16 layers (``BERTKIT_BF16_PACK=0``): both routes on every machine."""
    import bertkit.modeldir.int8 as int8

    int8.can_pack_bf16.cache_clear()
    if request.param == "plain":
        monkeypatch.setenv("BERTKIT_BF16_PACK", "0")
    elif not int8.can_pack_bf16():
        pytest.skip("this CPU's oneDNN does not compute bf16")
    yield request.param
    int8.can_pack_bf16.cache_clear()


def test_bf16_inference_stores_linear_weights_in_bf16_with_the_same_answers(tmp_path, bf16_packing):
    """prepare(model, "bf16") keeps no fp32 copy to cast at every forward pass: its linear
    layers hold bf16 weights (the tied masked-LM decoder stays on the fp32 embeddings), and it
    answers exactly as autocast over the fp32 weights does; packed for oneDNN, within bf16's
    rounding (the feed-forward GELU is applied in the product, before its output is rounded)."""
    import copy

    from bertkit.modeldir.int8 import PackedLinear, prepare
    from bertkit.precision import autocast

    model = load_model(make_task_model(tmp_path, "mlm"))
    ids = torch.tensor([[2, 5, 6, 7, 4, 9, 16, 3], [2, 21, 23, 25, 4, 3, 0, 0]])
    mask = (ids != 0).long()
    with torch.inference_mode(), autocast("bf16"):
        expected = model(ids, None, mask).logits.float()
    half = prepare(copy.deepcopy(model), "bf16")
    qkv = half.bert.encoder.layer[0].attention.self.qkv
    assert isinstance(qkv, PackedLinear) == (bf16_packing == "packed")
    assert qkv.weight.dtype == torch.bfloat16
    assert half.mlm_head.decoder.weight.dtype == torch.float32
    assert half.mlm_head.decoder.weight is half.bert.embeddings.word_embeddings.weight
    with torch.inference_mode(), autocast("bf16"):
        got = half(ids, None, mask).logits.float()
    if bf16_packing == "plain":
        assert torch.equal(got, expected)
    else:
        assert torch.allclose(got, expected, atol=0.05, rtol=0.02)
    with pytest.raises(BertkitError, match="stored in BF16; it runs at precision bf16, not fp32"):
        prepare(half, "fp32")
    assert prepare(half, "bf16") is half


def test_packed_bf16_layers_save_copy_and_unpack_as_plain_linear_layers(tmp_path, monkeypatch):
    """A packed layer is an ``nn.Linear`` to everything outside its forward pass: the state
    dict holds the plain bf16 weight under the same names, a deep copy answers the same (the
    feed-forward expansion still applying its GELU), and :func:`unpack_linears` (the compiled
    route's first step) gives plain layers back, whose block applies the GELU again; an input
    of no rows gives no rows."""
    import copy

    from bertkit.modeldir.int8 import PackedLinear, can_pack_bf16, prepare, unpack_linears
    from bertkit.precision import autocast

    monkeypatch.delenv("BERTKIT_BF16_PACK", raising=False)
    can_pack_bf16.cache_clear()
    if not can_pack_bf16():
        pytest.skip("this CPU's oneDNN does not compute bf16")
    model = load_model(make_task_model(tmp_path, "classify"))
    plain = {k: v.to(torch.bfloat16) if v.is_floating_point() and "LayerNorm" not in k and "embeddings" not in k
             else v for k, v in model.state_dict().items()}
    half = prepare(copy.deepcopy(model), "bf16")
    state = half.state_dict()
    assert set(state) == set(plain)
    assert all(torch.equal(state[k], plain[k]) for k in plain)
    ids = torch.tensor([[2, 5, 6, 7, 4, 9, 16, 3]])
    with torch.inference_mode(), autocast("bf16"):
        expected = half(ids).logits
        assert torch.equal(copy.deepcopy(half)(ids).logits, expected)
        layer = half.bert.encoder.layer[0].intermediate.dense
        assert layer(torch.zeros(0, layer.in_features)).shape == (0, layer.out_features)
        assert copy.deepcopy(half).bert.encoder.layer[0].intermediate.dense.activation == "gelu"
        unpack_linears(half)
        assert not any(isinstance(m, PackedLinear) for m in half.modules())
        assert torch.allclose(half(ids).logits.float(), expected.float(), atol=0.02)


def test_the_feed_forward_expansion_applies_its_gelu_in_the_packed_product_only(monkeypatch):
    """A feed-forward block's packed expansion computes ``gelu(W x + b)`` itself (exact or
    tanh, as the block's ``hidden_act``), within bf16's rounding of the fp32 answer, and its
    block does not apply it again; an activation oneDNN is not given (relu) stays with the
    block; a plain layer from it leaves the GELU to the block."""
    from bertkit.config import BertConfig
    from bertkit.model.encoder import FeedForward
    from bertkit.modeldir.int8 import PackedLinear, can_pack_bf16, half_linears

    monkeypatch.delenv("BERTKIT_BF16_PACK", raising=False)
    can_pack_bf16.cache_clear()
    if not can_pack_bf16():
        pytest.skip("this CPU's oneDNN does not compute bf16")
    torch.manual_seed(0)
    x = torch.randn(5, 16)
    for act, fused in (("gelu", "gelu"), ("gelu_new", "gelu_new"), ("relu", None)):
        block = FeedForward(BertConfig(hidden_size=16, num_attention_heads=2, intermediate_size=64, hidden_act=act)).eval()
        with torch.no_grad():
            block.dense.weight.copy_(block.dense.weight.bfloat16().float())  # exactly representable
            expected = block(x.bfloat16().float())
        wrapper = torch.nn.Sequential()
        wrapper.add_module("intermediate", block)
        monkeypatch.setattr("bertkit.modeldir.int8._quantisable", lambda model: ["intermediate.dense"])
        half_linears(wrapper, "bf16")
        assert isinstance(block.dense, PackedLinear) and block.dense.activation == fused
        with torch.inference_mode():
            got = block(x).float()
            assert torch.allclose(got, expected, atol=2e-2, rtol=1e-2)
            assert (got < 0).any() == (act != "relu")  # GELU dips below zero; applied twice it would not match
            block.dense = block.dense.as_linear()
            assert torch.allclose(block(x.bfloat16()).float(), expected, atol=2e-2, rtol=1e-2)


@pytest.mark.parametrize("cpu_class", ["avx2", "amx", "avx512-vnni", "avx512-bf16"])
def test_fp32_layers_are_packed_for_few_rows_only_where_measured(tmp_path, monkeypatch, cpu_class):
    """``load(precision="fp32")`` packs the linear layers for MKL on the class measured
    faster for few rows (the VNNI Xeon, up to 768 rows) and nowhere else; the variable
    overrides, a bad value names it, and other precisions are never packed this way."""
    from bertkit.modeldir.int8 import Fp32PackedLinear, fp32_packed_rows

    monkeypatch.setenv("BERTKIT_CPU_CLASS", cpu_class)
    monkeypatch.delenv("BERTKIT_FP32_PACKED_ROWS", raising=False)
    expected = {"avx512-vnni": 768}.get(cpu_class, 0)
    assert fp32_packed_rows() == expected
    directory = make_task_model(tmp_path, "classify")
    packed = [m for m in load(directory, precision="fp32").model.modules() if isinstance(m, Fp32PackedLinear)]
    assert {m.rows for m in packed} == ({expected} if expected else set())
    assert not any(isinstance(m, Fp32PackedLinear) for m in load(directory, precision="int8").model.modules())
    monkeypatch.setenv("BERTKIT_FP32_PACKED_ROWS", "32")
    assert {m.rows for m in load(directory, precision="fp32").model.modules()
            if isinstance(m, Fp32PackedLinear)} == {32}
    monkeypatch.setenv("BERTKIT_FP32_PACKED_ROWS", "few")
    with pytest.raises(BertkitError, match="BERTKIT_FP32_PACKED_ROWS"):
        fp32_packed_rows()


def test_a_layer_shape_packs_only_where_its_packed_product_answers_alike(monkeypatch):
    """Every fp32 linear layer is packed, of any width (the classifier's two outputs too), once
    its shape's packed product has answered as the plain one at other row counts than it was
    packed for on this machine; a shape whose packed product answers otherwise stays plain."""
    from bertkit.modeldir import int8
    from bertkit.modeldir.int8 import Fp32PackedLinear, pack_fp32

    monkeypatch.setenv("BERTKIT_FP32_PACKED_ROWS", "768")
    shapes = [(768, 3072), (3072, 768), (128, 128), (128, 2)]
    assert all(int8._packing_answers_alike(i, o, torch.get_num_threads()) for i, o in shapes)  # MKL here
    model = torch.nn.Sequential(*(torch.nn.Linear(i, o) for i, o in shapes))
    pack_fp32(model)
    assert all(isinstance(m, Fp32PackedLinear) for m in model)

    real = int8._packed_product
    monkeypatch.setattr(int8, "_packed_product", lambda x, *args: real(x, *args) * (1 if len(x) < 300 else 1.001))
    monkeypatch.setattr(int8, "_packing_answers_alike", functools.cache(int8._packing_answers_alike.__wrapped__))
    model = torch.nn.Sequential(torch.nn.Linear(64, 32))
    pack_fp32(model)
    assert not isinstance(model[0], Fp32PackedLinear)


def test_a_packed_fp32_layer_packs_again_when_the_thread_count_changes(monkeypatch):
    """MKL's packed copy follows the thread count it was packed under (one packed on one
    thread ran slower than the plain product on two): a layer made under one count and run
    under another packs its copy again, once, and answers as the plain product."""
    from bertkit.cpu import torch_threads
    from bertkit.modeldir.int8 import Fp32PackedLinear

    linear = torch.nn.Linear(48, 32)
    with torch_threads(1):
        layer = Fp32PackedLinear(linear, rows=64)
        first = layer.packed
        assert layer.packed_threads == 1 and first is not None
    x = torch.randn(7, 48)
    with torch_threads(2), torch.inference_mode():
        got = layer(x)
        assert layer.packed_threads == 2 and layer.packed is not first
        again = layer.packed
        layer(x)
        assert layer.packed is again  # packed once per change, not per call
    assert torch.allclose(got, torch.nn.functional.linear(x, linear.weight, linear.bias), atol=1e-5)


def test_packed_fp32_layers_answer_as_plain_ones_and_stay_linear_layers(tmp_path, monkeypatch):
    """An :class:`Fp32PackedLinear` runs few rows in inference mode on its packed copy (the
    same answers to rounding), more rows or a call with gradients on its plain weight (the
    same answers exactly); its state dict, deep copy and :func:`unpack_linears` are those of
    the ``nn.Linear`` it was made from; an input of no rows gives no rows."""
    import copy

    from bertkit.modeldir.int8 import FP32_PACK_ROWS, Fp32PackedLinear, pack_fp32, unpack_linears

    monkeypatch.setenv("BERTKIT_FP32_PACKED_ROWS", "6")
    model = load_model(make_task_model(tmp_path, "classify")).eval()
    plain = copy.deepcopy(model)
    pack_fp32(model)
    assert sum(isinstance(m, Fp32PackedLinear) for m in model.modules()) > 0
    state, expected_state = model.state_dict(), plain.state_dict()
    assert set(state) == set(expected_state) and all(torch.equal(state[k], expected_state[k]) for k in state)
    few, many = torch.tensor([[2, 5, 6, 7, 3]]), torch.tensor([[2, 5, 6, 7, 4, 9, 16, 3]])
    layer = model.bert.encoder.layer[0].intermediate.dense
    x = torch.randn(5, layer.in_features)
    with torch.inference_mode():
        for ids in (few, many):
            got, want = model(ids).logits, plain(ids).logits
            assert torch.allclose(got, want, atol=1e-5)
        x8 = torch.randn(8, layer.in_features)  # 8 rows > 6: the plain product
        assert torch.equal(layer(x8), torch.nn.functional.linear(x8, layer.weight, layer.bias))
        assert torch.allclose(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias), atol=1e-5)
        probe = Fp32PackedLinear(torch.nn.Linear(layer.in_features, 4), rows=6)  # which copy runs?
        probe.packed = torch.ops.mkl._mkl_reorder_linear_weight(torch.zeros(4, layer.in_features), FP32_PACK_ROWS)
        assert torch.equal(probe(x), probe.bias.expand(5, 4))  # 5 rows: the packed copy
        assert not torch.equal(probe(x8), probe.bias.expand(8, 4))  # 8 rows: the plain weight
        assert torch.equal(probe(x[:1]), probe.bias.expand(1, 4))  # one row: the packed copy too
        assert layer(torch.zeros(0, layer.in_features)).shape == (0, layer.out_features)
        assert torch.allclose(copy.deepcopy(model)(few).logits, model(few).logits, atol=1e-6)
    with torch.no_grad():  # gradients or not, outside inference mode: the plain weight
        assert not torch.equal(probe(x), probe.bias.expand(5, 4))
    unpack_linears(model)
    assert not any(isinstance(m, Fp32PackedLinear) for m in model.modules())
    with torch.inference_mode():
        assert torch.equal(model(few).logits, plain(few).logits)


def test_activations_keep_8_bits_where_the_cpu_has_vnni(tmp_path, cpu_class):
    """7-bit activations (reduce_range) only without VNNI (the AVX2 EPYC); with VNNI/AMX 8."""
    import bertkit.modeldir.int8 as int8

    model = quantize_int8(load_model(make_task_model(tmp_path, "classify")))
    layers = [m for m in model.modules() if isinstance(m, int8._dynamic_linear())]
    assert layers and {m.reduce_range for m in layers} == {cpu_class == "avx2"}
    save_int8(model, tmp_path / "int8")
    loaded = [m for m in load_model(tmp_path / "int8").modules() if isinstance(m, int8._dynamic_linear())]
    assert {m.reduce_range for m in loaded} == {cpu_class == "avx2"}


def test_the_tied_masked_lm_decoder_is_packed_lazily_and_stays_tied(tmp_path, monkeypatch):
    """A loaded fp32 masked-LM model's decoder runs on a packed copy made at its first product
    (none while only embeddings are asked for), its weight still the word embeddings' (in a
    deep copy too); fill-mask and SPLADE vectors answer as the plain head's, lone and batched."""
    import copy

    from bertkit.modeldir.int8 import Fp32PackedLinear

    monkeypatch.setenv("BERTKIT_FP32_PACKED_ROWS", "768")
    directory = make_task_model(tmp_path, "mlm")
    bert, plain = load(directory, precision="fp32"), load(directory, precision="fp32")
    plain.model.mlm_head.decoder = plain.model.mlm_head.decoder.as_linear()  # the head as built
    decoder = bert.model.mlm_head.decoder
    assert isinstance(decoder, Fp32PackedLinear) and decoder.packed is None
    assert decoder.weight is bert.model.bert.embeddings.word_embeddings.weight
    bert.embed(TEXTS)
    assert decoder.packed is None
    masked = ["the man [MASK] to the store .", "he is [MASK]", "she was [MASK] , the [MASK] was good !"]
    for texts in (masked, [masked[1]]):  # batched; a lone text with one [MASK] (one row)
        got = [c for text in bert.fill_mask(texts, top_k=3) for mask in text for c in mask]
        want = [c for text in plain.fill_mask(texts, top_k=3) for mask in text for c in mask]
        assert [c["token"] for c in got] == [c["token"] for c in want]
        np.testing.assert_allclose([c["score"] for c in got], [c["score"] for c in want], rtol=1e-4)
    assert decoder.packed is not None
    for got, want in zip(bert.embed_sparse(TEXTS), plain.embed_sparse(TEXTS)):
        assert [t["index"] for t in got] == [t["index"] for t in want]
        np.testing.assert_allclose([t["value"] for t in got], [t["value"] for t in want], atol=1e-5)
    twin = copy.deepcopy(bert.model)
    assert twin.mlm_head.decoder.weight is twin.bert.embeddings.word_embeddings.weight
    assert twin.mlm_head.decoder.weight is not decoder.weight and twin.mlm_head.decoder.lazy
    served = load(directory, precision="fp32")
    served.warm_up()  # what a server runs before its first request: the copy is made there
    assert served.model.mlm_head.decoder.packed is not None
