"""The task models: ``BertModel`` plus an output head each (paper sections 3.1 and 4, figure 4).

Each model keeps the encoder in ``.bert``, returns logits in a :class:`ModelOutput` and,
given labels, the loss:

* ``BertForPreTraining``: masked LM + next sentence prediction (``loss = mlm + nsp``).
* ``BertForMaskedLM``: masked LM only.
* ``BertForSequenceClassification``: ``[CLS]`` pooled -> num_labels (1 = regression, MSE).
* ``BertForTokenClassification``: every token -> num_labels (labels -100 ignored).
* ``BertForQuestionAnswering``: every token -> start and end logits.
* ``BertForMultipleChoice``: inputs (B, C, T); one score per choice, softmax over choices.

Masked-LM contract: with ``mlm_labels`` (B, T) (-100 = not predicted), only the labelled
positions go through transform + vocabulary projection, and ``mlm_logits`` is (N, V) in the
order of ``mlm_labels[mlm_labels != -100]``; without labels ``mlm_logits`` is (B, T, V).

With ``mlm_labels`` and no hidden states or attentions asked for, the last encoder layer also
runs only where its output is read (the labelled positions, plus ``[CLS]`` for the NSP head),
see :mod:`bertkit.model.sparse_last_layer`; ``last_hidden_state`` is then ``None``. When the
labels cover most of the sequence (the ``ltr`` objective labels every position) the full
path runs instead. ``sparse_last_layer = False`` on the model turns this off.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.config import IGNORE_INDEX, BertConfig
from bertkit.model.bert import BertModel, BertPreTrainedModel
from bertkit.model.encoder import activation
from bertkit.model.outputs import ModelOutput
from bertkit.model.sparse_last_layer import encode_at_positions, encode_cls, labelled_positions


class MaskedLMHead(nn.Module):
    """dense + activation + LayerNorm, then the decoder tied to the word embeddings + bias."""

    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = activation(config.hidden_act)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.decoder.weight = word_embeddings.weight  # tied: one tensor, trained by both
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        transformed = self.LayerNorm(self.act(self.dense(hidden)))
        if type(self.decoder) is nn.Linear:  # as built and trained: one product with the bias
            return F.linear(transformed, self.decoder.weight, self.bias)
        return self.decoder(transformed) + self.bias  # a decoder a loader replaced (an fp32 packed copy)


def masked_lm(head: MaskedLMHead, sequence_output: torch.Tensor, mlm_labels: torch.Tensor | None):
    """``(logits, loss)`` of the masked LM; gathers labelled positions before the head."""
    if mlm_labels is None:
        return head(sequence_output), None
    selected = mlm_labels != IGNORE_INDEX
    return _mlm_loss(head, sequence_output[selected], mlm_labels[selected])


def _mlm_loss(head: MaskedLMHead, hidden: torch.Tensor, targets: torch.Tensor):
    logits = head(hidden)
    if targets.numel() == 0:
        return logits, logits.sum() * 0.0
    return logits, F.cross_entropy(logits.float(), targets.long())


def _encode_and_predict(model, input_ids, token_type_ids, attention_mask, mlm_labels,
                        output_hidden_states, output_attentions):
    """``(encoder output, mlm_logits, mlm_loss)`` of a masked-LM model (``.bert``,
    ``.mlm_head``); the last layer runs at the labelled positions (and ``[CLS]`` when the model
    has a pooler) only, when that is allowed and pays (see the module docstring)."""
    sparse = None
    pooler = model.bert.pooler
    # a causal model pools its last real token, which the labelled positions need not hold
    if (mlm_labels is not None and model.sparse_last_layer and not (output_hidden_states or output_attentions)
            and not (pooler is not None and pooler.causal)):
        sparse = labelled_positions(mlm_labels, with_cls=pooler is not None)
    if sparse is None:
        out = model.bert(input_ids, token_type_ids, attention_mask, output_hidden_states, output_attentions)
        return (out, *masked_lm(model.mlm_head, out.last_hidden_state, mlm_labels))
    positions, valid = sparse
    out = encode_at_positions(model.bert, input_ids, token_type_ids, attention_mask, positions)
    hidden, out.last_hidden_state = out.last_hidden_state, None
    return (out, *_mlm_loss(model.mlm_head, hidden[valid], mlm_labels[mlm_labels != IGNORE_INDEX]))


def _sum_losses(*losses: torch.Tensor | None) -> torch.Tensor | None:
    present = [loss for loss in losses if loss is not None]
    return sum(present[1:], present[0]) if present else None


class BertForPreTraining(BertPreTrainedModel):
    """BERT's pre-training model: masked LM head and next-sentence (IsNext) head."""

    pipeline = "fill-mask"  # the Hugging Face pipeline its head answers

    sparse_last_layer = True  # last layer at the labelled positions + [CLS] only (see above)

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=True)
        self.mlm_head = MaskedLMHead(config, self.bert.embeddings.word_embeddings)
        self.nsp_head = nn.Linear(config.hidden_size, 2)
        self.mlm_head.apply(self._init_module)
        self.nsp_head.apply(self._init_module)
        nn.init.zeros_(self.mlm_head.bias)

    def forward(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        mlm_labels=None,
        next_sentence_label=None,
        output_hidden_states=False,
        output_attentions=False,
    ) -> ModelOutput:
        out, mlm_logits, mlm_loss = _encode_and_predict(
            self, input_ids, token_type_ids, attention_mask, mlm_labels, output_hidden_states, output_attentions
        )
        nsp_logits = self.nsp_head(out.pooled_output)
        nsp_loss = None
        if next_sentence_label is not None:
            nsp_loss = F.cross_entropy(nsp_logits.float(), next_sentence_label.reshape(-1).long())
        out.mlm_logits, out.nsp_logits = mlm_logits, nsp_logits
        out.mlm_loss, out.nsp_loss = mlm_loss, nsp_loss
        out.loss = _sum_losses(mlm_loss, nsp_loss)
        return out


