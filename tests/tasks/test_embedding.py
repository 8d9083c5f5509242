"""The sentence-embedding task: pair files, losses, fine-tuning a bi-encoder, and the saved
directory embedding at every door with the trained pooling."""

from __future__ import annotations

import itertools
import json
import random

import numpy as np
import pytest
import torch

from bertkit.cli.main import main
from bertkit.errors import BertkitError, DataFormatError
from bertkit.finetuning.config import FinetuneConfig
from bertkit.finetuning.loop import finetune
from bertkit.inference import load
from bertkit.modeldir.st_layout import read_st_pooling
from bertkit.runlog import read_log
from bertkit.tasks import get_task
from bertkit.tasks.embedding import cosent_loss, cosine_loss, mnr_loss, retrieval_metrics
from bertkit.tasks.formats.pairs import PairExample, pair_columns, read_pairs
from tests.finetune_helpers import FAST, NOISE, make_model, one_thread  # noqa: F401

STSB_HEADER = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("embedding_model"))


def toy_pair(rng: random.Random, score: float) -> tuple[str, str]:
    """Two short noise sentences; with score 5 both carry ``good``, with 0 one carries
    ``good`` and the other ``bad``, with 2.5 one carries ``good`` and the other neither."""
    def words(key):
        out = [rng.choice(NOISE) for _ in range(rng.randint(2, 5))]
        if key:
            out.insert(rng.randint(0, len(out)), key)
        return " ".join(out)
    second = {5.0: "good", 2.5: None, 0.0: "bad"}[score]
    return words("good"), words(second)


