"""Sentence-embedding fine-tuning, bertkit against sentence-transformers' own trainer, side by
side in one run on the same recipe (issue 34). By default: STS-B train, mean pooling,
cosine-similarity loss (gold score / 5), batch 16, lr 1e-4, 2 epochs, linear warm-up over 10%
of the updates then decay, AdamW with weight decay 0.01 (none on biases and LayerNorm, in
both), gradient clipping at 1.0, max length 64, fp32, one thread. ``--loss cosent`` (CoSENT,
scale 20, both sides), ``--lr``, ``--epochs``, ``--batch`` and ``--warmup`` change the recipe
for both contenders at once. ``--loss mnr`` trains on positive pairs (MRPC's paraphrases by
default) with in-batch negatives (temperature 0.05, i.e. sentence-transformers'
``MultipleNegativesRankingLoss`` at its scale 20, fed by its ``NO_DUPLICATES`` batch sampler;
bertkit masks duplicates in the loss instead) and scores retrieval over the dev pairs (bertkit's
evaluator against sentence-transformers' ``InformationRetrievalEvaluator``: MRR@10, top-1
accuracy, recall@10).

For each seed, both contenders start from the same checkpoint and read the same pairs (bertkit's
reader of the data directory), tokenised to the same ids, in random batches of the same size
(the same 360 updates per STS-B epoch, the last batch 5 pairs; the same warm-up steps,
``int(warmup x updates)``); the order alternates with the seed so that neither always runs
on the busier half of a shared machine. Reported per run:

* dev Spearman (x100) of the cosine (MRR@10 x100 for ``mnr``): bertkit's as ``bertkit
  finetune`` scores it (the last epoch, ``select="last"``), sentence-transformers' by its own
  evaluator; bertkit's saved directory is also loaded with ``SentenceTransformer`` and scored
  by that same evaluator (the two must agree: the directory is a sentence-transformers model);
* wall seconds from the checkpoint on disk to the trained model: reading, tokenising, training,
  the dev evaluation after every epoch (both contenders: the curve below) and, for bertkit,
  the saving of the model (the evaluator's final scoring is outside both); and the CPU seconds
  of the process over the same span (with one thread, less moved than the wall time by other
  jobs on a shared machine);
* the curve: (seconds since the start, dev figure) after every epoch, in ``--json``.

    python bench/embedding_train.py --out runs/embedding-bench                 # seeds 1, 2, 3
    python bench/embedding_train.py --out runs/embedding-bench --seeds 1 --limit 500
    python bench/embedding_train.py --out runs/emb-cosent --loss cosent --lr 2e-4 --epochs 4 \
        --json runs/emb-cosent.json
    python bench/embedding_train.py --out runs/emb-mnr --loss mnr --json runs/emb-mnr.json
    python bench/embedding_train.py --plot docs/images/embedding-stsb-time.png \
        --from runs/emb-cosent.json runs/emb-cosine.json     # dev figure against seconds

Needs ``sentence-transformers`` with ``datasets`` and ``accelerate`` (its trainer).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
RECIPE = {"lr": 1e-4, "batch": 16, "epochs": 2, "warmup": 0.1, "max_seq_length": 64, "weight_decay": 0.01,
          "max_grad_norm": 1.0, "adam_eps": None,  # adam_eps None: each trainer's own (bertkit 1e-6, ST 1e-8)
          "dropout": 0.1}  # hidden and attention dropout: BERT's, the checkpoint's and bertkit's default
SCALE = 5.0  # STS-B's largest score: the cosine loss's targets are score / 5
MNR_SCALE = 20.0  # sentence-transformers' default scale = 1 / bertkit's default temperature 0.05
# bertkit's retrieval metric -> sentence-transformers' InformationRetrievalEvaluator's
RETRIEVAL = {"mrr@10": "dev_cosine_mrr@10", "recall@1": "dev_cosine_accuracy@1", "recall@10": "dev_cosine_recall@10"}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, default=DATA / "models" / "bert-tiny-splade")
    p.add_argument("--data", type=Path, help="train.* and dev.* pairs (default: glue/STS-B; glue/MRPC for mnr)")
    p.add_argument("--out", type=Path, help="scratch folder for the trained models")
    p.add_argument("--seeds", default="1,2,3", help="comma-separated seeds")
    p.add_argument("--loss", choices=["cosine", "cosent", "mnr"], default="cosine")
    p.add_argument("--lr", type=float, default=RECIPE["lr"])
    p.add_argument("--batch", type=int, default=RECIPE["batch"])
    p.add_argument("--epochs", type=int, default=RECIPE["epochs"])
    p.add_argument("--warmup", type=float, default=RECIPE["warmup"], help="warm-up fraction of the updates")
    p.add_argument("--bucket", type=int, default=50,
                   help="the loop's length buckets (FinetuneConfig.bucket); since 2026-11-26 the embedding task's "
                        "training batches are random samples whatever this is, as sentence-transformers draws "
                        "them (length buckets cost CoSENT 0.4 Spearman: issue 34), so it changes nothing here")
    p.add_argument("--adam-eps", type=float, help="AdamW's epsilon for both contenders (default: each its own, "
                                                  "bertkit BERT's 1e-6, sentence-transformers transformers' 1e-8)")
    p.add_argument("--dropout", type=float, default=RECIPE["dropout"],
                   help="hidden and attention dropout for both contenders (bertkit's --dropout; "
                        "sentence-transformers' model config)")
    p.add_argument("--st-batches", choices=["own", "bertkit"], default="own",
                   help="sentence-transformers' batches: its own sampler's, or bertkit's for the same seed "
                        "(the same pairs in the same batches in the same order: a paired comparison in which "
                        "only the dropout draws differ)")
    p.add_argument("--limit", type=int, help="the first N train and dev pairs only (a quick run)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--only", choices=["bertkit", "sentence-transformers"], help="one contender")
    p.add_argument("--json", type=Path, help="write the rows (curves included) here")
    p.add_argument("--plot", type=Path, help="a PNG of the dev figure against seconds from the --from files")
    p.add_argument("--from", dest="sources", type=Path, nargs="+", help="--json files to plot")
    p.add_argument("--note", default="", help="a footnote under the plot (the machine and its load)")
    args = p.parse_args(argv)
    if args.plot and not args.sources:
        p.error("--plot needs --from")
    if not args.plot and not args.out:
        p.error("--out is required to train")
    if args.data is None:
        args.data = DATA / "glue" / ("MRPC" if args.loss == "mnr" else "STS-B")
    return args


def recipe(args: argparse.Namespace) -> dict:
    """The hyper-parameters both contenders train with."""
    return {**RECIPE, "lr": args.lr, "batch": args.batch, "epochs": args.epochs, "warmup": args.warmup,
            "adam_eps": args.adam_eps, "dropout": args.dropout}


def read_split(data: Path, split: str, limit: int | None, loss: str) -> list:
    """The pairs of ``data``'s split, as bertkit's embedding task reads them for ``loss``."""
    from bertkit.tasks import get_task

    return get_task("embedding", loss=loss).read(data, split)[:limit]


def write_jsonl(examples: list, path: Path) -> None:
    """``examples`` as a JSON Lines file (a cut of the data): ``text_a, text_b, score`` for
    scored pairs, ``anchor, positive`` for positive pairs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for ex in examples:
            row = ({"text_a": ex.texts[0], "text_b": ex.texts[1], "score": ex.score} if ex.score is not None
                   else {"anchor": ex.texts[0], "positive": ex.texts[1]})
            f.write(json.dumps(row) + "\n")


