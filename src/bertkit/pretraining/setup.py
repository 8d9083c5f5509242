"""What a pre-training run starts from: datasets, tokenizer and model.

Contract:

* ``open_datasets(config) -> (train, eval_or_None)``: :class:`PretrainingDataset` views;
  ``ltr`` reads the original tokens (``unmasked``), the others the masks as stored or drawn
  dynamically (``config.dynamic_masking``; seeded by ``config.seed``, so a function of
  ``(seed, epoch, index)``). ``config.mask_rate`` draws the training masks at load time at
  that rate (:func:`~bertkit.pretraining.masking.load_time_config`); evaluation data keeps
  its own masking, so held-out accuracies of runs with different rates stay comparable.
* ``build_tokenizer(config, meta)``: ``--vocab`` (with the settings saved beside it), else
  the tokenizer of the ``--init-from`` model; its size must equal the data's
  ``vocab_size``. The normaliser settings the data was made with (``meta.json``) and any
  ``--lowercase``/``--strip-accents`` flag must agree with the saved ones: a contradiction is
  an error naming both.
* ``build_model(config, vocab_size, seq_len)``: ``BertForPreTraining`` for ``mlm+nsp``, else
  ``BertForMaskedLM`` (causal attention for ``ltr``); from ``--init-from`` (weights only: a
  model directory, a run directory's ``model/`` or its newest checkpoint), ``--model-config``
  or the ``--model-size`` preset. ``--dropout`` overrides both dropout rates.
"""

from __future__ import annotations

from pathlib import Path

from bertkit.config import BertConfig
from bertkit.errors import BertkitError, CheckpointError
from bertkit.pretraining.train_config import PretrainConfig


def open_datasets(config: PretrainConfig):
    from bertkit.pretraining.data import PretrainingDataset

    ltr = config.objective == "ltr"
    dynamic = True if config.mask_rate is not None else config.dynamic_masking
    train = PretrainingDataset(config.data, dynamic_masking=dynamic, seed=config.seed, unmasked=ltr)
    if config.mask_rate is not None and not ltr:
        from bertkit.pretraining.masking import load_time_config

        train.masking_config = load_time_config(train.masking_config, config.mask_rate,
                                                train.max_seq_length, config.max_predictions)
    evaluation = None
    if config.eval_data:
        evaluation = PretrainingDataset(config.eval_data, seed=config.seed, unmasked=ltr)
    return train, evaluation


def init_source(init_from: str | Path) -> tuple[str, Path]:
    """``("model", dir)`` or ``("checkpoint", file)`` named by ``--init-from``."""
    from bertkit.checkpoint import is_model_dir
    from bertkit.training import CheckpointManager

    path = Path(init_from)
    for candidate in (path / "model", path):
        if is_model_dir(candidate):
            return "model", candidate
    latest = CheckpointManager(path / "checkpoints").latest()
    if latest is not None:
        return "checkpoint", latest
    raise CheckpointError(f"{path}: neither a model directory nor a run directory with a "
                          "model/ or checkpoints/ to initialise from")


def build_tokenizer(config: PretrainConfig, meta: dict):
    from bertkit.checkpoint import load_tokenizer
    from bertkit.tokenizer import BertTokenizer
    from bertkit.tokenizer.settings import resolve_settings

    made = meta.get("settings", {})
    flags = {"lowercase": config.lowercase, "strip_accents": config.strip_accents}
    # the data's settings (meta.json; no strip_accents in data made before it was stored):
    # a flag must agree with them, and they with the settings saved with the vocabulary
    data_settings = {k: made[k] for k in ("lowercase", "strip_accents") if made.get(k) is not None}
    resolve_settings(data_settings, flags, f"{config.data}/meta.json (the data's settings)")
    given = {**data_settings, **{k: v for k, v in flags.items() if v is not None}}
    given.setdefault("lowercase", None)
    given.setdefault("strip_accents", None)
    if config.vocab:
        google = bool(made.get("google_tokenizer", False))
        tok = BertTokenizer.from_file(config.vocab, google_compat=google, **given)
    elif config.init_from and init_source(config.init_from)[0] == "model":
        tok = load_tokenizer(init_source(config.init_from)[1], **given)
    else:
        raise BertkitError("missing setting 'vocab' (--vocab VOCAB.txt, the vocabulary the data was made with)")
    if len(tok) != meta["vocab_size"]:
        raise BertkitError(f"the vocabulary has {len(tok)} tokens but the data was made with "
                           f"{meta['vocab_size']} ({meta.get('vocab_file')})")
    check_vocab_fingerprint(tok, meta, config.vocab or config.init_from)
    return tok


