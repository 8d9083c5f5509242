"""``--budget``: its arithmetic, the run it plans, the deadline and resume (fake clocks only)."""

import json

import pytest
import torch

from bertkit.errors import BertkitError
from bertkit.pretraining import budget as budget_mod
from bertkit.pretraining.budget import (
    BudgetClock,
    measure_step_seconds,
    parse_budget,
    plan_steps,
    replan_step,
)
from bertkit.pretraining.train import pretrain
from bertkit.pretraining.train_config import PretrainConfig
from bertkit.runlog import read_log
from bertkit.training import CheckpointManager

from .train_helpers import settings, weights


class FakeClock:
    """Time moves only when the test says so."""

    def __init__(self, t: float = 0.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


# ------------------------------------------------------------------ arithmetic
@pytest.mark.parametrize("text, seconds", [("1h", 3600), ("90m", 5400), ("3600s", 3600),
                                           ("1h30m", 5400), ("1.5h", 5400), ("2m30s", 150),
                                           (" 45S ", 45)])
def test_parse_budget(text, seconds):
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["1x", "0", "0s", "0h0m", "", "90", "h", "1h1h", "m30", "-5m"])
def test_parse_budget_rejects(text):
    with pytest.raises(BertkitError, match="budget"):
        parse_budget(text)


def test_config_rejects_malformed_budget_before_any_work(tmp_path):
    config = PretrainConfig(data=str(tmp_path / "nowhere"), out=str(tmp_path / "out"), budget="1x")
    with pytest.raises(BertkitError, match="'1x'"):
        config.validate()
    assert not (tmp_path / "out").exists()


def test_plan_steps():
    # 2% reserve: 3600 * 0.98 = 3528 s usable, 28 s already spent, 1.75 s per step
    assert plan_steps(3600, 28.0, 1.75) == 2000
    assert plan_steps(100, 0.0, 0.98) == 100
    assert plan_steps(100, 0.0, 0.99) == 98
    assert plan_steps(10, 9.5, 0.2, reserve_fraction=0.0) == 2


@pytest.mark.parametrize("budget_s, spent, step", [(1, 0, 2.0), (100, 98, 0.5), (10, 12, 1.0)])
def test_plan_steps_shorter_than_one_step(budget_s, spent, step):
    with pytest.raises(BertkitError, match="leaves no time for one training step") as caught:
        plan_steps(budget_s, spent, step)
    least = int(str(caught.value).rsplit("at least ", 1)[1].split()[0])
    assert plan_steps(least, spent, step) >= 1  # the least budget the message gives is enough
    assert least - 1 < (spent + step) / 0.98


def test_a_budget_used_up_by_the_probe_says_so_not_a_step_longer_than_it():
    # issue 25 #132: 0.36 s budget, 1.8 s spent measuring, 0.13 s a step
    with pytest.raises(BertkitError, match=r"measuring the step time took 1.8 s.*at least 2 s"):
        plan_steps(0.36, 1.8, 0.13)


@pytest.mark.parametrize("text", ["99999999h", "400d", "9000h"])
def test_absurd_budgets_are_refused_with_the_limit(text):
    with pytest.raises(BertkitError, match=r"budget|duration") as caught:
        parse_budget(text)
    if text != "400d":
        assert "years; at most 8784h (one year)" in str(caught.value)


def test_a_negative_budget_on_the_command_line_is_read_as_one(tmp_path, capsys):
    from bertkit.cli.main import main

    code = main(["pretrain", "--data", str(tmp_path), "--vocab", str(tmp_path / "v.txt"),
                 "--out", str(tmp_path / "o"), "--budget", "-5m"])
    err = capsys.readouterr().err
    assert code != 0 and "--budget '-5m': a budget cannot be negative" in err, err


def test_budget_clock_counts_time_spent_before():
    clock = FakeClock(50.0)
    b = BudgetClock(100.0, spent_before=30.0, clock=clock)
    assert b.spent() == 30.0 and b.left() == 70.0 and not b.over()
    clock.t = 117.0
    assert b.spent() == 97.0 and not b.over()  # reserve starts at 98 s
    clock.t = 118.0
    assert b.over() and b.left() == 2.0


def test_measure_step_seconds_drops_the_first_step():
    clock = FakeClock()
    durations = iter([9.0, 1.0, 3.0, 2.0, 2.5])

    def step():
        clock.t += next(durations)

    assert measure_step_seconds(step, probes=5, clock=clock) == 2.25


