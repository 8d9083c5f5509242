"""``torchrun --nproc_per_node 2`` on CPU follows the single-process run at the same global batch."""

import shutil
import subprocess

import pytest
import torch

from bertkit.pretraining.train import pretrain

from ..torchrun_helpers import torchrun_env, torchrun_path
from .train_helpers import cli_flags, losses, make_data, settings, weights


def _launch(config) -> None:
    # --tee 2: each rank's own stderr in torchrun's, so that a failure shows why the rank ended
    # (a rank once aborted under load with only torchrun's summary to read)
    proc = subprocess.run(
        [torchrun_path(), "--standalone", "--nproc_per_node", "2", "--tee", "2", "-m", "bertkit.cli.main",
         "pretrain", *cli_flags(config)],
        capture_output=True, text=True, timeout=180, env=torchrun_env(),
    )
    assert proc.returncode == 0, proc.stderr[-6000:]


@pytest.mark.slow
def test_two_processes_match_one_with_accumulation(tmp_path):
    torchrun_path()  # skips without it
    files = make_data(tmp_path / "pt")
    # global batch 4: one process 2 x accumulation 2, or two processes 2 x 1; dropout off
    common = dict(steps=6, batch_size=2, dropout=0.0, log_every=1, save_every=3, keep=2)
    single = settings(files, tmp_path / "single", grad_accum=2, **common)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pretrain(single)
    finally:
        torch.set_num_threads(threads)
    _launch(settings(files, tmp_path / "ddp", **common))
    one, two = losses(tmp_path / "single"), losses(tmp_path / "ddp")
    assert [r["step"] for r in one] == [r["step"] for r in two] == [1, 2, 3, 4, 5, 6]
    for a, b in zip(one, two):
        for key in ("mlm_loss", "nsp_loss", "mlm_acc", "nsp_acc", "grad_norm"):
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-5), (a["step"], key)
    assert one[-1]["mlm_loss"] != one[0]["mlm_loss"]  # it trained
    w1, w2 = weights(tmp_path / "single"), weights(tmp_path / "ddp")
    for name in w1:
        torch.testing.assert_close(w2[name], w1[name], rtol=1e-4, atol=1e-5)

    # every rank resumes: drop the final state, resume from step 3 with two processes again
    ddp = tmp_path / "ddp"
    (ddp / "checkpoints" / "step-00000006.pt").unlink()
    shutil.rmtree(ddp / "model")
    _launch(settings(files, ddp, resume=True, **common))
    assert losses(ddp) == two
    resumed = weights(ddp)
    assert all(torch.equal(resumed[k], w2[k]) for k in w2)
