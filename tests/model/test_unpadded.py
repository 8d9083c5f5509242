"""Padding-free compute (``attention_impl="unpadded"``) equals the padded path in fp32 on the
real tokens: encoder outputs, pre-training losses and gradients (with the sparse last layer),
fine-tuning heads, inference - on tiny fixtures and on real SST-2 dev batches."""

from __future__ import annotations

import copy

import pytest
import torch

from bertkit.config import BertConfig
from bertkit.model import (
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)
from bertkit.model import unpadded as unpadded_module
from bertkit.model.unpadded import AttentionCost, CallCost, Packing, one_by_one

TOL = dict(rtol=1e-5, atol=1e-5)


def _config(**overrides) -> BertConfig:
    values = dict(vocab_size=60, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)
    return BertConfig(**{**values, **overrides})


def _batch(lengths, vocab=60, seed=0):
    """Right-padded random ids, two segments per row, mask 1 on the real tokens."""
    gen = torch.Generator().manual_seed(seed)
    longest = max(lengths)
    ids = torch.randint(5, vocab, (len(lengths), longest), generator=gen)
    mask = (torch.arange(longest)[None] < torch.tensor(lengths)[:, None]).long()
    types = ((torch.arange(longest)[None] >= (torch.tensor(lengths)[:, None] // 2)) & mask.bool()).long()
    return ids * mask, types, mask


def _pair(cls, config: BertConfig, **kwargs):
    """The same weights as a padded and as an unpadded model."""
    torch.manual_seed(0)
    padded = cls(config, **kwargs)
    unpadded = copy.deepcopy(padded)
    unpadded.config = BertConfig.from_dict({**config.to_dict(), "attention_impl": "unpadded"})
    for module in unpadded.modules():
        if hasattr(module, "config"):
            module.config = unpadded.config
    return padded, unpadded


def _grads(model) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _assert_same_grads(a, b):
    ga, gb = _grads(a), _grads(b)
    assert set(ga) == set(gb) and ga
    for name in ga:
        torch.testing.assert_close(gb[name], ga[name], **TOL, msg=name)


def test_packing_round_trip_and_offsets():
    _, _, mask = _batch([3, 5, 1])
    packing = Packing.from_mask(mask.bool())
    x = torch.arange(3 * 5, dtype=torch.float32).view(3, 5, 1)
    packed = packing.pack(x)
    assert packed.shape == (9, 1)
    torch.testing.assert_close(packing.unpack(packed), x * mask[..., None])
    assert packing.cu_seqlens().tolist() == [0, 3, 8, 9]


def test_spread_puts_each_token_in_place_and_a_real_token_at_padding():
    _, _, mask = _batch([3, 5, 1])
    mask = mask.bool()
    mask[2] = torch.tensor([False, False, True, False, False])  # a row that starts with padding
    packing = Packing.from_mask(mask)
    x = torch.arange(3 * 5, dtype=torch.float32).view(3, 5, 1) + 1
    spread = packing.spread(packing.pack(x))
    torch.testing.assert_close(spread[mask], x[mask])
    # padding reads the last real token before it in the batch: row 0's tail its last token,
    # row 2's leading padding row 1's last token
    assert spread[..., 0].tolist() == [[1, 2, 3, 3, 3], [6, 7, 8, 9, 10], [10, 10, 13, 13, 13]]


# call costs under which few heads attend in one padded call and many one sequence at a time
COSTS = AttentionCost(padded=CallCost(call=30.0, row=0.0, head=2.0, token=0.2, pair=0.01),
                      single=CallCost(call=40.0, row=0.0, head=1.0, token=0.2, pair=0.01))


def test_attention_goes_one_sequence_at_a_time_where_padding_costs_more_than_calls():
    lengths = [40, 5, 6, 22, 5, 24, 7, 23]
    # 8 calls: 8 x 40 + per head (8 x 1 + 132 tokens x 0.2 + 3,324 x 0.01) = 320 + 67.6 a head;
    # one call padded to 40: 30 + per head 8 x (2 + 40 x 0.2 + 1,600 x 0.01) = 30 + 208 a head
    assert not one_by_one(lengths, 1, COSTS)
    assert one_by_one(lengths, 12, COSTS)
    assert not one_by_one([9, 9, 8], 12, COSTS)  # little padding: one call
    packing = Packing.from_mask(_batch(lengths)[2].bool())
    assert packing.lengths == lengths and packing.offsets == [0, 40, 45, 51, 73, 78, 102, 109]
    assert packing.one_by_one(12, COSTS) and not packing.one_by_one(1, COSTS)


def test_attention_costs_are_read_for_the_inputs_dtype(monkeypatch):
    """A fit holds for the dtype it was measured in: fp32's costs never choose for bf16 inputs."""
    monkeypatch.setenv("BERTKIT_CPU_CLASS", "avx512-vnni")
    monkeypatch.setattr(unpadded_module, "ATTENTION_COST_BY_CLASS", {("avx512-vnni", "fp32"): COSTS})
    assert unpadded_module.attention_cost(torch.float32) is COSTS
    assert unpadded_module.attention_cost(torch.bfloat16) is None
    monkeypatch.setenv("BERTKIT_CPU_CLASS", "amx")
    assert unpadded_module.attention_cost(torch.float32) is None
    monkeypatch.setenv("BERTKIT_ATTENTION_ONE_BY_ONE", "0")
    monkeypatch.setenv("BERTKIT_CPU_CLASS", "avx512-vnni")
    assert unpadded_module.attention_cost(torch.float32) is None


@pytest.fixture
def costed_class(monkeypatch):
    """This CPU taken for the VNNI class, whose attention costs are :data:`COSTS`."""
    monkeypatch.setenv("BERTKIT_CPU_CLASS", "avx512-vnni")
    monkeypatch.setitem(unpadded_module.ATTENTION_COST_BY_CLASS, ("avx512-vnni", "fp32"), COSTS)


@pytest.mark.parametrize("heads, lengths, alone", [(16, [40, 5, 6, 22, 5, 24, 7, 23], True),
                                                   (16, [9, 9, 8], False), (1, [3, 30], False)])
def test_attention_one_sequence_at_a_time_equals_one_padded_call(costed_class, monkeypatch, heads, lengths, alone):
    padded, unpadded = _pair(BertModel, _config(hidden_size=64, num_attention_heads=heads))
    ids, types, mask = _batch(lengths)
    calls = []
    monkeypatch.setattr(unpadded_module, "_attention_one_by_one", lambda *args: calls.append(1) or _one_by_one(*args))
    chosen = unpadded.eval()(ids, types, mask).last_hidden_state
    assert len(calls) == (3 if alone else 0)  # a call per layer where one_by_one says so
    real = mask.bool()
    torch.testing.assert_close(chosen[real], padded.eval()(ids, types, mask).last_hidden_state[real], **TOL)
    monkeypatch.setenv("BERTKIT_ATTENTION_ONE_BY_ONE", "0")  # turned off: one padded call
    unpadded(ids, types, mask)
    assert len(calls) == (3 if alone else 0)
    monkeypatch.delenv("BERTKIT_ATTENTION_ONE_BY_ONE")
    monkeypatch.setenv("BERTKIT_CPU_CLASS", "amx")  # a class with no fitted costs: one padded call
    calls.clear()
    torch.testing.assert_close(unpadded(ids, types, mask).last_hidden_state, chosen, **TOL)
    assert not calls
    unpadded.train()  # training pads, whatever the class
    monkeypatch.setenv("BERTKIT_CPU_CLASS", "avx512-vnni")
    unpadded(ids, types, mask)
    assert not calls


_one_by_one = unpadded_module._attention_one_by_one


def test_config_option_is_saved_and_checked(tmp_path):
    config = _config(attention_impl="unpadded")
    config.to_json(tmp_path / "config.json")
    assert BertConfig.from_json(tmp_path / "config.json").attention_impl == "unpadded"
    assert BertConfig().attention_impl == "padded"
    with pytest.raises(ValueError, match="attention_impl"):
        _config(attention_impl="ragged")


@pytest.mark.parametrize("attention", ["bidirectional", "causal"])
def test_encoder_outputs_match_on_real_tokens(attention):
    padded, unpadded = _pair(BertModel, _config(attention=attention))
    ids, types, mask = _batch([7, 19, 1, 12, 19])
    a = padded.eval()(ids, types, mask, output_hidden_states=True)
    b = unpadded.eval()(ids, types, mask, output_hidden_states=True)
    real = mask.bool()
    torch.testing.assert_close(b.last_hidden_state[real], a.last_hidden_state[real], **TOL)
    assert b.last_hidden_state[~real].abs().max() == 0
    torch.testing.assert_close(b.pooled_output, a.pooled_output, **TOL)
    assert len(b.hidden_states) == len(a.hidden_states) == 4
    for x, y in zip(a.hidden_states, b.hidden_states):
        torch.testing.assert_close(y[real], x[real], **TOL)


def test_pretraining_losses_and_gradients_match_with_the_sparse_last_layer():
    padded, unpadded = _pair(BertForPreTraining, _config())
    ids, types, mask = _batch([9, 16, 4, 13], seed=1)
    labels = torch.full_like(ids, -100)
    for row, positions in enumerate([[1, 5], [2, 3, 14], [2], [7, 11]]):
        labels[row, positions] = ids[row, positions]
    nsp = torch.tensor([0, 1, 1, 0])
    outs = [m.train()(ids, types, mask, mlm_labels=labels, next_sentence_label=nsp)
            for m in (padded, unpadded)]
    for out in outs:
        out.loss.backward()
    for name in ("loss", "mlm_loss", "nsp_loss"):
        torch.testing.assert_close(getattr(outs[1], name), getattr(outs[0], name), **TOL)
    _assert_same_grads(padded, unpadded)


@pytest.mark.parametrize("cls, target", [
    (BertForSequenceClassification, "labels"),
    (BertForTokenClassification, "token_labels"),
    (BertForQuestionAnswering, "spans"),
])
def test_finetuning_heads_losses_and_gradients_match(cls, target):
    kwargs = {} if cls is BertForQuestionAnswering else {"num_labels": 3}
    padded, unpadded = _pair(cls, _config(), **kwargs)
    ids, types, mask = _batch([10, 3, 17, 8], seed=2)
    if target == "labels":
        extra = {"labels": torch.tensor([0, 2, 1, 1])}
    elif target == "token_labels":
        extra = {"labels": torch.where(mask.bool(), ids % 3, torch.full_like(ids, -100))}
    else:
        extra = {"start_positions": torch.tensor([1, 0, 5, 2]), "end_positions": torch.tensor([3, 1, 9, 6])}
    outs = [m.train()(ids, types, mask, **extra) for m in (padded, unpadded)]
    if target == "spans":
        # the span softmax runs over every position, padding included (as in Hugging Face
        # and Google's BERT), and padding logits differ by design: compare the real ones
        real = mask.bool()
        for name in ("start_logits", "end_logits"):
            torch.testing.assert_close(getattr(outs[1], name)[real], getattr(outs[0], name)[real], **TOL)
        return
    for out in outs:
        out.loss.backward()
    torch.testing.assert_close(outs[1].loss, outs[0].loss, **TOL)
    _assert_same_grads(padded, unpadded)


def test_no_padding_and_attention_probabilities_use_the_padded_path():
    padded, unpadded = _pair(BertModel, _config())
    ids, types, mask = _batch([6, 6])
    torch.testing.assert_close(unpadded.eval()(ids, types, mask).last_hidden_state,
                               padded.eval()(ids, types, mask).last_hidden_state)
    ids, types, mask = _batch([6, 2])
    out = unpadded(ids, types, mask, output_attentions=True)
    assert out.attentions is not None and len(out.attentions) == 3


def test_real_sst2_dev_batches_match(shared):
    from bertkit.checkpoint import load_pretrained
    from bertkit.tokenizer import BertTokenizer

    dev = shared("glue", "SST-2", "dev.tsv")
    vocab = shared("vocab", "bert-base-uncased-vocab.txt")
    tokenizer = BertTokenizer.from_file(vocab)
    sentences = [line.split("\t")[0] for line in dev.read_text(encoding="utf-8").splitlines()[1:97]]
    model_dir = shared("models", "bert-tiny-splade")
    with pytest.warns(UserWarning):  # the classifier head is new
        padded = load_pretrained(model_dir, BertForSequenceClassification, num_labels=2,
                                 config_overrides={"hidden_dropout_prob": 0.0,
                                                   "attention_probs_dropout_prob": 0.0})
    unpadded = copy.deepcopy(padded)
    for module in unpadded.modules():
        if hasattr(module, "config"):
            module.config = BertConfig.from_dict({**padded.config.to_dict(), "attention_impl": "unpadded"})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for start in range(0, len(sentences), 32):  # file order: lengths vary a lot per batch
            encodings = tokenizer.encode_batch(sentences[start:start + 32], padding="longest",
                                               max_length=128)
            ids = torch.tensor([e.input_ids for e in encodings])
            mask = torch.tensor([e.attention_mask for e in encodings])
            assert mask.float().mean() < 0.8  # real padding in the batch
            labels = torch.arange(len(encodings)) % 2
            outs = [m.train()(ids, None, mask, labels=labels, output_hidden_states=True)
                    for m in (padded, unpadded)]
            for out in outs:
                out.loss.backward()
            real = mask.bool()
            torch.testing.assert_close(outs[1].hidden_states[-1][real], outs[0].hidden_states[-1][real], **TOL)
            torch.testing.assert_close(outs[1].logits, outs[0].logits, **TOL)
            _assert_same_grads(padded, unpadded)
            padded.zero_grad()
            unpadded.zero_grad()
    finally:
        torch.set_num_threads(threads)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_bf16_unpadded_matches_padded():
    padded, unpadded = _pair(BertModel, _config())
    ids, types, mask = (t.cuda() for t in _batch([7, 19, 1, 12]))
    with torch.autocast("cuda", dtype=torch.bfloat16):
        a = padded.cuda().eval()(ids, types, mask).last_hidden_state.float()
        b = unpadded.cuda().eval()(ids, types, mask).last_hidden_state.float()
    real = mask.bool()
    torch.testing.assert_close(b[real], a[real], rtol=2e-2, atol=2e-2)
