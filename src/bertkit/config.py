"""``BertConfig``: the hyper-parameters of a BERT network, presets, and ``config.json`` I/O.

The field names are the Hugging Face ``config.json`` names, so a bertkit ``config.json`` is
a Hugging Face one. Fields bertkit does not know are kept in ``extra`` and written back
unchanged; a missing field takes its default. ``attention`` ("bidirectional" or "causal")
is a bertkit extra that Hugging Face ignores, and so is ``attention_impl`` ("padded", or
"unpadded": the padding-free compute of :mod:`bertkit.model.unpadded`; same outputs).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertkit.errors import CheckpointError
from bertkit.fileio import atomic_write

ATTENTION_KINDS = ("bidirectional", "causal")
ATTENTION_IMPLS = ("padded", "unpadded")
UNPAD_MODES = ("auto", *ATTENTION_IMPLS)  # BertInference.unpad's choices (serve --attention-impl)

# The label value every loss ignores (positions with nothing to predict), Hugging Face's
# convention; MLM labels, token-task labels and the ltr targets all use it.
IGNORE_INDEX = -100
# the hidden_act names a config may hold (bertkit.model.encoder maps each to its function)
ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish")

# name -> (layers, hidden, heads); intermediate size is 4 x hidden.
PRESETS: dict[str, tuple[int, int, int]] = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}


_INT_MINIMUM = {"vocab_size": 1, "hidden_size": 1, "num_hidden_layers": 0,
                "num_attention_heads": 1, "intermediate_size": 1, "max_position_embeddings": 1,
                "type_vocab_size": 0}


@dataclass
class BertConfig:
    """Shape and regularisation of a BERT network (defaults: BERT-Base, uncased vocabulary)."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    attention: str = "bidirectional"
    attention_impl: str = "padded"
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._check_values()
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not a multiple of "
                f"num_attention_heads {self.num_attention_heads}"
            )
        if self.attention not in ATTENTION_KINDS:
            raise ValueError(f"attention must be one of {ATTENTION_KINDS}, got {self.attention!r}")
        if self.attention_impl not in ATTENTION_IMPLS:
            raise ValueError(f"attention_impl must be one of {ATTENTION_IMPLS}, "
                             f"got {self.attention_impl!r}")

    def _check_values(self) -> None:
        """Types and ranges of the shape and dropout fields: a wrong value is named here, not
        found later as a 0-layer model or a cryptic message from deep inside torch."""
        for name, low in _INT_MINIMUM.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
            if value < low:
                raise ValueError(f"{name} must be at least {low}, got {value}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value < 1:
                raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"unsupported hidden_act {self.hidden_act!r}; choose from "
                             f"{', '.join(ACTIVATIONS)}")

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> BertConfig:
        """A paper-sized configuration: tiny mini small medium base large."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
        layers, hidden, heads = PRESETS[name]
        values = dict(
            num_hidden_layers=layers,
            hidden_size=hidden,
            num_attention_heads=heads,
            intermediate_size=4 * hidden,
        )
        values.update(overrides)
        return cls(**values)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls) if f.name != "extra"]

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> BertConfig:
        """Known fields set the config; every other key is kept in ``extra``."""
        known = set(cls.field_names())
        kwargs = {k: v for k, v in values.items() if k in known}
        extra = {k: v for k, v in values.items() if k not in known}
        return cls(**kwargs, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        """Hugging Face ``config.json`` content: known fields, kept extras, ``model_type``."""
        values: dict[str, Any] = {"model_type": "bert"}
        values.update(self.extra)
        values.update({name: getattr(self, name) for name in self.field_names()})
        return values

    @classmethod
    def from_json(cls, path: str | Path) -> BertConfig:
        path = Path(path)
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as e:
            raise CheckpointError(f"{path}: not a readable JSON config ({e})") from None
        if not isinstance(values, dict):
            raise CheckpointError(f"{path}: a config.json must hold a JSON object")
        model_type = values.get("model_type", "bert")
        if model_type != "bert":
            raise CheckpointError(f"{path}: model_type is {model_type!r}, not a BERT config")
        try:
            return cls.from_dict(values)
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{path}: invalid BERT config ({e})") from None

    def to_json(self, path: str | Path) -> None:
        with atomic_write(path) as f:
            json.dump(self.to_dict(), f, indent=2, sort_keys=True)
            f.write("\n")

    def num_parameters(self, with_pooler: bool = True) -> int:
        """Parameters of the encoder (embeddings + layers [+ pooler]); heads not counted."""
        h, i = self.hidden_size, self.intermediate_size
        embeddings = (self.vocab_size + self.max_position_embeddings + self.type_vocab_size) * h + 2 * h
        attention = 4 * (h * h + h) + 2 * h
        feed_forward = (h * i + i) + (i * h + h) + 2 * h
        pooler = h * h + h if with_pooler else 0
        # a pruned head (config.json pruned_heads) takes its q/k/v rows and output columns along
        d = self.head_size
        pruned = sum(len(heads) for heads in (self.extra.get("pruned_heads") or {}).values())
        return (embeddings + self.num_hidden_layers * (attention + feed_forward) + pooler
                - pruned * (4 * h * d + 3 * d))
