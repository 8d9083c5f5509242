"""Pre-training step speed: bertkit vs Hugging Face ``BertForPreTraining``, side by side.

One training step = forward + backward + gradient clipping (1.0) + AdamW, on the same shapes,
batch and masking (15% of positions, at most 20 per 128 tokens, NSP labels). Three contenders:

* ``bertkit``   - ``BertForPreTraining`` + ``bertkit.training.TrainStep`` (as ``bertkit pretrain``
                  runs it: MLM head on the masked positions only, fused AdamW, non-finite guard);
* ``hf``        - stock ``transformers.BertForPreTraining(labels=..., next_sentence_label=...)``
                  (MLM head on every position) with ``torch.optim.AdamW`` (same groups);
* ``hf-masked`` - the same HF model used carefully: ``model.bert(...)``, gather the masked
                  positions, ``model.cls.predictions`` on them only, NSP on the pooled output;
* ``bertkit-full`` (not run by default) - bertkit with ``sparse_last_layer = False``: the last
                  encoder layer at every position, to measure what running it at the masked
                  positions and ``[CLS]`` only gains;
* ``bertkit-unpadded`` (not run by default) - bertkit with ``attention_impl="unpadded"``
                  (``bertkit.model.unpadded``: every position-wise op on the real tokens only);
                  it pays on batches with padding, i.e. with ``--shards``;
* ``bertkit-compiled`` (not run by default) - bertkit's model under
                  ``torch.compile(dynamic=True)``.

``--shards DIR`` (made by ``bertkit pretrain-data``) times real batches instead of the
synthetic full-length ones: consecutive instances, padded to the data's length as
``bertkit pretrain`` pads them (short sequences by ``short_seq_prob``), the steps cycling
through ``--steps`` different batches; tokens/s then counts real (non-padding) tokens.

``--precision fp32,bf16`` (the default) runs every contender in both: bf16 is
``torch.autocast("cpu", dtype=torch.bfloat16)`` around the forward pass (bertkit through
``TrainStep(precision="bf16")`` as ``bertkit pretrain`` does, Hugging Face with the same
autocast), fp32 without it; each row also gives that contender's bf16 speed-up over its fp32.

Prints the median wall ms/step (the contenders take turns step by step), tokens/s by the
wall clock and by process CPU time (steadier on a shared machine; equal to wall time on an
idle one with --threads 1) and bertkit's speed-up over each contender by both clocks.
glibc malloc is tuned to keep freed memory (``bertkit.cpu.keep_freed_memory``, as
``bertkit pretrain`` does on the CPU) for every contender alike; ``--default-malloc`` skips it.
Example: ``python bench/pretrain.py --sizes mini,base --contenders bertkit,hf --precision fp32,bf16``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

DEFAULT_BATCH = {"tiny": 32, "mini": 16, "small": 8, "medium": 8, "base": 4, "large": 2}
DEFAULT_STEPS = {"tiny": 8, "mini": 6, "small": 4, "medium": 4, "base": 3, "large": 2}
MASK_ID, CLS_ID, SEP_ID = 103, 101, 102


def make_batch(batch: int, seq: int, vocab: int, seed: int) -> dict[str, torch.Tensor]:
    """Full-length ``[CLS] A [SEP] B [SEP]`` pairs with BERT's masking budget."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, vocab, (batch, seq), generator=g)
    split = seq // 2
    ids[:, 0], ids[:, split], ids[:, -1] = CLS_ID, SEP_ID, SEP_ID
    types = torch.zeros_like(ids)
    types[:, split + 1:] = 1
    labels = torch.full_like(ids, -100)
    per_seq = min(round(0.15 * seq), max(1, 20 * seq // 128))
    candidates = [i for i in range(1, seq - 1) if i != split]
    for row in range(batch):
        chosen = torch.tensor(candidates)[torch.randperm(len(candidates), generator=g)[:per_seq]]
        labels[row, chosen] = ids[row, chosen]
        ids[row, chosen] = MASK_ID
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": torch.ones_like(ids),
            "mlm_labels": labels, "next_sentence_label": torch.randint(0, 2, (batch,), generator=g)}


def _autocast(precision: str):
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")


def bertkit_step(size: str, vocab: int, precision: str = "fp32", sparse_last_layer: bool = True,
                 attention_impl: str = "padded", compiled: bool = False):
    from bertkit.config import BertConfig
    from bertkit.model import BertForPreTraining
    from bertkit.training import TrainStep, build_optimizer, linear_warmup_decay

    config = BertConfig.preset(size, vocab_size=vocab, attention_impl=attention_impl)
    model = BertForPreTraining(config).train()
    model.sparse_last_layer = sparse_last_layer
    opt = build_optimizer(model, lr=1e-4)
    run = torch.compile(model, dynamic=True) if compiled else model
    step = TrainStep(run, opt, linear_warmup_decay(opt, 0, 10**6), device=torch.device("cpu"),
                     precision=precision)
    return lambda batch: step([batch], lambda m, b: m(**b))


def _hf_model(size: str, vocab: int):
    from transformers import BertConfig as HFConfig
    from transformers import BertForPreTraining as HFBertForPreTraining

    from bertkit.config import BertConfig

    ours = BertConfig.preset(size, vocab_size=vocab)
    config = HFConfig(vocab_size=vocab, hidden_size=ours.hidden_size,
                      num_hidden_layers=ours.num_hidden_layers,
                      num_attention_heads=ours.num_attention_heads,
                      intermediate_size=ours.intermediate_size, hidden_act="gelu")
    model = HFBertForPreTraining(config).train()
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}], lr=1e-4, eps=1e-6)
    return model, opt


