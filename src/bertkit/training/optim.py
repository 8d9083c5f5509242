"""AdamW with BERT's parameter groups.

Contract: ``build_optimizer(model, lr, weight_decay=0.01)`` returns a ``torch.optim.AdamW``
(betas 0.9/0.999, eps 1e-6 as in BERT) with two parameter groups: weight decay on every
matrix, none on biases, LayerNorm weights or any other 1-D parameter. Tied parameters appear
once. ``implementation`` is "auto" (fused kernel when the device supports it, else
foreach), "fused", "foreach" or "plain".
"""

from __future__ import annotations

import torch
from torch import nn

IMPLEMENTATIONS = ("auto", "fused", "foreach", "plain")


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Split trainable parameters into a decayed group and a no-decay group."""
    norm_ids = {
        id(p)
        for module in model.modules()
        if isinstance(module, nn.LayerNorm | nn.RMSNorm)
        for p in module.parameters(recurse=False)
    }
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if param.ndim < 2 or name.endswith("bias") or id(param) in norm_ids:
            no_decay.append(param)
        else:
            decay.append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def build_optimizer(
    model: nn.Module,
    lr: float,
    weight_decay: float = 0.01,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-6,
    implementation: str = "auto",
) -> torch.optim.AdamW:
    """AdamW over :func:`param_groups`; see the module docstring for ``implementation``."""
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(f"implementation must be one of {IMPLEMENTATIONS}, got {implementation!r}")
    groups = param_groups(model, weight_decay)
    kwargs = dict(lr=lr, betas=betas, eps=eps)
    if implementation in ("auto", "fused"):
        try:
            return torch.optim.AdamW(groups, fused=True, **kwargs)
        except (RuntimeError, ValueError, TypeError):
            if implementation == "fused":
                raise
    return torch.optim.AdamW(groups, foreach=implementation != "plain", **kwargs)


def is_fused(optimizer: torch.optim.Optimizer) -> bool:
    """True when the optimizer runs the fused kernel (which can skip a step without a sync)."""
    return bool(optimizer.defaults.get("fused"))
