"""Padding-free compute (``BertConfig.attention_impl = "unpadded"``; MosaicBERT's "unpadding").

A batch of variable-length sequences padded to T holds N <= B*T real tokens. Embeddings,
the q/k/v and output projections, the feed-forward network and every LayerNorm are
position-wise, so they run on the N packed real tokens only (a (N, H) matrix instead of
(B*T, H)): that is most of a layer's FLOPs at BERT's lengths. Attention mixes positions
within a sequence: its q/k/v rows are scattered back to (B, heads, T, d) for one
``scaled_dot_product_attention`` call with the key-padding mask (each sequence attends to its
own tokens only), and the context is packed again - or, on a GPU with the ``flash_attn``
package, ``flash_attn_varlen_func`` runs on the packed tokens directly. In inference on a CPU
class whose attention costs were measured (:data:`ATTENTION_COST_BY_CLASS`), each sequence
attends in a call of its own on its packed tokens where that costs less than padding every
sequence to the longest (:func:`one_by_one`): attention's work grows with the square of the
padded length, and a server's batch gathers requests of any length.

Contract: with the same weights, :func:`forward_unpadded` equals ``BertModel.forward`` on
the real tokens (float rounding; the tests hold it to 1e-5 in fp32); padding positions of
its (B, T, H) outputs are zeros instead of the padded path's unused values. Dropout draws
differ (other tensor shapes), so training runs agree in distribution, not bit for bit.
Attention probabilities (``output_attentions``) are computed by the padded path only.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import torch
import torch.nn.functional as F

from bertkit import cpu
from bertkit.model.attention import attend, build_attention_mask
from bertkit.model.encoder import EncoderLayer
from bertkit.model.outputs import ModelOutput
from bertkit.precision import DTYPE_PRECISIONS


@dataclass(frozen=True)
class Packing:
    """Where the real tokens of a (B, T) batch sit: ``indices`` (N,) into the flattened
    batch, in (row, position) order, so each sequence's tokens are contiguous."""

    indices: torch.Tensor
    batch: int
    length: int
    key_mask: torch.Tensor  # (B, T) bool, True for real tokens

    @classmethod
    def from_mask(cls, key_mask: torch.Tensor) -> Packing:
        batch, length = key_mask.shape
        indices = key_mask.reshape(-1).nonzero().squeeze(1)
        return cls(indices, batch, length, key_mask)

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, ...) -> (N, ...): the real tokens' rows."""
        return x.reshape(self.batch * self.length, *x.shape[2:]).index_select(0, self.indices)

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """(N, ...) -> (B, T, ...), zeros at padding."""
        out = x.new_zeros(self.batch * self.length, *x.shape[1:])
        return out.index_copy(0, self.indices, x).view(self.batch, self.length, *x.shape[1:])

    def spread(self, x: torch.Tensor) -> torch.Tensor:
        """(N, ...) -> (B, T, ...) for a consumer that masks the padding out: a padding position
        holds the last real token before it in the batch (any finite values would do). One
        gather, no zero fill and scatter: 3.3x faster than :meth:`unpack` on a BERT-Tiny
        server's 16 x 45 attention inputs (VNNI Xeon)."""
        return x.index_select(0, self._sources).view(self.batch, self.length, *x.shape[1:])

    def rows_at(self, positions: torch.Tensor) -> torch.Tensor:
        """(B, Q) positions of real tokens -> (B, Q) their rows in the packed tokens."""
        return self._sources.view(self.batch, self.length).gather(1, positions)

    @cached_property
    def _sources(self) -> torch.Tensor:
        """(B*T,) the packed row each position of the batch reads: its own, or for padding the
        last real token before it (the first one if none is)."""
        return (self.key_mask.reshape(-1).cumsum(0) - 1).clamp_(min=0)

    @cached_property
    def lengths(self) -> list[int]:
        """Each sequence's count of real tokens."""
        return self.key_mask.sum(1).tolist()

    def one_by_one(self, heads: int, cost: AttentionCost) -> bool:
        """:func:`one_by_one` for these sequences (decided once per packing, head count and
        cost: every layer of a pass shares it)."""
        key = (heads, cost)
        if key not in self._alone:
            self._alone[key] = one_by_one(self.lengths, heads, cost)
        return self._alone[key]

    @cached_property
    def _alone(self) -> dict:
        return {}

    @cached_property
    def offsets(self) -> list[int]:
        """Where each sequence's tokens start in the packed rows."""
        return [0, *itertools.accumulate(self.lengths)][:-1]

    def cu_seqlens(self) -> torch.Tensor:
        """int32 (B+1,) offsets of each sequence in the packed tokens (flash-attn's format)."""
        counts = self.key_mask.sum(1, dtype=torch.int32)
        return F.pad(counts.cumsum(0, dtype=torch.int32), (1, 0))


