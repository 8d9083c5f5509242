"""Embedding parity with sentence-transformers on real text (issue 34): bertkit's server
against sentence-transformers' own encoders, on the first N STS-B dev sentences.

* sparse: ``POST /embed_sparse`` on a SPLADE checkpoint against ``SparseEncoder``
  (``MLMTransformer`` + ``SpladePooling("max")``): the largest weight difference, and whether
  the non-zero terms and the top-20 order are the same; and ``/embed`` of a server started
  with ``--pooling splade`` (the dense vector) against the same;
* dense: ``POST /embed`` (``normalize: false``) on a trained embedding directory against
  ``SentenceTransformer(dir).encode``, without a prompt and with each prompt a copy of the
  directory gets from ``bertkit st-layout --prompt`` (by ``prompt_name``, and the default).

The server runs in process (FastAPI's test client; the same app ``bertkit serve`` runs)::

    python bench/embedding_parity.py --sparse-model ../shared/data/models/bert-tiny-splade \\
        --dense-model runs/emb/bertkit-s1 --count 200
"""

from __future__ import annotations

import argparse
import csv
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
PROMPTS = {"query": "query: ", "doc": "passage: "}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sparse-model", type=Path, default=DATA / "models" / "bert-tiny-splade")
    p.add_argument("--dense-model", type=Path, help="a directory `bertkit finetune embedding` wrote")
    p.add_argument("--data", type=Path, default=DATA / "glue" / "STS-B", help="dev.tsv's sentences are the texts")
    p.add_argument("--count", type=int, default=200, help="texts compared")
    return p.parse_args(argv)


def sentences(data: Path, count: int) -> list[str]:
    """The first ``count`` distinct sentences of ``data``'s dev.tsv (both columns, in order)."""
    with open(data / "dev.tsv", encoding="utf-8") as f:
        rows = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        texts = dict.fromkeys(t for row in rows for t in (row["sentence1"], row["sentence2"]))
    return list(texts)[:count]


def post(client, route: str, body: dict):
    response = client.post(route, json=body)
    if response.status_code != 200:
        raise SystemExit(f"{route}: {response.status_code} {response.text}")
    return response.json()


def in_chunks(client, route: str, texts: list[str], size: int = 32, **extra) -> list:
    """``route``'s answers for ``texts``, ``size`` at a time (the server's --max-items)."""
    return [a for i in range(0, len(texts), size) for a in post(client, route, {"inputs": texts[i:i + size], **extra})]


def sparse_parity(model: Path, texts: list[str]) -> str:
    from fastapi.testclient import TestClient
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.models import MLMTransformer, SpladePooling

    from bertkit.serve import ServeConfig, create_app

    with TestClient(create_app(ServeConfig(model=str(model)))) as client:
        answers = in_chunks(client, "/embed_sparse", texts)
    with TestClient(create_app(ServeConfig(model=str(model), pooling="splade"))) as client:
        dense = np.asarray(in_chunks(client, "/embed", texts, normalize=False))
    encoder = SparseEncoder(modules=[MLMTransformer(str(model)), SpladePooling("max")], device="cpu")
    want = encoder.encode(texts, convert_to_tensor=True).to_dense().numpy()
    mine = np.zeros_like(want)
    for row, terms in enumerate(answers):
        mine[row, [t["index"] for t in terms]] = [t["value"] for t in terms]
    same_terms = sum(set(np.flatnonzero(a)) == set(np.flatnonzero(b)) for a, b in zip(mine, want))
    same_top = sum(list(np.argsort(-a, kind="stable")[:20]) == list(np.argsort(-b, kind="stable")[:20])
                   for a, b in zip(mine, want))
    return (f"sparse, {len(texts)} texts, /embed_sparse against SparseEncoder (SpladePooling max): largest "
            f"weight difference {np.abs(mine - want).max():.1e}; same non-zero terms {same_terms}/{len(texts)}; "
            f"same top-20 order {same_top}/{len(texts)}; {np.count_nonzero(want) / len(texts):.0f} terms a text; "
            f"/embed under --pooling splade against the same: largest difference {np.abs(dense - want).max():.1e}")


def dense_parity(model: Path, texts: list[str]) -> list[str]:
    from fastapi.testclient import TestClient
    from sentence_transformers import SentenceTransformer

    from bertkit.cli.main import main as bertkit
    from bertkit.serve import ServeConfig, create_app

    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        prompted = Path(tmp) / "prompted"
        shutil.copytree(model, prompted)
        flags = [f for name, text in PROMPTS.items() for f in ("--prompt", f"{name}={text}")]
        if bertkit(["st-layout", str(prompted), *flags, "--default-prompt-name", "query"]) != 0:
            raise SystemExit("bertkit st-layout failed")
        cases = [(model, None), (prompted, "doc"), (prompted, None)]  # the last: the default prompt, both sides
        for directory, name in cases:
            with TestClient(create_app(ServeConfig(model=str(directory)))) as client:
                extra = {"normalize": False, **({"prompt_name": name} if name else {})}
                mine = np.asarray(in_chunks(client, "/embed", texts, **extra))
            want = SentenceTransformer(str(directory), device="cpu").encode(texts, prompt_name=name)
            which = ("no prompt" if directory == model else
                     f"prompt_name {name!r}" if name else "no prompt_name: the default prompt")
            lines.append(f"dense, {len(texts)} texts, /embed against SentenceTransformer(dir).encode, {which}: "
                         f"largest difference {np.abs(mine - want).max():.1e}")
    return lines


def main(argv=None) -> int:
    args = parse_args(argv)
    texts = sentences(args.data, args.count)
    print(sparse_parity(args.sparse_model, texts), flush=True)
    if args.dense_model:
        for line in dense_parity(args.dense_model, texts):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
