"""Pre-training refuses what would silently train garbage: a reordered vocabulary, divergence."""

from __future__ import annotations

import pytest
import torch

from bertkit.errors import BertkitError
from bertkit.pretraining.train import pretrain

from .train_helpers import VOCAB, make_data, settings


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return make_data(tmp_path_factory.mktemp("checks"))


def test_vocab_of_same_size_but_other_order_is_refused(files, tmp_path):
    shuffled = VOCAB[:5] + VOCAB[5:][::-1]
    (tmp_path / "shuffled.txt").write_text("\n".join(shuffled) + "\n")
    run = settings(files, tmp_path / "run", vocab=str(tmp_path / "shuffled.txt"))
    with pytest.raises(BertkitError, match="not the vocabulary the data was made with"):
        pretrain(run)
    assert not (tmp_path / "run" / "model").exists()


def test_same_vocab_under_another_name_and_line_ending_is_accepted(files, tmp_path):
    (tmp_path / "copy.txt").write_text("\r\n".join(VOCAB) + "\r\n")
    run = settings(files, tmp_path / "run", vocab=str(tmp_path / "copy.txt"), steps=1, save_every=1)
    assert pretrain(run).step == 1


def test_a_diverging_run_stops_without_exporting(files, tmp_path):
    torch.manual_seed(0)
    run = settings(files, tmp_path / "run", lr=1e6, steps=12, log_every=2, save_every=100)
    with pytest.raises(BertkitError, match="diverged"):
        pretrain(run)
    assert not (tmp_path / "run" / "model").exists()