@dataclass(frozen=True)
class CallCost:
    """Microseconds of one CPU attention call on ``rows`` sequences padded to ``length`` tokens
    with ``heads`` heads, fitted on a CPU class (fp32, one thread):
    ``call + rows * (row + heads * (head + length * token + length**2 * pair))``."""

    call: float
    row: float
    head: float
    token: float
    pair: float

    def __call__(self, rows: int, length: int, heads: int) -> float:
        return self.call + rows * (self.row + heads * (self.head + length * self.token + length * length * self.pair))


@dataclass(frozen=True)
class AttentionCost:
    """Attention's two ways on the CPU: ``padded``, one call over the sequences gathered from
    the packed tokens and padded to the longest (the gather, the masked attention and the
    packing back), and ``single``, a call per sequence on its own packed tokens (no gather, no
    mask), priced per call with ``rows`` 1."""

    padded: CallCost
    single: CallCost


# Fitted per CPU class and dtype of the attention's inputs by bench/attention_calls.py (least
# squares on the relative error; the grid and what it saves are in docs/serving-results.md,
# "Attention one sequence at a time"). A (class, dtype) not measured makes one call per batch,
# padded to its longest sequence.
# * avx512-vnni, fp32: Intel Xeon @ 2.50GHz with VNNI, no native bf16 (2026-11-27); predictions
#   0.75-1.20x the measured time (10th-90th percentile, three fits). BERT-Base fp32, batches of 16 and 32
#   random SST-2 dev sentences: 0.94x and 0.93x the time of a pass; BERT-Tiny (2 heads): level.
ATTENTION_COST_BY_CLASS: dict[tuple[str, str], AttentionCost] = {
    ("avx512-vnni", "fp32"): AttentionCost(padded=CallCost(call=38.79, row=0.0, head=4.257, token=0.2089, pair=0.0044),
                                           single=CallCost(call=39.27, row=0.0, head=0.9776, token=0.2291, pair=0.0029)),
    # amx, bf16: Intel Xeon with AMX (2026-12-02); predictions 0.83-1.16x the measured time
    # (padded), 0.88-1.10x (single). A base-sized bf16 model, batches of 16 and 32 random SST-2
    # dev sentences unpadded: 0.96x and 0.84x the time of a pass (best of 3 rounds).
    ("amx", "bf16"): AttentionCost(padded=CallCost(call=18.17, row=0.0, head=1.7647, token=0.0448, pair=0.001),
                                   single=CallCost(call=15.6143, row=0.0, head=0.9107, token=0.0575, pair=0.0006)),
    # avx512-bf16, bf16: AMD EPYC with avx512_bf16 (2026-12-07; its padded call is the two-products
    # attention); predictions 0.78-1.15x the measured time (padded), 0.95-1.06x (single). A
    # base-sized bf16 model, batches of 4 / 16 / 32 random SST-2 dev sentences unpadded: 0.99x /
    # 0.97x / 0.97x the time of a pass (best of 3 rounds).
    ("avx512-bf16", "bf16"): AttentionCost(
        padded=CallCost(call=33.8735, row=1.0793, head=1.8914, token=0.0238, pair=0.0027),
        single=CallCost(call=15.091, row=0.0, head=1.3617, token=0.0944, pair=0.0034)),
}


def attention_cost(dtype: torch.dtype = torch.float32) -> AttentionCost | None:
    """This CPU class's fitted :class:`AttentionCost` for attention inputs of ``dtype``, or
    None where none was fitted or ``BERTKIT_ATTENTION_ONE_BY_ONE=0`` turns the choice off (one
    padded call always)."""
    if os.environ.get("BERTKIT_ATTENTION_ONE_BY_ONE", "").strip() == "0":
        return None
    name = str(dtype).removeprefix("torch.")
    return ATTENTION_COST_BY_CLASS.get((cpu.cpu_class(), DTYPE_PRECISIONS.get(name, name)))


def one_by_one(lengths: Sequence[int], heads: int, cost: AttentionCost) -> bool:
    """Whether attention over sequences of ``lengths`` costs less by ``cost`` as one call per
    sequence, each on its own packed tokens, than as one call padded to the longest."""
    alone = sum(cost.single(1, n, heads) for n in lengths)
    return alone < cost.padded(len(lengths), max(lengths), heads)


def embed_packed(embeddings, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None,
                 packing: Packing) -> torch.Tensor:
    """``BertEmbeddings`` on the real tokens only: (N, H)."""
    length = packing.length
    limit = embeddings.position_embeddings.num_embeddings
    if length > limit:
        raise ValueError(f"sequence length {length} exceeds max_position_embeddings {limit}; "
                         "truncate the input")
    ids = packing.pack(input_ids).long()
    positions = packing.indices % length
    if token_type_ids is None:
        segments = embeddings.token_type_embeddings.weight[0]
    else:
        segments = embeddings.token_type_embeddings(packing.pack(token_type_ids).long())
    summed = embeddings.word_embeddings(ids) + segments + embeddings.position_embeddings(positions)
    return embeddings.dropout(embeddings.LayerNorm(summed))


def _flash_varlen():
    try:
        from flash_attn import flash_attn_varlen_func
    except ImportError:
        return None
    return flash_attn_varlen_func