def st_evaluator(dev: list, loss: str):
    """sentence-transformers' evaluator of the dev pairs: STS (Spearman of the cosine) for
    scored pairs; for ``mnr``, retrieval with bertkit's corpus (each distinct anchor queries
    the distinct positives, relevant: the positives of the rows sharing the anchor)."""
    from sentence_transformers.sentence_transformer.evaluation import (
        EmbeddingSimilarityEvaluator,
        InformationRetrievalEvaluator,
    )

    if loss != "mnr":
        return EmbeddingSimilarityEvaluator([ex.texts[0] for ex in dev], [ex.texts[1] for ex in dev],
                                            [ex.score / SCALE for ex in dev], main_similarity="cosine",
                                            name="dev", show_progress_bar=False)
    queries: dict[str, str] = {}
    corpus: dict[str, str] = {}
    relevant: dict[str, set[str]] = {}
    for ex in dev:
        qid = queries.setdefault(ex.texts[0], f"q{len(queries)}")
        did = corpus.setdefault(ex.texts[1], f"d{len(corpus)}")
        relevant.setdefault(qid, set()).add(did)
    return InformationRetrievalEvaluator({q: t for t, q in queries.items()}, {d: t for t, d in corpus.items()},
                                         relevant, mrr_at_k=[10], ndcg_at_k=[10], accuracy_at_k=[1, 10],
                                         precision_recall_at_k=[1, 10], map_at_k=[10], name="dev",
                                         write_csv=False, show_progress_bar=False)


