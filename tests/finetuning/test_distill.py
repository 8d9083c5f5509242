"""``bertkit distill``: students, the loss hook, the teacher run once, clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bertkit.checkpoint import load_pretrained
from bertkit.cli.main import main
from bertkit.errors import BertkitError, CheckpointError
from bertkit.finetuning.config import FinetuneConfig
from bertkit.finetuning.distill import (
    PROJECTION,
    DistillConfig,
    DistillTask,
    attention_loss,
    distill,
    hidden_loss,
    layer_map,
    layer_slice,
    make_student,
    soft_loss,
)
from bertkit.finetuning.loop import finetune
from bertkit.inference.features import run_model
from bertkit.tasks import get_task
from bertkit.tokenizer import BertTokenizer
from tests.finetune_helpers import FAST, VOCAB, make_model, one_thread, write_sst2  # noqa: F401


@pytest.fixture(scope="module")
def teacher(model_dir, toy_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("teacher")
    finetune(get_task("sst2"), model_dir, toy_dir, out, FinetuneConfig(**FAST))
    return out


def test_layer_slice_is_evenly_spaced_from_the_first():
    assert layer_slice(12, 6) == [0, 2, 4, 6, 8, 10]
    assert layer_slice(12, 3) == [0, 4, 8]
    assert layer_slice(2, 1) == [0]
    assert layer_slice(4, 4) == [0, 1, 2, 3]
    with pytest.raises(BertkitError, match="--student-layers"):
        layer_slice(2, 3)


def test_soft_loss_is_scaled_kl_and_zero_for_equal_logits():
    s, t = torch.randn(5, 3), torch.randn(5, 3)
    expected = F.kl_div(F.log_softmax(s / 2, -1), F.softmax(t / 2, -1), reduction="batchmean") * 4
    assert torch.allclose(soft_loss(s, t, 2.0), expected, atol=1e-6)
    assert soft_loss(t, t, 3.0).abs() < 1e-6
    mask = torch.tensor([True, False, True, False, False])
    assert torch.allclose(soft_loss(s, t, 1.0, mask), soft_loss(s[mask], t[mask], 1.0))


def test_a_full_slice_is_the_teacher(teacher, tmp_path):
    task = get_task("sst2")
    model = task.build_model(teacher)
    tok = BertTokenizer.from_pretrained(teacher)
    student = load_pretrained(make_student(DistillConfig(str(teacher), student_layers=2), task,
                                           model, tok, tmp_path / "s"))
    one = load_pretrained(make_student(DistillConfig(str(teacher), student_layers=1), task,
                                       model, tok, tmp_path / "s1"))
    ids = torch.tensor([[2, 5, 6, 15, 3]])
    with torch.no_grad():
        assert torch.equal(student(ids).logits, model(ids).logits)
        assert one.config.num_hidden_layers == 1
        assert torch.equal(one.bert.encoder.layer[0].output.dense.weight,
                           model.bert.encoder.layer[0].output.dense.weight)


@pytest.mark.parametrize("name, labels", [("sst2", None), ("stsb", None), ("ner", None)])
def test_teacher_equal_to_student_gives_zero_soft_loss(model_dir, name, labels):
    task = get_task(name)
    model = task.build_model(model_dir)  # eval mode: no dropout
    tok = BertTokenizer.from_pretrained(model_dir)
    if name == "ner":
        from bertkit.tasks.formats.conll import TaggedSentence

        examples = [TaggedSentence(["the", "man", "went"], ["O", "B-PER", "O"], 1),
                    TaggedSentence(["he", "is", "good", "day"], ["B-PER", "O", "O", "O"], 2)]
    else:
        from bertkit.tasks.formats.base import TextExample

        label = "1" if name == "sst2" else "3.5"
        examples = [TextExample(str(i), s, "the day" if name == "stsb" else None, label, i)
                    for i, s in enumerate(["the man went", "he is good", "a quick night ."])]
    wrapped = DistillTask(task, model, DistillConfig("t", student="x", alpha=1.0), "cpu")
    feats = wrapped.featurize(examples, tok, 16, train=True)
    batch = feats.collate(list(range(len(feats))))
    out = wrapped.compute(model, batch)
    assert out.loss.abs() < 1e-6
    plain = task.compute(model, {k: v for k, v in batch.items() if k != "feature_index"})
    mixed = DistillTask(task, model, DistillConfig("t", student="x", alpha=0.0), "cpu")
    mixed.teacher_logits = wrapped.teacher_logits
    assert torch.allclose(mixed.compute(model, batch).loss, plain.loss)


def count_teacher_forwards(task, teacher) -> list:
    """A list that gets one entry per pass of ``teacher`` built by ``task`` (its forward, or
    its ``head_logits``: what inference reads of a classifier)."""
    calls = []
    original = task.build_model

    def counting_build(model_dir, config_overrides=None):
        model = original(model_dir, config_overrides)
        if str(model_dir) == str(teacher):
            model.register_forward_hook(lambda *a: calls.append(1))
            head = model.head_logits
            model.head_logits = lambda *a, **k: (calls.append(1), head(*a, **k))[1]
        return model

    task.build_model = counting_build
    return calls


def test_distill_runs_the_teacher_once_and_saves_a_task_model(teacher, toy_dir, tmp_path):
    task = get_task("sst2")
    calls = count_teacher_forwards(task, teacher)
    cfg = FinetuneConfig(**{**FAST, "epochs": 2, "grid": {"seed": [1, 2]}})
    runs, best = distill(task, toy_dir, tmp_path / "d", DistillConfig(str(teacher), student_layers=1), cfg)
    train_batches = -(-128 // FAST["eval_batch"])
    assert len(calls) == train_batches  # one pass over the training features, for 2 runs x 2 epochs
    assert len(runs) == 2 and best.metrics["accuracy"] >= 0.9
    config = json.loads((tmp_path / "d" / "config.json").read_text())
    assert config["num_hidden_layers"] == 1
    assert config["bertkit_distill"]["student_layer_indices"] == [0]
    assert config["bertkit_finetune"]["task"] == "sst2"
    log = [json.loads(line) for line in (tmp_path / "d" / "log.jsonl").read_text().splitlines()]
    assert any(r["event"] == "train" for r in log) and any(r["event"] == "best" for r in log)
    # the distilled directory is an ordinary sst2 model
    model = get_task("sst2").build_model(tmp_path / "d")
    feats = get_task("sst2").featurize(get_task("sst2").read(toy_dir, "dev"),
                                       BertTokenizer.from_pretrained(tmp_path / "d"), 32)
    out = run_model(get_task("sst2"), model, feats, 16)
    assert np.isfinite(np.stack(out["logits"])).all()


def test_distill_cli_with_a_preset_student(teacher, toy_dir, tmp_path, capsys):
    code = main(["distill", "sst2", "--teacher", str(teacher), "--student", "tiny", "--data",
                 str(toy_dir), "--out", str(tmp_path / "p"), "--epochs", "1", "--lr", "1e-3",
                 "--max-seq-length", "32", "--no-progress", "--temperature", "3", "--alpha", "0.7"])
    assert code == 0
    config = json.loads((tmp_path / "p" / "config.json").read_text())
    assert config["hidden_size"] == 128 and config["vocab_size"] == len(VOCAB)
    assert config["bertkit_distill"]["temperature"] == 3.0
    assert "best: accuracy=" in capsys.readouterr().out
    assert not list(tmp_path.glob(".student-*"))  # the scratch student is removed


def test_a_teacher_without_a_task_head_is_refused(model_dir, toy_dir, tmp_path, capsys):
    code = main(["distill", "sst2", "--teacher", str(model_dir), "--student-layers", "1",
                 "--data", str(toy_dir), "--out", str(tmp_path / "x"), "--no-progress"])
    assert code == 1
    err = capsys.readouterr().err
    assert "--teacher" in err and "no trained sst2 head" in err


def test_a_student_with_another_vocabulary_is_refused(teacher, toy_dir, tmp_path):
    other = make_model(tmp_path / "other")
    (other / "vocab.txt").write_text("\n".join(VOCAB[:-1] + ["zebra"]) + "\n", encoding="utf-8")
    (other / "tokenizer.json").unlink(missing_ok=True)  # made from the old vocabulary: would disagree
    with pytest.raises(CheckpointError, match="--student .* --teacher .* different vocabularies"):
        distill(get_task("sst2"), toy_dir, tmp_path / "x", DistillConfig(str(teacher), student=str(other)),
                FinetuneConfig(**FAST))


@pytest.mark.parametrize("kwargs, match", [({"student": "tiny", "student_layers": 1}, "exactly one"),
                                           ({}, "exactly one"),
                                           ({"student": "tiny", "alpha": 1.5}, "--alpha"),
                                           ({"student": "tiny", "temperature": 0}, "--temperature")])
def test_bad_settings(kwargs, match):
    with pytest.raises(BertkitError, match=match):
        DistillConfig("t", **kwargs).check()


# ---------------------------------------------------------------- TinyBERT-style intermediate matching
def test_layer_map_is_tinybert_uniform_mapping():
    assert layer_map(1, 2) == [2]
    assert layer_map(2, 12) == [6, 12]
    assert layer_map(4, 12) == [3, 6, 9, 12]
    assert layer_map(3, 4) == [1, 2, 4]
    assert layer_map(2, 2) == [1, 2]
    with pytest.raises(BertkitError, match="student has 4 layers, the teacher 2"):
        layer_map(4, 2)


def student_dir(root, hidden=16, heads=2, layers=2):
    """A random BERT of another shape with the toy vocabulary (a --student directory)."""
    from bertkit.checkpoint import save_pretrained
    from bertkit.config import BertConfig
    from bertkit.model import BertModel

    root.mkdir(parents=True, exist_ok=True)
    (root / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    torch.manual_seed(3)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=2 * hidden, max_position_embeddings=64)
    return save_pretrained(BertModel(config), root, tokenizer=BertTokenizer.from_file(root / "vocab.txt"))


def test_the_projection_maps_student_width_to_teacher_width_and_is_not_saved(teacher, tmp_path):
    task = get_task("sst2")
    wrapped = DistillTask(task, task.build_model(teacher), DistillConfig(str(teacher), student="x",
                                                                          hidden_weight=1.0), "cpu")
    model = wrapped.build_model(student_dir(tmp_path / "s", hidden=16))
    projection = getattr(model, PROJECTION)
    assert tuple(projection.weight.shape) == (32, 16)  # student 16 -> teacher 32
    assert any(p is projection.weight for p in model.parameters())  # trained with the student
    state = model.state_dict()
    assert not any(PROJECTION in k for k in state)
    model.load_state_dict(state, strict=True)  # a saved state loads back without it
    same = wrapped.build_model(student_dir(tmp_path / "w", hidden=32))
    assert isinstance(getattr(same, PROJECTION), torch.nn.Identity)  # equal widths: none
    plain = DistillTask(task, wrapped.teacher, DistillConfig(str(teacher), student="x"), "cpu")
    assert not hasattr(plain.build_model(tmp_path / "w"), PROJECTION)  # weights 0: untouched


def test_intermediate_losses_add_weighted_mse_terms(teacher, toy_dir, tmp_path):
    task = get_task("sst2")
    tok = BertTokenizer.from_pretrained(teacher)
    teacher_model = task.build_model(teacher)
    examples = task.read(toy_dir, "train")[:6]
    losses, parts = {}, {}
    for hidden, attention in [(0.0, 0.0), (2.0, 0.0), (0.0, 3.0)]:
        cfg = DistillConfig(str(teacher), student="x", hidden_weight=hidden, attention_weight=attention)
        wrapped = DistillTask(task, teacher_model, cfg, "cpu")
        feats = wrapped.featurize(examples, tok, 16, train=True)
        torch.manual_seed(0)
        student = wrapped.build_model(student_dir(tmp_path / "s", hidden=16)).eval()
        if hidden:
            torch.nn.init.eye_(getattr(student, PROJECTION).weight[:16])  # a known projection
        batch = feats.collate(list(range(len(feats))))
        losses[hidden, attention] = wrapped.compute(student, batch).loss
        plain = {k: v for k, v in batch.items() if k not in ("feature_index", "labels")}
        with torch.no_grad():
            s = student(**plain, output_hidden_states=True, output_attentions=True)
            t = teacher_model.eval()(**plain, output_hidden_states=True, output_attentions=True)
        mask = plain["attention_mask"].bool()
        if hidden:
            parts["hidden"] = hidden_loss(s.hidden_states, t.hidden_states, [1, 2],
                                          getattr(student, PROJECTION), mask)
        if attention:
            parts["attention"] = attention_loss(s.attentions, t.attentions, [1, 2], mask)
    assert parts["hidden"] > 0 and parts["attention"] > 0
    base = losses[0.0, 0.0]
    assert torch.allclose(losses[2.0, 0.0] - base, 2.0 * parts["hidden"], atol=1e-5)
    assert torch.allclose(losses[0.0, 3.0] - base, 3.0 * parts["attention"], atol=1e-5)


def test_hidden_loss_by_hand():
    student = [torch.ones(1, 3, 2), torch.zeros(1, 3, 2)]
    teacher = [torch.zeros(1, 3, 2), torch.zeros(1, 3, 2), torch.ones(1, 3, 2) * 2]
    mask = torch.tensor([[True, True, False]])
    # embeddings: (1 - 0)^2 = 1; layer 1 -> teacher layer 2: (0 - 2)^2 = 4; mean 2.5
    assert hidden_loss(student, teacher, [2], torch.nn.Identity(), mask).item() == pytest.approx(2.5)
    student[1][0, 2] = 100.0  # a padded position does not count
    assert hidden_loss(student, teacher, [2], torch.nn.Identity(), mask).item() == pytest.approx(2.5)


def saved_tensors(directory):
    from safetensors.torch import load_file

    return load_file(str(next(directory.glob("*.safetensors"))))


def test_weights_zero_are_exactly_logit_distillation(teacher, toy_dir, tmp_path):
    cfg = FinetuneConfig(**{**FAST, "epochs": 1})
    distill(get_task("sst2"), toy_dir, tmp_path / "a", DistillConfig(str(teacher), student_layers=1), cfg)
    distill(get_task("sst2"), toy_dir, tmp_path / "b",
            DistillConfig(str(teacher), student_layers=1, hidden_weight=0.0, attention_weight=0.0), cfg)
    a, b = saved_tensors(tmp_path / "a"), saved_tensors(tmp_path / "b")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_distill_with_matching_trains_a_different_student_and_saves_an_ordinary_model(teacher, toy_dir,
                                                                                       tmp_path, capsys):
    common = ["distill", "sst2", "--teacher", str(teacher), "--student", str(student_dir(tmp_path / "s")),
              "--data", str(toy_dir), "--epochs", "1", "--lr", "5e-3", "--batch-size", "16",
              "--max-seq-length", "32", "--no-progress"]
    assert main([*common, "--out", str(tmp_path / "plain")]) == 0
    assert main([*common, "--out", str(tmp_path / "tiny"), "--hidden-weight", "1",
                 "--attention-weight", "1"]) == 0
    plain, matched = saved_tensors(tmp_path / "plain"), saved_tensors(tmp_path / "tiny")
    assert plain.keys() == matched.keys() and not any(PROJECTION in k for k in matched)
    assert any(not torch.equal(plain[k], matched[k]) for k in plain)  # the matching changed training
    config = json.loads((tmp_path / "tiny" / "config.json").read_text())
    assert config["hidden_size"] == 16 and config["bertkit_distill"]["hidden_weight"] == 1.0
    model = load_pretrained(tmp_path / "tiny")  # strict: an ordinary model of the task
    assert not hasattr(model, PROJECTION)
    results = json.loads((tmp_path / "tiny" / "results.json").read_text())
    assert np.isfinite(results["best"]["metrics"]["accuracy"])


def test_matching_runs_the_teacher_on_every_training_batch(teacher, toy_dir, tmp_path):
    task = get_task("sst2")
    calls = count_teacher_forwards(task, teacher)
    cfg = FinetuneConfig(**{**FAST, "epochs": 1})
    distill(task, toy_dir, tmp_path / "d", DistillConfig(str(teacher), student_layers=1, hidden_weight=0.5), cfg)
    caching, steps = -(-128 // FAST["eval_batch"]), -(-128 // FAST["batch"])
    assert len(calls) == caching + steps


def test_bad_matching_combinations_are_clear_errors(teacher, toy_dir, tmp_path, capsys):
    cfg = FinetuneConfig(**{**FAST, "epochs": 1})
    four_heads = student_dir(tmp_path / "h4", hidden=32, heads=4)
    with pytest.raises(BertkitError, match="--attention-weight: student layer 1 has 4 attention heads"):
        distill(get_task("sst2"), toy_dir, tmp_path / "x",
                DistillConfig(str(teacher), student=str(four_heads), attention_weight=1.0), cfg)
    # the same student is fine for hidden states alone
    distill(get_task("sst2"), toy_dir, tmp_path / "ok",
            DistillConfig(str(teacher), student=str(four_heads), hidden_weight=1.0), cfg)
    deep = student_dir(tmp_path / "deep", layers=3)
    with pytest.raises(BertkitError, match="student has 3 layers, the teacher 2"):
        distill(get_task("sst2"), toy_dir, tmp_path / "y",
                DistillConfig(str(teacher), student=str(deep), hidden_weight=1.0), cfg)
    for flag in ("--hidden-weight", "--attention-weight"):
        with pytest.raises(SystemExit):
            main(["distill", "sst2", "--teacher", str(teacher), "--student-layers", "1", "--data",
                  str(toy_dir), "--out", str(tmp_path / "z"), flag, "-1"])
        assert flag in capsys.readouterr().err
        with pytest.raises(BertkitError, match=flag):
            DistillConfig("t", student="tiny", **{flag[2:].replace("-", "_"): float("nan")}).check()


def test_compute_without_build_model_needs_no_projection_only_for_equal_widths(teacher, toy_dir, tmp_path):
    task = get_task("sst2")
    tok = BertTokenizer.from_pretrained(teacher)
    wrapped = DistillTask(task, task.build_model(teacher), DistillConfig(str(teacher), student="x",
                                                                          hidden_weight=1.0), "cpu")
    feats = wrapped.featurize(task.read(toy_dir, "train")[:4], tok, 16, train=True)
    batch = feats.collate(list(range(len(feats))))
    same = task.build_model(student_dir(tmp_path / "w", hidden=32))  # not through wrapped.build_model
    assert torch.isfinite(wrapped.compute(same, batch).loss)
    narrow = task.build_model(student_dir(tmp_path / "n", hidden=16))
    with pytest.raises(BertkitError, match="no width projection"):
        wrapped.compute(narrow, batch)


def test_a_diverging_distillation_stops_with_an_error_naming_the_step(teacher, toy_dir, tmp_path):
    out = tmp_path / "inf"
    cfg = DistillConfig(teacher=str(teacher), student_layers=1, temperature=float("inf"))
    with pytest.raises(BertkitError, match=r"diverged at step \d+"):
        distill(get_task("sst2"), toy_dir, out, cfg, FinetuneConfig(**{**FAST, "epochs": 1}))
    assert not (out / "config.json").exists() and not (out / "results.json").exists()


def test_distill_cli_with_a_huge_learning_rate_exits_non_zero(teacher, toy_dir, tmp_path, capsys):
    out = tmp_path / "huge"
    code = main(["distill", "sst2", "--teacher", str(teacher), "--student-layers", "1", "--data",
                 str(toy_dir), "--out", str(out), "--epochs", "2", "--lr", "1e6",
                 "--max-seq-length", "32", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and "bertkit: error: training diverged at step" in err
    assert "lr_scheduler" not in err and "Traceback" not in err
    assert not (out / "results.json").exists()
    assert not (out / "config.json").exists() or (out / ".unfinished.json").exists()


def test_a_killed_runs_student_copy_is_replaced_and_removed(teacher, toy_dir, tmp_path):
    from bertkit.finetuning.distill import STUDENT_SCRATCH

    out = tmp_path / "resumed"
    leftover = out / STUDENT_SCRATCH  # what a kill -9 during training leaves, inside --out
    leftover.mkdir(parents=True)
    (leftover / "model.safetensors").write_bytes(b"\0" * 1000)
    cfg = DistillConfig(teacher=str(teacher), student_layers=1)
    distill(get_task("sst2"), toy_dir, out, cfg, FinetuneConfig(**{**FAST, "epochs": 1}))
    assert not leftover.exists() and (out / "results.json").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # nothing beside --out


def test_distill_never_replaces_its_teacher_or_student(teacher, toy_dir, tmp_path, capsys):
    """Case 400: ``--teacher D --out D --overwrite`` replaced the teacher by the student."""
    import shutil

    copy = shutil.copytree(teacher, tmp_path / "teacher")
    before = {p.name: p.read_bytes() for p in copy.iterdir() if p.is_file()}
    common = ["--data", str(toy_dir), "--epochs", "1", "--max-seq-length", "32", "--no-progress",
              "--overwrite"]
    assert main(["distill", "sst2", "--teacher", str(copy), "--student-layers", "1",
                 "--out", str(copy), *common]) == 1
    assert capsys.readouterr().err == (f"bertkit: error: --out {copy} would overwrite the "
                                       f"--teacher {copy}: choose another --out\n")
    student = make_model(tmp_path / "student")
    assert main(["distill", "sst2", "--teacher", str(copy), "--student", str(student),
                 "--out", str(student), *common]) == 1
    assert capsys.readouterr().err == (f"bertkit: error: --out {student} would overwrite the "
                                       f"--student {student}: choose another --out\n")
    assert {p.name: p.read_bytes() for p in copy.iterdir() if p.is_file()} == before
    assert (student / "config.json").is_file()