# ------------------------------------------------------------------ runs
@pytest.fixture
def clock(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(budget_mod, "now", clock)
    return clock


def _fixed_probe(monkeypatch, seconds: float):
    monkeypatch.setattr(budget_mod, "_probe", lambda run: seconds)


def _ticking(clock, seconds_per_step: float):
    def on_step(step):
        clock.t += seconds_per_step
    return on_step


class _Interrupt(Exception):
    pass


def _crashing(clock, seconds_per_step: float, at: int):
    """``_ticking``, and a crash right after step ``at``."""
    tick = _ticking(clock, seconds_per_step)

    def on_step(step):
        tick(step)
        if step == at:
            raise _Interrupt
    return on_step


def _budget_state(run_dir):
    return CheckpointManager(run_dir / "checkpoints").load()["extra"]["budget"]


def test_budget_plans_the_steps_and_exports(files, tmp_path, clock, monkeypatch):
    _fixed_probe(monkeypatch, 1.0)
    out = tmp_path / "run"
    result = pretrain(settings(files, out, budget="20s", steps=1000), on_step=_ticking(clock, 1.0))
    # 20 s less the 2% reserve = 19.6 s at 1 s a step
    assert result.step == 19 and result.stopped_by is None
    assert (out / "model" / "model.safetensors").is_file()
    plan = [r for r in read_log(out / "log.jsonl") if r.get("event") == "budget"]
    assert plan and plan[0]["steps"] == 19 and plan[0]["step_s"] == 1.0
    import yaml

    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["steps"] == 19 and saved["budget"] == "20s"
    state = _budget_state(out)
    assert state["steps"] == 19 and state["budget_s"] == 20.0
    assert state["spent_s"] == 19.0  # the final checkpoint follows the 19th step
    lrs = [r["lr"] for r in read_log(out / "log.jsonl") if "lr" in r]
    assert lrs[-1] < lrs[0] or len(lrs) == 1  # the schedule decays over the planned steps


def test_budget_stops_at_the_deadline_when_slower_than_measured(files, tmp_path, clock, monkeypatch):
    _fixed_probe(monkeypatch, 1.0)  # planned 19 steps of 1 s, but each takes 2 s
    out = tmp_path / "slow"
    result = pretrain(settings(files, out, budget="20s"), on_step=_ticking(clock, 2.0))
    assert result.step == 10 and result.stopped_by is None  # 10 x 2 s >= 19.6 s
    assert (out / "model" / "model.safetensors").is_file()
    stops = [r for r in read_log(out / "log.jsonl") if r.get("event") == "budget_stop"]
    assert len(stops) == 1 and stops[0]["step"] == 10 and stops[0]["steps"] == 19


@pytest.mark.parametrize("steps, at", [(19, 0), (39, 0), (40, 20), (400, 20), (4783, 240)])
def test_replan_step(steps, at):
    assert replan_step(steps) == at


def test_budget_replans_once_from_the_runs_own_pace(files, tmp_path, clock, monkeypatch):
    """Probe: 1 s a step, 49 steps in 50 s. The run takes 0.5 s: at step 20 (10 s spent,
    0.5 s a step since step 1) it fixes 20 + (49 - 10) / 0.5 = 98 steps, and ends on time."""
    _fixed_probe(monkeypatch, 1.0)
    out = tmp_path / "fast"
    result = pretrain(settings(files, out, budget="50s", save_every=10), on_step=_ticking(clock, 0.5))
    assert result.step == 98 and result.stopped_by is None
    log = read_log(out / "log.jsonl")
    plans = [r for r in log if r.get("event") in ("budget", "budget_replan")]
    assert [(r["event"], r["step"], r["steps"]) for r in plans] == [("budget", 0, 49), ("budget_replan", 20, 98)]
    assert plans[1]["step_s"] == 0.5 and plans[1]["replan_at"] == 0
    import yaml

    assert yaml.safe_load((out / "config.yaml").read_text())["steps"] == 98
    state = _budget_state(out)
    assert state["steps"] == 98 and state["replan_at"] == 0 and state["spent_s"] == 49.0
    lrs = {r["step"]: r["lr"] for r in log if "lr" in r}
    assert lrs[98] < 0.02 * max(lrs.values())  # decayed over the new count, to ~0 at its end


def test_a_slower_run_replans_to_fewer_steps_and_still_decays(files, tmp_path, clock, monkeypatch):
    _fixed_probe(monkeypatch, 0.5)  # 98 planned; at 1 s a step: 20 + (49 - 20) / 1 = 49
    out = tmp_path / "slow"
    result = pretrain(settings(files, out, budget="50s", save_every=10), on_step=_ticking(clock, 1.0))
    log = read_log(out / "log.jsonl")
    assert result.step == 49 and not [r for r in log if r.get("event") == "budget_stop"]
    assert [r["steps"] for r in log if r.get("event") == "budget_replan"] == [49]


@pytest.mark.parametrize("crash_at", [25, 35])  # newest checkpoint: the re-plan step's own, a later one
def test_resume_after_the_replan_keeps_it(files, tmp_path, clock, monkeypatch, crash_at):
    _fixed_probe(monkeypatch, 1.0)
    reference = tmp_path / "whole"
    pretrain(settings(files, reference, budget="50s", save_every=10), on_step=_ticking(clock, 0.5))

    clock.t = 0.0
    out = tmp_path / "cut"
    with pytest.raises(_Interrupt):
        pretrain(settings(files, out, budget="50s", save_every=10), on_step=_crashing(clock, 0.5, crash_at))
    assert _budget_state(out)["steps"] == 98
    monkeypatch.setattr(budget_mod, "_probe", lambda run: pytest.fail("measured again"))
    result = pretrain(settings(files, out, budget="50s", save_every=10, resume=True),
                      on_step=_ticking(clock, 0.5))
    assert result.step == 98
    assert not [r for r in read_log(out / "log.jsonl") if r.get("event") == "budget_replan" and r["step"] > 20]
    a, b = weights(out), weights(reference)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_budget_too_short_for_one_step_fails_before_training(files, tmp_path):
    out = tmp_path / "short"
    with pytest.raises(BertkitError, match="leaves no time for one training step"):
        pretrain(settings(files, out, budget="0.001s"))  # the real probe: a step takes longer
    assert not (out / "checkpoints").exists() or not any((out / "checkpoints").iterdir())
    assert not (out / "model").exists()


def test_probe_leaves_no_trace(files, tmp_path, monkeypatch):
    """A budget run planned at 8 steps (real probe) == a plain --steps 8 run, bit for bit."""
    monkeypatch.setattr(budget_mod, "plan_steps", lambda *a, **k: 8)
    pretrain(settings(files, tmp_path / "budget", budget="1h", dropout=0.1, dynamic_masking=True))
    pretrain(settings(files, tmp_path / "plain", steps=8, dropout=0.1, dynamic_masking=True))
    a, b = weights(tmp_path / "budget"), weights(tmp_path / "plain")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_resume_keeps_the_plan_and_the_time_spent(files, tmp_path, clock, monkeypatch):
    _fixed_probe(monkeypatch, 1.0)
    reference = tmp_path / "whole"
    pretrain(settings(files, reference, budget="20s"), on_step=_ticking(clock, 1.0))

    clock.t = 0.0
    out = tmp_path / "cut"
    with pytest.raises(_Interrupt):  # a crash: the newest checkpoint is step 6's
        pretrain(settings(files, out, budget="20s"), on_step=_crashing(clock, 1.0, 7))
    saved = _budget_state(out)
    assert saved["steps"] == 19 and saved["spent_s"] == 5.0  # taken before step 6's tick

    def no_probe(run):
        raise AssertionError("a resumed budget run must not measure again")

    monkeypatch.setattr(budget_mod, "_probe", no_probe)
    clock.t = 1000.0  # another day, another clock origin
    with pytest.raises(BertkitError, match="same --budget"):
        pretrain(settings(files, out, budget="30s", resume=True))
    result = pretrain(settings(files, out, budget="20s", resume=True), on_step=_ticking(clock, 1.0))
    assert result.step == 19
    assert _budget_state(out)["spent_s"] == 5.0 + 13  # steps 7..19 after the resume
    a, b = weights(out), weights(reference)
    assert all(torch.equal(a[k], b[k]) for k in a)
    events = [r.get("event") for r in read_log(out / "log.jsonl")]
    assert "resume" in events


def test_resume_needs_the_budget_it_was_started_with(files, tmp_path, clock, monkeypatch):
    out = tmp_path / "plain"
    pretrain(settings(files, out, steps=3))
    with pytest.raises(BertkitError, match="without --budget"):
        pretrain(settings(files, out, budget="1h", resume=True))


def test_budget_flag_reaches_the_config(files, tmp_path):
    from bertkit.cli.main import build_parser
    from bertkit.cli.pretrain import config_from_args

    args = build_parser().parse_args(["pretrain", "--data", "d", "--out", "o", "--budget", "90m",
                                      "--mask-rate", "0.3"])
    config = config_from_args(args)
    assert config.budget == "90m" and config.mask_rate == 0.3
    assert json.dumps(config.to_dict())  # plain values, stored in checkpoints


@pytest.mark.parametrize("hidden", [32, 256])
def test_precision_auto_is_resolved_logged_and_saved(files, tmp_path, cpu_class, hidden):
    """``auto`` as on each CPU class: bf16 with native bf16 for a model wide enough to gain."""
    import yaml

    from bertkit.config import BertConfig
    from bertkit.precision import BF16_MIN_HIDDEN

    config = BertConfig.from_json(files["model_config"])
    config.hidden_size, config.intermediate_size, config.num_hidden_layers = hidden, 2 * hidden, 1
    config.to_json(tmp_path / "model.json")
    expected = "bf16" if cpu_class == "amx" and hidden >= BF16_MIN_HIDDEN["training"] else "fp32"
    out = tmp_path / expected
    pretrain(settings(files, out, steps=2, precision="auto", model_config=str(tmp_path / "model.json")))
    note = [r for r in read_log(out / "log.jsonl") if r.get("event") == "precision"]
    assert note[0]["precision"] == expected and note[0]["requested"] == "auto"
    assert cpu_class in note[0]["reason"]
    assert yaml.safe_load((out / "config.yaml").read_text())["precision"] == expected
    assert CheckpointManager(out / "checkpoints").load()["config"]["precision"] == expected
