"""Calibration inputs for static INT8 (OpenVINO's NNCF route, :mod:`bertkit.inference.openvino`,
and PyTorch 2's export route, :mod:`bertkit.inference.static_int8`): real text of the model's
task read from a file, its floor of distinct inputs, and rows padded into a batch; and a
fine-tuned directory's own inputs (``calibration.jsonl``: token ids of training inputs, written
by ``bertkit finetune``, named ``--calibration saved``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bertkit.errors import BertkitError, DataFormatError
from bertkit.precision import check_calibration


def _field(row, name: str):
    """``name`` (input_ids / token_type_ids) of a row: an encoding, a feature dict, or (for
    input_ids) a plain list of ids; None when the row has no such field."""
    if isinstance(row, dict):
        return row.get(name)
    if hasattr(row, name):
        return getattr(row, name)
    return row if name == "input_ids" else None


def pad_rows(rows: Sequence, pad_id: int = 0) -> dict[str, np.ndarray]:
    """Rows (token-id lists, encodings, or task feature dicts with ``input_ids`` and
    ``token_type_ids``) -> the graph's int64 inputs, padded to the longest row."""
    ids_of = [list(_field(r, "input_ids")) for r in rows]
    width = max(len(r) for r in ids_of)
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    for i, (row, original) in enumerate(zip(ids_of, rows)):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
        given = _field(original, "token_type_ids")
        if given is not None:
            types[i, : len(row)] = list(given)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def padded_batches(rows: Sequence, batch_size: int) -> list[dict[str, np.ndarray]]:
    """:func:`pad_rows` of every ``batch_size`` rows in turn (the last batch may be shorter)."""
    if not rows:
        raise BertkitError("INT8 calibration needs at least one example of real text")
    return [pad_rows(rows[i : i + batch_size]) for i in range(0, len(rows), batch_size)]


def texts_and_pairs(inputs: Sequence[str | tuple[str, str]]) -> tuple[list[str], list[str] | None]:
    """Calibration inputs (as :func:`read_calibration` gives them, or a caller's list) split
    (a pair: a tuple or list of two) into the first texts and the second ones (None for
    single texts); a
    :class:`BertkitError` for a list mixing the two kinds."""
    pairs = [tuple(x) for x in inputs if isinstance(x, tuple | list)]
    if pairs and len(pairs) != len(inputs):
        raise BertkitError("calibration mixes single texts and (text, pair) tuples: the model takes one or the other")
    return ([a for a, _ in pairs], [b for _, b in pairs]) if pairs else (list(inputs), None)


def encoder_rows(inputs: Sequence, tokenizer, max_length: int, vocab_size: int) -> list:
    """Calibration inputs as encoder rows: texts or ``(text, pair)`` tuples tokenised as the
    engine tokenises its inputs (truncated to ``max_length``), or saved token rows
    (:func:`saved_calibration`) as they are, checked against the model (ids below
    ``vocab_size``, at most ``max_length`` tokens): a :class:`BertkitError` otherwise."""
    if is_saved_rows(inputs):
        for number, row in enumerate(inputs, 1):
            if len(row["input_ids"]) > max_length or max(row["input_ids"]) >= vocab_size:
                raise BertkitError(f"{CALIBRATION_FILE}: line {number} does not fit this model (more than "
                                   f"{max_length} tokens, or an id outside its {vocab_size}-token vocabulary)")
        return list(inputs)
    texts, pairs = texts_and_pairs(inputs)
    return tokenizer.encode_batch(texts, pairs, max_length=max_length, truncation="longest_first")


CALIBRATION_MAX_BYTES = 64 << 20
MIN_CALIBRATION_INPUTS = 16  # serve's floor: one line (or one line 30 times) flipped SST-2 answers


def read_calibration(path: str | Path, minimum: int = 1) -> list[str | tuple[str, str]]:
    """Calibration inputs from a UTF-8 text file: one input per line, a tab between the two
    texts of a pair (sentence pairs; question and passage for SQuAD); blank lines skipped.
    A line with two tabs, a file mixing single texts and pairs, or one with fewer than
    ``minimum`` distinct inputs is a :class:`DataFormatError` naming the file (and line)."""
    inputs: list[str | tuple[str, str]] = []
    try:
        with open(path, "rb") as f:  # bounded: /dev/zero or a stray huge file must not fill memory
            data = f.read(CALIBRATION_MAX_BYTES + 1)
        if len(data) > CALIBRATION_MAX_BYTES:
            raise BertkitError(f"{path}: the calibration file is larger than {CALIBRATION_MAX_BYTES >> 20} MB; "
                               "a few hundred inputs of the model's task are enough")
        lines = data.decode("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise BertkitError(f"{path}: cannot read the calibration file ({e})") from e
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) > 2:
            raise DataFormatError(path, "one text, or two separated by one tab, per line", number)
        if inputs and (len(parts) == 2) != isinstance(inputs[0], tuple):
            raise DataFormatError(path, "mixes single texts and tab-separated pairs: the model "
                                        "takes one or the other", number)
        inputs.append(parts[0] if len(parts) == 1 else (parts[0], parts[1]))
    if not inputs:
        raise DataFormatError(path, "no calibration input (one text, or a tab-separated pair, per line)")
    distinct = len(set(inputs))
    if distinct < minimum:
        raise DataFormatError(path, f"{distinct} distinct calibration input(s): INT8 calibration needs at least "
                                    f"{minimum} different texts of the model's task (a few hundred is usual), or its "
                                    "activation ranges fit those texts alone and answers change")
    return inputs