def _attention_packed(attention, hidden: torch.Tensor, packing: Packing,
                      mask: torch.Tensor | None) -> torch.Tensor:
    """Self-attention context (N, H) of packed ``hidden`` (N, H), per sequence."""
    heads, size = attention.num_heads, attention.head_size
    qkv = attention.qkv(hidden)  # (N, 3H)
    dropout = attention.dropout_prob if attention.training else 0.0
    flash = _flash_varlen() if hidden.is_cuda and qkv.dtype in (torch.float16, torch.bfloat16) else None
    if flash is not None:
        q, k, v = qkv.view(-1, 3, heads, size).unbind(1)
        cu = packing.cu_seqlens()
        longest = max(packing.lengths)
        context = flash(q, k, v, cu, cu, longest, longest, dropout_p=dropout, causal=attention.causal)
        return context.reshape(hidden.shape[0], heads * size)
    cost = attention_cost(qkv.dtype) if not (hidden.is_cuda or attention.training or attention.causal) else None
    if cost is not None and packing.one_by_one(heads, cost):
        return _attention_one_by_one(qkv, packing, heads, size)
    return _attention_padded(qkv, packing, mask, heads, size, dropout, attention.training, attention.causal)


def _attention_padded(qkv: torch.Tensor, packing: Packing, mask: torch.Tensor | None, heads: int, size: int,
                      dropout: float = 0.0, training: bool = False, causal: bool = False) -> torch.Tensor:
    """The context (N, heads * size) of packed ``qkv`` (N, 3 * heads * size): one attention call
    (:func:`~bertkit.model.attention.attend`), every sequence padded to the longest."""
    padded = packing.spread(qkv).view(packing.batch, packing.length, 3 * heads * size)
    return packing.pack(attend(padded, mask, heads, size, dropout, training, causal))


def _attention_one_by_one(qkv: torch.Tensor, packing: Packing, heads: int, size: int) -> torch.Tensor:
    """The context (N, heads * size) of packed ``qkv`` (N, 3 * heads * size): one
    ``scaled_dot_product_attention`` call per sequence on its own packed tokens (no padding,
    no mask; inference)."""
    out = qkv.new_empty(qkv.shape[0], heads * size)
    for start, length in zip(packing.offsets, packing.lengths):
        own = qkv[start:start + length].view(1, length, 3, heads, size)
        query, key, value = own.permute(2, 0, 3, 1, 4).unbind(0)
        context = F.scaled_dot_product_attention(query, key, value)
        out[start:start + length].view(1, length, heads, size).copy_(context.transpose(1, 2))
    return out


def layer_packed(layer: EncoderLayer, hidden: torch.Tensor, packing: Packing,
                 mask: torch.Tensor | None) -> torch.Tensor:
    """One encoder block on packed tokens: (N, H) -> (N, H) (``mask`` from
    :func:`~bertkit.model.attention.build_attention_mask`)."""
    context = _attention_packed(layer.attention.self, hidden, packing, mask)
    attended = layer.attention.output(context, hidden)
    return layer.output(layer.intermediate(attended), attended)


def encode_packed(bert, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None,
                  key_mask: torch.Tensor, num_layers: int | None = None,
                  output_hidden_states: bool = False):
    """Embeddings and the first ``num_layers`` (default all) layers of ``BertModel`` ``bert``
    on packed tokens: ``(packed (N, H), packing, hidden states (B, T, H) or None)``."""
    packing = Packing.from_mask(key_mask)
    mask = build_attention_mask(key_mask, packing.length, bert.encoder.causal)
    hidden = embed_packed(bert.embeddings, input_ids, token_type_ids, packing)
    states = [packing.unpack(hidden)] if output_hidden_states else None
    layers = bert.encoder.layer
    for layer in layers[: len(layers) if num_layers is None else num_layers]:
        hidden = layer_packed(layer, hidden, packing, mask)
        if states is not None:
            states.append(packing.unpack(hidden))
    return hidden, packing, tuple(states) if states is not None else None


def forward_unpadded(bert, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None,
                     key_mask: torch.Tensor, output_hidden_states: bool = False) -> ModelOutput:
    """``BertModel.forward``'s result computed on the real tokens only (see the module doc)."""
    hidden, packing, states = encode_packed(bert, input_ids, token_type_ids, key_mask,
                                            output_hidden_states=output_hidden_states)
    last = states[-1] if states is not None else packing.unpack(hidden)
    pooled = bert.pooler(last, key_mask) if bert.pooler is not None else None
    return ModelOutput(last_hidden_state=last, pooled_output=pooled, hidden_states=states)


def uses_unpadded(bert, key_mask: torch.Tensor | None, output_attentions: bool = False) -> bool:
    """Whether ``bert`` runs padding-free on this batch: the option is on, some token is
    padding, and no attention probabilities are asked for."""
    return (key_mask is not None and not output_attentions
            and getattr(bert.config, "attention_impl", "padded") == "unpadded")
