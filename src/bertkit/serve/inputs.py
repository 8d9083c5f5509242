"""Request ``inputs`` read with text-embeddings-inference's grammar (its ``router/src/http/types.rs``),
and the model rows bertkit builds for what its engine does not plan itself.

* ``/predict`` (``PredictInput``): ``"text"`` is one text; ``["A", "B"]`` is ONE pair;
  ``[["A"], ["B", "C"]]`` is a batch of a text and a pair; a list of 3+ strings is an error.
  Question answering and multiple choice (bertkit extras TEI does not serve) take
  ``{"question", "context"}`` / ``{"context", "choices"}`` or a list of those.
* ``/embed``, ``/embed_all``, ``/v1/embeddings`` (``Input``): a text, token ids ``[101, ...]``,
  or a list of texts and/or id lists.

Each function returns ``(items, single)``; a bad shape is an :class:`ApiError` (422, or 400
``Empty`` for an empty list), a batch over ``max_items`` a 413.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from bertkit.errors import BertkitError
from bertkit.serve.errors import ApiError

PREDICT_GRAMMAR = ("a string, a pair of strings [string, string] or a batch of mixed strings and "
                   "pairs [[string], [string, string], ...]")


def check_batch_size(n: int, max_items: int, why: str = "") -> None:
    """TEI's message and status (its code's 422; its OpenAPI file says 413) for a batch over
    ``--max-client-batch-size`` (bertkit: ``--max-items``): the OpenAPI description's
    ``maxItems``, refused as every request it forbids."""
    if n > max_items:
        raise ApiError(f"batch size {n} > maximum allowed batch size {max_items} (--max-items){why}",
                       tei_err="batch_size")


def _sequence(value: Any, where: str) -> str | list[str]:
    if not isinstance(value, list) or not 1 <= len(value) <= 2 or not all(isinstance(x, str) for x in value):
        raise _malformed(f"{where}: expected [string] or [string, string], got {_shape(value)}")
    return value[0] if len(value) == 1 else list(value)


def _malformed(message: str) -> ApiError:
    """A 422 for ``inputs`` of a shape TEI's JSON types refuse: its router answers those
    before its handler, so no metric counts them (``tei_err``: none)."""
    return ApiError(message, tei_err=None)


def _shape(value: Any) -> str:
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return type(value).__name__.replace("NoneType", "null")


def predict_items(inputs: Any, structured: bool, max_items: int) -> tuple[list, bool]:
    """``/predict``'s items: texts (``str``) and pairs (``[A, B]``); dicts when ``structured``
    (question answering, multiple choice)."""
    if structured and isinstance(inputs, dict):
        return [inputs], True
    if structured and isinstance(inputs, list) and inputs and all(isinstance(x, dict) for x in inputs):
        check_batch_size(len(inputs), max_items)
        return inputs, False
    if isinstance(inputs, str):
        return [inputs], True
    if not isinstance(inputs, list) or not inputs:
        what = "an empty list" if isinstance(inputs, list) else _shape(inputs)
        raise _malformed(f"inputs: expected {PREDICT_GRAMMAR}, got {what}")
    if isinstance(inputs[0], str):
        if len(inputs) > 2 or not all(isinstance(x, str) for x in inputs):
            raise _malformed(f"inputs: expected {PREDICT_GRAMMAR}, got a list of {len(inputs)} "
                           f"(a batch is a list of lists: [[\"A\"], [\"B\"]])")
        return [inputs[0] if len(inputs) == 1 else list(inputs)], True
    check_batch_size(len(inputs), max_items)
    return [_sequence(x, f"inputs[{i}]") for i, x in enumerate(inputs)], False


def _is_ids(value: Any) -> bool:
    """Token ids: JSON integers (``2.0`` is ``2`` in JSON, ``true`` is not ``1``)."""
    return isinstance(value, list) and all(
        (isinstance(x, int) and not isinstance(x, bool)) or (isinstance(x, float) and x.is_integer())
        for x in value)


def _ids(value: Any) -> Any:
    """``value`` with token ids as Python ints (a text as it is)."""
    return [int(x) for x in value] if isinstance(value, list) else value


def embed_items(inputs: Any, max_items: int, field: str = "inputs") -> tuple[list, bool]:
    """``/embed``'s items: texts (``str``) and token-id lists (``list[int]``)."""
    items, single = _embed_items(inputs, max_items, field)
    return [_ids(x) for x in items], single


def _embed_items(inputs: Any, max_items: int, field: str) -> tuple[list, bool]:
    if isinstance(inputs, str) or (_is_ids(inputs) and inputs):
        return [inputs], True
    if isinstance(inputs, list):
        if not inputs:
            raise ApiError(f"`{field}` cannot be empty", "Empty")
        check_batch_size(len(inputs), max_items)
        for i, x in enumerate(inputs):
            if not (isinstance(x, str) or _is_ids(x)):
                raise _malformed(f"{field}[{i}]: expected a string or a list of token ids, got {_shape(x)}")
        return inputs, False
    raise _malformed(f"{field}: expected a string, token ids, or a list of those, got {_shape(inputs)}")


