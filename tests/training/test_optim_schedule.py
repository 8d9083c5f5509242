import pytest
import torch

from bertkit.training import build_optimizer, default_warmup, linear_warmup_decay, param_groups
from bertkit.training.optim import is_fused

from .toy import Toy


def test_no_decay_on_biases_and_layernorm():
    model = Toy()
    decay, no_decay = param_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    assert sorted(names[id(p)] for p in decay["params"]) == ["dense.weight", "embed.weight", "out.weight"]
    assert sorted(names[id(p)] for p in no_decay["params"]) == [
        "LayerNorm.bias", "LayerNorm.weight", "dense.bias", "out.bias"]
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0


def test_tied_parameter_counted_once():
    model = Toy()
    model.out.weight = nn_param = torch.nn.Parameter(torch.zeros(1, 8))
    model.extra = torch.nn.Linear(8, 1, bias=False)
    model.extra.weight = nn_param
    groups = param_groups(model, 0.01)
    assert sum(p is nn_param for g in groups for p in g["params"]) == 1


def test_bert_hyper_parameters_and_fused_on_cpu():
    opt = build_optimizer(Toy(), lr=1e-4)
    assert opt.defaults["betas"] == (0.9, 0.999) and opt.defaults["eps"] == 1e-6
    assert is_fused(opt)  # torch >= 2.4 has a fused CPU AdamW
    assert not is_fused(build_optimizer(Toy(), lr=1e-4, implementation="foreach"))
    with pytest.raises(ValueError):
        build_optimizer(Toy(), lr=1e-4, implementation="turbo")


def test_warmup_then_linear_decay_to_zero():
    opt = build_optimizer(Toy(), lr=1.0)
    sched = linear_warmup_decay(opt, warmup_steps=4, total_steps=10)
    lrs = []
    for _ in range(10):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[:4] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert lrs[4:] == pytest.approx([1.0, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6])
    assert opt.param_groups[0]["lr"] == 0.0
    state = sched.state_dict()
    fresh = linear_warmup_decay(build_optimizer(Toy(), lr=1.0), 4, 10)
    fresh.load_state_dict(state)
    assert fresh.last_epoch == 10


def test_default_warmup_is_one_percent():
    assert default_warmup(1_000_000) == 10_000
    assert default_warmup(50) == 1