def check_vocab_fingerprint(tok, meta: dict, source) -> None:
    """Refuse a vocabulary whose tokens (in id order) differ from those the data was made with.

    Data written before fingerprints were stored has none; then nothing can be checked."""
    expected = meta.get("vocab_fingerprint")
    if expected is None or tok.vocab.fingerprint() == expected:
        return
    raise BertkitError(
        f"{source}: not the vocabulary the data was made with ({meta.get('vocab_file')}): same "
        "size, but other tokens or another token order, so the data's ids would mean other "
        "tokens; pass the vocab.txt given to pretrain-data")


def _overrides(config: PretrainConfig, vocab_size: int) -> dict:
    values: dict = {"vocab_size": vocab_size}
    if config.dropout is not None:
        values.update(hidden_dropout_prob=config.dropout, attention_probs_dropout_prob=config.dropout)
    if config.objective == "ltr":
        values["attention"] = "causal"
    if config.attention_impl is not None:
        values["attention_impl"] = config.attention_impl
    return values


def build_model(config: PretrainConfig, vocab_size: int, seq_len: int, tokenizer=None):
    from bertkit.model import BertForMaskedLM, BertForPreTraining

    cls = BertForPreTraining if config.objective == "mlm+nsp" else BertForMaskedLM
    overrides = _overrides(config, vocab_size)
    if config.init_from:
        model = _from_init(cls, config.init_from, overrides, tokenizer)
    else:
        if config.model_config:
            base = BertConfig.from_json(config.model_config).to_dict()
            model_config = BertConfig.from_dict({**base, **overrides})
        else:
            try:
                model_config = BertConfig.preset(config.model_size, **overrides)
            except ValueError as e:
                raise BertkitError(str(e)) from None
        model = cls(model_config)
    if seq_len > model.config.max_position_embeddings:
        raise BertkitError(f"the data has sequences of {seq_len} tokens but the model only "
                           f"{model.config.max_position_embeddings} position embeddings")
    return model.train()


def _from_init(cls, init_from: str, overrides: dict, tokenizer=None):
    from bertkit.checkpoint import load_pretrained

    kind, path = init_source(init_from)
    if kind == "model":
        theirs = _init_tokenizer(path)
        if tokenizer is None or theirs is None or theirs.vocab.tokens == tokenizer.vocab.tokens:
            return load_pretrained(path, model_class=cls, config_overrides=overrides)
        return _with_vocabulary(cls, path, overrides, theirs, tokenizer)
    return _from_checkpoint(cls, path, overrides)


def _init_tokenizer(path: Path):
    """The tokenizer saved in the ``--init-from`` model directory (None when it has none)."""
    from bertkit.checkpoint import load_tokenizer

    try:
        return load_tokenizer(path)
    except CheckpointError:
        return None


def _with_vocabulary(cls, path: Path, overrides: dict, theirs, tokenizer):
    """The ``--init-from`` model with the data's vocabulary: the rows of the tokens both
    vocabularies share are kept, a new token's row is the mean of its pieces' rows under the
    model's own vocabulary (:func:`bertkit.model.vocab_growth.remap_vocabulary`). The counts
    are left in ``model.vocab_remap`` (logged by the run)."""
    from bertkit.checkpoint import load_pretrained
    from bertkit.model.vocab_growth import remap_vocabulary

    own = {k: v for k, v in overrides.items() if k != "vocab_size"}
    model = load_pretrained(path, model_class=cls, config_overrides=own)
    kept, new = remap_vocabulary(model, theirs, tokenizer.vocab.tokens)
    model.vocab_remap = {"init_vocab_size": len(theirs), "vocab_size": len(tokenizer),
                         "rows_kept": kept, "new_tokens": new}
    return model


def _from_checkpoint(cls, path: Path, overrides: dict):
    from bertkit.training import CheckpointManager, check_model_shape

    state = CheckpointManager(path.parent).load(path)
    model = cls(BertConfig.from_dict({**state["extra"]["model_config"], **overrides}))
    check_model_shape(model, state["model"], str(path), strict=False)
    own = model.state_dict()
    model.load_state_dict({k: v for k, v in state["model"].items() if k in own}, strict=False)
    return model
