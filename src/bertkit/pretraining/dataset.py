"""Reading pre-training data: :class:`PretrainingDataset` and :func:`collate`.

Items are dicts of numpy arrays, ``T = max_seq_length``::

    input_ids            (T,) int32   masked ids ([PAD] after the sequence)
    token_type_ids       (T,) int32   0 for [CLS] A [SEP], 1 for B [SEP], 0 on padding
    attention_mask       (T,) int32   1 on the sequence, 0 on padding
    mlm_labels           (T,) int64   original id at predicted positions, -100 elsewhere
    next_sentence_label  ()   int64   0 = IsNext, 1 = NotNext

Masking is static (stored at creation), dynamic (drawn at load time from an RNG that is a
pure function of ``(seed, epoch, global index)``: call :meth:`PretrainingDataset.set_epoch`
each epoch; a resumed run sees the same masks) or off (``unmasked=True``: the original
tokens, all ``mlm_labels`` -100, e.g. for a left-to-right objective that derives next-token
labels from ``input_ids``). Static data can also be read dynamically or unmasked: the
stored predictions restore the original tokens.
"""

from __future__ import annotations

import bisect
from pathlib import Path

import numpy as np

from bertkit.config import IGNORE_INDEX
from bertkit.errors import DataFormatError
from bertkit.pretraining.masking import MaskingConfig, VocabInfo, dynamic_rng, mask_sequence
from bertkit.pretraining.shards import (
    MLM_FIELDS,
    STATIC_FIELDS,
    VOCAB_INFO_NAME,
    read_meta,
    shard_file,
)


def collate(items: list[dict[str, np.ndarray]]) -> dict:
    """Stack items into a batch: a dict of int64 ``torch`` tensors, ``(B, T)`` and ``(B,)``."""
    import torch

    if not items:
        raise ValueError("cannot collate an empty batch")
    return {
        key: torch.from_numpy(np.stack([item[key] for item in items]).astype(np.int64))
        for key in items[0]
    }


class PretrainingDataset:
    """Memory-mapped pre-training instances of a directory written by ``create_pretraining_data``.

    ``dynamic_masking``: None = as the data was made (``meta["masking"]``); True = draw
    masks at load time (needs ``seed``); False = stored masks (static data only).
    ``len()``, integer indexing, :meth:`shard` for distributed training, :meth:`set_epoch`.
    """

    def __init__(
        self,
        directory: str | Path,
        dynamic_masking: bool | None = None,
        seed: int = 0,
        unmasked: bool = False,
        epoch: int = 0,
    ):
        self.directory = Path(directory)
        self.meta = read_meta(self.directory)
        stored_static = self.meta["masking"] == "static"
        if dynamic_masking is None:
            dynamic_masking = not stored_static
        if not dynamic_masking and not stored_static and not unmasked:
            raise DataFormatError(
                self.directory, "the data was made for dynamic masking: it stores no masks"
            )
        self.dynamic_masking = bool(dynamic_masking) and not unmasked
        self.unmasked = unmasked
        self.stored_static = stored_static
        self.seed = int(seed)
        self.epoch = int(epoch)
        self.max_seq_length = int(self.meta["max_seq_length"])
        self.masking_config = MaskingConfig(
            self.meta["masked_lm_prob"], self.meta["max_predictions_per_seq"], self.meta["whole_word_mask"]
        )
        self._shards = self._open_shards()
        counts = [s["count"] for s in self.meta["shards"]]
        self._offsets = np.cumsum([0] + counts).tolist()
        self._start, self._stop = 0, self._offsets[-1]
        self._vocab_info: VocabInfo | None = None

    def _open_shards(self) -> list[dict[str, np.ndarray]]:
        fields = STATIC_FIELDS + (MLM_FIELDS if self.stored_static else ())
        shards = []
        for k, record in enumerate(self.meta["shards"]):
            arrays = {}
            for f in fields:
                path = shard_file(self.directory, k, f)
                try:
                    arrays[f] = np.load(path, mmap_mode="r")
                except (OSError, ValueError) as e:
                    raise DataFormatError(path, f"cannot read shard array ({e})") from None
                if len(arrays[f]) != record["count"]:
                    raise DataFormatError(path, f"{len(arrays[f])} rows, meta.json says {record['count']}")
            shards.append(arrays)
        return shards

    @property
    def vocab_info(self) -> VocabInfo:
        if self._vocab_info is None:
            with np.load(self.directory / VOCAB_INFO_NAME) as z:
                self._vocab_info = VocabInfo(
                    z["continuation"], z["special"], z["random_pool"], int(self.meta["mask_id"])
                )
        return self._vocab_info

    def __len__(self) -> int:
        return self._stop - self._start

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose dynamic masks items get (no effect on static masks)."""
        self.epoch = int(epoch)

    def shard(self, rank: int, world_size: int) -> PretrainingDataset:
        """This rank's contiguous part: ``len(self) // world_size`` items (the rest dropped,
        so every rank takes the same number of steps). Dynamic masks keep depending on the
        global index, so they do not change with ``world_size``."""
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} outside world size {world_size}")
        size = len(self) // world_size
        return self.subset(rank * size, (rank + 1) * size)

    def subset(self, start: int, stop: int) -> PretrainingDataset:
        """A view on items ``start:stop`` of this dataset (sharing the memory maps)."""
        if not 0 <= start <= stop <= len(self):
            raise ValueError(f"range {start}:{stop} outside 0:{len(self)}")
        view = object.__new__(PretrainingDataset)
        view.__dict__.update(self.__dict__)
        view._start, view._stop = self._start + start, self._start + stop
        return view

    def global_index(self, index: int) -> int:
        """The index of item ``index`` of this view in the whole directory."""
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} items")
        return self._start + (index % len(self))

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        g = self.global_index(index)
        k = bisect.bisect_right(self._offsets, g) - 1
        shard, row = self._shards[k], g - self._offsets[k]
        T = self.max_seq_length
        ids = np.asarray(shard["input_ids"][row], dtype=np.int32)
        length, b_start = int(shard["lengths"][row]), int(shard["b_starts"][row])
        labels = np.full(T, IGNORE_INDEX, dtype=np.int64)
        if self.stored_static:
            positions = np.asarray(shard["mlm_positions"][row], dtype=np.int64)
            keep = positions >= 0
            positions, originals = positions[keep], np.asarray(shard["mlm_ids"][row])[keep]
            if self.unmasked or self.dynamic_masking:
                ids[positions] = originals
            else:
                labels[positions] = originals
        if self.dynamic_masking:
            rng = dynamic_rng(self.seed, self.epoch, g)
            masked, positions, originals = mask_sequence(
                ids[:length], self.vocab_info, self.masking_config, rng
            )
            ids[:length] = masked
            labels[positions] = originals
        token_type_ids = np.zeros(T, dtype=np.int32)
        token_type_ids[b_start:length] = 1
        attention_mask = np.zeros(T, dtype=np.int32)
        attention_mask[:length] = 1
        return {
            "input_ids": ids,
            "token_type_ids": token_type_ids,
            "attention_mask": attention_mask,
            "mlm_labels": labels,
            "next_sentence_label": np.array(shard["next_sentence_label"][row], dtype=np.int64),
        }

    collate = staticmethod(collate)

    def __getstate__(self) -> dict:
        # Memory maps would be pickled as full copies: reopen them instead (DataLoader workers).
        state = dict(self.__dict__)
        state["_shards"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._shards = self._open_shards()
