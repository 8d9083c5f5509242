"""Model directories: ``load_pretrained`` / ``save_pretrained``, Hugging Face in and out.

A bertkit model directory *is* a Hugging Face BERT directory::

    config.json            HF fields + bertkit extras (attention, id2label, bertkit_task, ...)
    model.safetensors      HF tensor names: bert.embeddings..., bert.encoder.layer.N...,
                           cls.predictions..., cls.seq_relationship..., classifier..., qa_outputs...
    vocab.txt, tokenizer_config.json   (written by the tokenizer when one is given)

Reading also accepts ``pytorch_model.bin`` (``torch.load(weights_only=True)``), names with or
without the ``bert.`` prefix, and legacy ``gamma``/``beta`` LayerNorm names. Tensors the model
has but the checkpoint lacks keep their fresh initialisation and are named in a warning;
checkpoint tensors the model has no use for are named in a warning; a shape mismatch is a
:class:`CheckpointError` naming the tensor. Every file is written atomically.

Name mapping (the only differences between bertkit modules and HF tensor names):
``...attention.self.qkv`` <-> ``...attention.self.{query,key,value}`` (row blocks),
``mlm_head.{dense,LayerNorm}`` <-> ``cls.predictions.transform.{dense,LayerNorm}``,
``mlm_head.bias`` <-> ``cls.predictions.bias``, ``nsp_head`` <-> ``cls.seq_relationship``.

A ``pruned_heads`` field in ``config.json`` (Hugging Face's, ``{"layer": [original head
indices]}``) shapes the model's layers before the weights are read
(:mod:`bertkit.model.pruning`); it is written back unchanged.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from bertkit.config import BertConfig
from bertkit.errors import CheckpointError
from bertkit.fileio import atomic_path, atomic_write
from bertkit.model import TASK_MODELS, BertModel, BertPreTrainedModel
from bertkit.model.pruning import apply_pruned_heads
from bertkit.tokenizer import BertTokenizer

CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
TORCH_FILE = "pytorch_model.bin"

# internal prefix -> HF prefix, for the heads (the encoder needs only the qkv split)
_HEAD_NAMES = [
    ("mlm_head.dense.", "cls.predictions.transform.dense."),
    ("mlm_head.LayerNorm.", "cls.predictions.transform.LayerNorm."),
    ("mlm_head.bias", "cls.predictions.bias"),
    ("nsp_head.", "cls.seq_relationship."),
]
_QKV = re.compile(r"^(.*\.attention\.self)\.qkv\.(weight|bias)$")
_SPLIT_QKV = re.compile(r"^(.*\.attention\.self)\.(query|key|value)\.(weight|bias)$")
_TIED_DECODER_WEIGHT = "cls.predictions.decoder.weight"
_DECODER_BIAS = "cls.predictions.decoder.bias"


# ---------------------------------------------------------------- name conversion
def to_hf_state_dict(model: BertPreTrainedModel) -> dict[str, torch.Tensor]:
    """The model's tensors under Hugging Face names (``bert.`` prefix, tied decoder left out)."""
    hf: dict[str, torch.Tensor] = {}
    prefix = "bert." if isinstance(model, BertModel) else ""
    for name, tensor in model.state_dict().items():
        name = prefix + name
        if name == "mlm_head.decoder.weight":
            continue  # tied to bert.embeddings.word_embeddings.weight
        qkv = _QKV.match(name)
        if qkv:
            for part, block in zip(("query", "key", "value"), tensor.chunk(3, dim=0)):
                hf[f"{qkv.group(1)}.{part}.{qkv.group(2)}"] = block
            continue
        for internal, external in _HEAD_NAMES:
            if name.startswith(internal):
                name = external + name[len(internal) :]
                break
        hf[name] = tensor
    return hf


def from_hf_state_dict(hf: dict[str, torch.Tensor], model: BertPreTrainedModel) -> dict[str, torch.Tensor]:
    """Inverse of :func:`to_hf_state_dict` for a complete set of the model's HF tensors."""
    internal: dict[str, torch.Tensor] = {}
    blocks: dict[tuple[str, str], dict[str, torch.Tensor]] = {}
    for name, tensor in hf.items():
        split = _SPLIT_QKV.match(name)
        if split:
            blocks.setdefault((split.group(1), split.group(3)), {})[split.group(2)] = tensor
            continue
        for internal_prefix, external in _HEAD_NAMES:
            if name.startswith(external):
                name = internal_prefix + name[len(external) :]
                break
        internal[name] = tensor
    for (module, kind), parts in blocks.items():
        internal[f"{module}.qkv.{kind}"] = torch.cat([parts["query"], parts["key"], parts["value"]])
    if isinstance(model, BertModel):
        internal = {k.removeprefix("bert."): v for k, v in internal.items()}
    elif hasattr(model, "mlm_head"):
        internal["mlm_head.decoder.weight"] = internal["bert.embeddings.word_embeddings.weight"]
    return internal