def st_scores(evaluator, model, loss: str) -> dict:
    """The evaluator's figures (x100) of ``model`` under bertkit's names; the main one first."""
    found = evaluator(model)
    if loss == "mnr":
        return {name: 100 * found[key] for name, key in RETRIEVAL.items()}
    return {"spearman": 100 * found["dev_spearman_cosine"]}


def run_bertkit(model: Path, data: Path, out: Path, seed: int, rec: dict, loss: str, bucket: int = 50) -> dict:
    """``bertkit finetune embedding`` (library call) on the recipe: dev figures, seconds, curve."""
    from bertkit.finetuning.config import FinetuneConfig
    from bertkit.finetuning.loop import finetune
    from bertkit.runlog import read_log
    from bertkit.tasks import get_task

    eps = rec.get("adam_eps")
    rec = {k: v for k, v in rec.items() if k != "adam_eps"}
    cfg = FinetuneConfig(**rec, seed=seed, select="last", precision="fp32", device="cpu", progress=False,
                         overwrite=True, log_every=10_000, bucket=bucket)
    if eps is not None:  # no finetune option: the loop's optimizer builder, given the bench's eps
        import functools

        from bertkit.finetuning import loop
        from bertkit.training import build_optimizer

        loop.build_optimizer = functools.partial(build_optimizer, eps=eps)
    started, clock, cpu = time.time(), time.perf_counter(), time.process_time()
    _, best = finetune(get_task("embedding", pooling="mean", loss=loss), model, data, out, cfg)
    seconds, cpu = time.perf_counter() - clock, time.process_time() - cpu
    main = "mrr@10" if loss == "mnr" else "spearman"
    curve = [[r["time"] - started, 100 * r[main]] for r in read_log(out / "log.jsonl") if r.get("event") == "eval"]
    names = list(RETRIEVAL) if loss == "mnr" else ["spearman"]
    return {**{n: 100 * best.metrics[n] for n in names}, "seconds": seconds, "cpu_seconds": cpu, "curve": curve}


def bertkit_batches(n: int, batch: int, seed: int, epoch: int) -> list[list[int]]:
    """The index batches bertkit's fine-tuning loop draws in ``epoch`` (1-based) for the
    embedding task's ``n`` training pairs (random batches: every length the same)."""
    import numpy as np

    from bertkit.training.sampler import length_batches

    rng = np.random.default_rng([seed, epoch])
    return [b.tolist() for b in length_batches(np.zeros(n, dtype=int), batch, rng)]


