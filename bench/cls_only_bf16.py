"""Would a bf16 classifier's last layer at ``[CLS]`` only keep the doors agreeing, and pay?

bertkit runs a sentence classifier's last layer at ``[CLS]`` only in fp32
(``bertkit.model.sparse_last_layer.cls_pays``), and in bf16 on the CPU classes of
``bertkit.cpu.BF16_ROWS_ALONE_CLASSES``, which this script's figures put there; on the others
bf16 computes every position, because a row's
bf16 rounding might then depend on the rows computed beside it, and a model's doors (a lone
request, a batch, ``predict``, the server) must answer alike. This script measures that on
this CPU, for a model loaded at ``--precision`` (default bf16, weights stored in bf16 as the
engine stores them):

* the door gap that exists today: each sentence alone against the same sentence in a batch,
  both on the full last layer;
* the gap the change would add: batches at ``[CLS]`` only against the same batches full, and
  against each sentence alone;
* the same batches on their real tokens only (``BertInference.unpad``, what a server's
  ``--attention-impl auto`` does on the classes of ``BF16_UNPADDED_CLASSES``) against padded;
* label flips between those, and the time of a batch both ways (ms a row, best of rounds).

On a CPU class that computes bf16 natively and is not in that set yet (AMX), run it before
adding the class: if the ``[CLS]``-only gap is 0 (it was on the avx512_bf16 EPYC, 2026-12-01)
or no larger than today's alone-vs-batch gap, with no label flips, the class may join. A class
joins ``BF16_UNPADDED_CLASSES`` only where unpadded against padded is 0 here and on the doors
test's wide random models too (``tests/inference/test_default_precision.py`` run on that CPU
itself: the AMX Xeon gave 0.0 here but one bf16 ulp there, 2026-12-02), because a server's
unpadded batch must answer as ``predict``'s padded one.

    python bench/cls_only_bf16.py --model runs/sst2
    python bench/cls_only_bf16.py --model runs/base/sst2 --sentences 96 --batch 16
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from machine import describe, line  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "glue" / "SST-2" / "dev.tsv"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--model", type=Path, required=True, help="a sequence-classification model directory")
    p.add_argument("--data", type=Path, default=DATA, help="sentences, first column after a header (SST-2 dev)")
    p.add_argument("--precision", default="bf16", choices=["bf16", "fp16", "fp32"])
    p.add_argument("--sentences", type=int, default=256, help="sentences compared (default 256)")
    p.add_argument("--batch", type=int, default=16, help="sentences a batch, drawn at random (default 16)")
    p.add_argument("--rounds", type=int, default=3, help="timing rounds; the best is kept (default 3)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    return p.parse_args(argv)


def padded(tokenizer, texts: list[str]):
    rows = [tokenizer.encode(t).input_ids for t in texts]
    ids = torch.zeros(len(rows), max(map(len, rows)), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = torch.tensor(row)
        mask[i, :len(row)] = 1
    return ids, torch.zeros_like(ids), mask


def main(argv=None) -> int:
    args = parse_args(argv)
    from bertkit.inference import load
    from bertkit.model import sparse_last_layer, task_models
    from bertkit.precision import autocast

    torch.set_num_threads(args.threads)
    bert = load(args.model, precision=args.precision)
    model = bert.model
    if not hasattr(model, "head_logits"):
        raise SystemExit(f"{args.model}: not a sequence classifier (its model has no head_logits)")
    lines = args.data.read_text(encoding="utf-8").splitlines()[1:]
    texts = [ln.split("\t")[0] for ln in lines][:args.sentences]
    random.seed(0)
    order = random.sample(range(len(texts)), len(texts))
    batches = [order[i:i + args.batch] for i in range(0, len(order), args.batch)]
    inputs = [padded(bert.tokenizer, [texts[i] for i in b]) for b in batches]
    rule = sparse_last_layer.cls_pays

    def any_precision(bert_model, input_ids):  # the fp32 rule without its precision test
        return ("forward" not in vars(bert_model) and not bert_model.encoder.causal
                and input_ids.numel() - input_ids.shape[0] >= sparse_last_layer.SPARSE_CLS_MIN_POSITIONS)

    def logits(batch, cls_only: bool) -> np.ndarray:
        task_models.cls_pays = any_precision if cls_only else (lambda *a: False)
        with torch.inference_mode(), autocast(bert.precision, bert.device):
            return model.head_logits(*batch).float().numpy()

    try:
        alone = np.zeros((len(texts), model.num_labels), dtype=np.float32)
        for i, text in enumerate(texts):
            alone[i] = logits(padded(bert.tokenizer, [text]), False)[0]
        full, sparse = np.zeros_like(alone), np.zeros_like(alone)
        for b, batch in zip(batches, inputs):
            full[b], sparse[b] = logits(batch, False), logits(batch, True)
        unpadded = np.zeros_like(alone)  # the same batches on their real tokens (serve's --attention-impl)
        bert.unpad("unpadded")
        for b, batch in zip(batches, inputs):
            unpadded[b] = logits(batch, False)
        bert.unpad("padded")
        times = {"full": [], "cls": []}
        for _ in range(args.rounds):
            for name in times:
                start = time.perf_counter()
                for batch in inputs:
                    logits(batch, name == "cls")
                times[name].append((time.perf_counter() - start) / len(texts) * 1e3)
    finally:
        task_models.cls_pays = rule

    def gap(a, b) -> str:
        return f"max |diff| {np.abs(a - b).max():.2e}, label flips {int((a.argmax(1) != b.argmax(1)).sum())}"

    print(line(describe()), f"; {args.threads} thread(s); {args.model}, precision {bert.precision}, "
          f"{len(texts)} sentences, batches of {args.batch}")
    print(f"today's door gap, alone vs in a batch (full last layer): {gap(alone, full)}")
    print(f"[CLS] only vs full, the same batches:                   {gap(sparse, full)}")
    print(f"[CLS] only in a batch vs alone (full):                  {gap(sparse, alone)}")
    print(f"unpadded vs padded, the same batches (full):            {gap(unpadded, full)}")
    full_ms, cls_ms = min(times["full"]), min(times["cls"])
    print(f"ms a row: full {full_ms:.3f}, [CLS] only {cls_ms:.3f} ({cls_ms / full_ms:.2f}x the time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
