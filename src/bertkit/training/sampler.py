"""Batch orders: deterministic, resumable, rank-sharded (:class:`EpochBatches`, pre-training)
and length-bucketed for variable-length inputs (:func:`length_batches`, fine-tuning and
inference).

Contract: the item order of epoch ``e`` is a permutation drawn from
``numpy.random.default_rng([seed, e])`` (or ``arange`` without shuffling), a pure function of
``(seed, epoch)``. Global batch ``b`` of an epoch is ``order[b*G:(b+1)*G]`` with
``G = micro_batch_size * accumulation * world_size`` (an incomplete tail is dropped); rank
``r`` takes its contiguous slice of ``G / world_size`` items and splits it into
``accumulation`` micro-batches. A position ``{"epoch": e, "batch": b}`` names the next global
batch, so a resumed run reads exactly the batches an uninterrupted one would, skipping the
consumed ones without loading them.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from bertkit.errors import BertkitError


class EpochBatches:
    def __init__(
        self,
        num_items: int,
        micro_batch_size: int,
        accumulation: int = 1,
        world_size: int = 1,
        rank: int = 0,
        seed: int = 0,
        shuffle: bool = True,
    ):
        if micro_batch_size < 1 or accumulation < 1:
            raise ValueError("micro_batch_size and accumulation must be >= 1")
        self.num_items = num_items
        self.micro_batch_size = micro_batch_size
        self.accumulation = accumulation
        self.world_size = world_size
        self.rank = rank
        self.seed = seed
        self.shuffle = shuffle
        if self.batches_per_epoch == 0:
            raise BertkitError(
                f"the data has {num_items} instances, fewer than one global batch of "
                f"{self.global_batch_size} (micro-batch {micro_batch_size} x accumulation "
                f"{accumulation} x {world_size} processes)"
            )

    @property
    def global_batch_size(self) -> int:
        return self.micro_batch_size * self.accumulation * self.world_size

    @property
    def batches_per_epoch(self) -> int:
        return self.num_items // self.global_batch_size

    def epoch_order(self, epoch: int) -> np.ndarray:
        if not self.shuffle:
            return np.arange(self.num_items)
        return np.random.default_rng([self.seed, epoch]).permutation(self.num_items)

    def micro_batches(self, order: np.ndarray, batch: int) -> list[np.ndarray]:
        """This rank's micro-batches (index arrays) of global batch ``batch`` of ``order``."""
        per_rank = self.micro_batch_size * self.accumulation
        start = batch * self.global_batch_size + self.rank * per_rank
        mine = order[start:start + per_rank]
        return [mine[i:i + self.micro_batch_size] for i in range(0, per_rank, self.micro_batch_size)]

    def iterate(self, position: dict | None = None) -> Iterator[tuple[dict, list[np.ndarray]]]:
        """Endless ``(position_after, micro_batches)`` from ``position`` (default: the start)."""
        epoch = int((position or {}).get("epoch", 0))
        batch = int((position or {}).get("batch", 0))
        while True:
            order = self.epoch_order(epoch)
            while batch < self.batches_per_epoch:
                micro = self.micro_batches(order, batch)
                batch += 1
                yield {"epoch": epoch, "batch": batch}, micro
            epoch, batch = epoch + 1, 0


def length_batches(lengths, batch_size: int, rng: np.random.Generator | None = None,
                   bucket: int = 50, longest_first: bool = False) -> list[np.ndarray]:
    """Index batches over ``lengths`` for variable-length inputs (little padding).

    Without ``rng``: sorted by length, shortest first (``longest_first``: longest first),
    ties in index order (evaluation and inference). With ``rng``: shuffled, then each chunk
    of ``bucket`` batches sorted by length and cut into batches, and the batch order
    shuffled (training: random yet little padding)."""
    lengths = np.asarray(lengths)
    n = len(lengths)
    if rng is None:
        order = np.argsort(-lengths if longest_first else lengths, kind="stable")
        return [order[i: i + batch_size] for i in range(0, n, batch_size)]
    order = rng.permutation(n)
    chunk = batch_size * max(1, bucket)
    batches = []
    for start in range(0, n, chunk):
        part = order[start: start + chunk]
        part = part[np.argsort(lengths[part], kind="stable")]
        batches.extend(part[i: i + batch_size] for i in range(0, len(part), batch_size))
    return [batches[i] for i in rng.permutation(len(batches))]
