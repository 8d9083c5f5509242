"""The on-disk layout of pre-training data: sharded ``.npy`` arrays plus ``meta.json``.

A data directory holds, for each shard ``k``, the files ``shard-{k:05d}.{field}.npy``:

=======================  ==========  =====================================================
field                    shape       meaning
=======================  ==========  =====================================================
``input_ids``            (n, T)      ``[CLS] A [SEP] B [SEP]`` then ``[PAD]``; uint16 when
                                     the vocabulary fits, else int32. Masked (static
                                     masking) or the original tokens (dynamic masking)
``lengths``              (n,)        int32, tokens before padding (attention mask)
``b_starts``             (n,)        int32, first position of segment B (token type 1 from
                                     there up to ``lengths``)
``next_sentence_label``  (n,)        int8, 0 = IsNext, 1 = NotNext (random B)
``mlm_positions``        (n, P)      int16, static masking only: predicted positions, -1 pad
``mlm_ids``              (n, P)      static masking only: the original ids there (0 pad)
=======================  ==========  =====================================================

plus ``vocab_info.npz`` (what dynamic masking needs to know about the vocabulary) and
``meta.json``, written last: a directory without ``meta.json`` is unfinished. Every file is
written under a temporary name and renamed, so no half-written file ever carries a final
name. Files are read with ``np.load(mmap_mode="r")``: nothing is loaded up front.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bertkit.fileio import atomic_write

META_NAME = "meta.json"
VOCAB_INFO_NAME = "vocab_info.npz"
FORMAT = "bertkit-pretraining-data"
FORMAT_VERSION = 1
STATIC_FIELDS = ("input_ids", "lengths", "b_starts", "next_sentence_label")
MLM_FIELDS = ("mlm_positions", "mlm_ids")


def shard_file(directory: str | Path, shard: int, field: str) -> Path:
    """The path of one array of one shard."""
    return Path(directory) / f"shard-{shard:05d}.{field}.npy"


def save_array(path: Path, array: np.ndarray) -> None:
    """``np.save`` under a temporary name, renamed over ``path`` once complete."""
    with atomic_write(path, "wb") as f:
        np.save(f, np.ascontiguousarray(array), allow_pickle=False)


class ShardWriter:
    """Collects rows (dicts of equally long arrays) and writes full shards as they fill.

    ``add`` takes any number of rows; ``close`` writes the last, partial shard and returns
    the shard list for ``meta.json`` (``[{"name": ..., "count": ...}]``).
    """

    def __init__(self, directory: str | Path, shard_size: int, fields: tuple[str, ...]):
        if shard_size < 1:
            raise ValueError("shard_size must be at least 1")
        self.directory = Path(directory)
        self.shard_size = shard_size
        self.fields = fields
        self.pending: dict[str, list[np.ndarray]] = {f: [] for f in fields}
        self.pending_rows = 0
        self.shards: list[dict] = []

    def add(self, rows: dict[str, np.ndarray]) -> None:
        for field in self.fields:
            self.pending[field].append(rows[field])
        self.pending_rows += len(rows[self.fields[0]])
        while self.pending_rows >= self.shard_size:
            self._flush(self.shard_size)

    def _flush(self, count: int) -> None:
        index = len(self.shards)
        for field in self.fields:
            joined = np.concatenate(self.pending[field])
            save_array(shard_file(self.directory, index, field), joined[:count])
            self.pending[field] = [joined[count:]] if len(joined) > count else []
        self.pending_rows -= count
        self.shards.append({"name": f"shard-{index:05d}", "count": count})

    def close(self) -> list[dict]:
        if self.pending_rows:
            self._flush(self.pending_rows)
        return self.shards


def remove_stale_files(directory: Path, keep_shards: int) -> None:
    """Delete shard files numbered ``keep_shards`` and up (left by an earlier, larger run)."""
    for path in directory.glob("shard-*.npy"):
        number = path.name[len("shard-") :].split(".", 1)[0]
        if number.isdigit() and int(number) >= keep_shards:
            path.unlink()


def write_meta(directory: str | Path, meta: dict) -> None:
    """Write ``meta.json`` atomically (the last file of a finished directory)."""
    with atomic_write(Path(directory) / META_NAME) as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")


def read_meta(directory: str | Path) -> dict:
    """Read and check ``meta.json``; a missing one means the directory is not finished."""
    from bertkit.errors import DataFormatError

    path = Path(directory) / META_NAME
    if not path.exists():
        raise DataFormatError(
            directory, "no meta.json: not pre-training data, or its creation did not finish"
        )
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataFormatError(path, f"not valid JSON ({e})") from None
    if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
        raise DataFormatError(path, f"not {FORMAT} version {FORMAT_VERSION}")
    return meta