def write_stsb(directory, train: int = 192, dev: int = 60):
    """Toy scored pairs in GLUE STS-B's own layout (ten columns, header)."""
    directory.mkdir(parents=True, exist_ok=True)
    for split, n, seed in (("train", train, 1), ("dev", dev, 2)):
        rng = random.Random(seed)
        lines = [STSB_HEADER]
        for i in range(n):
            score = (0.0, 2.5, 5.0)[i % 3]
            a, b = toy_pair(rng, score)
            lines.append(f"{i}\tmain-captions\ttoy\t2012\t{i:04d}\tnone\tnone\t{a}\t{b}\t{score:.3f}")
        (directory / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


# ------------------------------------------------------------------ pair files
def test_stsb_and_generic_scored_pairs_are_read_by_their_header(tmp_path):
    write_stsb(tmp_path / "stsb", 3, 3)
    layout, columns = pair_columns(tmp_path / "stsb" / "train.tsv")
    assert (layout, columns) == ("scored", {"text_a": "sentence1", "text_b": "sentence2", "score": "score"})
    examples = read_pairs(tmp_path / "stsb" / "train.tsv", layout, columns)
    assert [ex.score for ex in examples] == [0.0, 2.5, 5.0] and len(examples[0].texts) == 2
    (tmp_path / "pairs.csv").write_text('text_a,text_b,score\n"a, b",c,0.5\nd,e,1\n', encoding="utf-8")
    layout, columns = pair_columns(tmp_path / "pairs.csv")
    examples = read_pairs(tmp_path / "pairs.csv", layout, columns)
    assert [(ex.texts, ex.score, ex.line) for ex in examples] == [(["a, b", "c"], 0.5, 2), (["d", "e"], 1.0, 3)]


@pytest.mark.parametrize("body, words", [
    ("text_a,text_b,score\na,b,high\n", "pairs.csv:2: score 'high' in column 'score' is not a number"),
    ("text_a,text_b,score\na,b,nan\n", "pairs.csv:2: score 'nan' in column 'score' is not finite"),
    ("text_a,text_b,score\na, ,1\n", "pairs.csv:2: column 'text_b' must be a non-empty text"),
    ("first,second,score\na,b,1\n", "pairs.csv:1: no text_a column (text_a or sentence1)"),
])
def test_bad_pair_files_name_the_file_and_line(tmp_path, body, words):
    (tmp_path / "pairs.csv").write_text(body, encoding="utf-8")
    with pytest.raises(DataFormatError) as caught:
        layout, columns = pair_columns(tmp_path / "pairs.csv")
        read_pairs(tmp_path / "pairs.csv", layout, columns)
    assert words in str(caught.value)


def test_options_are_checked_when_the_task_is_built():
    with pytest.raises(BertkitError, match="pooling must be one of cls, mean, max"):
        get_task("embedding", pooling="sum")
    with pytest.raises(BertkitError, match="loss must be one of"):
        get_task("embedding", loss="triplet")
    with pytest.raises(BertkitError, match="unknown option"):
        get_task("embedding", labels=["a", "b"])
    task = get_task("embedding")
    assert (task.pooling, task.loss, task.main_metric) == ("mean", "cosine", "spearman")


# ------------------------------------------------------------------ losses
def test_cosine_loss_is_the_squared_error_of_the_cosine():
    u = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    v = torch.tensor([[0.0, 2.0], [2.0, 2.0]])
    target = torch.tensor([0.5, 0.5])  # cosines 0 and 1
    assert cosine_loss(u, v, target).item() == pytest.approx((0.25 + 0.25) / 2)


def test_cosent_loss_equals_its_formula_and_reads_only_the_order_of_scores():
    torch.manual_seed(0)
    u, v, scores = torch.randn(5, 4), torch.randn(5, 4), torch.tensor([0.0, 1.0, 1.0, 3.0, 5.0])
    cos = torch.nn.functional.cosine_similarity(u, v) * 20
    terms = [cos[j] - cos[i] for i, j in itertools.product(range(5), repeat=2) if scores[i] > scores[j]]
    want = torch.log(1 + torch.exp(torch.stack(terms)).sum())
    assert cosent_loss(u, v, scores).item() == pytest.approx(want.item(), rel=1e-5)
    assert cosent_loss(u, v, scores * 7 + 1).item() == pytest.approx(want.item(), rel=1e-5)
    agree = torch.tensor([[1.0, 0.0]] * 2), torch.tensor([[1.0, 0.0], [0.0, 1.0]])  # cosines 1, 0
    right, wrong = cosent_loss(*agree, torch.tensor([1.0, 0.0])), cosent_loss(*agree, torch.tensor([0.0, 1.0]))
    assert right.item() < 1e-6 < 19 < wrong.item()


# ------------------------------------------------------------------ training batches
def _short_and_long_pairs(n: int = 256) -> list[PairExample]:
    """Half the pairs of two words, half of twenty: length buckets would split them."""
    rng = random.Random(3)
    examples = []
    for i in range(n):
        width = 2 if i % 2 else 20
        texts = tuple(" ".join(rng.choice(NOISE) for _ in range(width)) for _ in range(2))
        examples.append(PairExample(f"p{i}", list(texts), float(i % 6), i + 1))
    return examples


def test_training_batches_are_random_samples_not_length_buckets(model_dir):
    """In-batch losses (CoSENT, MNR) compare a batch's pairs with each other: a batch must be a
    random sample, as sentence-transformers draws it, not one length class (on STS-B, length
    buckets make most of a batch one source, and CoSENT then lost 0.4 Spearman: issue 34)."""
    from bertkit.tokenizer import BertTokenizer
    from bertkit.training.sampler import length_batches

    tok = BertTokenizer.from_file(model_dir / "vocab.txt")
    train = get_task("embedding", loss="cosent").featurize(_short_and_long_pairs(), tok, 32, train=True)
    batches = length_batches(train.lengths, 16, np.random.default_rng(0), bucket=50)  # the loop's call
    short = [train.features[i]["input_ids"].shape[-1] < 10 for batch in batches for i in batch]
    shares = [np.mean(short[b * 16:(b + 1) * 16]) for b in range(len(batches))]
    assert sum(0 < share < 1 for share in shares) >= 0.9 * len(batches)  # bucketed: none mixed
    batch = train.collate(batches[0])  # padded to the batch's own longest text
    longest = max(train.features[i]["input_ids"].shape[-1] for i in batches[0])
    assert batch["input_ids"].shape == (16, 2, longest)
    evaluation = get_task("embedding", loss="cosent").featurize(_short_and_long_pairs(), tok, 32)
    assert len(set(evaluation.lengths.tolist())) > 1  # evaluation keeps sorting by length


@pytest.mark.parametrize("pooling", ["mean", "cls", "max"])
def test_training_runs_on_the_real_tokens_and_gives_the_padded_forwards_embeddings(model_dir, pooling,
                                                                                  monkeypatch):
    """Random batches carry more padding: in training the encoder runs on the real tokens only,
    with the padded forward's embeddings and gradients (dropout off to compare)."""
    import bertkit.tasks.embedding as embedding
    from bertkit.tokenizer import BertTokenizer

    packed, original = [], embedding.encode_packed
    monkeypatch.setattr(embedding, "encode_packed", lambda *a, **k: packed.append(1) or original(*a, **k))

    task = get_task("embedding", loss="cosent", pooling=pooling)
    tok = BertTokenizer.from_file(model_dir / "vocab.txt")
    batch = task.featurize(_short_and_long_pairs(8), tok, 32, train=True).collate(range(8))
    model = task.build_model(model_dir, {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0})
    results = []
    for training in (True, False):
        model.train(training)
        model.zero_grad()
        out = task.compute(model, batch)
        out.loss.backward()
        results.append((out.pooled_output.detach(), model.embeddings.word_embeddings.weight.grad.clone()))
    assert packed == [1]  # the training forward only
    (vectors, grad), (padded_vectors, padded_grad) = results
    torch.testing.assert_close(vectors, padded_vectors, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grad, padded_grad, atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------ fine-tuning
@pytest.mark.parametrize("loss", ["cosine", "cosent"])
def test_finetuning_on_scored_pairs_raises_the_spearman_of_the_cosine(model_dir, tmp_path, loss):
    data = write_stsb(tmp_path / "data")
    task = get_task("embedding", loss=loss)
    cfg = FinetuneConfig(**{**FAST, "epochs": 6, "lr": 1e-3})
    runs, best = finetune(task, model_dir, data, tmp_path / "out", cfg)
    before = get_task("embedding")
    from bertkit.finetuning.evaluate import evaluate_sets, load_eval_sets
    from bertkit.tokenizer import BertTokenizer

    tok = BertTokenizer.from_file(model_dir / "vocab.txt")
    sets = load_eval_sets(before, data, tok, 32)
    untrained, _ = evaluate_sets(before, before.build_model(model_dir), sets, 32)
    assert best.metrics["spearman"] >= 0.8 > untrained["spearman"] + 0.2
    saved = json.loads((tmp_path / "out" / "config.json").read_text())["bertkit_finetune"]
    assert saved["task"] == "embedding"
    scale = {"score_scale": 5.0} if loss == "cosine" else {}  # CoSENT reads only the scores' order
    assert saved["options"] == {"loss": loss, "pooling": "mean", **scale}


def test_the_saved_directory_embeds_with_the_trained_pooling_at_every_door(model_dir, tmp_path):
    data = write_stsb(tmp_path / "data", 48, 12)
    out = tmp_path / "out"
    finetune(get_task("embedding", pooling="max"), model_dir, data, out, FinetuneConfig(**{**FAST, "epochs": 1}))
    assert read_st_pooling(out) == "max"  # bertkit serve's default pooling
    pooling = json.loads((out / "1_Pooling" / "config.json").read_text())
    assert pooling["pooling_mode_max_tokens"] and not pooling["pooling_mode_mean_tokens"]
    assert json.loads((out / "sentence_bert_config.json").read_text())["max_seq_length"] == 32
    bert = load(out)
    texts = ["the man went to the store", "good day"]
    default = bert.embed(texts)
    assert bert.default_pooling == "max"
    np.testing.assert_allclose(default, bert.embed(texts, pool="max"), atol=0)
    assert not np.allclose(default, bert.embed(texts, pool="cls"), atol=1e-3)
    # the vectors the task trained and scored are the ones the engine serves
    task = get_task("embedding", pooling="max")
    feats = task.featurize(task.read(data, "dev")[:2], bert.tokenizer, 32)
    with torch.inference_mode():
        trained = task.compute(bert.model, feats.collate([0, 1])).pooled_output.numpy()
    ex = task.read(data, "dev")[:2]
    np.testing.assert_allclose(trained[:, 0], bert.embed([e.texts[0] for e in ex]), atol=1e-5)
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    assert main(["embed", str(out), "--input", str(tmp_path / "texts.txt"),
                 "--output", str(tmp_path / "vectors.npy")]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "vectors.npy"), default, atol=1e-6)
    predictions = [json.loads(x) for x in (out / "predictions_dev.jsonl").read_text().splitlines()]
    assert len(predictions) == 12 and set(predictions[0]) == {"id", "cosine"}


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_the_saved_directory_is_a_sentence_transformers_model(model_dir, tmp_path, pooling):
    st = pytest.importorskip("sentence_transformers")
    data = write_stsb(tmp_path / "data", 48, 12)
    out = tmp_path / "out"
    finetune(get_task("embedding", pooling=pooling), model_dir, data, out,
             FinetuneConfig(**{**FAST, "epochs": 2, "max_seq_length": 16}))
    assert [m["type"].rsplit(".", 1)[1] for m in json.loads((out / "modules.json").read_text())] == [
        "Transformer", "Pooling"]  # unnormalised: bertkit embed's vectors
    assert json.loads((out / "config_sentence_transformers.json").read_text())["prompts"] == {}
    texts = [" ".join(random.Random(i).choices(NOISE, k=3 + i % 20)) for i in range(40)]
    want = load(out).embed(texts)
    got = st.SentenceTransformer(str(out), device="cpu").encode(texts, batch_size=7)
    assert np.abs(got - want).max() < 1e-5  # long texts cut at the trained max_seq_length alike


def test_a_model_that_was_not_trained_for_embeddings_keeps_cls_as_its_default(model_dir):
    bert = load(model_dir)
    assert bert.default_pooling == "cls"
    np.testing.assert_allclose(bert.embed(["good day"]), bert.embed(["good day"], pool="cls"), atol=0)


# ------------------------------------------------------------------ positive pairs
def test_mrpc_files_are_read_as_their_paraphrases_only(tmp_path):
    rows = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String", '1\t1\t2\tHe said "yes".\tHe agreed.',
            "0\t3\t4\tIt rained.\tIt was sunny.", "1\t5\t6\tA cat sat.\tA cat was sitting."]
    (tmp_path / "msr_paraphrase_train.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    task = get_task("embedding", loss="mnr")
    examples = task.read(tmp_path, "train")
    assert [(ex.texts, ex.line) for ex in examples] == [(['He said "yes".', "He agreed."], 2),
                                                        (["A cat sat.", "A cat was sitting."], 4)]
    with pytest.raises(BertkitError, match="positive pairs trains with --loss mnr, not cosine"):
        get_task("embedding").read(tmp_path, "train")


def test_anchor_positive_negative_files_and_their_column_options(tmp_path):
    (tmp_path / "train.jsonl").write_text(json.dumps({"anchor": "a", "positive": "b", "negative": "c"}) + "\n")
    assert get_task("embedding", loss="mnr").read(tmp_path, "train")[0].texts == ["a", "b", "c"]
    (tmp_path / "train.csv").write_text("q,d\nwhere,here\n")
    task = get_task("embedding", loss="mnr", text_column="q", pair_column="d", train_file="train.csv")
    assert task.read(tmp_path, "train")[0].texts == ["where", "here"]
    with pytest.raises(DataFormatError, match="train.csv:1: no column 'x'"):
        get_task("embedding", loss="mnr", text_column="x", train_file="train.csv").read(tmp_path, "train")


def _cross_entropy(logits: torch.Tensor) -> float:
    return torch.nn.functional.cross_entropy(logits, torch.arange(len(logits))).item()


def test_mnr_loss_is_in_batch_cross_entropy_and_never_takes_a_duplicate_as_negative():
    torch.manual_seed(0)
    vectors = torch.randn(3, 3, 8)  # anchor, positive, hard negative
    unit = torch.nn.functional.normalize(vectors, dim=-1)
    candidates = torch.cat([unit[:, 1], unit[:, 2]])  # positives, then negatives
    logits = unit[:, 0] @ candidates.T / 0.05
    distinct = torch.arange(9).reshape(3, 3)
    assert mnr_loss(vectors, distinct, 0.05) == pytest.approx(_cross_entropy(logits), rel=1e-5)
    # row 1 repeats row 0's anchor, row 2's negative is row 0's positive text: anchor 0 must
    # not be pushed from positive 1 (its own anchor's pair), nor anchor 0 from negative 2
    dup = torch.tensor([[0, 1, 2], [0, 4, 5], [6, 7, 1]])
    masked = logits.clone()  # columns: positives of rows 0, 1, 2, then their negatives
    masked[0, [1, 4, 5]] = float("-inf")  # row 1 shares anchor 0; negative 2 is positive 0's text
    masked[1, [0, 3]] = float("-inf")  # row 0 shares anchor 1
    assert mnr_loss(vectors, dup, 0.05) == pytest.approx(_cross_entropy(masked), rel=1e-5)
    assert mnr_loss(vectors, dup, 0.05) != pytest.approx(_cross_entropy(logits), rel=1e-3)


def test_retrieval_metrics_rank_the_dev_positives_for_each_anchor():
    examples = [PairExample("1", ["q1", "d1"]), PairExample("2", ["q2", "d2"]), PairExample("3", ["q2", "d3"])]
    outputs = [np.array([[1.0, 0.0], [1.0, 0.1]]),   # q1: d1 first
               np.array([[0.0, 1.0], [1.0, -1.0]]),  # q2: d3 first, then d1, then d2
               np.array([[0.0, 1.0], [0.1, 1.0]])]
    metrics = retrieval_metrics(examples, outputs)
    assert metrics == {"mrr@10": 1.0, "recall@1": 1.0, "recall@10": 1.0}
    swapped = retrieval_metrics(examples[:2], outputs[:2])  # q2's only positive d2 ranks 2nd
    assert swapped["mrr@10"] == pytest.approx((1 + 1 / 2) / 2) and swapped["recall@1"] == 0.5


def test_finetuning_with_in_batch_negatives_lowers_the_loss_and_scores_retrieval(model_dir, tmp_path):
    rng = random.Random(0)
    keys = ["good", "bad", "day", "night", "cafe", "hello", "world", "quick"]
    for split, n in (("train", 96), ("dev", 24)):
        lines = ["anchor,positive"]
        for i in range(n):
            key = keys[i % len(keys)]
            lines.append(f"{key} {' '.join(rng.sample(NOISE, 3))},{' '.join(rng.sample(NOISE, 2))} {key}")
        (tmp_path / f"{split}.csv").write_text("\n".join(lines) + "\n")
    # 6 epochs: after 4 the loss ratio below was 0.74-0.83 over seeds (dropout draws), astride 0.8
    cfg = FinetuneConfig(**{**FAST, "epochs": 6, "lr": 1e-3, "log_every": 1})
    _, best = finetune(get_task("embedding", loss="mnr"), model_dir, tmp_path, tmp_path / "out", cfg)
    assert set(best.metrics) == {"mrr@10", "recall@1", "recall@10"} and 0 < best.metrics["mrr@10"] <= 1
    losses = [r["loss"] for r in read_log(tmp_path / "out" / "log.jsonl") if r.get("event") == "train"]
    assert np.mean(losses[-6:]) < 0.8 * np.mean(losses[:6])


# ------------------------------------------------------------------ Matryoshka
def test_matryoshka_sums_the_loss_over_leading_widths_and_scores_each(model_dir, tmp_path):
    data = write_stsb(tmp_path / "data", 48, 12)
    task = get_task("embedding", matryoshka_dims=[8, 32, 16])
    assert task.metric_names == ("spearman", "pearson", "spearman@32", "spearman@16", "spearman@8")
    model = task.build_model(model_dir)
    tok = load(model_dir).tokenizer
    batch = task.featurize(task.read(data, "train")[:6], tok, 32, train=True).collate(range(6))
    plain = get_task("embedding")
    vectors = plain.embed_batch(model, batch).float()
    want = sum(plain.batch_loss(vectors[..., :d], batch) for d in (32, 16, 8))
    assert task.compute(model, batch).loss.item() == pytest.approx(want.item(), rel=1e-5)
    _, best = finetune(task, model_dir, data, tmp_path / "out", FinetuneConfig(**{**FAST, "epochs": 1}))
    assert set(best.metrics) == set(task.metric_names)
    assert best.metrics["spearman@32"] == best.metrics["spearman"]  # the full width
    with pytest.raises(BertkitError, match="matryoshka-dims 64 is wider than the model's embeddings"):
        get_task("embedding", matryoshka_dims=[64]).build_model(model_dir)


def test_the_embedding_options_shadow_no_flag_of_the_commands_that_read_task_options():
    """finetune and distill gather task options from their parsed flags by name: an option
    named like one of their own settings (distill's --temperature) would be taken for it."""
    import dataclasses

    from bertkit.finetuning.config import DistillConfig
    from bertkit.tasks.task_options import GROUPS

    own = set(GROUPS["sentence embeddings (embedding)"])
    for config in (FinetuneConfig, DistillConfig):
        assert own & {f.name for f in dataclasses.fields(config)} == set()
