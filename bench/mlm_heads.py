"""Masked-LM heads in use: SPLADE sparse vectors and fill-mask, bertkit against the references.

One checkpoint with a masked-LM head (default: the shared SPLADE BERT-Tiny), SST-2 dev
sentences, in one process, interleaved rounds:

* sparse: ``load(model).embed_sparse`` against sentence-transformers' ``SparseEncoder``
  (``MLMTransformer`` + ``SpladePooling("max")``, the same checkpoint);
* fill-mask: ``load(model).fill_mask`` (each sentence's fourth word made ``[MASK]``) against
  transformers' ``pipeline("fill-mask")``;

each for a lone text a call (median ms) and ``--batch`` texts a call (ms a text), with the
ratio reference / bertkit (above 1: bertkit faster). The answers are compared first (sparse:
the largest weight difference and how many texts have the same non-zero terms; fill-mask: how
many masks have the same best token). Each figure is the best of ``--rounds`` rounds.

    python bench/mlm_heads.py                      # about a minute on one thread
    python bench/mlm_heads.py --texts 50 --rounds 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from machine import describe, line  # noqa: E402

DATA = ROOT.parent / "shared" / "data"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--model", type=Path, default=DATA / "models" / "bert-tiny-splade",
                   help="a model directory with a masked-LM head (default: the shared SPLADE BERT-Tiny)")
    p.add_argument("--data", type=Path, default=DATA / "glue" / "SST-2" / "dev.tsv", help="sentences (first column)")
    p.add_argument("--texts", type=int, default=200, help="sentences timed (default 200)")
    p.add_argument("--batch", type=int, default=32, help="texts a call in the batched figures (default 32)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the best is kept (default 3)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    return p.parse_args(argv)


def sentences(path: Path, count: int) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()[1:]
    texts = [line.split("\t")[0] for line in lines if len(line.split("\t")[0].split()) >= 5]
    if not texts:
        raise SystemExit(f"{path}: no sentences of five words or more")
    return texts[:count]


def masked(text: str, mask: str) -> str:
    words = text.split()
    return " ".join(words[:3] + [mask] + words[4:])


def lone_ms(call, texts) -> float:
    """Median ms of ``call`` on one text at a time."""
    times = []
    for text in texts:
        start = time.perf_counter()
        call(text)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def batched_ms(call, texts, batch: int) -> float:
    """ms a text of ``call`` on ``batch`` texts at a time."""
    start = time.perf_counter()
    for i in range(0, len(texts), batch):
        call(texts[i:i + batch])
    return (time.perf_counter() - start) / len(texts) * 1e3


def contenders(model: Path, batch: int):
    """``{(workload, name): (lone call, batched call)}`` for bertkit and the references."""
    import transformers
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.models import MLMTransformer, SpladePooling

    from bertkit.inference import load

    bert = load(model)
    encoder = SparseEncoder(modules=[MLMTransformer(str(model)), SpladePooling("max")], device="cpu")
    pipe = transformers.pipeline("fill-mask", model=str(model), device="cpu", top_k=5)
    return {
        ("sparse", "bertkit"): (bert.embed_sparse, lambda t: bert.embed_sparse(t, batch_size=batch)),
        ("sparse", "sentence-transformers"): (lambda t: encoder.encode([t]),
                                              lambda t: encoder.encode(t, batch_size=batch)),
        ("fill-mask", "bertkit"): (bert.fill_mask, lambda t: bert.fill_mask(t, batch_size=batch)),
        ("fill-mask", "transformers"): (pipe, lambda t: pipe(t, batch_size=batch)),
    }, bert, encoder, pipe


def agreement(bert, encoder, pipe, texts, masked_texts) -> list[str]:
    """What the two sides answer, compared, before any timing."""
    want = encoder.encode(texts, convert_to_tensor=True).to_dense().numpy()
    mine = np.zeros_like(want)
    for row, terms in enumerate(bert.embed_sparse(texts)):
        mine[row, [t["index"] for t in terms]] = [t["value"] for t in terms]
    same_terms = sum(set(np.flatnonzero(a)) == set(np.flatnonzero(b)) for a, b in zip(mine, want))
    top = [answer[0][0]["token"] for answer in bert.fill_mask(masked_texts)]  # the first [MASK]'s best
    reference = [answer[0]["token"] for answer in pipe(masked_texts)]
    return [f"sparse: largest weight difference {np.abs(mine - want).max():.1e}, "
            f"same non-zero terms {same_terms}/{len(texts)}",
            f"fill-mask: same best token {sum(a == b for a, b in zip(top, reference))}/{len(top)}"]


def main(argv=None) -> int:
    args = parse_args(argv)
    if not args.model.is_dir() or not args.data.is_file():
        print(f"skipped: {args.model} or {args.data} is absent")
        return 0
    torch.set_num_threads(args.threads)
    texts = sentences(args.data, args.texts)
    runs, bert, encoder, pipe = contenders(args.model, args.batch)
    masked_texts = {"bertkit": [masked(t, "[MASK]") for t in texts],
                    "transformers": [masked(t, pipe.tokenizer.mask_token) for t in texts]}
    print(line(describe()), f"; {args.threads} thread(s); {args.model.name}, "
          f"{len(texts)} SST-2 dev sentences, batches of {args.batch}", flush=True)
    for said in agreement(bert, encoder, pipe, texts[:64], masked_texts["bertkit"][:64]):
        print(said, flush=True)
    best: dict[tuple, list[float]] = {}
    for _ in range(args.rounds):
        for (workload, name), (lone, batched) in runs.items():
            inputs = texts if workload == "sparse" else masked_texts["transformers" if name == "transformers" else "bertkit"]
            lone(inputs[0])  # warm
            figures = [lone_ms(lone, inputs), batched_ms(batched, inputs, args.batch)]
            old = best.get((workload, name), [float("inf")] * 2)
            best[(workload, name)] = [min(a, b) for a, b in zip(old, figures)]
    print(f"\n| workload | engine | lone text (median ms) | batch of {args.batch} (ms a text) | ratio lone | ratio batch |")
    print("|---|---|---|---|---|---|")
    for workload, reference in (("sparse", "sentence-transformers"), ("fill-mask", "transformers")):
        ours = best[(workload, "bertkit")]
        for name in ("bertkit", reference):
            lone, batched = best[(workload, name)]
            ratio = (f"{lone / ours[0]:.2f}x", f"{batched / ours[1]:.2f}x") if name != "bertkit" else ("", "")
            print(f"| {workload} | {name} | {lone:.2f} | {batched:.2f} | {ratio[0]} | {ratio[1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
