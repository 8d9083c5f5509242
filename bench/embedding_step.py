"""The training step of ``bertkit finetune embedding`` against sentence-transformers' trainer,
step by step (issue 34: bertkit stays ~0.2 dev Spearman below on the same recipe and batches).

Both contenders start from the same checkpoint (BERT-Tiny by default) and read the same
STS-B training batches: bertkit's own for the seed (``length_batches`` with
``default_rng([seed, 1])``, as the fine-tuning loop draws them), fed to sentence-transformers'
trainer by ``bench/embedding_train.py``'s :class:`BertkitOrder`. The recipe is the bench's
(CoSENT scale 20, mean pooling, batch 16, lr 2e-4, 4 epochs of schedule, warm-up 10%, AdamW
weight decay 0.01, clipping 1.0, max length 64, fp32).

* bertkit: ``get_task("embedding", pooling="mean", loss="cosent")``, its ``build_model`` with
  the loop's dropout overrides, ``build_optimizer(..., implementation="auto")``,
  ``linear_warmup_decay`` and :class:`~bertkit.training.TrainStep`, called as
  ``finetuning.loop.train_epochs`` calls them (``task.compute`` on ``train.collate(idx)``);
  ``--bertkit-forward padded`` replaces the packed training forward (``embed_batch``) by
  ``BertModel.forward`` on the padded batch.
* sentence-transformers: ``SentenceTransformer([Transformer, Pooling("mean")])``,
  ``CoSENTLoss``, ``SentenceTransformerTrainer(...).train()`` itself (its optimizer and
  scheduler from ``create_optimizer_and_scheduler``), stopped after ``--steps`` updates.

Recorded per update, on both sides, by a wrapper around ``torch.nn.utils.clip_grad_norm_``
(both trainers clip through it) and around ``optimizer.step``: the loss, the learning rate the
update used, the gradient norm before clipping, and the pre-clip gradient of every parameter
(bertkit names; Hugging Face's query/key/value joined into ``qkv``). Reported: per-step
loss / lr / norm differences, per-tensor gradient differences at chosen steps, the weights
after the last step (max abs difference per tensor), and which parameters each optimizer holds,
decays and actually changed.

``--dropout-stats``: with dropout 0.1 (train mode), the spread of the embeddings and of the
loss over repeated forward passes of one batch on the same weights (bertkit packed, bertkit
padded, sentence-transformers; each twice, for the noise floor), and the mean gradients over
the draws compared pairwise. ``--full``: whole runs, bertkit's ``finetune`` against the trainer
(``--dropout 0``: the same run to float rounding). ``--hybrid SEEDS``: bertkit's loop driving
transformers' ``BertModel``. Findings: ``bench/results/embedding-step-amx-2026-11-26.md``.

    OMP_NUM_THREADS=1 python bench/embedding_step.py --steps 200 --adam-eps 1e-8   # dropout off
    OMP_NUM_THREADS=1 python bench/embedding_step.py --steps 50 --bertkit-forward padded
    OMP_NUM_THREADS=1 python bench/embedding_step.py --dropout-stats --draws 300
    OMP_NUM_THREADS=1 python bench/embedding_step.py --full --dropout 0 --adam-eps 1e-8
    OMP_NUM_THREADS=1 python bench/embedding_step.py --hybrid 1,2,3,4,5,6
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from embedding_train import DATA, RECIPE, SCALE, BertkitOrder, bertkit_batches, read_split  # noqa: E402

REPORT_STEPS = (1, 2, 5, 10, 25, 50, 100, 200)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, default=DATA / "models" / "bert-tiny-splade")
    p.add_argument("--data", type=Path, default=DATA / "glue" / "STS-B")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--epochs", type=int, default=4, help="of schedule (the lr at each step)")
    p.add_argument("--adam-eps", type=float, help="AdamW's eps for both (default: each its own, 1e-6 / 1e-8)")
    p.add_argument("--dropout", type=float, default=0.0, help="both models' hidden and attention dropout")
    p.add_argument("--bertkit-forward", choices=["packed", "padded"], default="packed")
    p.add_argument("--dropout-stats", action="store_true")
    p.add_argument("--draws", type=int, default=100)
    p.add_argument("--hybrid", default="",
                   help="comma-separated seeds: bertkit's fine-tuning loop (train_epochs: its batches, step, "
                        "optimizer, schedule, evaluation) driving Hugging Face's BertModel (the encoder "
                        "sentence-transformers trains) instead of bertkit's, dropout 0.1; the last epoch's dev "
                        "Spearman per seed")
    p.add_argument("--stats-dropout", default="0.1,0.1", help="--dropout-stats: hidden,attention dropout")
    p.add_argument("--full", action="store_true",
                   help="whole runs instead of steps: bertkit's finetune() and sentence-transformers' trainer "
                        "(bench/embedding_train.py's), on bertkit's batches, with --dropout and --adam-eps for "
                        "both; the dev Spearman of each and the final weights compared")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "emb-step")
    p.add_argument("--json", type=Path)
    return p.parse_args(argv)


# ------------------------------------------------------------------ recording
class Recorder:
    """Pre-clip gradients, norms, losses and learning rates of every update of one trainer."""

    def __init__(self, names: dict[int, str], keep: set[int]):
        self.names, self.keep = names, keep
        self.steps: list[dict] = []
        self.grads: dict[int, dict[str, torch.Tensor]] = {}
        self.clipped_params: list[list[str]] = []
        self.losses: list[float] = []
        self._orig = torch.nn.utils.clip_grad_norm_

    def clip(self, parameters, max_norm, *args, **kwargs):
        params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
        step = len(self.steps) + 1
        with_grad = [p for p in params if p.grad is not None]
        names = [self.names.get(id(p), "?") for p in with_grad]
        self.clipped_params.append(sorted(names))
        norms = {n: float(p.grad.double().norm()) for n, p in zip(names, with_grad)}
        if step in self.keep:
            self.grads[step] = {n: p.grad.detach().clone() for n, p in zip(names, with_grad)}
        total = self._orig(params, max_norm, *args, **kwargs)
        self.steps.append({"step": step, "norm": float(total), "max_norm": float(max_norm),
                           "tensor_norms": norms, "in_clip": len(params), "with_grad": len(with_grad)})
        return total

    def wrap_optimizer(self, optimizer) -> None:
        step = optimizer.step

        def stepped(*a, **kw):
            self.steps[-1]["lr"] = [g["lr"] for g in optimizer.param_groups]
            return step(*a, **kw)

        optimizer.step = stepped

    def __enter__(self):
        torch.nn.utils.clip_grad_norm_ = self.clip
        return self

    def __exit__(self, *exc):
        torch.nn.utils.clip_grad_norm_ = self._orig


def hf_name(name: str) -> str | None:
    """A sentence-transformers parameter name as bertkit's (``...attention.self.query`` etc.
    kept: joined later), or None outside the encoder."""
    m = re.search(r"(embeddings\..*|encoder\..*|pooler\..*)$", name)
    return m.group(1) if m else None


def join_qkv(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out, parts = {}, {}
    for name, t in tensors.items():
        m = re.match(r"^(.*\.attention\.self)\.(query|key|value)\.(weight|bias)$", name)
        if m:
            parts.setdefault((m.group(1), m.group(3)), {})[m.group(2)] = t
        else:
            out[name] = t
    for (module, kind), p in parts.items():
        if len(p) == 3:
            out[f"{module}.qkv.{kind}"] = torch.cat([p["query"], p["key"], p["value"]])
    return out


def join_qkv_norms(norms: dict[str, float]) -> dict[str, float]:
    out, parts = {}, {}
    for name, v in norms.items():
        m = re.match(r"^(.*\.attention\.self)\.(query|key|value)\.(weight|bias)$", name)
        if m:
            parts.setdefault((m.group(1), m.group(3)), []).append(v)
        else:
            out[name] = v
    for (module, kind), vs in parts.items():
        out[f"{module}.qkv.{kind}"] = math.sqrt(sum(v * v for v in vs))
    return out


# ------------------------------------------------------------------ bertkit
def bertkit_setup(args, dropout: float, attention: float | None = None):
    from bertkit.checkpoint import load_tokenizer
    from bertkit.finetuning.loop import seed_everything
    from bertkit.tasks import get_task

    task = get_task("embedding", pooling="mean", loss="cosent")
    examples = task.read(args.data, "train")
    train = task.featurize(examples, load_tokenizer(args.model), RECIPE["max_seq_length"], train=True)
    seed_everything(args.seed)
    model = task.build_model(args.model, config_overrides={
        "hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout if attention is None else attention})
    return task, train, model


def padded_compute(task):
    """``task.compute`` with the padded ``BertModel.forward`` instead of the packed one."""
    from bertkit.model import ModelOutput
    from bertkit.model.pooling import pool_features

    def compute(model, batch):
        ids = batch["input_ids"]
        b, k, length = ids.shape
        mask = batch["attention_mask"].reshape(b * k, length)
        hidden = model(ids.reshape(b * k, length), batch["token_type_ids"].reshape(b * k, length),
                       mask).last_hidden_state
        vectors = pool_features(hidden, mask, task.pooling).reshape(b, k, -1)
        return ModelOutput(loss=task.batch_loss(vectors.float(), batch), pooled_output=vectors)

    return compute


def run_bertkit(args, batches, keep):
    from bertkit.inference.features import to_device
    from bertkit.training import TrainStep, build_optimizer, linear_warmup_decay

    task, train, model = bertkit_setup(args, args.dropout)
    total = math.ceil(len(train) / RECIPE["batch"]) * args.epochs
    eps = {} if args.adam_eps is None else {"eps": args.adam_eps}
    optimizer = build_optimizer(model, args.lr, RECIPE["weight_decay"], implementation="auto", **eps)
    scheduler = linear_warmup_decay(optimizer, int(RECIPE["warmup"] * total), total)
    device = torch.device("cpu")
    step_fn = TrainStep(model, optimizer, scheduler, device=device, precision="fp32",
                        max_grad_norm=RECIPE["max_grad_norm"])
    names = {id(p): n for n, p in model.named_parameters()}
    groups = [{"weight_decay": g["weight_decay"], "params": sorted(names[id(p)] for p in g["params"])}
              for g in optimizer.param_groups]
    initial = {n: p.detach().clone() for n, p in model.named_parameters()}
    rec = Recorder(names, keep)
    rec.wrap_optimizer(optimizer)
    compute = task.compute if args.bertkit_forward == "packed" else padded_compute(task)
    model.train()
    with rec:
        for idx in batches[: args.steps]:
            import numpy as np

            result = step_fn([to_device(train.collate(np.asarray(idx)), device)], compute, [1.0])
            rec.losses.append(float(result.outputs[0].loss.detach()))
    final = {n: p.detach().clone() for n, p in model.named_parameters()}
    return {"rec": rec, "groups": groups, "initial": initial, "final": final,
            "skipped": int(step_fn.skipped_steps), "fused": bool(optimizer.defaults.get("fused")),
            "eps": optimizer.defaults["eps"], "requires_grad": sorted(n for n, p in model.named_parameters()
                                                                     if p.requires_grad)}


# ------------------------------------------------------------------ sentence-transformers
def st_model(args, dropout: float, attention: float | None = None):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    encoder = Transformer(str(args.model), max_seq_length=RECIPE["max_seq_length"],
                          config_kwargs={"hidden_dropout_prob": dropout,
                                         "attention_probs_dropout_prob": dropout if attention is None else attention})
    return SentenceTransformer(modules=[encoder, Pooling(encoder.get_embedding_dimension(), "mean")], device="cpu")


def run_st(args, train_examples, keep):
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer import losses
    from transformers import TrainerCallback

    st = st_model(args, args.dropout)
    names = {}
    for n, p in st.named_parameters():
        h = hf_name(n)
        if h is not None:
            names[id(p)] = h
    initial = join_qkv({names[id(p)]: p.detach().clone() for p in st.parameters()})
    dataset = Dataset.from_dict({"sentence1": [ex.texts[0] for ex in train_examples],
                                 "sentence2": [ex.texts[1] for ex in train_examples],
                                 "score": [ex.score / SCALE for ex in train_examples]})
    objective = losses.CoSENTLoss(st)
    updates = math.ceil(len(train_examples) / RECIPE["batch"]) * args.epochs
    targs = SentenceTransformerTrainingArguments(
        output_dir=str(args.out / "st"), num_train_epochs=args.epochs, per_device_train_batch_size=RECIPE["batch"],
        learning_rate=args.lr, warmup_steps=int(RECIPE["warmup"] * updates), weight_decay=RECIPE["weight_decay"],
        max_grad_norm=RECIPE["max_grad_norm"], seed=args.seed, save_strategy="no", eval_strategy="no",
        logging_strategy="no", report_to="none", disable_tqdm=True, use_cpu=True, dataloader_num_workers=0,
        **({"adam_epsilon": args.adam_eps} if args.adam_eps is not None else {}))
    order = BertkitOrder(len(train_examples), RECIPE["batch"], args.seed)
    rec = Recorder(names, keep)
    steps = args.steps

    class Stop(TrainerCallback):
        def on_pre_optimizer_step(self, a, state, control, optimizer=None, **kw):
            rec.steps[-1]["lr"] = [g["lr"] for g in optimizer.param_groups]  # the lr this update uses
            rec.steps[-1]["optimizer"] = type(getattr(optimizer, "optimizer", optimizer)).__name__

        def on_step_end(self, a, state, control, **kw):
            if state.global_step >= steps:
                control.should_training_stop = True

    class Trainer(SentenceTransformerTrainer):
        def get_batch_sampler(self, *a, **kw):
            return order

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            rec.losses.append(float((loss[0] if return_outputs else loss).detach()))
            return loss

    trainer = Trainer(model=st, args=targs, train_dataset=dataset, loss=objective, callbacks=[Stop()])
    with rec:
        trainer.train()
    opt = getattr(trainer.optimizer, "optimizer", trainer.optimizer)  # accelerate's wrapper
    groups = [{"weight_decay": g["weight_decay"], "params": sorted(names.get(id(p), "?") for p in g["params"])}
              for g in opt.param_groups]
    final = join_qkv({names[id(p)]: p.detach().clone() for p in st.parameters()})
    return {"rec": rec, "groups": groups, "initial": initial, "final": final,
            "fused": bool(opt.defaults.get("fused")), "eps": opt.defaults.get("eps"),
            "optimizer": type(opt).__name__, "trainer_steps": trainer.state.global_step,
            "requires_grad": sorted(names[id(p)] for p in st.parameters() if p.requires_grad)}


# ------------------------------------------------------------------ comparison
def max_rel(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    d = (a.double() - b.double()).abs()
    return float(d.max()), float(d.norm() / max(b.double().norm(), 1e-30))


def compare(args, bk, st) -> dict:
    out: dict = {}
    rb, rs = bk["rec"], st["rec"]
    out["optimizer"] = {"bertkit": {"fused": bk["fused"], "eps": bk["eps"], "skipped": bk["skipped"]},
                        "st": {"fused": st["fused"], "eps": st["eps"], "class": st["optimizer"],
                               "steps": st["trainer_steps"]}}
    qkvless = lambda names: sorted(set(join_qkv({n: torch.zeros(1) for n in names})))  # noqa: E731
    out["groups"] = {
        "bertkit": [{"wd": g["weight_decay"], "n": len(g["params"]), "params": g["params"]} for g in bk["groups"]],
        "st": [{"wd": g["weight_decay"], "n": len(g["params"]), "params": qkvless(g["params"])} for g in st["groups"]]}
    dec_b = set(bk["groups"][0]["params"]) if bk["groups"][0]["weight_decay"] else set()
    dec_s = {n for g in st["groups"] if g["weight_decay"] for n in qkvless(g["params"])}
    out["decay_only_bertkit"] = sorted(dec_b - dec_s)
    out["decay_only_st"] = sorted(dec_s - dec_b)
    out["trainable_only_bertkit"] = sorted(set(bk["requires_grad"]) - set(qkvless(st["requires_grad"])))
    out["trainable_only_st"] = sorted(set(qkvless(st["requires_grad"])) - set(bk["requires_grad"]))
    out["clipped_only_bertkit"] = sorted(set(qkvless(rb.clipped_params[0])) - set(qkvless(rs.clipped_params[0])))
    out["clipped_only_st"] = sorted(set(qkvless(rs.clipped_params[0])) - set(qkvless(rb.clipped_params[0])))
    per_step = []
    for k, (sb, ss) in enumerate(zip(rb.steps, rs.steps)):
        tb, ts = sb["tensor_norms"], join_qkv_norms(ss["tensor_norms"])
        worst = max(tb, key=lambda n: abs(tb[n] - ts.get(n, 0.0)) / max(ts.get(n, 0.0), 1e-30))
        per_step.append({"step": k + 1, "loss_bk": rb.losses[k], "loss_st": rs.losses[k],
                         "lr_bk": sb["lr"][0], "lr_st": ss["lr"][0],
                         "norm_bk": sb["norm"], "norm_st": ss["norm"],
                         "worst_tensor_norm_rel": [worst, abs(tb[worst] - ts.get(worst, 0.0)) / max(ts.get(worst, 0.0),
                                                                                                    1e-30)]})
    out["steps"] = per_step
    grads = {}
    for step in sorted(set(rb.grads) & set(rs.grads)):
        gb, gs = rb.grads[step], join_qkv(rs.grads[step])
        grads[step] = {n: max_rel(gb[n], gs[n]) if n in gs else "missing in st" for n in sorted(gb)}
        for n in sorted(set(gs) - set(gb)):
            grads[step][n] = "missing in bertkit"
    out["grads"] = grads
    weights = {}
    for n in sorted(bk["final"]):
        if n not in st["final"]:
            weights[n] = "missing in st"
            continue
        moved_b = float((bk["final"][n] - bk["initial"][n]).abs().max())
        moved_s = float((st["final"][n] - st["initial"][n]).abs().max())
        weights[n] = {"diff": max_rel(bk["final"][n], st["final"][n]), "moved_bk": moved_b, "moved_st": moved_s,
                      "start_diff": float((bk["initial"][n] - st["initial"][n]).abs().max())}
    out["weights"] = weights
    return out


def print_report(res: dict) -> None:
    print("optimizer:", json.dumps(res["optimizer"]))
    for side in ("bertkit", "st"):
        print(side, "groups:", [(g["wd"], g["n"]) for g in res["groups"][side]])
    for key in ("decay_only_bertkit", "decay_only_st", "trainable_only_bertkit", "trainable_only_st",
                "clipped_only_bertkit", "clipped_only_st"):
        print(f"{key}: {res[key]}")
    print("\nstep | loss bertkit | loss st | lr bertkit | lr st | norm bertkit | norm st | worst tensor norm (rel)")
    for s in res["steps"]:
        print(f"{s['step']:4d} | {s['loss_bk']:.6f} | {s['loss_st']:.6f} | {s['lr_bk']:.4e} | {s['lr_st']:.4e} | "
              f"{s['norm_bk']:.5f} | {s['norm_st']:.5f} | {s['worst_tensor_norm_rel'][0]} "
              f"{s['worst_tensor_norm_rel'][1]:.2e}")
    for step, per in res["grads"].items():
        worst = sorted(((v[1], n, v[0]) for n, v in per.items() if isinstance(v, tuple)), reverse=True)[:4]
        missing = [n for n, v in per.items() if isinstance(v, str)]
        print(f"\ngrads at step {step}: worst rel diffs {[(n, f'{r:.2e}', f'{m:.2e}') for r, n, m in worst]}"
              f"{' missing: ' + str(missing) if missing else ''}")
    print("\nweights after the last step (max abs diff, rel, moved bertkit, moved st):")
    for n, w in res["weights"].items():
        if isinstance(w, str):
            print(f"  {n}: {w}")
        else:
            print(f"  {n}: {w['diff'][0]:.3e} {w['diff'][1]:.2e} {w['moved_bk']:.3e} {w['moved_st']:.3e}"
                  f"{'  START DIFF ' + str(w['start_diff']) if w['start_diff'] else ''}")


# ------------------------------------------------------------------ dropout statistics
def _norm(g: dict) -> float:
    return math.sqrt(sum(float(v.double().norm()) ** 2 for v in g.values()))


def _cos(a: dict, b: dict) -> float:
    return sum(float((a[n].double() * b[n].double()).sum()) for n in b) / max(_norm(a) * _norm(b), 1e-30)


def dropout_stats(args, batches) -> dict:
    """Train-mode spread over ``draws`` forward passes of one batch, same weights, dropout
    ``--stats-dropout`` (hidden, attention; 0.1, 0.1 by default); each trainer twice, so that the
    difference between two sets of draws of one trainer shows the noise floor."""
    import numpy as np

    from bertkit.inference.features import to_device

    torch.manual_seed(args.seed)
    hidden, attention = (float(x) for x in args.stats_dropout.split(","))
    task, train, model = bertkit_setup(args, hidden, attention)
    idx = np.asarray(batches[0])
    batch = to_device(train.collate(idx), torch.device("cpu"))
    st = st_model(args, hidden, attention)
    examples = read_split(args.data, "train", None, "cosent")
    texts_a = [examples[i].texts[0] for i in idx]
    texts_b = [examples[i].texts[1] for i in idx]
    from sentence_transformers.sentence_transformer import losses

    objective = losses.CoSENTLoss(st)
    labels = torch.tensor([examples[i].score / SCALE for i in idx])
    feats = [st.preprocess(texts_a), st.preprocess(texts_b)] if hasattr(st, "preprocess") else \
        [st.tokenize(texts_a), st.tokenize(texts_b)]
    padded = padded_compute(task)

    def bk(compute):
        out = compute(model, batch)
        return out.loss, out.pooled_output.reshape(-1, out.pooled_output.shape[-1])

    def stf():
        loss = objective([dict(f) for f in feats], labels)
        emb = [st(dict(f))["sentence_embedding"] for f in feats]
        return loss, torch.stack(emb, 1).reshape(-1, emb[0].shape[-1])

    bk_names = {n: p for n, p in model.named_parameters() if p.requires_grad}
    st_params = {hf_name(n): p for n, p in st.named_parameters() if hf_name(n)}
    res = {}
    runs = (("bertkit packed", lambda: bk(task.compute), model, bk_names),
            ("bertkit packed, 2nd draws", lambda: bk(task.compute), model, bk_names),
            ("bertkit padded", lambda: bk(padded), model, bk_names),
            ("sentence-transformers", stf, st, st_params),
            ("sentence-transformers, 2nd draws", stf, st, st_params))
    for label, fn, mod, params in runs:
        mod.eval()
        for p in params.values():
            p.grad = None
        loss0, emb0 = fn()
        loss0.backward()
        g0 = join_qkv({n: p.grad.clone() for n, p in params.items() if p.grad is not None})
        mod.train()
        losses_, embs, gsum = [], [], None
        for _ in range(args.draws):
            for p in params.values():
                p.grad = None
            loss, emb = fn()
            loss.backward()
            losses_.append(float(loss))
            embs.append(emb.detach())
            g = join_qkv({n: p.grad.clone() for n, p in params.items() if p.grad is not None})
            gsum = g if gsum is None else {n: gsum[n] + g[n] for n in g}
        e = torch.stack(embs)
        gmean = {n: v / args.draws for n, v in gsum.items()}
        res[label] = {
            "eval_loss": float(loss0), "train_loss_mean": float(np.mean(losses_)),
            "train_loss_se": float(np.std(losses_) / math.sqrt(len(losses_))),
            "emb_draw_sd": float(e.std(0).mean()), "emb_sd": float(e.std()),
            "emb_mean_shift": float((e.mean(0) - emb0.detach()).abs().mean()),
            "emb_norm_mean": float(e.norm(dim=-1).mean()), "emb_norm_eval": float(emb0.norm(dim=-1).mean()),
            "grad_mean_norm": _norm(gmean), "grad_eval_norm": _norm(g0),
            "grad_mean_cos_to_eval": _cos(gmean, g0), "_gmean": gmean, "_emb_mean": e.mean(0)}
    labels = list(res)
    pairs = {}
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            pairs[f"{a} | {b}"] = {"grad_mean_cos": _cos(res[a]["_gmean"], res[b]["_gmean"]),
                                   "emb_mean_abs_diff": float((res[a]["_emb_mean"] - res[b]["_emb_mean"]).abs().mean()),
                                   "loss_mean_diff": res[a]["train_loss_mean"] - res[b]["train_loss_mean"]}
    for r in res.values():
        r.pop("_gmean"), r.pop("_emb_mean")
    res["pairs"] = pairs
    return res


def full_runs(args) -> dict:
    """The whole recipe (``--epochs``) through bertkit's ``finetune`` and sentence-transformers'
    trainer, both at ``--dropout``, on bertkit's batches for ``--seed``."""
    import functools

    import embedding_train as bench
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules

    from bertkit.finetuning import loop
    from bertkit.finetuning.config import FinetuneConfig
    from bertkit.tasks import get_task
    from bertkit.training import build_optimizer

    rec = {**RECIPE, "lr": args.lr, "epochs": args.epochs, "adam_eps": args.adam_eps}
    train = read_split(args.data, "train", None, "cosent")
    evaluator = bench.st_evaluator(read_split(args.data, "dev", None, "cosent"), "cosent")
    out = args.out / f"full-d{args.dropout:g}-s{args.seed}"
    cfg = FinetuneConfig(**{k: v for k, v in rec.items() if k != "adam_eps"}, seed=args.seed, select="last",
                         precision="fp32", device="cpu", progress=False, overwrite=True, log_every=10_000,
                         dropout=args.dropout)
    if args.adam_eps is not None:
        loop.build_optimizer = functools.partial(build_optimizer, eps=args.adam_eps)
    _, best = loop.finetune(get_task("embedding", pooling="mean", loss="cosent"), args.model, args.data,
                            out / "bertkit", cfg)
    bk = SentenceTransformer(str(out / "bertkit"), device="cpu")
    original = modules.Transformer
    modules.Transformer = functools.partial(original, config_kwargs={
        "hidden_dropout_prob": args.dropout, "attention_probs_dropout_prob": args.dropout})
    try:
        st, *_ = bench.run_sentence_transformers(args.model, train, out / "st", args.seed, rec, "cosent",
                                                 evaluator, batches="bertkit")
    finally:
        modules.Transformer = original
    wb = {hf_name(n): p.detach() for n, p in bk.named_parameters() if hf_name(n)}
    ws = {hf_name(n): p.detach() for n, p in st.named_parameters() if hf_name(n)}
    diffs = {n: max_rel(wb[n], ws[n]) for n in sorted(wb) if n in ws and not n.startswith("pooler")}
    return {"bertkit_spearman": 100 * best.metrics["spearman"],
            "bertkit_st_evaluator": bench.st_scores(evaluator, bk, "cosent")["spearman"],
            "st_spearman": bench.st_scores(evaluator, st, "cosent")["spearman"],
            "weights_max_abs_rel": diffs}