def _hf_update(model, opt, loss):
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)


def hf_step(size: str, vocab: int, precision: str = "fp32"):
    model, opt = _hf_model(size, vocab)

    def step(b):
        with _autocast(precision):
            out = model(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"],
                        attention_mask=b["attention_mask"], labels=b["mlm_labels"],
                        next_sentence_label=b["next_sentence_label"])
        _hf_update(model, opt, out.loss)

    return step


def hf_masked_step(size: str, vocab: int, precision: str = "fp32"):
    model, opt = _hf_model(size, vocab)

    def step(b):
        with _autocast(precision):
            out = model.bert(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"],
                             attention_mask=b["attention_mask"])
            selected = b["mlm_labels"] != -100
            logits = model.cls.predictions(out.last_hidden_state[selected])
            nsp = model.cls.seq_relationship(out.pooler_output)
            loss = F.cross_entropy(logits.float(), b["mlm_labels"][selected]) + F.cross_entropy(
                nsp.float(), b["next_sentence_label"])
        _hf_update(model, opt, loss)

    return step


def bertkit_full_step(size: str, vocab: int, precision: str = "fp32"):
    return bertkit_step(size, vocab, precision, sparse_last_layer=False)


def bertkit_unpadded_step(size: str, vocab: int, precision: str = "fp32"):
    return bertkit_step(size, vocab, precision, attention_impl="unpadded")


def bertkit_compiled_step(size: str, vocab: int, precision: str = "fp32"):
    return bertkit_step(size, vocab, precision, compiled=True)


CONTENDERS = {"bertkit": bertkit_step, "hf": hf_step, "hf-masked": hf_masked_step,
              "bertkit-full": bertkit_full_step, "bertkit-unpadded": bertkit_unpadded_step,
              "bertkit-compiled": bertkit_compiled_step}
DEFAULT_CONTENDERS = "bertkit,hf,hf-masked"


def shard_batches(directory: str, batch: int, count: int) -> list[dict[str, torch.Tensor]]:
    """``count`` batches of ``batch`` consecutive instances of real pre-training data."""
    from bertkit.pretraining.data import PretrainingDataset
    from bertkit.pretraining.objectives import prepare_batch

    data = PretrainingDataset(directory)
    if len(data) < batch * count:
        raise SystemExit(f"{directory}: {len(data)} instances, fewer than {batch} x {count}")
    return [prepare_batch([data[i] for i in range(k * batch, (k + 1) * batch)], "mlm+nsp")["inputs"]
            for k in range(count)]


