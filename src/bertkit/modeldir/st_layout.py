"""A model directory in sentence-transformers' layout, the one text-embeddings-inference reads its
pooling from: ``modules.json`` (the transformer, then pooling, then optionally normalisation),
``1_Pooling/config.json`` (the classic ``pooling_mode_*`` keys), ``sentence_bert_config.json``
(``max_seq_length``), ``config_sentence_transformers.json`` (the model type, cosine similarity,
and the ``prompts`` / ``default_prompt_name`` the directory already had, kept). The files are
added beside the model's own; nothing else changes, so bertkit, transformers and
``SentenceTransformer(dir)`` all load the same directory, and ``SentenceTransformer(dir).encode``
gives bertkit's ``embed(pool=...)`` vectors. ``bertkit finetune embedding`` writes them into
every model it saves (:meth:`bertkit.tasks.embedding.EmbeddingTask.write_model_files`).

Prompts (:func:`read_st_prompts`): a prompt is text put before the input as it is (``"query: "``
+ text), as sentence-transformers does; ``default_prompt_name`` names the prompt used when none
is asked.
"""

from __future__ import annotations

import json
from pathlib import Path

from bertkit.errors import BertkitError
from bertkit.fileio import atomic_write
from bertkit.modeldir.entry import read_model_config, saved_task_options

POOLINGS = ("cls", "mean", "max")
POOLING_FILE = Path("1_Pooling") / "config.json"
ST_CONFIG_FILE = "config_sentence_transformers.json"


def _write_json(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as f:
        json.dump(value, f, indent=2)


def write_st_layout(directory: str | Path, pooling: str | None, hidden_size: int, max_seq_length: int,
                    normalize: bool = False, prompts: dict[str, str] | None = None,
                    default_prompt_name: str | None = None) -> None:
    """Add sentence-transformers' files to the model directory ``directory``; ``pooling``
    None: the pooling the model was fine-tuned with (:func:`trained_pooling`), which a
    directory without one must be given. ``prompts`` are added to the directory's own (a
    name given again takes the new text); ``default_prompt_name`` None keeps its default; a
    default naming no prompt is a :class:`BertkitError`, nothing written."""
    kept, default = read_st_prompts(directory)
    prompts = {**kept, **(prompts or {})}
    default = default_prompt_name or default
    if default is not None and default not in prompts:
        raise BertkitError(f"--default-prompt-name {default!r} names no prompt (the prompts: "
                           f"{', '.join(prompts) or 'none'}); add it with --prompt {default}=TEXT")
    if pooling is None:
        pooling = trained_pooling(directory)
        if pooling is None:
            raise BertkitError(f"{directory}: the model was not fine-tuned with a pooling; give --pooling")
    if pooling not in POOLINGS:
        raise BertkitError(f"--pooling must be one of {', '.join(POOLINGS)} (got {pooling!r})")
    directory = Path(directory)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
        (directory / "2_Normalize").mkdir(exist_ok=True)
    _write_json(directory / "modules.json", modules)
    _write_json(directory / POOLING_FILE, {
        "word_embedding_dimension": hidden_size, "pooling_mode_cls_token": pooling == "cls",
        "pooling_mode_mean_tokens": pooling == "mean", "pooling_mode_max_tokens": pooling == "max",
        "pooling_mode_mean_sqrt_len_tokens": False, "pooling_mode_weightedmean_tokens": False,
        "pooling_mode_lasttoken": False, "include_prompt": True})
    _write_json(directory / "sentence_bert_config.json", {"max_seq_length": max_seq_length,
                                                          "do_lower_case": False})
    _write_json(directory / ST_CONFIG_FILE, {"model_type": "SentenceTransformer", "prompts": prompts,
                                             "default_prompt_name": default, "similarity_fn_name": "cosine"})


def read_st_prompts(directory: str | Path) -> tuple[dict[str, str], str | None]:
    """``(prompts, default_prompt_name)`` of a directory's ``config_sentence_transformers.json``
    (``({}, None)`` without one). Not JSON, a prompt that is not text, or a default naming no
    prompt: a :class:`BertkitError` naming the file."""
    path = Path(directory) / ST_CONFIG_FILE
    if not path.is_file():
        return {}, None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise BertkitError(f"{path}: not JSON ({e})") from None
    prompts = config.get("prompts") or {}
    if not isinstance(prompts, dict) or not all(isinstance(v, str) for v in prompts.values()):
        raise BertkitError(f"{path}: prompts must map names to texts")
    default = config.get("default_prompt_name")
    if default is not None and default not in prompts:
        raise BertkitError(f"{path}: default_prompt_name {default!r} is not one of its prompts "
                           f"({', '.join(prompts) or 'none'})")
    return dict(prompts), default


def trained_pooling(directory: str | Path) -> str | None:
    """The pooling a model directory was fine-tuned with (its saved task option ``pooling``,
    as the sentence-embedding task saves it), None for any other directory."""
    if not (Path(directory) / "config.json").is_file():
        return None
    pooling = saved_task_options(read_model_config(directory))[1].get("pooling")
    return pooling if pooling in POOLINGS else None


def read_st_pooling(directory: str | Path) -> str | None:
    """The pooling a directory declares: ``cls`` / ``mean`` / ``max`` from its
    ``1_Pooling/config.json`` (classic or newer keys), else the one it was fine-tuned with
    (:func:`trained_pooling`), else None; a pooling file with another pooling is a
    :class:`BertkitError` naming the file."""
    path = Path(directory) / POOLING_FILE
    if not path.is_file():
        return trained_pooling(directory)
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as e:
        raise BertkitError(f"{path}: not JSON ({e})") from None
    if not isinstance(config, dict):
        raise BertkitError(f"{path}: not a pooling config (a JSON {type(config).__name__}, not an object)")
    modes = [k.removeprefix("pooling_mode_") for k, v in config.items() if k.startswith("pooling_mode_") and v is True]
    if len(modes) > 1:  # sentence-transformers concatenates them: a vector bertkit serve cannot give
        raise BertkitError(f"{path}: sets several poolings ({', '.join(modes)}), whose vectors sentence-transformers "
                           f"concatenates; bertkit serve pools one way: keep one of {', '.join(POOLINGS)}")
    if config.get("pooling_mode") in POOLINGS:
        return config["pooling_mode"]
    if config.get("pooling_mode_cls_token"):
        return "cls"
    if config.get("pooling_mode_mean_tokens"):
        return "mean"
    if config.get("pooling_mode_max_tokens"):
        return "max"
    raise BertkitError(f"{path}: a pooling bertkit serve does not have (it has {', '.join(POOLINGS)})")
