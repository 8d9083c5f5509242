"""The last encoder layer run only at the needed positions gives the full path's results."""

from __future__ import annotations

import pytest
import torch

from bertkit.config import BertConfig
from bertkit.model import BertForMaskedLM, BertForPreTraining, BertModel
from bertkit.model.sparse_last_layer import (
    encode_at_positions,
    labelled_positions,
    whole_projections,
)


def config(attention="bidirectional", layers=2, attention_impl="padded"):
    return BertConfig(vocab_size=50, hidden_size=24, num_hidden_layers=layers, num_attention_heads=3,
                      intermediate_size=40, max_position_embeddings=32, attention=attention,
                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, attention_impl=attention_impl)


def inputs(batch=4, length=20, seed=0, padded=True):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 50, (batch, length), generator=g)
    types = torch.zeros_like(ids)
    types[:, length // 2:] = 1
    mask = torch.ones_like(ids)
    if padded:
        mask[1, 15:] = 0
        mask[3, 9:] = 0
    labels = torch.full_like(ids, -100)
    for row, cols in enumerate([[1, 4, 7], [2, 3, 11, 14], [], [0, 5]]):
        labels[row, cols] = ids[row, cols]
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask, "mlm_labels": labels}


def losses_and_grads(model, batch, sparse):
    model.sparse_last_layer = sparse
    model.zero_grad(set_to_none=True)
    out = model(**batch)
    out.loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out, grads


@pytest.mark.parametrize("attention", ["bidirectional", "causal"])
@pytest.mark.parametrize("padded", [True, False])
@pytest.mark.parametrize("cls", [BertForPreTraining, BertForMaskedLM])
def test_sparse_last_layer_equals_full_path(cls, padded, attention):
    torch.manual_seed(0)
    model = cls(config(attention)).train()  # dropout 0: the two paths are deterministic
    batch = inputs(padded=padded)
    if cls is BertForPreTraining:
        batch["next_sentence_label"] = torch.tensor([0, 1, 1, 0])
    assert labelled_positions(batch["mlm_labels"], with_cls=cls is BertForPreTraining) is not None
    full, full_grads = losses_and_grads(model, batch, sparse=False)
    sparse, sparse_grads = losses_and_grads(model, batch, sparse=True)
    # a causal model with a pooler pools its last real token: it takes the full path
    sparse_used = not (cls is BertForPreTraining and attention == "causal")
    assert (sparse.last_hidden_state is None) == sparse_used and full.last_hidden_state is not None
    torch.testing.assert_close(sparse.loss, full.loss, rtol=0, atol=1e-6)
    torch.testing.assert_close(sparse.mlm_logits, full.mlm_logits, rtol=0, atol=1e-5)
    if cls is BertForPreTraining:
        torch.testing.assert_close(sparse.nsp_logits, full.nsp_logits, rtol=0, atol=1e-6)
        torch.testing.assert_close(sparse.nsp_loss, full.nsp_loss, rtol=0, atol=1e-6)
    assert sparse_grads.keys() == full_grads.keys()
    for name, grad in full_grads.items():
        torch.testing.assert_close(sparse_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("attention_impl", ["padded", "unpadded"])  # unpadded: keys and values packed
def test_encode_at_positions_gathers_the_full_output(attention_impl):
    torch.manual_seed(0)
    model = BertModel(config(layers=3, attention_impl=attention_impl)).eval()
    batch = inputs()
    positions = torch.tensor([[0, 3, 3], [14, 0, 2], [19, 18, 1], [0, 8, 0]])
    full = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    part = encode_at_positions(model, batch["input_ids"], batch["token_type_ids"], batch["attention_mask"],
                               positions)
    expected = full.last_hidden_state.gather(1, positions[..., None].expand(-1, -1, 24))
    assert part.last_hidden_state.shape == (4, 3, 24)
    torch.testing.assert_close(part.last_hidden_state, expected, rtol=0, atol=1e-5)
    # position 0 first in rows 0 and 3: the usual pooled output there
    torch.testing.assert_close(part.pooled_output[[0, 3]], full.pooled_output[[0, 3]], rtol=0, atol=1e-6)


def test_whole_projections_give_the_positions_the_same_output_from_whole_products(monkeypatch):
    """Within whole_projections (how static INT8 traces its [CLS] graph) the last layer's
    projections are one whole product of the fused layer over every position (the queries its
    rows there: a second call would be a second use of the weight, which inductor's INT8
    fusions leave in float), not row blocks of its weight; the output is the same, and outside
    it the row blocks are back."""
    torch.manual_seed(0)
    model = BertModel(config(layers=2)).eval()
    batch = inputs()
    args = (model, batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], torch.tensor([[0]] * 4))
    qkv = model.encoder.layer[-1].attention.self.qkv
    rows = []
    qkv.register_forward_hook(lambda module, x, out: rows.append(x[0].shape[:-1]))
    with torch.inference_mode():
        blocks = encode_at_positions(*args)
        assert rows == []  # its weight's row blocks: the layer itself is not called
        with whole_projections():
            whole = encode_at_positions(*args)
        assert rows == [(4, 20)]  # one call: every row's queries, keys and values
        encode_at_positions(*args)
    assert len(rows) == 1
    torch.testing.assert_close(whole.last_hidden_state, blocks.last_hidden_state, rtol=0, atol=1e-5)


def test_labelled_positions_order_padding_and_fallback():
    labels = torch.full((3, 10), -100)
    labels[0, [4, 1]] = 7
    labels[2, [9, 0, 5]] = 8
    positions, valid = labelled_positions(labels, with_cls=True)
    assert positions.tolist() == [[0, 1, 4, 0], [0, 0, 0, 0], [0, 0, 5, 9]]
    assert valid.tolist() == [[False, True, True, False], [False] * 4, [False, True, True, True]]
    assert labels[labels != -100].tolist() == labels.gather(1, positions)[valid].tolist()
    positions, valid = labelled_positions(labels, with_cls=False)
    assert positions.tolist() == [[1, 4, 0], [0, 0, 0], [0, 5, 9]]
    # most of the sequence labelled (the ltr objective) or nothing to compute: full path
    assert labelled_positions(torch.zeros(2, 10, dtype=torch.long), with_cls=True) is None
    assert labelled_positions(torch.full((2, 10), -100), with_cls=False) is None


def test_ltr_like_labels_take_the_full_path():
    torch.manual_seed(0)
    model = BertForMaskedLM(config("causal")).eval()
    batch = inputs()
    batch["mlm_labels"] = torch.roll(batch["input_ids"], -1, 1)
    out = model(**batch)
    assert out.last_hidden_state is not None and out.mlm_logits.shape == (80, 50)
