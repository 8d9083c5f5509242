"""The normaliser settings that travel with a vocabulary, and the flags that may restate them.

A vocabulary is only half a tokenizer: a cased vocabulary read with lower-casing on turns
most words into ``[UNK]`` (Hangul syllables are even decomposed into jamo). So every
vocabulary bertkit writes carries its settings in the files Hugging Face reads too
(``tokenizer.json``'s ``BertNormalizer`` and ``tokenizer_config.json``), and every reader
takes them from there.

Contract:

* :data:`SETTINGS` are the three normaliser settings: ``lowercase``, ``strip_accents``
  (``None``: follows ``lowercase``, as in Google's and Hugging Face's tokenizers) and
  ``split_cjk`` (a word per CJK ideograph).
* :func:`saved_settings` finds the settings saved with a vocabulary: in a directory, its
  ``tokenizer_config.json`` over its ``tokenizer.json``; beside a ``vocab.txt`` file, the same
  files, counted only when that ``tokenizer.json`` holds this very vocabulary (or, with no
  ``tokenizer.json``, when the file is named ``vocab.txt``: the Hugging Face layout). It
  returns ``({}, None)`` when nothing is saved (a bare Google ``vocab.txt``).
* :func:`resolve_settings` lays the settings a caller gives (``None``: not given) over the
  saved ones. A given value that contradicts a saved one is an
  :class:`~bertkit.errors.OptionError` naming both (and the file); with nothing saved, a
  vocabulary is uncased (BERT's default).
* :class:`TokenizerOptions` declares the flags once (``--lowercase/--no-lowercase``,
  ``--strip-accents/--no-strip-accents``); :func:`add_tokenizer_flags` adds them and the short
  form ``--cased`` (``--no-lowercase``, accents then follow) to a parser.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from bertkit.errors import DataFormatError, OptionError
from bertkit.options import add_options, option

SETTINGS = ("lowercase", "strip_accents", "split_cjk")
CONFIG_FILE = "tokenizer_config.json"
TOKENIZER_FILE = "tokenizer.json"
VOCAB_FILE = "vocab.txt"


@dataclass(frozen=True)
class TokenizerOptions:
    """The normaliser flags of every command that reads text with a vocabulary; ``None`` (not
    given) means the setting saved with the vocabulary."""

    lowercase: bool | None = option(
        None, "lower-case the text: an uncased vocabulary (--cased or --no-lowercase: a cased "
              "one). Default: the setting saved with the vocabulary, else lower-case")
    strip_accents: bool | None = option(
        None, "remove accents after Unicode NFD decomposition (this also splits Hangul "
              "syllables into jamo). Default: the setting saved with the vocabulary, else as "
              "--lowercase")


def add_tokenizer_flags(parser, *, suppress_defaults: bool = False) -> None:
    """``--lowercase/--no-lowercase``, ``--strip-accents/--no-strip-accents`` and ``--cased``
    (the short form of ``--no-lowercase``) on ``parser``; dests ``lowercase``, ``strip_accents``
    (None when absent, or no attribute at all with ``suppress_defaults``)."""
    add_options(parser, TokenizerOptions, suppress_defaults=suppress_defaults)
    import argparse

    parser.add_argument("--cased", dest="lowercase", action="store_false",
                        default=argparse.SUPPRESS,
                        help="a cased vocabulary: keep case (and accents, unless "
                             "--strip-accents); the same as --no-lowercase")


def effective_strip_accents(settings: dict) -> bool:
    """Whether accents are stripped under ``settings`` (``strip_accents`` None follows
    ``lowercase``, which defaults to True)."""
    lowercase = settings.get("lowercase")
    lowercase = True if lowercase is None else lowercase
    strip = settings.get("strip_accents")
    return lowercase if strip is None else bool(strip)


def _flag(name: str, value: bool) -> str:
    return {("lowercase", True): "--lowercase", ("lowercase", False): "--cased/--no-lowercase",
            ("strip_accents", True): "--strip-accents",
            ("strip_accents", False): "--no-strip-accents"}.get((name, value), f"{name}={value}")


def resolve_settings(saved: dict, given: dict, source: str | Path | None = None) -> dict:
    """The settings to tokenize with: ``given`` (values ``None`` are not given) over ``saved``.

    Returns ``{"lowercase", "strip_accents", "split_cjk"}`` with every value set.
    A given value that differs from the saved one raises :class:`OptionError` naming the flag,
    the saved value and ``source``.
    """
    where = f" in {source}" if source else ""
    out = {"lowercase": saved.get("lowercase"), "strip_accents": saved.get("strip_accents"),
           "split_cjk": saved.get("split_cjk")}
    for name in SETTINGS:
        value = given.get(name)
        if value is None:
            continue
        if name in saved and saved[name] is not None and saved[name] != value:
            raise OptionError(f"{_flag(name, value)} contradicts the setting "
                              f"{name}={str(saved[name]).lower()} saved{where}; drop the flag (the "
                              "saved setting is used) or use a vocabulary trained that way")
        if name == "strip_accents" and "lowercase" in saved and saved.get(name) is None:
            if effective_strip_accents(saved) != value:
                raise OptionError(
                    f"{_flag(name, value)} contradicts the setting "
                    f"strip_accents={str(effective_strip_accents(saved)).lower()} saved{where} (it "
                    f"follows lowercase={str(saved['lowercase']).lower()}); drop the flag")
        out[name] = value
    if out["lowercase"] is None:
        out["lowercase"] = True
    if out["strip_accents"] is None:
        out["strip_accents"] = out["lowercase"]
    if out["split_cjk"] is None:
        out["split_cjk"] = True
    return out


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataFormatError(path, f"unreadable JSON ({e})") from None
    if not isinstance(data, dict):
        raise DataFormatError(path, "not a JSON object")
    return data


def normalizer_settings(tokenizer_json: dict) -> dict:
    """The settings of a ``tokenizer.json``'s ``BertNormalizer`` (``{}`` for another one)."""
    normalizer = tokenizer_json.get("normalizer") or {}
    if normalizer.get("type") != "BertNormalizer":
        return {}
    return {"lowercase": normalizer.get("lowercase", True),
            "strip_accents": normalizer.get("strip_accents"),
            "split_cjk": normalizer.get("handle_chinese_chars", True)}