class BertForMaskedLM(BertPreTrainedModel):
    """Masked LM only (no pooler, no NSP); ``logits`` is the same tensor as ``mlm_logits``."""

    pipeline = "fill-mask"  # the Hugging Face pipeline its head answers

    sparse_last_layer = True  # last layer at the labelled positions only (see above)

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.mlm_head = MaskedLMHead(config, self.bert.embeddings.word_embeddings)
        self.mlm_head.apply(self._init_module)
        nn.init.zeros_(self.mlm_head.bias)

    def forward(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        mlm_labels=None,
        output_hidden_states=False,
        output_attentions=False,
    ) -> ModelOutput:
        out, out.mlm_logits, out.mlm_loss = _encode_and_predict(
            self, input_ids, token_type_ids, attention_mask, mlm_labels, output_hidden_states, output_attentions
        )
        out.logits, out.loss = out.mlm_logits, out.mlm_loss
        return out


def _labels_from_config(config: BertConfig, num_labels: int | None, default: int = 2) -> int:
    if num_labels is not None:
        return num_labels
    id2label = config.extra.get("id2label")
    return len(id2label) if id2label else default


class _ClassifierModel(BertPreTrainedModel):
    """The shape shared by the classification heads: encoder -> dropout -> linear ``classifier``.

    ``pooled`` heads read the pooled ``[CLS]`` vector, the others every token's vector.
    """

    pooled = True

    def __init__(self, config: BertConfig, num_outputs: int):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=self.pooled)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, num_outputs)
        self.classifier.apply(self._init_module)

    def _scores(self, input_ids, token_type_ids, attention_mask, output_hidden_states,
                output_attentions) -> ModelOutput:
        out = self.bert(input_ids, token_type_ids, attention_mask, output_hidden_states, output_attentions)
        features = out.pooled_output if self.pooled else out.last_hidden_state
        out.logits = self.classifier(self.dropout(features))
        return out

    def _pooled_logits(self, input_ids, token_type_ids, attention_mask) -> torch.Tensor:
        """(B, outputs) logits of a pooled head over (B, T) inputs, for inference: the last
        layer at ``[CLS]`` only, the one position the pooler reads, where
        :func:`~bertkit.model.sparse_last_layer.encode_cls` answers; else the whole pass."""
        out = encode_cls(self.bert, input_ids, token_type_ids, attention_mask)
        if out is None:
            return self._scores(input_ids, token_type_ids, attention_mask, False, False).logits
        return self.classifier(self.dropout(out.pooled_output))


class BertForSequenceClassification(_ClassifierModel):
    """Pooled ``[CLS]`` -> dropout -> linear; ``num_labels == 1`` means regression (MSE).

    ``num_labels`` defaults to the size of ``id2label`` in the config, else 2.
    """

    pipeline = "text-classification"  # the Hugging Face pipeline its head answers

    def __init__(self, config: BertConfig, num_labels: int | None = None):
        self.num_labels = _labels_from_config(config, num_labels)
        super().__init__(config, self.num_labels)

    def forward(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        labels=None,
        output_hidden_states=False,
        output_attentions=False,
    ) -> ModelOutput:
        out = self._scores(input_ids, token_type_ids, attention_mask, output_hidden_states, output_attentions)
        if labels is not None:
            if self.num_labels == 1:
                out.loss = F.mse_loss(out.logits.float().squeeze(-1), labels.float().view(-1))
            else:
                out.loss = F.cross_entropy(out.logits.float(), labels.reshape(-1).long())
        return out

    def head_logits(self, input_ids, token_type_ids=None, attention_mask=None) -> torch.Tensor:
        """``forward(...).logits`` alone (within float rounding), for inference
        (:meth:`_pooled_logits`: the last layer at ``[CLS]`` only where that pays)."""
        return self._pooled_logits(input_ids, token_type_ids, attention_mask)


