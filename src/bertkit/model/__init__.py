"""The BERT network and its heads (see docs/model.md and docs/design.md)."""

from bertkit.model.bert import BertModel, BertPooler, BertPreTrainedModel
from bertkit.model.outputs import ModelOutput
from bertkit.model.task_models import (
    TASK_MODELS,
    BertForMaskedLM,
    BertForMultipleChoice,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)

__all__ = [
    "TASK_MODELS",
    "BertForMaskedLM",
    "BertForMultipleChoice",
    "BertForPreTraining",
    "BertForQuestionAnswering",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertModel",
    "BertPooler",
    "BertPreTrainedModel",
    "ModelOutput",
]
