"""Resume is exact: interrupted (SIGTERM, kill -9) + resumed == uninterrupted, bit for bit."""

import dataclasses
import json
import os
import signal
import subprocess
import sys

import pytest
import torch

from bertkit.errors import BertkitError, CheckpointError
from bertkit.pretraining.train import pretrain
from bertkit.training import CheckpointManager

from .train_helpers import losses, settings, weights

# dropout on and dynamic masks across an epoch boundary (~30 instances / 4 per batch):
# RNG states and the data position both have to come back for the weights to match.
RUN = dict(steps=10, dynamic_masking=True, eval_every=4, eval_batches=2)


@pytest.fixture(scope="module")
def files(pt_files):
    return {**pt_files, "eval": pt_files["data"]}


@pytest.fixture(scope="module")
def reference(files, tmp_path_factory):
    out = tmp_path_factory.mktemp("reference")
    result = pretrain(settings(files, out, eval_data=str(files["eval"]), **RUN))
    assert result.stopped_by is None and result.step == 10
    return out


def _assert_same_run(run, reference):
    a, b = weights(run), weights(reference)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert losses(run) == losses(reference)


def test_reference_run_logs_and_exports(reference):
    records = losses(reference)
    steps = [r["step"] for r in records if "mlm_acc" in r]
    assert steps == [2, 4, 6, 8, 10]
    assert {"mlm_loss", "mlm_acc", "nsp_loss", "nsp_acc", "lr", "grad_norm"} <= set(records[0])
    assert [r["step"] for r in records if "eval_mlm_acc" in r] == [4, 8, 10]
    assert (reference / "model" / "vocab.txt").is_file()
    assert [s for s, _ in CheckpointManager(reference / "checkpoints").checkpoints()] == [6, 9, 10]
    from bertkit.checkpoint import load_pretrained

    model = load_pretrained(reference / "model")
    assert type(model).__name__ == "BertForPreTraining"


def test_sigterm_checkpoints_then_resume_is_exact(files, reference, tmp_path):
    config = settings(files, tmp_path, eval_data=str(files["eval"]), **RUN)

    def terminate_at_4(step):
        if step == 4:
            os.kill(os.getpid(), signal.SIGTERM)

    stopped = pretrain(config, on_step=terminate_at_4)
    assert stopped.stopped_by == "SIGTERM" and stopped.step == 4 and stopped.model_dir is None
    assert CheckpointManager(tmp_path / "checkpoints").latest().name == "step-00000004.pt"
    with pytest.raises(BertkitError, match="--resume"):
        pretrain(config)
    pretrain(dataclasses.replace(config, resume=True))
    _assert_same_run(tmp_path, reference)


def test_kill_9_between_checkpoints_then_resume_is_exact(files, reference, tmp_path):
    config = settings(files, tmp_path, eval_data=str(files["eval"]), **RUN)
    script = (
        "import json, os, signal, sys, torch\n"
        "torch.set_num_threads(1)\n"
        "from bertkit.pretraining.train import pretrain\n"
        "from bertkit.pretraining.train_config import PretrainConfig\n"
        "kill = lambda step: step == 5 and os.kill(os.getpid(), signal.SIGKILL)\n"
        "pretrain(PretrainConfig(**json.loads(sys.argv[1])), on_step=kill)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(config.to_dict())],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert CheckpointManager(tmp_path / "checkpoints").latest().name == "step-00000003.pt"
    assert max(r["step"] for r in losses(tmp_path)) == 4  # logged past the checkpoint
    orphan = tmp_path / "checkpoints" / ".step-00000006.pt.k1ll3d.tmp"  # killed mid-write
    orphan.write_bytes(b"partial")
    pretrain(dataclasses.replace(config, resume=True))
    _assert_same_run(tmp_path, reference)
    assert not orphan.exists()


def test_resume_with_another_model_shape_is_refused(files, reference, tmp_path):
    import shutil

    shutil.copytree(reference / "checkpoints", tmp_path / "checkpoints")
    config = settings(files, tmp_path, resume=True, steps=12, model_config=None, model_size="tiny")
    with pytest.raises(CheckpointError, match=r"different model shape: .*\(32,\) in the checkpoint, \(128,\)"):
        pretrain(config)
