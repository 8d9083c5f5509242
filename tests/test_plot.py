"""``bertkit plot``: what each panel draws (the schedule's learning rate, dev metrics of a
fine-tuning run) and a diverged run refused instead of an empty panel."""

from __future__ import annotations

import json

import pytest

from bertkit.errors import BertkitError
from bertkit.plot import curves, plot_run


def finetune_log(path, loss=lambda step: 1.0 / step, with_eval_step=True):
    """A fine-tuning log as ``finetune`` writes it: 2 epochs of 4 steps, peak lr 1e-4."""
    run = {"lr": 1e-4, "batch": 16, "epochs": 2, "seed": 42}
    lines = [{"event": "start", "task": "sst2"}]
    for step in range(1, 9):
        lines.append({"event": "train", **run, "epoch": (step - 1) // 4 + 1, "step": step, "steps": 8,
                      "loss": loss(step), "lr_now": 1e-4 * (8 - step) / 8})
        if step % 4 == 0:
            record = {"event": "eval", **run, "epoch": step // 4, "accuracy": 0.5 + step / 100}
            lines.append({**record, "step": step} if with_eval_step else record)
    path.mkdir(parents=True, exist_ok=True)
    (path / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


@pytest.mark.parametrize("with_eval_step", [True, False])  # False: logs written before the step
def test_a_fine_tuning_run_draws_the_schedule_and_dev_metrics(tmp_path, with_eval_step):
    from bertkit.plot import _records

    run = finetune_log(tmp_path / "ft", with_eval_step=with_eval_step)
    panels = curves(_records(run)[1])
    rates = [v for _, v in panels["learning rate"]["lr_now"]]
    assert rates[0] == pytest.approx(8.75e-5) and rates[-1] == 0.0  # the decay, not the peak
    assert panels["dev metrics"] == {"accuracy": [(4, 0.54), (8, 0.58)]}
    assert [s for s, _ in panels["loss"]["loss"]] == list(range(1, 9))
    assert plot_run(run).read_bytes().startswith(b"\x89PNG")


def test_an_all_nan_run_is_an_error_not_an_empty_panel(tmp_path, capsys):
    from bertkit.cli.main import main

    run = finetune_log(tmp_path / "nan", loss=lambda step: float("nan"))
    with pytest.raises(BertkitError, match=r"loss is NaN or infinite at every one of its 8"):
        plot_run(run)
    assert main(["plot", str(run)]) == 1
    assert "the run diverged" in capsys.readouterr().err
    assert not (run / "curves.png").exists()


def test_nan_points_are_left_out_of_a_curve(tmp_path):
    from bertkit.plot import _records

    run = finetune_log(tmp_path / "some", loss=lambda step: float("nan") if step == 3 else 1.0)
    assert [s for s, _ in curves(_records(run)[1])["loss"]["loss"]] == [1, 2, 4, 5, 6, 7, 8]
