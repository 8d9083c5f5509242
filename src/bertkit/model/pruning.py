"""Attention-head pruning (Michel, Levy & Neubig 2019, "Are Sixteen Heads Really Better than One?").

Contract:

* :func:`head_importance` scores every head on data: ``I_h = sum_x |A_h(x) . dL/dA_h(x)|``, the
  magnitude of the loss's gradient with respect to a gate ``xi_h = 1`` on the head's output
  (``A_h``, the head's slice of the attention context), summed per example over the data as
  in the paper (section 4.1), then normalised per layer to unit L2 norm (section 4.2). Heads
  already pruned score ``nan``;
* :func:`heads_to_prune` picks the lowest-scoring heads over the whole network (a fraction in
  (0, 1) or a count), never the last head of a layer;
* :func:`prune_heads` removes heads *physically*: their rows of the fused query/key/value
  projection and their columns of the attention output projection are dropped, so the model
  is smaller and faster, not masked. Head indices are the *original* ones (as in Hugging
  Face's ``pruned_heads``); ``config.extra["pruned_heads"]`` (``{"layer": [heads]}``, the Hugging
  Face ``config.json`` field) records every head removed so far;
* :func:`apply_pruned_heads` re-applies a config's ``pruned_heads`` to a freshly built model,
  which is how :func:`bertkit.checkpoint.load_pretrained` builds a pruned model before its
  weights are read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

import torch
from torch import nn

from bertkit.errors import BertkitError

__all__ = [
    "apply_pruned_heads",
    "count_heads",
    "head_importance",
    "heads_to_prune",
    "parse_heads",
    "prune_heads",
    "pruned_heads",
    "remaining_heads",
]


def _layers(model) -> nn.ModuleList:
    return model.encoder_model().encoder.layer


def pruned_heads(config) -> dict[int, list[int]]:
    """``{layer: sorted original head indices removed}`` from ``config.extra["pruned_heads"]``."""
    saved = config.extra.get("pruned_heads") or {}
    return {int(layer): sorted(int(h) for h in heads) for layer, heads in saved.items() if heads}


def remaining_heads(config, layer: int) -> list[int]:
    """Original indices of the heads layer ``layer`` still has, in weight order."""
    gone = set(pruned_heads(config).get(layer, []))
    return [h for h in range(config.num_attention_heads) if h not in gone]


def count_heads(model) -> int:
    """Heads left in the whole network."""
    return sum(layer.attention.self.num_heads for layer in _layers(model))


def _keep_rows(linear: nn.Linear, index: torch.Tensor, dim: int) -> nn.Linear:
    """A new Linear keeping ``index`` of the output (``dim=0``) or input (``dim=1``) units."""
    weight = linear.weight.detach().index_select(dim, index).clone()
    bias = linear.bias.detach() if dim == 1 else linear.bias.detach()[index]
    out_features, in_features = weight.shape
    new = nn.Linear(in_features, out_features, device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        new.weight.copy_(weight)
        new.bias.copy_(bias)
    new.weight.requires_grad_(linear.weight.requires_grad)
    new.bias.requires_grad_(linear.bias.requires_grad)
    return new


def _prune_layer(layer, keep: Sequence[int]) -> None:
    """Keep the heads at weight positions ``keep`` (sorted) of one encoder layer."""
    attention = layer.attention.self
    size, heads = attention.head_size, attention.num_heads
    inner = heads * size
    units = torch.cat([torch.arange(h * size, (h + 1) * size) for h in keep])
    rows = torch.cat([units, units + inner, units + 2 * inner])  # query | key | value blocks
    attention.qkv = _keep_rows(attention.qkv, rows.to(attention.qkv.weight.device), dim=0)
    output = layer.attention.output
    output.dense = _keep_rows(output.dense, units.to(output.dense.weight.device), dim=1)
    attention.num_heads = len(keep)


def prune_heads(model, heads: Mapping[int, Iterable[int]]) -> None:
    """Remove ``heads`` (``{layer: original head indices}``) from ``model`` in place and
    record them in ``model.config.extra["pruned_heads"]``. A head already gone is ignored;
    removing every head of a layer, or an index out of range, is a BertkitError."""
    config = model.config
    layers = _layers(model)
    done = pruned_heads(config)
    for layer, chosen in sorted(heads.items()):
        layer = int(layer)
        if not 0 <= layer < len(layers):
            raise BertkitError(f"cannot prune layer {layer}: the model has {len(layers)} layers")
        chosen = {int(h) for h in chosen}
        bad = [h for h in chosen if not 0 <= h < config.num_attention_heads]
        if bad:
            raise BertkitError(f"layer {layer}: head {bad[0]} out of range "
                               f"(0..{config.num_attention_heads - 1})")
        present = remaining_heads(config, layer)
        chosen &= set(present)
        if not chosen:
            continue
        keep = [i for i, h in enumerate(present) if h not in chosen]
        if not keep:
            raise BertkitError(f"layer {layer}: pruning would remove all of its heads; "
                               "keep at least one head per layer")
        _prune_layer(layers[layer], keep)
        done[layer] = sorted(set(done.get(layer, [])) | chosen)
        config.extra["pruned_heads"] = {str(k): v for k, v in sorted(done.items())}


def apply_pruned_heads(model) -> None:
    """Shape a freshly built ``model`` like its config's ``pruned_heads`` (no-op without)."""
    done = pruned_heads(model.config)
    if not done:
        return
    layers = _layers(model)
    for layer, heads in done.items():
        if not 0 <= layer < len(layers):
            raise BertkitError(f"config.json: pruned_heads names layer {layer}, but the model "
                               f"has {len(layers)} layers")
        if any(not 0 <= h < model.config.num_attention_heads for h in heads):
            raise BertkitError(f"config.json: pruned_heads of layer {layer} ({heads}) out of "
                               f"range 0..{model.config.num_attention_heads - 1}")
        keep = [h for h in range(model.config.num_attention_heads) if h not in set(heads)]
        if not keep:
            raise BertkitError(f"config.json: pruned_heads removes every head of layer {layer}")
        _prune_layer(layers[layer], keep)


