"""Tiny random task models saved as model directories (for the inference, precision, ONNX and
server tests): 2 layers, width 16, the tiny vocabulary of ``tests/conftest.py``."""

from __future__ import annotations

from pathlib import Path

import torch

from bertkit.checkpoint import save_pretrained
from bertkit.config import BertConfig
from bertkit.model import (
    BertForMaskedLM,
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from bertkit.precision import BF16_MIN_HIDDEN
from bertkit.tokenizer import BertTokenizer

from .conftest import TINY_VOCAB

WIDE = BF16_MIN_HIDDEN["inference"]  # the narrowest width auto runs in bf16 where it is native
LABELS = {
    "classify": ["negative", "positive", "neutral"],
    "pair": ["0", "1"],  # MRPC's labels
    "regression": ["LABEL_0"],
    "tagging": ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"],
    "sst2": ["0", "1"],
    "ner": ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-ORG", "I-PER"],  # CoNLL-2003
}


def make_task_model(root: Path, kind: str, seed: int = 0, max_positions: int = 64,
                    hidden: int = 16, layers: int = 2) -> Path:
    """Save a tiny random model of ``kind`` (classify, pair, regression, tagging, qa, squad2,
    choice, mlm; sst2 and ner: fine-tuned for those tasks, as pair/regression/qa/squad2 are)
    under ``root/kind`` with its tokenizer; returns the directory. ``hidden``/``layers``: a
    wider model (:data:`WIDE`: where ``auto`` picks bf16 on a CPU with native bf16)."""
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(TINY_VOCAB) + "\n", encoding="utf-8")
    tok = BertTokenizer.from_file(vocab)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=layers,
                     num_attention_heads=2, intermediate_size=2 * hidden,
                     max_position_embeddings=max_positions)
    labels = LABELS.get(kind)
    extra = {}
    if labels:
        cfg.extra["id2label"] = {str(i): name for i, name in enumerate(labels)}
    task = {"pair": "mrpc", "regression": "stsb", "squad2": "squad2", "qa": "squad", "sst2": "sst2",
            "ner": "ner"}.get(kind)
    if task:
        # SQuAD's windows must fit in 48 tokens, as fine-tuning would have checked
        options = {"max_query_length": 16, "doc_stride": 12} if task.startswith("squad") else {}
        extra["bertkit_finetune"] = {"task": task, "options": options, "max_seq_length": 48}
    torch.manual_seed(seed)
    model = {
        "classify": BertForSequenceClassification, "pair": BertForSequenceClassification,
        "regression": BertForSequenceClassification, "tagging": BertForTokenClassification,
        "qa": BertForQuestionAnswering, "squad2": BertForQuestionAnswering,
        "choice": BertForMultipleChoice, "mlm": BertForMaskedLM, "sst2": BertForSequenceClassification,
        "ner": BertForTokenClassification,
    }[kind](cfg)
    with torch.no_grad():  # larger random weights: the outputs differ clearly between inputs
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3 * (16 / hidden) ** 0.5)
    return save_pretrained(model, root / kind, tokenizer=tok, extra_config=extra)