def normalize_hf_names(checkpoint: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Canonical HF names: legacy ``gamma``/``beta`` -> ``weight``/``bias``, ``bert.`` prefix
    on encoder tensors, ``decoder.bias`` folded into ``cls.predictions.bias``, buffers dropped."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in checkpoint.items():
        name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
        name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
        if name.split(".")[0] in ("embeddings", "encoder", "pooler"):
            name = "bert." + name
        if name.endswith(("position_ids", "token_type_ids")):
            continue  # buffers some versions save; not weights
        out[name] = tensor
    if _DECODER_BIAS in out:
        bias = out.pop(_DECODER_BIAS)
        out.setdefault("cls.predictions.bias", bias)
    return out


# ---------------------------------------------------------------- reading
def is_model_dir(directory: str | Path) -> bool:
    directory = Path(directory)
    return (directory / CONFIG_FILE).is_file() and (
        (directory / SAFETENSORS_FILE).is_file() or (directory / TORCH_FILE).is_file()
    )


def load_config(directory: str | Path) -> BertConfig:
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: no such model directory")
    if not (directory / CONFIG_FILE).is_file():
        raise CheckpointError(f"{directory}: not a BERT model directory (no {CONFIG_FILE})")
    return BertConfig.from_json(directory / CONFIG_FILE)


def read_weights(directory: str | Path) -> dict[str, torch.Tensor]:
    """The raw tensors of ``model.safetensors`` (preferred) or ``pytorch_model.bin``."""
    directory = Path(directory)
    if (directory / SAFETENSORS_FILE).is_file():
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            return load_file(str(directory / SAFETENSORS_FILE))
        except (SafetensorError, OSError) as e:
            raise CheckpointError(f"{directory / SAFETENSORS_FILE}: unreadable ({e})") from None
    if (directory / TORCH_FILE).is_file():
        from bertkit.fileio import safe_torch_load

        state = safe_torch_load(directory / TORCH_FILE, "weights file")
        if not isinstance(state, dict):
            raise CheckpointError(f"{directory / TORCH_FILE}: does not hold a state dict")
        return state
    raise CheckpointError(
        f"{directory}: not a BERT model directory (no {SAFETENSORS_FILE} or {TORCH_FILE})"
    )


def default_model_class(
    config: BertConfig, tensor_names: Iterable[str] = ()
) -> type[BertPreTrainedModel]:
    """The class named by ``bertkit_task`` or ``architectures`` in the config; failing that,
    guessed from the (normalised) tensor names: NSP head -> BertForPreTraining, MLM head ->
    BertForMaskedLM, else BertModel."""
    names = [config.extra.get("bertkit_task")] + list(config.extra.get("architectures") or [])
    for name in names:
        if name in TASK_MODELS:
            return TASK_MODELS[name]
    tensor_names = set(tensor_names)
    if any(n.startswith("cls.seq_relationship.") for n in tensor_names):
        return TASK_MODELS["BertForPreTraining"]
    if any(n.startswith("cls.predictions.") for n in tensor_names):
        return TASK_MODELS["BertForMaskedLM"]
    return BertModel


def load_pretrained(
    directory: str | Path,
    model_class: type[BertPreTrainedModel] | None = None,
    *,
    config_overrides: dict[str, Any] | None = None,
    **model_kwargs: Any,
) -> BertPreTrainedModel:
    """Build ``model_class`` from ``directory``'s config and load its weights (eval mode, CPU).

    ``model_class`` defaults to :func:`default_model_class`; ``model_kwargs`` go to its
    constructor (e.g. ``num_labels=3``); ``config_overrides`` replace config fields (e.g.
    dropout). Missing tensors are initialised and named in a ``UserWarning``, unused ones
    named in another; a wrong shape raises :class:`CheckpointError`.
    """
    config = load_config(directory)
    if config_overrides:
        config = BertConfig.from_dict({**config.to_dict(), **config_overrides})
    checkpoint = normalize_hf_names(read_weights(directory))
    model_class = model_class or default_model_class(config, checkpoint)
    model = model_class(config, **model_kwargs)
    apply_pruned_heads(model)  # config.json pruned_heads: layers with fewer heads
    load_hf_weights(model, checkpoint, source=str(directory))
    return model.eval()


def load_hf_weights(model: BertPreTrainedModel, checkpoint: dict[str, torch.Tensor], source: str = "checkpoint") -> None:
    """Copy HF-named (normalised) tensors into ``model``; see the module docstring for rules."""
    expected = to_hf_state_dict(model)
    tied = checkpoint.pop(_TIED_DECODER_WEIGHT, None)
    if tied is not None and "bert.embeddings.word_embeddings.weight" in checkpoint:
        if not torch.equal(tied, checkpoint["bert.embeddings.word_embeddings.weight"]):
            warnings.warn(
                f"{source}: {_TIED_DECODER_WEIGHT} differs from the word embeddings; "
                "bertkit ties them and uses the word embeddings",
                stacklevel=3,
            )
    for name, tensor in checkpoint.items():
        if name in expected and tuple(tensor.shape) != tuple(expected[name].shape):
            raise CheckpointError(
                f"{source}: tensor {name} has shape {tuple(tensor.shape)}, "
                f"the model expects {tuple(expected[name].shape)}"
            )
    bad = [name for name, tensor in checkpoint.items()
           if name in expected and tensor.is_floating_point() and not torch.isfinite(tensor).all()]
    if bad:
        raise CheckpointError(f"{source}: {len(bad)} tensor(s) hold NaN or infinite values (e.g. "
                              f"{bad[0]}): the weights are broken (a diverged run?)")
    missing = sorted(set(expected) - set(checkpoint))
    unexpected = sorted(set(checkpoint) - set(expected))
    if not set(expected) & set(checkpoint):
        raise CheckpointError(f"{source}: holds no BERT tensors (is it a BERT checkpoint?)")
    if missing:
        warnings.warn(
            f"{source}: {len(missing)} tensor(s) not in the checkpoint, freshly initialised: "
            + ", ".join(missing),
            stacklevel=3,
        )
    if unexpected:
        warnings.warn(
            f"{source}: {len(unexpected)} checkpoint tensor(s) not used by "
            f"{type(model).__name__}: " + ", ".join(unexpected),
            stacklevel=3,
        )
    merged = {name: checkpoint.get(name, tensor) for name, tensor in expected.items()}
    state = from_hf_state_dict(merged, model)
    with torch.no_grad():
        model.load_state_dict(state, strict=True)


# ---------------------------------------------------------------- writing
def hf_config_dict(model: BertPreTrainedModel, extra_config: dict[str, Any] | None = None) -> dict[str, Any]:
    """``config.json`` content: config fields + architectures/labels HF needs + extras."""
    values = model.config.to_dict()
    name = type(model).__name__
    values["architectures"] = [name]
    values["bertkit_task"] = name
    values["tie_word_embeddings"] = True
    num_labels = getattr(model, "num_labels", None)
    if num_labels is not None:
        id2label = values.get("id2label")
        if not id2label or len(id2label) != num_labels:
            values["id2label"] = {str(i): f"LABEL_{i}" for i in range(num_labels)}
        values["label2id"] = {label: int(i) for i, label in values["id2label"].items()}
        if num_labels == 1:
            values["problem_type"] = "regression"
    values.update(extra_config or {})
    return values


def save_pretrained(
    model: BertPreTrainedModel,
    directory: str | Path,
    tokenizer: Any = None,
    extra_config: dict[str, Any] | None = None,
    format: str = "hf",
) -> Path:
    """Write ``model`` (and ``tokenizer``, if given) as a model directory; returns it.

    ``format="hf"`` (the only format, and the default) is the Hugging Face layout that
    ``transformers`` loads with no missing or unexpected keys. Weights and tokenizer files
    are written first and ``config.json`` last, each atomically.
    """
    if format != "hf":
        raise ValueError(f"unknown format {format!r}; the model directory format is 'hf'")
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if tokenizer is not None:
        check_vocabulary(tokenizer, model.config.vocab_size, directory)
    tensors = {k: v.detach().to("cpu").contiguous() for k, v in to_hf_state_dict(model).items()}
    from bertkit.fileio import is_disk_full

    try:
        with atomic_path(directory / SAFETENSORS_FILE) as tmp:
            save_file(tensors, str(tmp), metadata={"format": "pt"})
    except Exception as e:
        if not is_disk_full(e):
            raise
        raise CheckpointError(f"{directory / SAFETENSORS_FILE}: no space left on device (the disk "
                              "is full) while writing the model; nothing was replaced") from None
    if tokenizer is not None:
        tokenizer.save_pretrained(directory)
    with atomic_write(directory / CONFIG_FILE) as f:
        json.dump(hf_config_dict(model, extra_config), f, indent=2, sort_keys=True)
        f.write("\n")
    return directory


# ------------------------------------------------------------------ the tokenizer of a model directory
def load_tokenizer(model_dir: str | Path, vocab: str | Path | None = None, lowercase: bool | None = None,
                   strip_accents: bool | None = None):
    """The model directory's tokenizer, or one built from ``vocab`` (a vocab.txt, with the
    settings saved beside it: :meth:`BertTokenizer.from_file`).

    ``lowercase`` and ``strip_accents`` (``--lowercase``/``--cased``, ``--strip-accents``)
    restate the saved settings: ``None`` takes them as saved, a value that contradicts
    them is an :class:`~bertkit.errors.OptionError` naming both. Every other saved setting
    (``google_compat``, CJK splitting, ``model_max_length``) is kept.
    """
    if vocab is not None:
        return BertTokenizer.from_file(vocab, lowercase=lowercase, strip_accents=strip_accents)
    try:
        return BertTokenizer.from_pretrained(model_dir, lowercase, strip_accents)
    except FileNotFoundError:
        raise CheckpointError(
            f"{model_dir}: no vocab.txt or tokenizer.json; pass the vocabulary (--vocab FILE)"
        ) from None


def check_vocabulary(tokenizer, vocab_size: int, source: str | Path) -> None:
    """A tokenizer whose size differs from the model's ``vocab_size`` is an error."""
    if len(tokenizer) != vocab_size:
        raise CheckpointError(
            f"{source}: the vocabulary has {len(tokenizer)} tokens but the model's vocab_size is "
            f"{vocab_size}; use the vocabulary the model was trained with"
        )