def hybrid_runs(args) -> dict:
    """bertkit's loop with transformers' ``BertModel`` as the encoder (see ``--hybrid``)."""
    from transformers import BertModel as HFBertModel

    from bertkit.checkpoint import load_tokenizer
    from bertkit.finetuning.config import FinetuneConfig
    from bertkit.finetuning.evaluate import load_eval_sets
    from bertkit.finetuning.loop import Hyper, train_epochs
    from bertkit.model import ModelOutput
    from bertkit.runlog import RunLogger
    from bertkit.tasks import get_task

    class Encoder(torch.nn.Module):
        def __init__(self, overrides):
            super().__init__()
            self.bert = HFBertModel.from_pretrained(str(args.model), **overrides)

        def forward(self, ids, types, mask):
            return ModelOutput(last_hidden_state=self.bert(input_ids=ids.long(), attention_mask=mask.long(),
                                                          token_type_ids=types.long()).last_hidden_state)

    task = get_task("embedding", pooling="mean", loss="cosent")
    task.build_model = lambda model_dir, config_overrides=None: Encoder(config_overrides or {})
    tokenizer = load_tokenizer(args.model)
    train = task.featurize(task.read(args.data, "train"), tokenizer, RECIPE["max_seq_length"], train=True)
    sets = load_eval_sets(task, args.data, tokenizer, RECIPE["max_seq_length"])
    rec = {k: v for k, v in RECIPE.items() if k != "adam_eps"}
    out = {}
    for seed in (int(x) for x in args.hybrid.split(",")):
        cfg = FinetuneConfig(**{**rec, "lr": args.lr, "epochs": args.epochs}, seed=seed, select="last",
                             precision="fp32", device="cpu", progress=False, log_every=10_000, dropout=0.1)
        hyper = Hyper(args.lr, RECIPE["batch"], args.epochs, seed)
        curve = [100 * metrics["spearman"] for _, _, metrics, _ in
                 train_epochs(task, args.model, train, sets, hyper, cfg, RunLogger(None, echo=False))]
        out[seed] = curve
        print(f"hybrid seed {seed}: dev Spearman per epoch {[round(c, 2) for c in curve]}", flush=True)
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    examples = read_split(args.data, "train", None, "cosent")
    batches = bertkit_batches(len(examples), RECIPE["batch"], args.seed, 1)
    if args.hybrid:
        res = hybrid_runs(args)
    elif args.full:
        res = full_runs(args)
        print(json.dumps({k: v for k, v in res.items() if k != "weights_max_abs_rel"}))
        for n, (m, r) in res["weights_max_abs_rel"].items():
            print(f"  {n}: max abs {m:.3e}, rel {r:.2e}")
    elif args.dropout_stats:
        res = dropout_stats(args, batches)
        for label, r in res.items():
            if label == "pairs":
                for pair, v in r.items():
                    print(pair, json.dumps({k: round(x, 6) for k, x in v.items()}))
            else:
                print(label, json.dumps({k: round(v, 6) for k, v in r.items()}))
    else:
        keep = {s for s in REPORT_STEPS if s <= args.steps} | {args.steps}
        bk = run_bertkit(args, batches, keep)
        st = run_st(args, examples, keep)
        res = compare(args, bk, st)
        print_report(res)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "result": res},
                                        indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
