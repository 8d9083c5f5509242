import numpy as np
import pytest

from bertkit.errors import BertkitError
from bertkit.training import EpochBatches


def _take(it, n):
    return [next(it) for _ in range(n)]


def test_order_is_a_function_of_seed_and_epoch():
    a, b = EpochBatches(10, 2, seed=3), EpochBatches(10, 2, seed=3)
    assert np.array_equal(a.epoch_order(1), b.epoch_order(1))
    assert not np.array_equal(a.epoch_order(0), a.epoch_order(1))
    assert sorted(a.epoch_order(0)) == list(range(10))


def test_resume_from_position_sees_the_same_batches():
    s = EpochBatches(10, 3, seed=1)  # 3 batches per epoch, tail of 1 dropped
    full = _take(s.iterate(), 7)
    pos = full[3][0]
    resumed = _take(s.iterate(pos), 3)
    for (p1, m1), (p2, m2) in zip(full[4:], resumed):
        assert p1 == p2 and all(np.array_equal(x, y) for x, y in zip(m1, m2))
    assert full[2][0] == {"epoch": 0, "batch": 3} and full[3][0] == {"epoch": 1, "batch": 1}


def test_ranks_split_the_global_batch_into_micro_batches():
    single = EpochBatches(16, 2, accumulation=2, world_size=1, seed=0)
    ranks = [EpochBatches(16, 1, accumulation=2, world_size=2, rank=r, seed=0) for r in range(2)]
    (_, whole), = _take(single.iterate(), 1)
    parts = [next(r.iterate())[1] for r in ranks]
    assert [len(m) for m in parts[0]] == [1, 1]
    assert np.array_equal(np.concatenate(whole), np.concatenate([np.concatenate(p) for p in parts]))


def test_too_little_data_is_a_clear_error():
    with pytest.raises(BertkitError, match="fewer than one global batch"):
        EpochBatches(3, 4)
