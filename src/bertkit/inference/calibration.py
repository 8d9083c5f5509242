"""Calibration inputs for static INT8 (OpenVINO's NNCF route, :mod:`bertkit.inference.openvino`,
and PyTorch 2's export route, :mod:`bertkit.inference.static_int8`): real text of the model's
task read from a file, its floor of distinct inputs, and rows padded into a batch."""

from __future__ import annotations

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


def calibration_option(path: str | Path | None, precision: str, command: str) -> list | None:
    """The inputs ``--calibration`` names for ``command`` (None without one): at least
    :data:`MIN_CALIBRATION_INPUTS` distinct, and only with ``--precision int8``."""
    check_calibration(path, precision, command)
    return None if path is None else read_calibration(path, MIN_CALIBRATION_INPUTS)