class BertkitOrder:
    """A batch sampler for sentence-transformers' trainer that yields bertkit's batches, epoch
    after epoch (it counts its own passes, whatever the trainer's ``set_epoch`` says)."""

    def __init__(self, n: int, batch: int, seed: int):
        self.n, self.batch, self.seed, self.passes = n, batch, seed, 0
        self.first: list[list[int]] = []  # each pass's first batch, to check the pairing

    def set_epoch(self, epoch: int) -> None:
        pass

    def __len__(self) -> int:
        return -(-self.n // self.batch)

    def __iter__(self):
        self.passes += 1
        batches = bertkit_batches(self.n, self.batch, self.seed, self.passes)
        self.first.append(batches[0])
        yield from batches


def run_sentence_transformers(model: Path, train: list, out: Path, seed: int, rec: dict, loss: str, evaluator,
                              batches: str = "own"):
    """sentence-transformers' trainer on the recipe, its evaluator run after every epoch (as
    bertkit's loop does): the trained model, wall and CPU seconds, the curve. ``batches="bertkit"``:
    the trainer reads bertkit's batches for ``seed`` (:class:`BertkitOrder`)."""
    import math

    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer import losses
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from sentence_transformers.sentence_transformer.training_args import BatchSamplers
    from transformers import TrainerCallback

    curve: list[list[float]] = []
    started, cpu = time.perf_counter(), time.process_time()

    class EveryEpoch(TrainerCallback):
        def on_epoch_end(self, *_, **__):
            curve.append([time.perf_counter() - started, st_scores(evaluator, st, loss)[main]])

    main = "mrr@10" if loss == "mnr" else "spearman"
    encoder = Transformer(str(model), max_seq_length=rec["max_seq_length"],
                          config_kwargs={"hidden_dropout_prob": rec["dropout"],
                                         "attention_probs_dropout_prob": rec["dropout"]})
    st = SentenceTransformer(modules=[encoder, Pooling(encoder.get_embedding_dimension(), "mean")], device="cpu")
    if loss == "mnr":
        dataset = Dataset.from_dict({"anchor": [ex.texts[0] for ex in train],
                                     "positive": [ex.texts[1] for ex in train]})
        objective = losses.MultipleNegativesRankingLoss(st, scale=MNR_SCALE)
    else:
        dataset = Dataset.from_dict({"sentence1": [ex.texts[0] for ex in train],
                                     "sentence2": [ex.texts[1] for ex in train],
                                     "score": [ex.score / SCALE for ex in train]})
        objective = (losses.CoSENTLoss(st) if loss == "cosent" else losses.CosineSimilarityLoss(st))
    updates = math.ceil(len(train) / rec["batch"]) * rec["epochs"]
    args = SentenceTransformerTrainingArguments(
        output_dir=str(out), num_train_epochs=rec["epochs"], per_device_train_batch_size=rec["batch"],
        learning_rate=rec["lr"], warmup_steps=int(rec["warmup"] * updates),
        weight_decay=rec["weight_decay"], max_grad_norm=rec["max_grad_norm"], seed=seed,
        **({"adam_epsilon": rec["adam_eps"]} if rec.get("adam_eps") is not None else {}),
        save_strategy="no", eval_strategy="no", logging_strategy="no", report_to="none",
        disable_tqdm=True, use_cpu=True, dataloader_num_workers=0,
        batch_sampler=BatchSamplers.NO_DUPLICATES if loss == "mnr" else BatchSamplers.BATCH_SAMPLER)
    order = BertkitOrder(len(train), rec["batch"], seed) if batches == "bertkit" else None

    class Trainer(SentenceTransformerTrainer):
        def get_batch_sampler(self, *a, **kw):
            return order if order is not None else super().get_batch_sampler(*a, **kw)

    Trainer(model=st, args=args, train_dataset=dataset, loss=objective, callbacks=[EveryEpoch()]).train()
    if order is not None and order.first != [bertkit_batches(len(train), rec["batch"], seed, e)[0]
                                             for e in range(1, rec["epochs"] + 1)]:
        raise RuntimeError("sentence-transformers' trainer did not read bertkit's batches epoch by epoch")
    return st, time.perf_counter() - started, time.process_time() - cpu, curve


def compare(args: argparse.Namespace) -> list[dict]:
    """Every (seed, contender) run; one row each."""
    data, rec = args.data, recipe(args)
    train, dev = (read_split(data, split, args.limit, args.loss) for split in ("train", "dev"))
    if args.limit:  # the cut both contenders read
        data = args.out / "data"
        write_jsonl(train, data / "train.jsonl")
        write_jsonl(dev, data / "dev.jsonl")
    evaluator = st_evaluator(dev, args.loss)
    rows = []
    for n, seed in enumerate(int(s) for s in args.seeds.split(",")):
        order = ["bertkit", "sentence-transformers"][:: 1 if n % 2 == 0 else -1]
        for who in order:
            if args.only and who != args.only:
                continue
            out = args.out / f"{who}-s{seed}"
            if who == "bertkit":
                from sentence_transformers import SentenceTransformer

                row = run_bertkit(args.model, data, out, seed, rec, args.loss, args.bucket)
                check = st_scores(evaluator, SentenceTransformer(str(out), device="cpu"), args.loss)
                row["st_evaluator"] = next(iter(check.values()))
            else:
                model, seconds, cpu, curve = run_sentence_transformers(args.model, train, out, seed, rec,
                                                                       args.loss, evaluator, args.st_batches)
                row = {**st_scores(evaluator, model, args.loss), "seconds": seconds, "cpu_seconds": cpu,
                       "curve": curve}
            rows.append({"contender": who, "seed": seed, **row})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict], loss: str) -> str:
    """Markdown: one row per run, then each contender's mean +- sample standard deviation."""
    names = list(RETRIEVAL) if loss == "mnr" else ["spearman"]
    heads = ["dev MRR@10", "dev top-1 (recall@1)", "dev recall@10"] if loss == "mnr" else ["dev Spearman"]
    lines = [f"| contender | seed | {' | '.join(heads)} | same, sentence-transformers' evaluator | wall s | CPU s |",
             "|---|---|" + "---|" * len(heads) + "---|---|---|"]
    for r in rows:
        check = f"{r['st_evaluator']:.2f}" if "st_evaluator" in r else ""
        figures = " | ".join(f"{r[n]:.2f}" for n in names)
        lines.append(f"| {r['contender']} | {r['seed']} | {figures} | {check} | {r['seconds']:.0f} "
                     f"| {r['cpu_seconds']:.0f} |")
    for who in dict.fromkeys(r["contender"] for r in rows):
        mine = [r for r in rows if r["contender"] == who]
        figures = " | ".join(_spread([r[n] for r in mine], 2) for n in names)
        lines.append(f"| **{who}** | mean | {figures} | | "
                     f"{_spread([r['seconds'] for r in mine], 0)} | {_spread([r['cpu_seconds'] for r in mine], 0)} |")
    return "\n".join(lines)


