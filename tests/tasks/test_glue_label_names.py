"""GLUE label names: a fine-tuned model's ``id2label`` says what each class means (SST-2
``negative``/``positive``), the data keep their strings, and directories written before (with
``"0"``/``"1"``) still load, evaluate and predict."""

from __future__ import annotations

import json

import pytest

from bertkit.cli.main import main
from bertkit.errors import BertkitError, CheckpointError
from bertkit.inference import load
from bertkit.tasks import get_task
from bertkit.tasks.base import check_head

from ..task_models import make_task_model

NAMES = {"sst2": ["negative", "positive"], "cola": ["unacceptable", "acceptable"],
         "mrpc": ["not_equivalent", "equivalent"], "qqp": ["not_duplicate", "duplicate"],
         "wnli": ["not_entailment", "entailment"], "rte": ["entailment", "not_entailment"],
         "qnli": ["entailment", "not_entailment"], "mnli": ["contradiction", "entailment", "neutral"]}


@pytest.mark.parametrize("name", sorted(NAMES))
def test_every_glue_classifier_names_its_labels(name):
    task = get_task(name)
    entries = task.config_entries()
    assert [entries["id2label"][str(i)] for i in range(task.num_labels)] == NAMES[name]
    assert entries["label2id"] == {n: i for i, n in enumerate(NAMES[name])}
    assert len(task.labels) == len(NAMES[name])  # the data's own strings are unchanged
    assert get_task("stsb").label_names is None


def test_old_and_new_directories_fit_the_head_check(tmp_path):
    old = make_task_model(tmp_path, "sst2")  # id2label {"0": "0", "1": "1"}: written before names
    check_head(old, "classifier.weight", ["0", "1"], 2, "sst2", ["negative", "positive"])
    config = json.loads((old / "config.json").read_text())
    config["id2label"], config["label2id"] = {"0": "negative", "1": "positive"}, {"negative": 0, "positive": 1}
    (old / "config.json").write_text(json.dumps(config))
    check_head(old, "classifier.weight", ["0", "1"], 2, "sst2", ["negative", "positive"])
    config["id2label"] = {"0": "bad", "1": "good"}
    (old / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="predicts labels"):
        check_head(old, "classifier.weight", ["0", "1"], 2, "sst2", ["negative", "positive"])


def test_a_directory_saved_with_0_1_still_evaluates_and_predicts(tmp_path):
    old = make_task_model(tmp_path, "sst2")
    data = tmp_path / "SST-2"
    data.mkdir()
    rows = [("the man went to the store .", "1"), ("he is bad", "0"), ("she was good", "1")]
    for split in ("train", "dev"):
        (data / f"{split}.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows))
    assert main(["evaluate", "sst2", "--model", str(old), "--data", str(data), "--output",
                 str(tmp_path / "m.json"), "--no-progress"]) == 0
    assert "accuracy" in json.loads((tmp_path / "m.json").read_text())["metrics"]["dev"]
    (tmp_path / "in.jsonl").write_text('{"sentence": "he is good"}\n')
    assert main(["predict", "sst2", "--model", str(old), "--input", str(tmp_path / "in.jsonl"),
                 "--output", str(tmp_path / "p.jsonl"), "--no-progress"]) == 0
    prediction = json.loads((tmp_path / "p.jsonl").read_text())
    # every door names the classes by the task's label names, for an old directory too
    assert prediction["label"] in ("negative", "positive")
    assert set(prediction["probabilities"]) == {"negative", "positive"}
    assert load(old).labels == ["negative", "positive"]


def test_generic_label_names_option(capsys):
    from bertkit.errors import BertkitError

    task = get_task("text-classification", labels="0,1", label_names="negative,positive")
    assert task.config_entries()["id2label"] == {"0": "negative", "1": "positive"}
    assert task.labels == ["0", "1"] and task.options["label_names"] == ["negative", "positive"]
    late = get_task("text-classification", label_names=["neg", "pos"])  # labels come from train
    assert late.label_names is None and late.options["label_names"] == ["neg", "pos"]
    with pytest.raises(BertkitError, match="3 label_names .* for 2 labels"):
        get_task("text-classification", labels="0,1", label_names="a,b,c")
    with pytest.raises(BertkitError, match="regression task has no label names"):
        get_task("regression", label_names="a,b")
    with pytest.raises(SystemExit):
        main(["finetune", "text-classification", "--help"])
    assert "--label-names A,B,..." in capsys.readouterr().out


def test_label_names_that_rename_the_data_labels_crosswise_are_refused():
    """2026-11-25 faults #360: --label-names pos,neg on labels neg, pos saved id2label
    {0: pos, 1: neg}, so every answer was the opposite class, with no word."""
    with pytest.raises(BertkitError, match=r"names label 0 \('neg' in the data\) 'pos'.*pass --labels"):
        get_task("text-classification", labels="neg,pos", label_names="pos,neg").label_names  # noqa: B018
    with pytest.raises(BertkitError, match="names label 1"):
        get_task("text-classification", labels="neg,pos", label_names="bad,neg").label_names  # noqa: B018
    fine = get_task("text-classification", labels="neg,pos", label_names="neg,positive")
    assert fine.label_names == ["neg", "positive"]
    assert get_task("text-classification", labels="0,1", label_names="negative,positive").label_names == [
        "negative", "positive"]