def time_interleaved(fns: dict, batches, steps: int, warmup: int) -> dict[str, dict[str, float]]:
    """Median wall and CPU seconds per step; the contenders take turns step by step, so a
    burst of load from other processes hits all of them alike. ``batches``: one batch, or a
    list the steps cycle through."""
    batches = batches if isinstance(batches, list) else [batches]
    for k in range(warmup):
        for fn in fns.values():
            fn(batches[k % len(batches)])
    times = {name: {"wall": [], "cpu": []} for name in fns}
    for k in range(steps):
        for name, fn in fns.items():
            wall, cpu = time.perf_counter(), time.process_time()
            fn(batches[k % len(batches)])
            times[name]["wall"].append(time.perf_counter() - wall)
            times[name]["cpu"].append(time.process_time() - cpu)
    return {name: {k: statistics.median(v) for k, v in t.items()} for name, t in times.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="tiny,mini,base", help="comma-separated presets")
    parser.add_argument("--seq", type=int, default=128, help="sequence length")
    parser.add_argument("--batch", type=int, default=None, help="batch size (default per size: "
                        + ", ".join(f"{k} {v}" for k, v in DEFAULT_BATCH.items()) + ")")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per round (default per size)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--vocab", type=int, default=30522, help="vocabulary size")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: steady figures on a shared machine; 0 = torch's)")
    parser.add_argument("--default-malloc", action="store_true",
                        help="leave glibc malloc as it is (default: keep freed memory, for every contender)")
    parser.add_argument("--contenders", default=DEFAULT_CONTENDERS,
                        help=f"subset of {', '.join(CONTENDERS)} (default {DEFAULT_CONTENDERS})")
    parser.add_argument("--shards", metavar="DIR", help="real pre-training data (bertkit "
                        "pretrain-data) instead of synthetic full-length batches")
    parser.add_argument("--precision", default="fp32,bf16",
                        help="comma-separated subset of fp32, bf16 (default: both, side by side)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if not args.default_malloc:
        from bertkit.cpu import keep_freed_memory

        keep_freed_memory()  # process-wide: the same allocator for all contenders
    from bertkit.cpu import cpu_bf16_support

    names = args.contenders.split(",")
    precisions = args.precision.split(",")
    if not set(precisions) <= {"fp32", "bf16"} or not set(names) <= set(CONTENDERS):
        parser.error(f"--precision from fp32, bf16 and --contenders from {', '.join(CONTENDERS)}")
    runs = [(name, p) for name in names for p in precisions]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, seq {args.seq}, vocab {args.vocab}")
    print(f"CPU: {cpu_bf16_support().reason}")
    print(f"{'size':6} {'batch':>5} {'contender':12} {'prec':4} {'ms/step':>9} {'tokens/s':>9} "
          f"{'cpu tok/s':>9}  {'bf16/fp32':>9}  bertkit speed-up at this precision (wall, cpu)")
    for size in args.sizes.split(","):
        batch_size = args.batch or DEFAULT_BATCH[size]
        steps = args.steps or DEFAULT_STEPS[size]
        if args.shards:
            batch = shard_batches(args.shards, batch_size, steps)
            tokens = statistics.mean(int(b["attention_mask"].sum()) for b in batch)
            padded = batch[0]["input_ids"].numel()
            print(f"{size}: real batches from {args.shards}: {tokens:.0f} real tokens of "
                  f"{padded} per batch ({1 - tokens / padded:.1%} padding)")
        else:
            batch = make_batch(batch_size, args.seq, args.vocab, seed=0)
            tokens = batch_size * args.seq
        torch.manual_seed(0)
        fns = {run: CONTENDERS[run[0]](size, args.vocab, run[1]) for run in runs}
        result = time_interleaved(fns, batch, steps, args.warmup)
        for name, p in runs:
            wall, cpu = result[(name, p)]["wall"], result[(name, p)]["cpu"]
            ratio, gain = "", ""
            if name != "bertkit" and ("bertkit", p) in result:
                ours = result[("bertkit", p)]
                ratio = f"{wall / ours['wall']:.2f}x, {cpu / ours['cpu']:.2f}x"
            if p == "bf16" and (name, "fp32") in result:
                gain = f"{result[(name, 'fp32')]['wall'] / wall:.2f}x"
            print(f"{size:6} {batch_size:5d} {name:12} {p:4} {wall * 1000:9.1f} {tokens / wall:9.0f} "
                  f"{tokens / cpu:9.0f}  {gain:>9}  {ratio}", flush=True)
        del fns


if __name__ == "__main__":
    main()
