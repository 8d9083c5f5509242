import os
import signal

import pytest
import torch

from bertkit.errors import BertkitError
from bertkit.training import (
    GracefulStop,
    MetricSums,
    TrainStep,
    build_optimizer,
    linear_warmup_decay,
)

from .toy import Toy, compute, toy_batch

CPU = torch.device("cpu")


def _step(implementation="auto", seed=0):
    torch.manual_seed(seed)
    model = Toy()
    model.dropout.p = 0.0
    opt = build_optimizer(model, lr=1e-2, implementation=implementation)
    return TrainStep(model, opt, linear_warmup_decay(opt, 0, 10), device=CPU)


def test_accumulation_equals_one_big_batch():
    a, b = _step(), _step()
    big = toy_batch(0, 8)
    halves = [{k: v[:4] for k, v in big.items()}, {k: v[4:] for k, v in big.items()}]
    a([big], compute)
    b(halves, compute)
    for p, q in zip(a.model.parameters(), b.model.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_clipping_at_max_norm_and_reported_lr():
    step = _step()
    step.max_grad_norm = 1e-3
    seen = []
    step.optimizer.register_step_pre_hook(
        lambda opt, args, kwargs: seen.append(torch.stack([p.grad.norm() for p in step.params]).norm()))
    result = step([toy_batch(1)], compute)
    assert result.lr == pytest.approx(1e-2)
    assert result.grad_norm > 1e-3  # the norm before clipping is reported
    assert seen[0] == pytest.approx(1e-3, rel=1e-3)


@pytest.mark.parametrize("implementation", ["fused", "foreach"])
def test_non_finite_step_is_skipped_and_counted(implementation):
    step = _step(implementation)
    step([toy_batch(1)], compute)
    before = [p.detach().clone() for p in step.model.parameters()]
    moments = [s["exp_avg"].clone() for s in step.optimizer.state.values()]
    bad = toy_batch(2)
    bad["y"][0] = float("nan")
    result = step([bad], compute)
    assert not bool(result.finite) and int(step.skipped_steps) == 1
    for p, q in zip(step.model.parameters(), before):
        assert torch.equal(p, q)
    for s, m in zip(step.optimizer.state.values(), moments):
        assert torch.equal(s["exp_avg"], m)
    assert all(p.grad is None for p in step.model.parameters())  # set_to_none
    result = step([toy_batch(3)], compute)  # training goes on
    assert bool(result.finite) and int(step.skipped_steps) == 1
    assert any(not torch.equal(p, q) for p, q in zip(step.model.parameters(), before))


def test_metric_sums_reduce_and_state():
    sums = MetricSums(CPU)
    sums.add(loss=torch.tensor(1.5), n=2)
    sums.add(loss=torch.tensor(0.5), n=1)
    state = sums.state_dict()
    assert sums.reduce() == {"loss": 2.0, "n": 3.0} and sums.reduce() == {}
    sums.load_state_dict(state)
    assert sums.reduce() == {"loss": 2.0, "n": 3.0}


def test_bf16_autocast_step_on_cpu():
    step = _step()
    step.precision = "bf16"
    result = step([toy_batch(1)], compute)
    assert bool(result.finite)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_graceful_stop_sets_flag_then_restores_handler(sig):
    previous = signal.getsignal(sig)
    with GracefulStop() as stop:
        os.kill(os.getpid(), sig)
        assert stop.requested and stop.signal_name == signal.Signals(sig).name
    assert signal.getsignal(sig) is previous


def test_second_sigint_raises():
    with GracefulStop(), pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)


def test_device_choice_is_checked():
    from bertkit.training.distributed import pick_device

    assert pick_device("cpu") == CPU
    with pytest.raises(BertkitError, match="unknown device"):
        pick_device("tpu9")
    if not torch.cuda.is_available():
        with pytest.raises(BertkitError, match="no CUDA device"):
            pick_device("cuda")