CALIBRATION_FILE = "calibration.jsonl"  # a fine-tuned directory's own calibration inputs
CALIBRATION_ROWS = 300  # how many finetune saves: the accuracy runs calibrated on 300
SAVED = "saved"  # --calibration saved: the model directory's CALIBRATION_FILE


def save_calibration(directory: str | Path, features: Sequence[dict], count: int = CALIBRATION_ROWS,
                     seed: int = 0) -> int:
    """Write ``count`` distinct encoder inputs drawn (``seed``) from training ``features`` (task
    feature dicts; a multiple-choice feature's (K, L) rows count one each) to ``directory /
    CALIBRATION_FILE``, one JSON object ``{"input_ids", "token_type_ids"}`` per line: the
    tokens the model was fine-tuned on, truncated as in training. Returns how many rows."""
    rows: dict[tuple, dict] = {}
    for i in np.random.default_rng(seed).permutation(len(features)):
        ids = np.atleast_2d(features[i]["input_ids"])
        types = np.atleast_2d(features[i].get("token_type_ids", np.zeros_like(ids)))
        masks = np.atleast_2d(features[i].get("attention_mask", np.ones_like(ids)))  # rows padded to the K's longest
        for row_ids, row_types, row_mask in zip(ids, types, masks):
            real = int(row_mask.sum())
            row = {"input_ids": row_ids[:real].tolist(), "token_type_ids": row_types[:real].tolist()}
            rows.setdefault(tuple(row["input_ids"] + row["token_type_ids"]), row)
        if len(rows) >= count:
            break
    chosen = list(rows.values())[:count]
    with open(Path(directory) / CALIBRATION_FILE, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row) + "\n" for row in chosen)
    return len(chosen)


def has_saved_calibration(model_dir: str | Path) -> bool:
    """Does ``model_dir`` hold the inputs :func:`save_calibration` writes?"""
    return (Path(model_dir) / CALIBRATION_FILE).is_file()


def is_saved_rows(inputs: Sequence) -> bool:
    """Are calibration ``inputs`` saved token rows (:func:`saved_calibration`), not texts?"""
    return bool(inputs) and isinstance(inputs[0], dict)


def saved_calibration(model_dir: str | Path) -> list[dict] | None:
    """The rows :func:`save_calibration` wrote in ``model_dir`` (None if it has none); a
    :class:`DataFormatError` naming the file and line for a malformed one."""
    if not has_saved_calibration(model_dir):
        return None
    path = Path(model_dir) / CALIBRATION_FILE
    rows = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            try:
                row = json.loads(line)
                ok = (isinstance(row, dict) and len(row.get("input_ids") or ()) >= 2
                      and len(row.get("token_type_ids") or ()) == len(row["input_ids"])
                      and all(isinstance(i, int) and i >= 0 for i in row["input_ids"] + row["token_type_ids"]))
            except json.JSONDecodeError:
                ok = False
            if not ok:
                raise DataFormatError(path, 'one JSON object per line, {"input_ids": [...], "token_type_ids": '
                                            "[...]} of equal length (written by bertkit finetune)", number)
            rows.append(row)
    return rows


def calibration_option(path: str | Path | None, precision: str, command: str,
                       model_dir: str | Path | None = None) -> list | None:
    """The inputs ``--calibration`` names for ``command`` (None without one): a file's (at least
    :data:`MIN_CALIBRATION_INPUTS` distinct), or with :data:`SAVED` ``model_dir``'s own
    (:func:`saved_calibration`); only with ``--precision int8``."""
    check_calibration(path, precision, command)
    if path is None:
        return None
    if str(path) != SAVED:
        return read_calibration(path, MIN_CALIBRATION_INPUTS)
    rows = saved_calibration(model_dir) if model_dir is not None else None
    if rows is None:
        raise BertkitError(f"{command}: --calibration {SAVED}: {model_dir} has no {CALIBRATION_FILE} (bertkit "
                           "finetune writes one with the model); pass a file of the model's task inputs instead")
    if len(rows) < MIN_CALIBRATION_INPUTS:
        raise DataFormatError(Path(model_dir) / CALIBRATION_FILE, f"{len(rows)} calibration input(s): INT8 "
                                                                  f"calibration needs at least {MIN_CALIBRATION_INPUTS}")
    return rows
