"""bf16 attention as two batched products (``bertkit.model.attention.products_attention``)
against torch's fused CPU kernel (``scaled_dot_product_attention``), side by side in one run:
the measurement behind ``bertkit.cpu.BF16_PRODUCTS_ATTENTION_CLASSES`` (docs/serving-results.md,
"Attention as two products").

    python bench/attention_products.py                    # BERT-Base's heads, one thread
    python bench/attention_products.py --shapes 1x64,16x48 --model-shapes ""

Two tables, each the best of ``--rounds`` interleaved rounds, CPU clock:

* the attention alone (12 heads of 64 unless ``--heads``/``--head-size``), per ``--shapes``
  (batch x tokens, a quarter of the rows padded by a quarter of their length): ms of each, the
  ratio products / kernel (below 1: the products are faster), their GFLOP/s and the largest
  difference between the two contexts;
* a whole BERT (``--preset``, random weights, bf16 weights as the engine stores them, bf16
  autocast, a classifier's ``head_logits``) per ``--model-shapes``, with the products and with the
  kernel (``bertkit.cpu.bf16_products_attention`` switched for the run), and the largest logit
  difference.

A class joins ``BF16_PRODUCTS_ATTENTION_CLASSES`` where the products are faster at the batch
shapes and no slower where ``PRODUCTS_ATTENTION_MIN_ROWS`` lets them run.
"""

from __future__ import annotations

import argparse
import copy
import functools
import time

import torch
import torch.nn.functional as F


def kernel(qkv, mask, heads, size):
    batch, length, _ = qkv.shape
    query, key, value = qkv.view(batch, length, 3, heads, size).permute(2, 0, 3, 1, 4).unbind(0)
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask).transpose(1, 2).reshape(
        batch, length, heads * size)


def best_ms(runs: dict, rounds: int, seconds: float) -> dict[str, float]:
    """name -> the best ms a call of ``runs[name]()`` over ``rounds`` interleaved rounds."""
    best = {name: float("inf") for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            run()
            start, calls = time.process_time(), 0
            while calls == 0 or time.process_time() - start < seconds:
                run()
                calls += 1
            best[name] = min(best[name], (time.process_time() - start) / calls * 1000)
    return best


def shapes(text: str) -> list[tuple[int, int]]:
    return [tuple(int(n) for n in s.split("x")) for s in text.split(",") if s.strip()]


def padded_mask(batch: int, length: int) -> torch.Tensor:
    """(B, T) True for real tokens: the last quarter of the rows padded by a quarter of their length."""
    mask = torch.ones(batch, length, dtype=torch.bool)
    mask[batch - batch // 4:, length - length // 4:] = False
    return mask


def attention_table(args, products_attention, build_attention_mask) -> None:
    heads, size = args.heads, args.head_size
    print(f"attention alone, bf16, {heads} heads of {size}: ms (products / kernel), GFLOP/s, max |difference|")
    for batch, length in shapes(args.shapes):
        qkv = torch.randn(batch, length, 3 * heads * size).bfloat16()
        mask = build_attention_mask(padded_mask(batch, length), length, causal=False)
        with torch.inference_mode():
            diff = float((products_attention(qkv, mask, heads, size).float()
                          - kernel(qkv, mask, heads, size).float()).abs().max())
            ms = best_ms({"kernel": functools.partial(kernel, qkv, mask, heads, size),
                          "products": functools.partial(products_attention, qkv, mask, heads, size)},
                         args.rounds, args.seconds)
        flops = 4 * batch * heads * length * length * size / 1e6  # MFLOP: two products
        print(f"  {batch:>3} x {length:<4} kernel {ms['kernel']:8.3f} ms ({flops / ms['kernel']:5.0f} GFLOP/s)  "
              f"products {ms['products']:8.3f} ms ({flops / ms['products']:5.0f})  "
              f"products/kernel {ms['products'] / ms['kernel']:.2f}  max |diff| {diff:.2g}", flush=True)


def logits(model, cpu, products: bool, ids, types, mask) -> torch.Tensor:
    """The classifier's bf16 logits with attention as products or through the kernel."""
    cpu.bf16_products_attention = lambda: products
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        return model.head_logits(ids, types, mask).float()


def model_table(args) -> None:
    from bertkit import cpu
    from bertkit.config import BertConfig
    from bertkit.model import BertForSequenceClassification
    from bertkit.modeldir.int8 import prepare

    torch.manual_seed(0)
    model = prepare(copy.deepcopy(BertForSequenceClassification(BertConfig.preset(args.preset), 2).eval()), "bf16")
    switch = cpu.bf16_products_attention
    print(f"BERT ({args.preset}) bf16, a classifier's head_logits: ms a pass (products / kernel), max |logit difference|")
    try:
        for batch, length in shapes(args.model_shapes):
            ids = torch.randint(1000, model.config.vocab_size, (batch, length))
            mask = padded_mask(batch, length).long()
            types = torch.zeros_like(ids)
            runs = {name: functools.partial(logits, model, cpu, on, ids, types, mask)
                    for name, on in (("kernel", False), ("products", True))}
            outputs = {name: run() for name, run in runs.items()}
            ms = best_ms(runs, args.rounds, args.seconds * 4)
            diff = float((outputs["products"] - outputs["kernel"]).abs().max())
            print(f"  {batch:>3} x {length:<4} kernel {ms['kernel']:9.1f} ms  products {ms['products']:9.1f} ms  "
                  f"products/kernel {ms['products'] / ms['kernel']:.3f}  max |diff| {diff:.2g}", flush=True)
    finally:
        cpu.bf16_products_attention = switch


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="1x32,1x64,1x128,8x128,32x32,16x48,32x128",
                        help="batch x tokens of the attention alone")
    parser.add_argument("--model-shapes", default="1x128,8x128,32x40,32x128",
                        help="batch x tokens of the whole model ('' for none)")
    parser.add_argument("--preset", default="base", help="the model's size (default base)")
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--seconds", type=float, default=0.5, help="timing per form per round")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    from machine import describe, line

    from bertkit.model.attention import build_attention_mask, products_attention

    print(f"{line(describe())}; {args.threads} thread(s)")
    attention_table(args, products_attention, build_attention_mask)
    if args.model_shapes.strip():
        model_table(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
