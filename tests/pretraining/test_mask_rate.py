"""``--mask-rate``: masks drawn at load time at the asked rate (tiny fixture and real shards),
80% [MASK] / 10% random / 10% unchanged, and a pure function of (seed, epoch, index)."""

from __future__ import annotations

from itertools import islice

import numpy as np
import pytest

from bertkit.errors import BertkitError
from bertkit.pretraining.masking import MaskingConfig, load_time_config
from bertkit.pretraining.setup import open_datasets
from bertkit.pretraining.train_config import PretrainConfig
from tests.conftest import shared_path

from .train_helpers import make_data


def measure(dataset, epochs=(0,), limit: int | None = None) -> dict[str, float]:
    """Masked share of the maskable tokens, and how predicted positions were changed."""
    from bertkit.pretraining.data import PretrainingDataset

    twin = PretrainingDataset(dataset.directory, unmasked=True)
    special = dataset.vocab_info.special
    mask_id = dataset.vocab_info.mask_id
    chosen = candidates = as_mask = unchanged = 0
    for epoch in epochs:
        dataset.set_epoch(epoch)
        for i in islice(range(len(dataset)), limit):
            item, original = dataset[i], twin[dataset.global_index(i)]["input_ids"]
            length = int(item["attention_mask"].sum())
            labelled = item["mlm_labels"] != -100
            assert np.array_equal(item["mlm_labels"][labelled], original[labelled])
            candidates += int((~special[original[:length]]).sum())
            chosen += int(labelled.sum())
            as_mask += int((item["input_ids"][labelled] == mask_id).sum())
            unchanged += int((item["input_ids"][labelled] == original[labelled]).sum())
            changed = ~labelled[:length] & (item["input_ids"][:length] != original[:length])
            assert not changed.any(), "only predicted positions may change"
    return {"rate": chosen / candidates, "mask": as_mask / chosen, "unchanged": unchanged / chosen,
            "random": 1 - (as_mask + unchanged) / chosen, "chosen": chosen}


def _config(files, **values) -> PretrainConfig:
    return PretrainConfig(data=str(files["data"]), out="unused", vocab=str(files["vocab"]),
                          **values).validate()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return make_data(tmp_path_factory.mktemp("mask"), documents=20)


def test_load_time_config_raises_the_cap_with_the_rate():
    stored = MaskingConfig(0.15, 20, whole_word_mask=True)
    assert load_time_config(stored, 0.15, 128) == MaskingConfig(0.15, 20, True)
    assert load_time_config(stored, 0.4, 128) == MaskingConfig(0.4, 52, True)
    assert load_time_config(stored, 0.4, 128, max_predictions=30).max_predictions_per_seq == 30
    assert load_time_config(stored, 0.1, 128).max_predictions_per_seq == 20


@pytest.mark.parametrize("rate", [0.15, 0.4])
def test_tiny_fixture_rate_and_80_10_10(files, rate):
    train, _ = open_datasets(_config(files, mask_rate=rate))
    assert train.dynamic_masking  # static data, masks drawn at load time instead
    m = measure(train, epochs=range(12))
    # per sequence round(n * rate) of n ~ 10-30 candidates: the share is near the rate
    assert m["rate"] == pytest.approx(rate, abs=0.03)
    assert m["chosen"] > 1000
    assert m["mask"] == pytest.approx(0.8, abs=0.04)
    # random replacements may hit the original token (1 in ~28 here)
    assert m["unchanged"] == pytest.approx(0.1 + 0.1 / 28, abs=0.03)
    assert m["random"] == pytest.approx(0.1 - 0.1 / 28, abs=0.03)


def test_masks_are_a_function_of_seed_epoch_index(files):
    a, _ = open_datasets(_config(files, mask_rate=0.3, seed=5))
    b, _ = open_datasets(_config(files, mask_rate=0.3, seed=5))
    b.set_epoch(1)
    b.set_epoch(0)
    for i in (0, 3, 7):
        assert np.array_equal(a[i]["input_ids"], b[i]["input_ids"])
    a.set_epoch(1)
    assert any(not np.array_equal(a[i]["mlm_labels"], b[i]["mlm_labels"]) for i in range(8))
    c, _ = open_datasets(_config(files, mask_rate=0.3, seed=6))
    assert any(not np.array_equal(c[i]["mlm_labels"], b[i]["mlm_labels"]) for i in range(8))


def test_without_mask_rate_the_stored_masks_are_used(files):
    train, _ = open_datasets(_config(files))
    assert not train.dynamic_masking
    assert train.masking_config.masked_lm_prob == 0.15


@pytest.mark.parametrize("values, message", [
    ({"mask_rate": 0.0}, "between 0 and 1"),
    ({"mask_rate": 1.0}, "between 0 and 1"),
    ({"mask_rate": 0.3, "dynamic_masking": False}, "no-dynamic-masking"),
    ({"mask_rate": 0.3, "objective": "ltr"}, "ltr"),
    ({"max_predictions": 30}, "mask-rate"),
    ({"mask_rate": 0.3, "max_predictions": 0}, ">= 1"),
])
def test_bad_masking_settings(values, message):
    with pytest.raises(BertkitError, match=message):
        PretrainConfig(data="d", out="o", **values).validate()


@pytest.fixture(scope="module")
def real_shards(tmp_path_factory):
    """Pre-training data from the first 300 KB of the shared corpus, with a 2,000-token
    vocabulary trained on it (static 15% masks, as `bertkit pretrain-data` writes by default)."""
    corpus = shared_path("corpus", "kjv.txt")
    from bertkit.pretraining.data import CreationSettings, create_pretraining_data
    from bertkit.tokenizer.train import count_words, train_wordpiece

    root = tmp_path_factory.mktemp("real")
    with open(corpus, encoding="utf-8") as f:
        text = f.read(300_000)
    (root / "corpus.txt").write_text(text, encoding="utf-8")
    vocab = train_wordpiece(count_words(text.splitlines(), progress=False), 2000, progress=False)
    vocab.save(root / "vocab.txt")
    create_pretraining_data([root / "corpus.txt"], root / "vocab.txt", root / "data",
                            CreationSettings(max_seq_length=128, dupe_factor=1), progress=False)
    return {"data": root / "data", "vocab": root / "vocab.txt"}


@pytest.mark.parametrize("rate", [0.15, 0.3, 0.4])
def test_real_shards_rate(real_shards, rate):
    train, _ = open_datasets(_config(real_shards, mask_rate=rate))
    m = measure(train, limit=300)
    assert m["rate"] == pytest.approx(rate, abs=0.01)  # ~120 candidates: rounding < 0.5%
    assert m["mask"] == pytest.approx(0.8, abs=0.03)
    assert m["unchanged"] == pytest.approx(0.1, abs=0.025)
