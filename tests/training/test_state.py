import random

import numpy as np
import pytest
import torch

from bertkit.errors import CheckpointError
from bertkit.training import (
    CheckpointManager,
    build_optimizer,
    capture_rng_state,
    capture_training_state,
    linear_warmup_decay,
    restore_rng_state,
    restore_training_state,
)
from bertkit.training import state as ckpt_module

from .toy import Toy


def _parts(width=8):
    model = Toy(width)
    opt = build_optimizer(model, lr=1e-3)
    return model, opt, linear_warmup_decay(opt, 2, 10)


def _state(model, opt, sched, step):
    return capture_training_state(model=model, optimizer=opt, scheduler=sched, step=step,
                                  data_position={"epoch": 0, "batch": step}, config={"seed": 1})


def test_keep_last_k_and_latest(tmp_path):
    manager = CheckpointManager(tmp_path, keep=2)
    parts = _parts()
    for step in (1, 2, 3):
        manager.save(_state(*parts, step), step)
    assert [s for s, _ in manager.checkpoints()] == [2, 3]
    assert manager.latest() == manager.path_for(3)
    assert manager.load()["step"] == 3


def test_round_trip_restores_everything(tmp_path):
    model, opt, sched = _parts()
    model(torch.tensor([1, 2]), torch.zeros(2)).loss.backward()
    opt.step()
    sched.step()
    torch.manual_seed(5)
    manager = CheckpointManager(tmp_path)
    manager.save(_state(model, opt, sched, 1), 1)
    expected = (random.random(), np.random.rand(), torch.rand(1))
    other = _parts()
    restore_training_state(manager.load(), model=other[0], optimizer=other[1], scheduler=other[2])
    assert (random.random(), np.random.rand()) == expected[:2] and torch.equal(torch.rand(1), expected[2])
    for a, b in zip(model.state_dict().values(), other[0].state_dict().values()):
        assert torch.equal(a, b)
    assert other[2].last_epoch == 1
    assert torch.equal(other[1].state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])


def test_rng_state_per_rank_list(tmp_path):
    torch.manual_seed(1)
    states = [capture_rng_state()]
    expected = torch.rand(3)
    restore_rng_state(states[0])
    model, opt, sched = _parts()
    state = capture_training_state(model=model, optimizer=opt, scheduler=sched, step=0,
                                   data_position={}, config={}, rng=states)
    torch.manual_seed(99)
    restore_training_state(state, model=model, optimizer=opt, scheduler=sched, rank=0)
    assert torch.equal(torch.rand(3), expected)


def test_different_model_shape_is_a_clear_error(tmp_path):
    manager = CheckpointManager(tmp_path)
    manager.save(_state(*_parts(8), 1), 1)
    model, opt, sched = _parts(16)
    with pytest.raises(CheckpointError, match=r"different model shape: .*dense.weight: \(8, 8\) in the checkpoint, \(16, 16\)"):
        restore_training_state(manager.load(), model=model, optimizer=opt, scheduler=sched,
                               source=str(manager.latest()))


def test_interrupted_write_keeps_last_good_checkpoint(tmp_path, monkeypatch):
    manager = CheckpointManager(tmp_path)
    parts = _parts()
    manager.save(_state(*parts, 1), 1)
    good = manager.path_for(1).read_bytes()

    def half_write(obj, path):
        with open(path, "wb") as f:
            f.write(b"PK\x03\x04 half a checkpoint")
        raise KeyboardInterrupt  # e.g. Ctrl-C mid-write

    monkeypatch.setattr(ckpt_module.torch, "save", half_write)
    with pytest.raises(KeyboardInterrupt):
        manager.save(_state(*parts, 2), 2)
    assert manager.latest() == manager.path_for(1) and manager.path_for(1).read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000001.pt"]
    # a temporary file left by a killed writer is never taken for a checkpoint
    (tmp_path / ".step-00000002.pt.abc.tmp").write_bytes(b"garbage")
    assert manager.latest() == manager.path_for(1)
    assert manager.load()["step"] == 1


def test_unreadable_or_missing_checkpoint(tmp_path):
    manager = CheckpointManager(tmp_path)
    with pytest.raises(CheckpointError, match="no checkpoint"):
        manager.load()
    manager.path_for(3).write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="unreadable"):
        manager.load()