def _spread(values: list[float], digits: int) -> str:
    mean = statistics.fmean(values)
    return f"{mean:.{digits}f} ± {statistics.stdev(values):.{digits}f}" if len(values) > 1 else f"{mean:.{digits}f}"


def plot(sources: list[Path], path: Path, note: str = "") -> None:
    """Every run's dev figure after each epoch against its seconds since the start, one colour
    per contender, one marker per recipe (``--json`` file)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"bertkit": "tab:blue", "sentence-transformers": "tab:orange"}
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    seeds = set()
    for source, marker in zip(sources, "os^Dv"):
        report = json.loads(source.read_text())
        for who, colour in colours.items():
            runs = [r for r in report["rows"] if r["contender"] == who]
            seeds.update(r["seed"] for r in runs)
            for n, r in enumerate(runs):
                xs, ys = zip(*r["curve"])
                ax.plot(xs, ys, marker=marker, color=colour, alpha=0.8, lw=1,
                        label=f"{who}, {report['label']}" if n == 0 else None)
    ax.axhline(80, color="grey", ls="--", lw=0.8)
    ax.set_xlabel("wall seconds since start (one thread; training + dev evaluation after each epoch)")
    ax.set_ylabel("STS-B dev Spearman x100")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"BERT-Tiny on STS-B train: dev Spearman after each epoch, {len(seeds)} seeds per line colour",
                 fontsize=9)
    lines = textwrap.wrap(note, 130)
    if lines:
        fig.text(0.01, 0.01, "\n".join(lines), fontsize=7, color="dimgrey")
    fig.tight_layout(rect=(0, 0.035 * len(lines), 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.plot:
        plot(args.sources, args.plot, args.note)
        return 0
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(args.threads)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    import torch

    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(ROOT / "bench"))
    from machine import describe, markdown

    args.out.mkdir(parents=True, exist_ok=True)
    rows = compare(args)
    rec = recipe(args)
    label = (f"{args.loss}, lr {rec['lr']:g}, batch {rec['batch']}, {rec['epochs']} epochs, "
             f"warm-up {rec['warmup']:g}{', bertkit bucket ' + str(args.bucket) if args.bucket != 50 else ''}"
             f"{', sentence-transformers on bertkit batches' if args.st_batches == 'bertkit' else ''}"
             f"{f', AdamW eps {args.adam_eps:g} (both)' if args.adam_eps is not None else ''}"
             f"{f', dropout {args.dropout:g}' if args.dropout != RECIPE['dropout'] else ''}")
    print(f"sentence embeddings, {args.data.name}, {label}, {args.threads} thread(s)"
          f"{f', first {args.limit} pairs' if args.limit else ''}\n")
    print(table(rows, args.loss))
    machine = describe()
    print("\n" + markdown(machine))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"label": label, "data": args.data.name, "loss": args.loss,
                                         "recipe": rec, "threads": args.threads, "rows": rows,
                                         "machine": machine, "load": os.getloadavg()}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
