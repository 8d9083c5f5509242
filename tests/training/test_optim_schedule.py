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
    assert lrs[:4] == pytest.approx([0.0, 0.25, 0.5, 0.75])  # the first update at rate 0
    assert lrs[4:] == pytest.approx([1.0, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6])
    assert opt.param_groups[0]["lr"] == 0.0
    state = sched.state_dict()
    fresh = linear_warmup_decay(build_optimizer(Toy(), lr=1.0), 4, 10)
    fresh.load_state_dict(state)
    assert fresh.last_epoch == 10


@pytest.mark.parametrize("warmup, total", [(144, 1440), (4, 10), (1, 5), (0, 7), (7, 7)])
def test_schedule_is_google_and_transformers_update_for_update(warmup, total):
    """Update k runs at k / warmup during warm-up (Google's optimization.py: global_step /
    num_warmup_steps, global_step 0 at the first update; transformers' linear schedule the
    same), so a run with warm-up makes its first update at rate 0; then transformers'
    (total - k) / (total - warmup)."""
    get_linear_schedule_with_warmup = pytest.importorskip("transformers").get_linear_schedule_with_warmup

    ours_opt, theirs_opt = build_optimizer(Toy(), lr=1.0), build_optimizer(Toy(), lr=1.0)
    ours = linear_warmup_decay(ours_opt, warmup, total)
    theirs = get_linear_schedule_with_warmup(theirs_opt, warmup, total)
    assert ours_opt.param_groups[0]["lr"] == (0.0 if warmup else 1.0)
    for _ in range(total + 1):
        assert ours_opt.param_groups[0]["lr"] == pytest.approx(theirs_opt.param_groups[0]["lr"], abs=1e-12)
        ours_opt.step(), ours.step()
        theirs_opt.step(), theirs.step()


def test_default_warmup_is_one_percent():
    assert default_warmup(1_000_000) == 10_000
    assert default_warmup(50) == 1
