"""Settings of ``bertkit pretrain``: one dataclass, filled from defaults, then a YAML/TOML
file, then command-line flags (later wins).

Contract: ``PretrainConfig.from_dict(values, source)`` accepts exactly the field names below
(dashes may stand for underscores) and raises :class:`~bertkit.errors.BertkitError` naming
any unknown field; ``load_config_file(path)`` reads ``.yaml``/``.yml``/``.toml`` into a dict
(a ``[pretrain]`` table / ``pretrain:`` mapping is unwrapped). ``validate()`` checks values.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertkit.config import PRESETS
from bertkit.errors import BertkitError
from bertkit.options import check_config, option, option_of
from bertkit.precision import HELP as PRECISION_HELP
from bertkit.precision import TRAINING as TRAINING_PRECISIONS
from bertkit.tokenizer.settings import TokenizerOptions

OBJECTIVES = ("mlm+nsp", "mlm", "ltr")


@dataclass
class PretrainConfig:
    """Every setting of a pre-training run; each field declares its flag, help and range
    (:func:`bertkit.options.option`), which the CLI, the config file and :meth:`validate` share."""

    data: str | None = option(None, "pre-training data directory (bertkit pretrain-data)")
    out: str | None = option(None, "run directory: log.jsonl, checkpoints/, model/")
    vocab: str | None = option(None, "vocab.txt the data was made with (exported with the model)")
    lowercase: bool | None = option_of(TokenizerOptions, "lowercase")
    strip_accents: bool | None = option_of(TokenizerOptions, "strip_accents")
    eval_data: str | None = option(None, "held-out pre-training data for periodic evaluation")
    model_size: str = option("tiny", "preset model size", choices=tuple(PRESETS))
    model_config: str | None = option(None, "model config.json (instead of --model-size)")
    init_from: str | None = option(
        None, "start from these weights only: a model directory or a run directory (phase 2)")
    objective: str = option("mlm+nsp", "mlm+nsp (BERT), mlm (no NSP) or ltr (left-to-right LM, "
                                       "causal mask)", choices=OBJECTIVES)
    dropout: float | None = option(None, "override hidden and attention dropout", ge=0, lt=1)
    attention_impl: str | None = option(None, "padded, or unpadded: compute on the real tokens "
                                              "only (default: the model's, else padded)",
                                        choices=("padded", "unpadded"))
    steps: int = option(1000, "total optimizer steps (ignored with --budget, which plans them)", ge=1)
    batch_size: int = option(32, "micro-batch size per process", ge=1)
    grad_accum: int = option(1, "micro-batches per optimizer step (global batch = batch x accum "
                                "x processes)", ge=1)
    lr: float = option(1e-4, "peak learning rate (paper: 1e-4)", ge=0)
    warmup_steps: int | None = option(None, "warm-up steps (default: --warmup-fraction of --steps)",
                                      ge=0)
    warmup_fraction: float = option(0.01, "warm-up share of the steps when --warmup-steps is not "
                                          "given (paper: 1%)", ge=0, lt=1)
    weight_decay: float = option(0.01, "AdamW weight decay (not on biases and LayerNorm)", ge=0)
    adam_eps: float = option(1e-6, "AdamW epsilon (BERT: 1e-6)", gt=0)
    max_grad_norm: float = option(1.0, "gradient clipping norm", gt=0)
    optimizer: str = option("auto", "AdamW kernel: auto (fused when possible), fused, foreach, plain",
                            choices=("auto", "fused", "foreach", "plain"))
    precision: str = option("auto", f"autocast precision ({PRECISION_HELP}; the resolved choice "
                                    "is logged and saved)", choices=TRAINING_PRECISIONS)
    compile: bool = option(False, "torch.compile the model")
    device: str = option("auto", "auto, cpu, cuda")
    dynamic_masking: bool | None = option(
        None, "draw masks per epoch at load time (default: as the data was made)")
    mask_rate: float | None = option(
        None, "masked-LM rate drawn at load time (dynamic masking), e.g. 0.15 (paper) or 0.3-0.4; "
              "default: the data's own masks and rate", gt=0, lt=1)
    max_predictions: int | None = option(
        None, "most masked positions per sequence with --mask-rate (default: the data's, raised "
              "to ceil(rate x sequence length))", ge=1)
    budget: str | None = option(
        None, "wall-clock budget, e.g. 1h, 90m, 3600s: measures the step time, then fixes --steps "
              "to fit (once more from the run's own pace after 5% of them) and stops at the "
              "deadline (docs/pretraining.md)")
    seed: int = option(0, "seed of initialisation, data order and dynamic masks", ge=0)
    log_every: int = option(10, "log every N steps", ge=1)
    save_every: int = option(500, "checkpoint every N steps (and at the end)", ge=1)
    keep: int = option(3, "checkpoints kept", ge=1)
    eval_every: int = option(0, "evaluate on --eval-data every N steps (0: at the end only)", ge=0)
    eval_batches: int = option(20, "batches per evaluation", ge=1)
    resume: bool = option(False, "continue from the newest checkpoint in --out")
    tensorboard: bool = option(False, "also write TensorBoard scalars (if installed)")
    progress: bool | None = option(None, "progress bar on stderr (default: only on a terminal)")

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls, values: dict[str, Any], source: str = "config") -> PretrainConfig:
        known = set(cls.field_names())
        normal = {str(k).replace("-", "_"): v for k, v in values.items()}
        unknown = sorted(set(normal) - known)
        if unknown:
            raise BertkitError(
                f"{source}: unknown field {', '.join(repr(u) for u in unknown)} "
                f"(known fields: {', '.join(sorted(known))})"
            )
        hints = typing.get_type_hints(cls)
        for name, value in normal.items():
            normal[name] = _checked(name, value, hints[name], source)
        return cls(**normal)

    def merged(self, values: dict[str, Any], source: str = "flags") -> PretrainConfig:
        """A copy with ``values`` (same rules as :meth:`from_dict`) laid over this config."""
        return PretrainConfig.from_dict({**dataclasses.asdict(self), **values}, source)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def validate(self) -> PretrainConfig:
        for name in ("data", "out"):
            if not getattr(self, name):
                raise BertkitError(f"missing setting {name!r} (--{name} or in the config file)")
        self._validate_recipe()  # before the ranges: its messages say more about these knobs
        check_config(self, "pretrain")
        if self.warmup_steps is not None and self.budget is None and not 0 <= self.warmup_steps <= self.steps:
            raise BertkitError(f"warmup_steps must lie in 0..steps ({self.steps}), got {self.warmup_steps}")
        return self

    def _validate_recipe(self) -> None:
        """The budget and masking knobs (issue 11): clear errors before any work."""
        if self.budget is not None:
            from bertkit.pretraining.budget import parse_budget

            parse_budget(self.budget)
        if self.mask_rate is not None:
            if not 0.0 < self.mask_rate < 1.0:
                raise BertkitError(f"mask_rate must lie strictly between 0 and 1, got {self.mask_rate}")
            if self.dynamic_masking is False:
                raise BertkitError("mask_rate draws masks at load time: it cannot be combined "
                                   "with --no-dynamic-masking")
            if self.objective == "ltr":
                raise BertkitError("mask_rate has no effect with objective ltr (it masks nothing)")
        elif self.max_predictions is not None:
            raise BertkitError("max_predictions applies to masks drawn with --mask-rate: give one")
        if self.max_predictions is not None and self.max_predictions < 1:
            raise BertkitError(f"max_predictions must be >= 1, got {self.max_predictions}")


_KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _checked(name: str, value: Any, hint: Any, source: str) -> Any:
    """``value`` as the field's type (an int where a float is expected is fine)."""
    kinds = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
    kind = kinds[0]
    if value is None and type(None) in typing.get_args(hint):
        return None
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    if kind is str and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise BertkitError(f"{source}: field {name!r} must be {_KINDS[kind]}, got {value!r}")


def load_config_file(path: str | Path) -> dict[str, Any]:
    """The settings dict of a ``.yaml``/``.yml``/``.toml`` run configuration file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".toml":
            import tomllib

            values = tomllib.loads(text)
        elif path.suffix in (".yaml", ".yml"):
            import yaml

            values = yaml.safe_load(text) or {}
        else:
            raise BertkitError(f"{path}: a run configuration must be .yaml, .yml or .toml")
    except (ValueError, ImportError) as e:  # yaml.YAMLError and TOMLDecodeError are ValueErrors
        raise BertkitError(f"{path}: not a readable configuration ({e})") from None
    except Exception as e:
        if type(e).__module__.startswith("yaml"):
            raise BertkitError(f"{path}: not a readable configuration ({e})") from None
        raise
    if not isinstance(values, dict):
        raise BertkitError(f"{path}: a configuration must be a mapping of field: value")
    if set(values) == {"pretrain"} and isinstance(values["pretrain"], dict):
        values = values["pretrain"]
    return values