class BertForTokenClassification(_ClassifierModel):
    """Every token's final hidden vector -> dropout -> linear (e.g. NER tags)."""

    pipeline = "token-classification"  # the Hugging Face pipeline its head answers

    pooled = False

    def __init__(self, config: BertConfig, num_labels: int | None = None):
        self.num_labels = _labels_from_config(config, num_labels)
        super().__init__(config, self.num_labels)

    def forward(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        labels=None,
        output_hidden_states=False,
        output_attentions=False,
    ) -> ModelOutput:
        out = self._scores(input_ids, token_type_ids, attention_mask, output_hidden_states, output_attentions)
        if labels is not None:
            out.loss = F.cross_entropy(
                out.logits.float().view(-1, self.num_labels), labels.reshape(-1).long(), ignore_index=IGNORE_INDEX
            )
        return out


class BertForQuestionAnswering(BertPreTrainedModel):
    """Span extraction: a start vector S and end vector E dotted with every token (sec. 4.2).

    Loss = mean of the start and end cross-entropies; positions outside the sequence
    (e.g. an answer truncated away) are ignored.
    """

    pipeline = "question-answering"  # the Hugging Face pipeline its head answers

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.qa_outputs.apply(self._init_module)

    def forward(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        start_positions=None,
        end_positions=None,
        output_hidden_states=False,
        output_attentions=False,
    ) -> ModelOutput:
        out = self.bert(input_ids, token_type_ids, attention_mask, output_hidden_states, output_attentions)
        start_logits, end_logits = self.qa_outputs(out.last_hidden_state).unbind(-1)
        out.start_logits, out.end_logits = start_logits, end_logits
        if start_positions is not None and end_positions is not None:
            length = start_logits.shape[1]

            def span_loss(logits, positions):
                positions = positions.reshape(-1).long()
                outside = (positions < 0) | (positions >= length)
                positions = positions.masked_fill(outside, IGNORE_INDEX)
                return F.cross_entropy(logits.float(), positions, ignore_index=IGNORE_INDEX)

            out.loss = (span_loss(start_logits, start_positions) + span_loss(end_logits, end_positions)) / 2
        return out


class BertForMultipleChoice(_ClassifierModel):
    """Inputs (B, C, T): each choice encoded on its own, pooled ``[CLS]`` -> one score.

    ``logits`` is (B, C); ``labels`` (B,) index the right choice (softmax over choices).
    """

    pipeline = "multiple-choice"  # the Hugging Face pipeline its head answers

    def __init__(self, config: BertConfig):
        super().__init__(config, 1)

    def forward(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        labels=None,
        output_hidden_states=False,
        output_attentions=False,
    ) -> ModelOutput:
        batch, choices, length = input_ids.shape

        def flat(t):
            return None if t is None else t.reshape(batch * choices, length)

        out = self._scores(
            flat(input_ids), flat(token_type_ids), flat(attention_mask), output_hidden_states, output_attentions
        )
        out.logits = out.logits.view(batch, choices)
        if labels is not None:
            out.loss = F.cross_entropy(out.logits.float(), labels.reshape(-1).long())
        return out

    def head_logits(self, input_ids, token_type_ids=None, attention_mask=None) -> torch.Tensor:
        """(B, C) ``forward(...).logits`` alone (within float rounding), for inference: every
        choice's row through :meth:`_pooled_logits` (its last layer at ``[CLS]`` only where that pays)."""
        batch, choices, length = input_ids.shape

        def flat(t):
            return None if t is None else t.reshape(batch * choices, length)

        return self._pooled_logits(flat(input_ids), flat(token_type_ids), flat(attention_mask)).view(batch, choices)


TASK_MODELS = {
    cls.__name__: cls
    for cls in (
        BertModel,
        BertForPreTraining,
        BertForMaskedLM,
        BertForSequenceClassification,
        BertForTokenClassification,
        BertForQuestionAnswering,
        BertForMultipleChoice,
    )
}