def text_items(inputs: Any, max_items: int, field: str = "inputs") -> tuple[list[str], bool]:
    """The texts of a route that reads texts only (``/fill-mask``): a string or a list of
    them, each valid Unicode; ``(items, single)``."""
    if isinstance(inputs, str):
        items, single = [inputs], True
    elif isinstance(inputs, list):
        if not inputs:
            raise ApiError(f"`{field}` cannot be empty", "Empty")
        check_batch_size(len(inputs), max_items)
        items, single = inputs, False
    else:
        raise _malformed(f"{field}: expected a string or a list of strings, got {_shape(inputs)}")
    for i, x in enumerate(items):
        where = "" if single else f"{field}[{i}]: "
        if not isinstance(x, str):
            raise _malformed(f"{where}expected a string, got {_shape(x)}")
        check_unicode(x, where)
    return items, single


def check_text(text: str, where: str) -> None:
    """TEI's 400 ``Empty`` for an empty text; bertkit also refuses a text that is empty once
    the tokenizer cleans it (white space, control or zero-width characters only:
    :func:`bertkit.tokenizer.basic.is_blank`), which has no tokens to read."""
    from bertkit.tokenizer.basic import is_blank

    check_unicode(text, where)
    if is_blank(text):
        hidden = " (it has no tokens: only control or zero-width characters)" if text.strip() else ""
        raise ApiError(f"{where}`inputs` cannot be empty{hidden}", "Empty")


def check_unicode(text: str, where: str) -> None:
    """A 422 for a text that is not Unicode: JSON's escapes can carry a lone UTF-16 surrogate
    (``"\\ud800"``), which no tokenizer reads and no answer can echo back as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ApiError(f"{where}the text holds a lone surrogate (U+{ord(text[e.start]):04X} at "
                       f"character {e.start}): it is not Unicode text", "Validation") from None


def id_row(ids: list[int], vocab_size: int, max_length: int, truncate: bool, left: bool,
           where: str = "") -> SimpleNamespace:
    """A model row of token ids given by the client (as TEI, used as they are: no special
    tokens added); ids outside the vocabulary are a 422 ``Tokenizer`` error."""
    if not ids:
        raise ApiError(f"{where}`inputs` cannot be empty", "Empty")
    bad = next((x for x in ids if not 0 <= x < vocab_size), None)
    if bad is not None:
        raise ApiError(f"{where}token id {bad} is outside the vocabulary (0..{vocab_size - 1})", "Tokenizer")
    cut = max(len(ids) - max_length, 0)
    if cut and not truncate:
        raise ApiError(f"{where}the input has {len(ids)} tokens, more than the model's limit of "
                       f"{max_length}", "Validation", 413)
    kept = ids[cut:] if left else ids[:len(ids) - cut]
    return SimpleNamespace(input_ids=list(kept), token_type_ids=[0] * len(kept), num_truncated=cut)


def left_row(tokenizer, text: str, pair: str | None, max_length: int) -> SimpleNamespace:
    """``[CLS] text [SEP] (pair [SEP])`` truncated from the LEFT (TEI's
    ``truncation_direction: left``), longest first: the shorter text keeps up to half the room,
    the longer one keeps its last tokens in the rest."""
    a = tokenizer.text_to_ids(text)
    b = tokenizer.text_to_ids(pair) if pair is not None else []
    room = max_length - (3 if pair is not None else 2)
    cut = max(len(a) + len(b) - room, 0)
    if cut:
        if pair is None:
            a = a[len(a) - room:]
        else:
            short_kept = min(min(len(a), len(b)), room // 2)
            long_kept = room - short_kept
            if len(a) >= len(b):
                a, b = a[len(a) - long_kept:], b[len(b) - short_kept:]
            else:
                a, b = a[len(a) - short_kept:], b[len(b) - long_kept:]
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    ids = [cls, *a, sep]
    types = [0] * len(ids)
    if pair is not None:
        ids += [*b, sep]
        types += [1] * (len(b) + 1)
    return SimpleNamespace(input_ids=ids, token_type_ids=types, num_truncated=cut)


def prompted(bert, inputs: Any, prompt_name: str | None) -> Any:
    """TEI's ``prompt_name``: ``inputs`` (a text, token ids, or a list of those) with the
    model's prompt put before each text (``bert.prompt_text``: the one named, else the
    directory's ``default_prompt_name``'s, else none); token ids as they are. A name the model
    has no prompt for: a 422 naming those it has."""
    try:
        prompt = bert.prompt_text(prompt_name)
    except BertkitError as e:
        raise ApiError(str(e), tei_err="tokenization") from None  # TEI finds the prompt when it tokenises
    if not prompt:
        return inputs
    if isinstance(inputs, str):
        return prompt + inputs
    if isinstance(inputs, list):
        return [prompt + x if isinstance(x, str) else x for x in inputs]
    return inputs
