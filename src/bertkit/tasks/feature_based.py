"""Feature-based NER (paper section 5.3, table 7): a frozen BERT feeds a BiLSTM tagger.

Contract:

* the encoder's weights never change: every encoder parameter has
  ``requires_grad=False``, the encoder runs under ``torch.no_grad`` and stays in eval
  mode (no dropout) even when the tagger is put in training mode;
* the tagger reads the hidden states named by ``layers`` (indices into
  ``hidden_states`` = embedding output followed by every layer, so ``-1`` is the last
  layer and ``0`` the embeddings) and combines them with ``concat`` (feature size
  ``len(layers) * hidden``) or ``sum`` (``hidden``); then dropout, a bidirectional LSTM
  (``lstm_layers`` layers, ``lstm_hidden`` units per direction) and a linear layer give
  per-token logits; labels follow :mod:`bertkit.tasks.tagging` (``-100`` ignored);
* the encoder sits in ``.bert``, so ``save_pretrained`` writes its tensors under their
  Hugging Face names (the directory stays a loadable BERT) and the tagger's under
  ``lstm.*`` / ``classifier.*`` beside them; :func:`build_feature_based` reads either a
  pre-trained directory (fresh tagger) or such a saved one (trained tagger).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.model import BertModel, ModelOutput
from bertkit.tasks.tagging import IGNORE_INDEX

COMBINE_MODES = ("concat", "sum")
TAGGER_PARTS = ("lstm", "classifier")

__all__ = ["COMBINE_MODES", "FeatureBasedTagger", "build_feature_based", "parse_layers"]


def parse_layers(text: str | int | Sequence[int]) -> list[int]:
    """``"-1,-2,-3,-4"`` -> ``[-1, -2, -3, -4]`` (an int or a sequence of ints passes through)."""
    if isinstance(text, int):
        return [text]
    if not isinstance(text, str):
        return [int(x) for x in text]
    try:
        layers = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--feature-layers takes comma-separated integers, got {text!r}") from None
    if not layers:
        raise ValueError("--feature-layers names no layer")
    return layers


class FeatureBasedTagger(nn.Module):
    """Frozen ``encoder`` + BiLSTM tagger over chosen hidden layers (see module docstring)."""

    def __init__(self, encoder: BertModel, num_labels: int, layers: Sequence[int] = (-1, -2, -3, -4),
                 combine: str = "concat", lstm_hidden: int = 256, lstm_layers: int = 2,
                 dropout: float = 0.1):
        layers = parse_layers(layers)
        super().__init__()
        if combine not in COMBINE_MODES:
            raise ValueError(f"combine must be one of {COMBINE_MODES}, got {combine!r}")
        available = encoder.config.num_hidden_layers + 1
        bad = [i for i in layers if not -available <= i < available]
        if bad or len(set(i % available for i in layers)) != len(layers):
            raise ValueError(f"feature layers {list(layers)} must be distinct indices into the "
                             f"{available} hidden states (embeddings + {available - 1} layers; "
                             f"-1 = last layer)")
        self.bert = encoder.eval()
        for p in self.bert.parameters():
            p.requires_grad_(False)
        self.config = encoder.config
        self.num_labels = num_labels
        self.settings = {"layers": list(layers), "combine": combine, "lstm_hidden": lstm_hidden,
                         "lstm_layers": lstm_layers, "dropout": dropout}
        hidden = encoder.config.hidden_size
        width = hidden * len(layers) if combine == "concat" else hidden
        self.dropout = nn.Dropout(dropout)
        self.lstm = nn.LSTM(width, lstm_hidden, num_layers=lstm_layers, batch_first=True,
                            bidirectional=True, dropout=dropout if lstm_layers > 1 else 0.0)
        self.classifier = nn.Linear(2 * lstm_hidden, num_labels)

    def train(self, mode: bool = True) -> FeatureBasedTagger:
        """Train the tagger; the encoder stays in eval mode."""
        super().train(mode)
        self.bert.eval()
        return self

    def features(self, input_ids, token_type_ids=None, attention_mask=None) -> torch.Tensor:
        """The combined (B, T, width) hidden states of the frozen encoder."""
        with torch.no_grad():
            out = self.bert(input_ids, token_type_ids, attention_mask, output_hidden_states=True)
        chosen = [out.hidden_states[i] for i in self.settings["layers"]]
        return torch.cat(chosen, dim=-1) if self.settings["combine"] == "concat" else sum(chosen)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None,
                labels=None) -> ModelOutput:
        x = self.dropout(self.features(input_ids, token_type_ids, attention_mask))
        if attention_mask is not None:
            lengths = attention_mask.sum(-1).clamp(min=1).cpu()
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                       enforce_sorted=False)
            x, _ = self.lstm(packed)
            x, _ = nn.utils.rnn.pad_packed_sequence(x, batch_first=True,
                                                    total_length=input_ids.shape[1])
        else:
            x, _ = self.lstm(x)
        logits = self.classifier(self.dropout(x))
        out = ModelOutput(logits=logits)
        if labels is not None:
            out.loss = F.cross_entropy(logits.float().view(-1, self.num_labels), labels.view(-1),
                                       ignore_index=IGNORE_INDEX)
        return out


def build_feature_based(model_dir: str | Path, num_labels: int,
                        config_overrides: dict | None = None, **settings) -> FeatureBasedTagger:
    """The tagger on the encoder of ``model_dir``; tagger tensors found there (a directory this
    class was saved to) are loaded, otherwise the tagger starts freshly initialised.

    The tagger's dropout defaults to the (overridden) config's ``hidden_dropout_prob``.
    """
    from bertkit.checkpoint import load_pretrained, read_weights

    encoder = load_pretrained(model_dir, model_class=BertModel, config_overrides=config_overrides,
                              add_pooling_layer=False)
    settings.setdefault("dropout", encoder.config.hidden_dropout_prob)
    model = FeatureBasedTagger(encoder, num_labels, **settings)
    saved = {k: v for k, v in read_weights(model_dir).items() if k.split(".")[0] in TAGGER_PARTS}
    if saved:
        model.load_state_dict({**model.state_dict(), **saved})
    return model.eval()