def head_importance(model, batches: Iterable[dict], compute: Callable,
                    normalize: bool = True) -> torch.Tensor:
    """(layers, heads) importance of every head (original indexing; ``nan`` where pruned).

    ``batches`` are collated training-style batches (with targets, so ``compute(model,
    batch).loss`` exists); ``compute`` is e.g. ``Task.compute``. The model runs in eval mode
    (no dropout); its weights get no update and their gradients are left untouched.
    """
    layers = _layers(model)
    config = model.config
    scores = [torch.zeros(layer.attention.self.num_heads, dtype=torch.float64) for layer in layers]
    captured: list[torch.Tensor | None] = [None] * len(layers)
    hooks = []

    def capture(index):
        def hook(module, args, output):
            context = output[0]
            context.retain_grad()
            captured[index] = context
        return hook

    for i, layer in enumerate(layers):
        hooks.append(layer.attention.self.register_forward_hook(capture(i)))
    was_training = model.training
    model.eval()
    params = [p for p in model.parameters()]
    saved_flags = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    embeddings = model.encoder_model().embeddings
    try:
        # the gradient must reach every context; with frozen weights, let it start at the input
        handle = embeddings.register_forward_hook(lambda m, a, out: out.requires_grad_(True))
        hooks.append(handle)
        for batch in batches:
            loss = compute(model, batch).loss
            loss.backward()
            for i, context in enumerate(captured):
                attention = layers[i].attention.self
                batch_size, length, _ = context.shape
                product = (context.detach() * context.grad).view(
                    batch_size, length, attention.num_heads, attention.head_size)
                # per example: |xi_h gradient| = |sum over tokens and units of A_h * dL/dA_h|;
                # the loss is a batch mean, so scale back to a per-example gradient
                per_example = product.sum(dim=(1, 3)).abs().double() * batch_size
                scores[i] += per_example.sum(0).cpu()
            captured = [None] * len(layers)
    finally:
        for hook in hooks:
            hook.remove()
        for p, flag in zip(params, saved_flags):
            p.requires_grad_(flag)
        model.train(was_training)
    table = torch.full((len(layers), config.num_attention_heads), math.nan, dtype=torch.float64)
    for i, layer_scores in enumerate(scores):
        if normalize:
            norm = layer_scores.norm()
            layer_scores = layer_scores / norm if norm > 0 else layer_scores
        table[i, remaining_heads(config, i)] = layer_scores
    return table


def parse_heads(text: str | float | int, total: int) -> int:
    """Heads to remove from ``--heads``: a fraction in (0, 1) of ``total`` heads (rounded;
    written with a decimal point) or a whole count in [1, total) (written without one);
    anything else is a BertkitError naming ``--heads``."""
    raw = str(text).strip()
    if isinstance(text, int) or raw.isdigit():
        count = int(raw)
    else:
        try:
            value = float(raw)
        except ValueError:
            raise BertkitError(f"--heads must be a fraction in (0, 1) or a whole number of heads, "
                               f"got {text!r}") from None
        if not 0 < value < 1:
            raise BertkitError(f"--heads {raw}: a fraction must lie in (0, 1), exclusive (or give "
                               "a whole number of heads)")
        count = round(value * total)
    if not 1 <= count < total:
        raise BertkitError(f"--heads {raw}: would remove {count} of the {total} heads; remove at "
                           f"least 1 and fewer than {total}")
    return count


def heads_to_prune(importance: torch.Tensor, count: int) -> dict[int, list[int]]:
    """The ``count`` lowest-scoring heads over the network (``{layer: [heads]}``, original
    indices), never a layer's last remaining head; ties go to the earlier head."""
    alive = ~torch.isnan(importance)
    left = alive.sum(1).tolist()
    order = sorted(((float(importance[l_, h]), l_, h) for l_, h in alive.nonzero().tolist()))
    chosen: dict[int, list[int]] = {}
    for _, layer, head in order:
        if len(sum(chosen.values(), [])) == count:
            break
        if left[layer] > 1:
            chosen.setdefault(layer, []).append(head)
            left[layer] -= 1
    taken = sum(len(v) for v in chosen.values())
    if taken < count:
        raise BertkitError(f"cannot remove {count} heads: only {taken} can go while every layer "
                           "keeps one")
    return {layer: sorted(heads) for layer, heads in sorted(chosen.items())}
