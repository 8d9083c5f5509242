"""Heads: logits shapes, losses, the masked-LM gather contract, weight tying."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bertkit.config import BertConfig
from bertkit.cpu import BF16_ROWS_ALONE_CLASSES, CPU_CLASS_ENV, CPU_CLASSES
from bertkit.model import (
    BertForMaskedLM,
    BertForMultipleChoice,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    sparse_last_layer,
)
from bertkit.model.sparse_last_layer import cls_pays, encode_at_positions
from bertkit.modeldir.int8 import Fp32PackedLinear, can_pack_fp32

CFG = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                 intermediate_size=32, max_position_embeddings=16)


def batch(b=3, t=6):
    g = torch.Generator().manual_seed(0)
    return torch.randint(5, 40, (b, t), generator=g)


def test_pretraining_gathers_labelled_positions_before_the_vocabulary():
    torch.manual_seed(0)
    model = BertForPreTraining(CFG).eval()
    ids = batch()
    labels = torch.full_like(ids, -100)
    labels[0, 1], labels[2, 4], labels[2, 0] = 7, 9, 11
    out = model(ids, mlm_labels=labels, next_sentence_label=torch.tensor([0, 1, 1]))
    full = model(ids)
    assert out.mlm_logits.shape == (3, 40) and full.mlm_logits.shape == (3, 6, 40)
    selected = labels != -100
    assert torch.allclose(out.mlm_logits, full.mlm_logits[selected], atol=1e-6)
    expected_mlm = F.cross_entropy(full.mlm_logits[selected], labels[selected])
    expected_nsp = F.cross_entropy(full.nsp_logits, torch.tensor([0, 1, 1]))
    assert torch.allclose(out.mlm_loss, expected_mlm, atol=1e-6)
    assert torch.allclose(out.loss, expected_mlm + expected_nsp, atol=1e-6)
    assert out.nsp_logits.shape == (3, 2)


def test_decoder_is_tied_to_word_embeddings():
    model = BertForMaskedLM(CFG)
    assert model.mlm_head.decoder.weight is model.bert.embeddings.word_embeddings.weight
    ids = batch()
    labels = ids.clone()
    model(ids, mlm_labels=labels).loss.backward()
    assert model.bert.embeddings.word_embeddings.weight.grad is not None
    assert model.bert.pooler is None


def test_masked_lm_without_labelled_positions_has_zero_loss():
    model = BertForMaskedLM(CFG)
    out = model(batch(), mlm_labels=torch.full((3, 6), -100))
    assert out.logits.shape == (0, 40) and out.loss.item() == 0.0


def test_sequence_classification_and_regression():
    ids = batch()
    cls = BertForSequenceClassification(CFG, num_labels=3).eval()
    out = cls(ids, labels=torch.tensor([0, 2, 1]))
    assert out.logits.shape == (3, 3)
    assert torch.allclose(out.loss, F.cross_entropy(out.logits, torch.tensor([0, 2, 1])))
    reg = BertForSequenceClassification(CFG, num_labels=1).eval()
    out = reg(ids, labels=torch.tensor([0.5, 1.0, 2.0]))
    assert out.logits.shape == (3, 1)
    assert torch.allclose(out.loss, F.mse_loss(out.logits.squeeze(-1), torch.tensor([0.5, 1.0, 2.0])))


@pytest.mark.parametrize("attention_impl", ["padded", "unpadded"])
def test_head_logits_run_the_last_layer_at_cls_only_and_equal_the_full_pass(monkeypatch, attention_impl):
    from bertkit.model.sparse_last_layer import SPARSE_CLS_MIN_POSITIONS

    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=48, max_position_embeddings=64, attention_impl=attention_impl)
    torch.manual_seed(0)
    model = BertForSequenceClassification(config, num_labels=3).eval()
    ids = torch.randint(5, 50, (4, 30))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    mask[3, 20:] = 0
    sparse = []
    monkeypatch.setattr(sparse_last_layer, "encode_at_positions",
                        lambda *args: sparse.append(args[-1].tolist()) or encode_at_positions(*args))
    with torch.inference_mode():
        full = model(ids, None, mask).logits
        torch.testing.assert_close(model.head_logits(ids, None, mask), full, rtol=1e-5, atol=1e-6)
        assert sparse == [[[0]] * 4]  # every row's [CLS] alone
        # a lone input too short for the last layer's other rows to outweigh the extra calls
        short = ids[:1, :SPARSE_CLS_MIN_POSITIONS]
        torch.testing.assert_close(model.head_logits(short), model(short).logits, rtol=1e-5, atol=1e-6)
        assert len(sparse) == 1
        # an encoder routed elsewhere (compiled, static INT8) computes every position: its forward runs
        routed = []
        own = model.bert.forward
        model.bert.forward = lambda *args, **kwargs: routed.append(1) or own(*args, **kwargs)
        torch.testing.assert_close(model.head_logits(ids, None, mask), full)
        assert routed == [1] and len(sparse) == 1


@pytest.mark.parametrize("klass", CPU_CLASSES)
@pytest.mark.parametrize("stored", ["fp32 weights", "bf16 packed"])
def test_bf16_head_logits_read_cls_alone_on_the_classes_measured_to_agree(monkeypatch, klass, stored):
    from bertkit.modeldir.int8 import prepare

    monkeypatch.setenv(CPU_CLASS_ENV, klass)
    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=48, max_position_embeddings=64)
    torch.manual_seed(0)
    model = BertForSequenceClassification(config, num_labels=3).eval()
    if stored == "bf16 packed":
        prepare(model, "bf16")
    ids = torch.randint(5, 50, (4, 30))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    sparse = []
    monkeypatch.setattr(sparse_last_layer, "encode_at_positions",
                        lambda *args: sparse.append(1) or encode_at_positions(*args))
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        cls_only = model.head_logits(ids, None, mask)
        full = model(ids, None, mask).logits
    assert sparse == ([1] if klass in BF16_ROWS_ALONE_CLASSES else [])
    torch.testing.assert_close(cls_only.float(), full.float(), rtol=0.02, atol=0.02)  # bf16 ulps at most
    with torch.inference_mode():  # dynamic INT8 computes every position: its scale is the batch's
        assert not cls_pays(prepare(BertForSequenceClassification(config, num_labels=3).eval(), "int8").bert, ids)


def test_multiple_choice_head_logits_score_each_choice_at_its_cls(monkeypatch):
    """(B, C, T) inputs: every choice's row runs its last layer at ``[CLS]`` only, as one
    batch of B x C rows, with the logits of the full pass."""

    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=48, max_position_embeddings=64, attention_impl="unpadded")
    torch.manual_seed(0)
    model = BertForMultipleChoice(config).eval()
    ids, types = torch.randint(5, 50, (2, 3, 20)), torch.zeros(2, 3, 20, dtype=torch.long)
    types[..., 12:] = 1
    mask = torch.ones_like(ids)
    mask[0, 1, 9:] = 0
    positions = []
    monkeypatch.setattr(sparse_last_layer, "encode_at_positions",
                        lambda *args: positions.append(args[-1].shape) or encode_at_positions(*args))
    with torch.inference_mode():
        full = model(ids, types, mask).logits
        got = model.head_logits(ids, types, mask)
    assert got.shape == (2, 3) and positions == [(6, 1)]
    torch.testing.assert_close(got, full, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not can_pack_fp32(), reason="needs a PyTorch with MKL")
def test_head_logits_on_layers_packed_for_inference():
    """A layer packed for MKL (or quantised) computes its fused q/k/v as a whole."""
    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=48, max_position_embeddings=64, attention_impl="unpadded")
    torch.manual_seed(0)
    model = BertForSequenceClassification(config, num_labels=2).eval()
    ids = torch.randint(5, 50, (3, 40))
    mask = torch.ones_like(ids)
    mask[0, 11:] = 0
    with torch.inference_mode():
        full = model(ids, None, mask).logits
        for layer in model.bert.encoder.layer:
            layer.attention.self.qkv = Fp32PackedLinear(layer.attention.self.qkv, 768)
        torch.testing.assert_close(model.head_logits(ids, None, mask), full, rtol=1e-5, atol=1e-5)


def test_num_labels_defaults_to_config_id2label():
    cfg = BertConfig.from_dict({**CFG.to_dict(), "id2label": {"0": "a", "1": "b", "2": "c", "3": "d"}})
    assert BertForSequenceClassification(cfg).num_labels == 4
    assert BertForTokenClassification(CFG).num_labels == 2


def test_token_classification_ignores_minus_100():
    model = BertForTokenClassification(CFG, num_labels=5).eval()
    labels = torch.full((3, 6), -100)
    labels[:, 1:3] = 2
    out = model(batch(), labels=labels)
    assert out.logits.shape == (3, 6, 5)
    expected = F.cross_entropy(out.logits[:, 1:3].reshape(-1, 5), labels[:, 1:3].reshape(-1))
    assert torch.allclose(out.loss, expected, atol=1e-6)


def test_question_answering_span_loss():
    model = BertForQuestionAnswering(CFG).eval()
    out = model(batch(), start_positions=torch.tensor([1, 2, 3]), end_positions=torch.tensor([2, 2, 99]))
    assert out.start_logits.shape == out.end_logits.shape == (3, 6)
    start = F.cross_entropy(out.start_logits, torch.tensor([1, 2, 3]))
    end = F.cross_entropy(out.end_logits[:2], torch.tensor([2, 2]))  # 99 is outside: ignored
    assert torch.allclose(out.loss, (start + end) / 2, atol=1e-6)


def test_multiple_choice_scores_each_choice():
    model = BertForMultipleChoice(CFG).eval()
    ids = torch.randint(5, 40, (2, 4, 6))
    out = model(ids, attention_mask=torch.ones_like(ids), labels=torch.tensor([3, 0]))
    assert out.logits.shape == (2, 4)
    single = model(ids[1:, 2:3]).logits
    assert torch.allclose(single[0, 0], out.logits[1, 2], atol=1e-5)
    assert torch.allclose(out.loss, F.cross_entropy(out.logits, torch.tensor([3, 0])))


@pytest.mark.parametrize("cls", [BertForPreTraining, BertForSequenceClassification])
def test_training_step_reduces_loss(cls):
    torch.manual_seed(0)
    model = cls(CFG)
    ids = batch()
    kwargs = {"mlm_labels": ids.clone(), "next_sentence_label": torch.tensor([0, 1, 0])} \
        if cls is BertForPreTraining else {"labels": torch.tensor([0, 1, 0])}
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    first = None
    for _ in range(5):
        loss = model(ids, **kwargs).loss
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < first


def test_narrow_integer_inputs_from_memory_mapped_data():
    """The pre-training data stores int32 ids, int8 segments and int32/int64 labels."""
    model = BertForPreTraining(CFG).eval()
    ids = batch()
    labels = torch.full_like(ids, -100)
    labels[:, 2] = 9
    out = model(ids.to(torch.int32), token_type_ids=torch.zeros_like(ids, dtype=torch.int8),
                attention_mask=torch.ones_like(ids, dtype=torch.int8), mlm_labels=labels.to(torch.int32),
                next_sentence_label=torch.tensor([0, 1, 0], dtype=torch.int32))
    ref = model(ids, torch.zeros_like(ids), torch.ones_like(ids), mlm_labels=labels,
                next_sentence_label=torch.tensor([0, 1, 0]))
    assert torch.allclose(out.loss, ref.loss)
