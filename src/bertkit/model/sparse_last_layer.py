"""The sparse last layer: the one home of a speed-up for pre-training and inference (the rest
of the model reads like the paper).

A head reads the last encoder layer at a few positions only: the masked-LM head at the
labelled positions, the NSP head and a sentence classifier's pooler at ``[CLS]``. Every
position still serves as key and value of the last layer's attention, but its queries,
attention output, feed-forward and LayerNorms need to run at those positions alone; about a quarter of a BERT-Base step's
encoder work for 20 of 128 positions. :func:`encode_at_positions` runs the encoder that way:
all layers but the last as usual, then :func:`layer_at_positions` for the last one. The
result equals (within float rounding) the full output gathered at the positions. A
padding-free model (:mod:`bertkit.model.unpadded`) takes the last layer's keys and values from
its packed real tokens too. Pre-training uses it, and in inference what reads ``[CLS]`` alone
(``BertForSequenceClassification.head_logits``, ``cls``-pooled embeddings) through
:func:`encode_cls`, where :func:`cls_pays` says so or a quantised route has a ``[CLS]`` graph
of its own (static INT8): a BERT-Tiny SST-2 classifier's batches of 16 random dev sentences
0.70x the time (half its layers are the last one).

:func:`labelled_positions` chooses the positions from MLM labels and declines (``None``)
where the full layer is as cheap: when the labels cover most of the sequence (the ``ltr``
objective labels every position) or nothing needs computing.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bertkit import cpu
from bertkit.config import IGNORE_INDEX
from bertkit.model.attention import MultiHeadSelfAttention, ThreadSwitch
from bertkit.model.encoder import EncoderLayer
from bertkit.model.outputs import ModelOutput

# run the last layer at the selected positions only while they are at most this share of T
SPARSE_LAST_LAYER_MAX_SHARE = 0.5
# a classifier's last layer at [CLS] only for a batch of at least this many other positions:
# below it the few rows left save less than the extra operator calls cost (a lone SST-2
# sentence of 21-37 tokens: BERT-Tiny 1.04-1.06x the time, BERT-Base 0.98-1.00x; from 57
# tokens 0.95-0.97x both; batches of 16 sentences BERT-Tiny 0.70x; VNNI Xeon, fp32, 2026-11-27)
SPARSE_CLS_MIN_POSITIONS = 48


def cls_pays(bert, input_ids: torch.Tensor) -> bool:
    """Whether an inference pass of ``bert`` (a ``BertModel``) that reads ``[CLS]`` alone (a
    classifier's pooler, a ``cls``-pooled embedding) runs its last layer there only
    (:func:`encode_at_positions`): on the encoder's own forward pass (not a compiled or
    quantised route put in its place, which computes every position), not causal (a causal
    model pools its last token), for a batch of :data:`SPARSE_CLS_MIN_POSITIONS` other
    positions, and where the last layer's products give a row the same numbers whatever rows
    are computed beside it: in fp32 (``nn.Linear`` layers of fp32 weights, as loaded or packed
    for MKL, outside autocast), and in bf16 (autocast on the CPU; ``nn.Linear`` or a product
    whose ``dtype`` says bf16, as the engine's packed bf16 layers) on the CPU classes measured
    so (:func:`bertkit.cpu.bf16_rows_alone`). Dynamic INT8 computes every position: its activation scale
    is the batch's."""
    layers = bert.encoder.layer
    if ("forward" in vars(bert) or bert.encoder.causal or not len(layers)
            or input_ids.numel() - input_ids.shape[0] < SPARSE_CLS_MIN_POSITIONS):
        return False
    last = layers[-1]
    products = (last.attention.self.qkv, last.attention.output.dense, last.intermediate.dense,
                last.output.dense)
    device = input_ids.device.type
    if not torch.is_autocast_enabled(device):
        return all(isinstance(p, nn.Linear) and p.weight.dtype is torch.float32 for p in products)
    if (device != "cpu" or torch.get_autocast_dtype("cpu") is not torch.bfloat16
            or not cpu.bf16_rows_alone()):
        return False
    return all(isinstance(p, nn.Linear) or getattr(p, "dtype", None) is torch.bfloat16 for p in products)


def encode_cls(bert, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None,
               attention_mask: torch.Tensor | None) -> ModelOutput | None:
    """``bert``'s output at ``[CLS]`` alone (``last_hidden_state`` (B, 1, H), ``pooled_output``)
    for an inference pass that reads nothing else, its last layer computed there only; None
    where the whole pass is to run instead. A route put in place of the encoder's forward pass
    that has a ``[CLS]`` graph of its own answers through it (``bert.bertkit_encode_cls``:
    static INT8, :mod:`bertkit.inference.static_int8`); the encoder's own pass where
    :func:`cls_pays`."""
    routed = getattr(bert, "bertkit_encode_cls", None)
    if routed is not None:
        return routed(input_ids, token_type_ids, attention_mask)
    if not cls_pays(bert, input_ids):
        return None
    return encode_at_positions(bert, input_ids, token_type_ids, attention_mask, at_cls(input_ids))


def at_cls(input_ids: torch.Tensor) -> torch.Tensor:
    """(B, 1) positions of each row's ``[CLS]`` (position 0), for :func:`encode_at_positions`."""
    return input_ids.new_zeros(input_ids.shape[0], 1)


def labelled_positions(mlm_labels: torch.Tensor, with_cls: bool):
    """``(positions (B, Q), valid (B, Q) bool)`` of the labelled positions of each row, in
    order, padded with position 0 (``valid`` False there); with ``with_cls`` every row starts
    with position 0 (``[CLS]``, ``valid`` False too). ``None`` when Q would exceed
    ``SPARSE_LAST_LAYER_MAX_SHARE`` of the sequence, or when nothing is labelled and no
    ``[CLS]`` is needed: the full last layer is then as cheap or cheaper."""
    batch, length = mlm_labels.shape
    selected = mlm_labels != IGNORE_INDEX
    counts = selected.sum(1)
    most = int(counts.max()) if batch else 0  # a host sync on a GPU, like the boolean indexing
    queries = most + int(with_cls)
    if queries == 0 or queries > SPARSE_LAST_LAYER_MAX_SHARE * length:
        return None
    # a stable sort puts each row's labelled positions first, in increasing order
    order = torch.sort(selected.to(torch.uint8), dim=1, descending=True, stable=True).indices[:, :most]
    valid = torch.arange(most, device=mlm_labels.device) < counts[:, None]
    positions = order.masked_fill(~valid, 0)
    if with_cls:
        positions = F.pad(positions, (1, 0))
        valid = F.pad(valid, (1, 0))
    return positions, valid


def gather_positions(hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """``hidden[b, positions[b, i]]`` for every ``b, i``: (B, T, H), (B, Q) -> (B, Q, H)."""
    batch, length, width = hidden.shape
    offsets = torch.arange(0, batch * length, length, device=positions.device)
    flat = (positions + offsets[:, None]).reshape(-1)
    return hidden.reshape(batch * length, width).index_select(0, flat).view(batch, -1, width)


def query_mask(key_mask: torch.Tensor | None, length: int, causal: bool,
               positions: torch.Tensor) -> torch.Tensor | None:
    """The attention mask of queries at ``positions`` (B, Q) only, broadcastable to
    (B, heads, Q, T); explicit when causal (the triangle depends on the positions)."""
    if not causal:
        return None if key_mask is None else key_mask[:, None, None, :]
    keys = torch.arange(length, device=positions.device)
    mask = (keys <= positions[:, :, None])[:, None]  # (B, 1, Q, T)
    return mask if key_mask is None else mask & key_mask[:, None, None, :]


_WHOLE = ThreadSwitch()


def whole_projections():
    """Within it (in this thread), the layer at positions computes its query, key and value
    projections as one whole product over every position (``qkv(hidden)``, the queries its rows
    at the positions), not by row blocks of the fused weight: a sliced weight is no parameter to
    a quantiser, which would leave those products in float (static INT8 traces its ``[CLS]``
    graph so; the positions' keys and values are computed and not read)."""
    return _WHOLE.within()


def _attention_at(attention: MultiHeadSelfAttention, hidden: torch.Tensor, queries: torch.Tensor, select,
                  mask: torch.Tensor | None, packing=None) -> torch.Tensor:
    """Context (B, Q, H) of ``queries`` (B, Q, H) attending over ``hidden``: (B, T, H), or the
    packed real tokens (N, H) of ``packing`` (a :class:`~bertkit.model.unpadded.Packing`);
    ``select`` picks the query rows of any tensor laid out as ``hidden`` (``queries`` is
    ``select(hidden)``)."""
    heads, size = attention.num_heads, attention.head_size
    width = heads * size  # the hidden size, less any pruned heads
    layer = attention.qkv
    if type(layer) is nn.Linear and not _WHOLE.on:  # row blocks: views, no copy
        kv = F.linear(hidden, layer.weight[width:], layer.bias[width:])
        query = F.linear(queries, layer.weight[:width], layer.bias[:width])
    else:  # a layer packed or quantised for inference computes as a whole, on its own kernels:
        # one product over every position (a second call on the query rows would be a second
        # use of the weight, which inductor's INT8 fusion then leaves in float)
        qkv = layer(hidden)
        kv, query = qkv[..., width:], select(qkv)[..., :width]
    if packing is not None:  # keys and values of the real tokens, spread to (B, T, 2 * width)
        kv = packing.spread(kv)
    batch, length = kv.shape[:2]
    key, value = kv.view(batch, length, 2, heads, size).permute(2, 0, 3, 1, 4).unbind(0)
    count = query.shape[1]
    query = query.reshape(batch, count, heads, size).transpose(1, 2)
    context = F.scaled_dot_product_attention(
        query, key, value, attn_mask=mask,
        dropout_p=attention.dropout_prob if attention.training else 0.0)
    return context.transpose(1, 2).reshape(batch, count, width)


def layer_at_positions(layer: EncoderLayer, hidden: torch.Tensor, mask: torch.Tensor | None,
                       positions: torch.Tensor, packing=None) -> torch.Tensor:
    """``layer``'s output at ``positions`` only, (B, Q, H): keys and values at every position,
    the rest at the Q positions (``mask`` from :func:`query_mask`). ``hidden``: (B, T, H), or
    the packed real tokens (N, H) of ``packing`` (positions then name real tokens)."""
    if packing is None:
        def select(rows: torch.Tensor) -> torch.Tensor:
            return gather_positions(rows, positions)
    else:
        def select(rows: torch.Tensor) -> torch.Tensor:
            return rows.index_select(0, packing.rows_at(positions).reshape(-1)).view(*positions.shape, -1)
    selected = select(hidden)  # queries and residual
    attended = layer.attention.output(_attention_at(layer.attention.self, hidden, selected, select, mask, packing),
                                      selected)
    return layer.output(layer.intermediate(attended), attended)


def encode_at_positions(bert, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None,
                        attention_mask: torch.Tensor | None, positions: torch.Tensor) -> ModelOutput:
    """``BertModel`` ``bert``'s output at ``positions`` (B, Q) of each sequence only:
    ``last_hidden_state`` (B, Q, H), ``last_hidden_state[b, i]`` being the full output at
    ``positions[b, i]``; the pooler reads ``last_hidden_state[:, 0]``, so put position 0
    (``[CLS]``) first for the usual ``pooled_output``. Padding-free models
    (:mod:`bertkit.model.unpadded`) run every layer but the last on the real tokens only."""
    from bertkit.model.bert import key_padding_mask
    from bertkit.model.unpadded import encode_packed, uses_unpadded

    key_mask = key_padding_mask(attention_mask)
    layers, causal, length = bert.encoder.layer, bert.encoder.causal, input_ids.shape[1]
    packing = None
    if uses_unpadded(bert, key_mask):
        hidden, packing, _ = encode_packed(bert, input_ids, token_type_ids, key_mask,
                                           num_layers=max(0, len(layers) - 1))
    else:  # the encoder's own loop, all layers but the last
        hidden = bert.encoder(bert.embeddings(input_ids, token_type_ids), key_mask,
                              num_layers=max(0, len(layers) - 1))[0]
    if len(layers) == 0:
        last = gather_positions(hidden if packing is None else packing.unpack(hidden), positions)
    else:
        last = layer_at_positions(layers[-1], hidden, query_mask(key_mask, length, causal, positions), positions,
                                  packing)
    # a causal model pools its last real token, which the positions need not hold: no summary
    pooled = bert.pooler(last) if bert.pooler is not None and not causal else None
    return ModelOutput(last_hidden_state=last, pooled_output=pooled)
