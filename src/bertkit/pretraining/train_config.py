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

from bertkit.errors import BertkitError

OBJECTIVES = ("mlm+nsp", "mlm", "ltr")


@dataclass
class PretrainConfig:
    """Every setting of a pre-training run (``help`` metadata feeds the CLI)."""

    data: str | None = None
    out: str | None = None
    vocab: str | None = None
    lowercase: bool | None = None
    eval_data: str | None = None
    model_size: str = "tiny"
    model_config: str | None = None
    init_from: str | None = None
    objective: str = "mlm+nsp"
    dropout: float | None = None
    steps: int = 1000
    batch_size: int = 32
    grad_accum: int = 1
    lr: float = 1e-4
    warmup_steps: int | None = None
    warmup_fraction: float = 0.01
    weight_decay: float = 0.01
    adam_eps: float = 1e-6
    max_grad_norm: float = 1.0
    optimizer: str = "auto"
    precision: str = "auto"
    compile: bool = False
    device: str = "auto"
    dynamic_masking: bool | None = None
    mask_rate: float | None = None
    max_predictions: int | None = None
    budget: str | None = None
    seed: int = 0
    log_every: int = 10
    save_every: int = 500
    keep: int = 3
    eval_every: int = 0
    eval_batches: int = 20
    resume: bool = False
    tensorboard: bool = False
    progress: bool | None = None  # None: bars only on a terminal

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
        if self.objective not in OBJECTIVES:
            raise BertkitError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        for name in ("steps", "batch_size", "grad_accum", "log_every", "save_every", "keep"):
            if int(getattr(self, name)) < 1:
                raise BertkitError(f"{name} must be >= 1, got {getattr(self, name)}")
        self._validate_recipe()
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
