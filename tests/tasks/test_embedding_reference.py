"""``finetune embedding`` against sentence-transformers' own trainer, update for update
(issue 34): from the same checkpoint, on the same batches, with dropout off and the same
AdamW eps, bertkit's loop (packed training forward, CoSENT, AdamW groups, clipping, warm-up
and decay) ends at sentence-transformers' weights. ``bench/embedding_step.py`` does the same
on BERT-Tiny and STS-B step by step."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertkit.finetuning.config import FinetuneConfig
from bertkit.finetuning.loop import finetune
from bertkit.tasks import get_task
from bertkit.training.sampler import length_batches
from tests.finetune_helpers import make_model, one_thread  # noqa: F401
from tests.tasks.test_embedding import write_stsb

pytest.importorskip("datasets")
pytest.importorskip("accelerate")
st = pytest.importorskip("sentence_transformers")


class BertkitBatches:
    """A batch sampler for sentence-transformers' trainer: the index batches bertkit's loop
    draws for ``seed``, epoch after epoch."""

    def __init__(self, n: int, batch: int, seed: int):
        self.n, self.batch, self.seed, self.epoch = n, batch, seed, 0

    def set_epoch(self, epoch: int) -> None:
        pass

    def __len__(self) -> int:
        return -(-self.n // self.batch)

    def __iter__(self):
        self.epoch += 1
        rng = np.random.default_rng([self.seed, self.epoch])
        yield from (b.tolist() for b in length_batches(np.zeros(self.n, dtype=int), self.batch, rng))


def test_cosent_finetuning_makes_sentence_transformers_trainers_updates(tmp_path):
    from datasets import Dataset
    from sentence_transformers.sentence_transformer import losses
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    model_dir = make_model(tmp_path / "model")
    data = write_stsb(tmp_path / "data", 40, 12)  # batches of 16, 16 and 8 pairs
    seed, epochs, length, eps = 3, 2, 32, 1e-6
    cfg = FinetuneConfig(lr=2e-3, batch=16, epochs=epochs, max_seq_length=length, warmup=0.2, weight_decay=0.01,
                         max_grad_norm=1.0, dropout=0.0, seed=seed, select="last", precision="fp32",
                         device="cpu", progress=False, log_every=1000)
    finetune(get_task("embedding", pooling="mean", loss="cosent"), model_dir, data, tmp_path / "bertkit", cfg)

    train = get_task("embedding", loss="cosent").read(data, "train")
    encoder = Transformer(str(model_dir), max_seq_length=length,
                          config_kwargs={"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0})
    reference = st.SentenceTransformer(modules=[encoder, Pooling(encoder.get_embedding_dimension(), "mean")],
                                       device="cpu")
    start = {n: p.detach().clone() for n, p in reference.named_parameters()}
    dataset = Dataset.from_dict({"sentence1": [ex.texts[0] for ex in train],
                                 "sentence2": [ex.texts[1] for ex in train],
                                 "score": [ex.score / 5 for ex in train]})
    updates = -(-len(train) // cfg.batch) * epochs
    args = st.SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path / "st"), num_train_epochs=epochs, per_device_train_batch_size=cfg.batch,
        learning_rate=cfg.lr, warmup_steps=int(cfg.warmup * updates), weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.max_grad_norm, adam_epsilon=eps, seed=seed, save_strategy="no", eval_strategy="no",
        logging_strategy="no", report_to="none", disable_tqdm=True, use_cpu=True, dataloader_num_workers=0)
    order = BertkitBatches(len(train), cfg.batch, seed)

    class Trainer(st.SentenceTransformerTrainer):
        def get_batch_sampler(self, *a, **kw):
            return order

    Trainer(model=reference, args=args, train_dataset=dataset, loss=losses.CoSENTLoss(reference)).train()
    assert order.epoch == epochs

    ours = dict(st.SentenceTransformer(str(tmp_path / "bertkit"), device="cpu").named_parameters())
    theirs = dict(reference.named_parameters())
    moved, differ = {}, {}
    for name, param in theirs.items():
        if ".pooler." in name:
            continue  # no embedding reads it: frozen in bertkit, never a gradient in sentence-transformers
        moved[name] = float((param.detach() - start[name]).abs().max())
        differ[name] = float((ours[name].detach() - param.detach()).abs().max())
    # every tensor trained, but the key biases: softmax over the keys ignores them (a zero gradient
    # but for float rounding, which AdamW's eps keeps from moving them)
    assert min(v for n, v in moved.items() if ".key.bias" not in n) > 1e-3
    worst = max(differ, key=differ.get)
    assert differ[worst] < 1e-5, (worst, differ[worst], moved[worst])
    texts = [ex.texts[0] for ex in train[:12]]
    with torch.inference_mode():
        got = st.SentenceTransformer(str(tmp_path / "bertkit"), device="cpu").encode(texts)
        want = reference.encode(texts)
    assert np.abs(got - want).max() < 1e-4