def config_settings(config: dict) -> dict:
    """The settings of a ``tokenizer_config.json`` (only the keys it holds)."""
    out = {}
    if "do_lower_case" in config:
        out["lowercase"] = bool(config["do_lower_case"])
    if "do_lower_case" in config or "strip_accents" in config:
        strip = config.get("strip_accents")
        out["strip_accents"] = None if strip is None else bool(strip)
    if "tokenize_chinese_chars" in config:
        out["split_cjk"] = bool(config["tokenize_chinese_chars"])
    return out


def vocab_tokens(tokenizer_json: dict) -> list[str] | None:
    """The WordPiece vocabulary of a ``tokenizer.json`` in id order (None if it has none)."""
    model = tokenizer_json.get("model")
    if not isinstance(model, dict) or not isinstance(model.get("vocab"), dict):
        return None
    table = model["vocab"]
    tokens = [""] * len(table)
    for token, index in table.items():
        if not isinstance(index, int) or not 0 <= index < len(tokens):
            return None
        tokens[index] = token
    return tokens


def saved_settings(vocab_path: str | Path, tokens: list[str] | None = None) -> tuple[dict, Path | None]:
    """The settings saved with the vocabulary at ``vocab_path`` (a ``vocab.txt`` or a directory)
    and the file they came from; ``({}, None)`` when none are saved (see the module docstring).

    ``tokens`` are the vocabulary's tokens, to match a ``tokenizer.json`` beside a file
    (read from ``vocab_path`` when not given).
    """
    path = Path(vocab_path)
    folder = path if path.is_dir() else path.parent
    config_file, json_file = folder / CONFIG_FILE, folder / TOKENIZER_FILE
    settings: dict = {}
    source = None
    if json_file.is_file():
        data = _read_json(json_file)
        if not path.is_dir():
            if tokens is None:
                from bertkit.tokenizer.vocab import Vocab

                tokens = Vocab.from_file(path).tokens
            if vocab_tokens(data) != list(tokens):
                return {}, None  # the settings of another vocabulary in the same folder
        settings, source = normalizer_settings(data), json_file
    elif not (path.is_dir() or path.name == VOCAB_FILE):
        return {}, None
    if config_file.is_file():
        from_config = config_settings(_read_json(config_file))
        if from_config:
            settings, source = {**settings, **from_config}, config_file
    return settings, source
