"""Generic tasks from CSV / TSV / JSON Lines with named columns: classification (labels
inferred or given), pairs, regression; options remembered by the model; clear errors."""

from __future__ import annotations

import csv
import json
import random

import pytest

from bertkit.cli.main import main
from bertkit.errors import BertkitError, CheckpointError, DataFormatError
from bertkit.finetuning.config import FinetuneConfig
from bertkit.finetuning.loop import finetune
from bertkit.modeldir.entry import saved_task_options
from bertkit.tasks import get_task
from tests.finetune_helpers import FAST, NOISE, make_model, one_thread, sentence, toy_rows  # noqa: F401


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("model"))


def write_csv(path, header, rows):
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def review_data(root):
    """Text classification, CSV with quoting, string labels pos/neg, custom column names."""
    root.mkdir(parents=True, exist_ok=True)
    for split, n, seed in (("train", 128, 1), ("dev", 48, 2)):
        rows = [(f"{s}, he", "pos" if y == "1" else "neg") for s, y in toy_rows(n, seed)]
        write_csv(root / f"{split}.csv", ["review", "sentiment"], rows)
    return root


def test_text_classification_learns_and_remembers_its_columns(model_dir, tmp_path, capsys):
    data = review_data(tmp_path / "data")
    out = tmp_path / "out"
    assert main(["finetune", "text-classification", "--model", str(model_dir), "--data", str(data),
                 "--out", str(out), "--text-column", "review", "--label-column", "sentiment",
                 "--lr", "5e-3", "--batch-size", "16", "--epochs", "4", "--no-progress"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["id2label"] == {"0": "neg", "1": "pos"}  # inferred, sorted
    options = config["bertkit_finetune"]["options"]
    assert options["text_column"] == "review" and options["labels"] == ["neg", "pos"]
    results = json.loads((out / "results.json").read_text())
    assert results["best"]["metrics"]["accuracy"] >= 0.9
    # evaluate and predict need no column flags: the model remembers them
    assert main(["evaluate", "text-classification", "--model", str(out), "--data", str(data),
                 "--no-progress"]) == 0
    assert '"accuracy"' in capsys.readouterr().out
    (tmp_path / "in.jsonl").write_text('{"review": "a good day"}\n{"review": "bad night"}\n')
    assert main(["predict", "text-classification", "--model", str(out), "--input",
                 str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "p.jsonl"), "--no-progress"]) == 0
    preds = [json.loads(x) for x in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [p["label"] for p in preds] == ["pos", "neg"]


def test_pair_classification_from_jsonl(model_dir, tmp_path):
    rng = random.Random(0)
    for split, n in (("train", 128), ("dev", 48)):
        with open(tmp_path / f"{split}.jsonl", "w") as f:
            for i in range(n):
                key = "good" if i % 2 else "bad"
                record = {"q": " ".join(rng.choice(NOISE) for _ in range(3)), "a": sentence(rng, key),
                          "y": i % 2}  # a JSON number label: read as "0"/"1"
                f.write(json.dumps(record) + "\n")
    task = get_task("text-pair-classification", text_column="q", pair_column="a", label_column="y")
    _, best = finetune(task, model_dir, tmp_path, tmp_path / "out", FinetuneConfig(**FAST))
    assert task.labels is None  # the task is not changed: the labels of train went to the model
    assert saved_task_options(tmp_path / "out")[1]["labels"] == ["0", "1"]
    assert best.metrics["accuracy"] >= 0.85


def test_regression_from_tsv(model_dir, tmp_path):
    rng = random.Random(0)
    for split, n in (("train", 160), ("dev", 48)):
        lines = ["text\tscore"]
        for i in range(n):
            value = [0.0, 2.5, 5.0][i % 3]
            key = {0.0: "bad", 2.5: "?", 5.0: "good"}[value]
            lines.append(f"{sentence(rng, key)}\t{value}")
        (tmp_path / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    task = get_task("regression", label_column="score")
    assert task.num_labels == 1 and task.main_metric == "pearson"
    _, best = finetune(task, model_dir, tmp_path, tmp_path / "out", FinetuneConfig(**{**FAST, "epochs": 8}))
    assert best.metrics["pearson"] >= 0.7
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["problem_type"] == "regression"


def test_bad_generic_input_is_reported_with_file_and_line(model_dir, tmp_path):
    write_csv(tmp_path / "train.csv", ["text", "label"], [("good", "a"), ("bad", "b")])
    (tmp_path / "dev.csv").write_text('text,label\ngood,a\n"bad,b\n')
    task = get_task("text-classification").for_data(tmp_path)
    assert task.labels == ["a", "b"]
    with pytest.raises(DataFormatError, match=r"dev\.csv:3: malformed CSV"):
        task.read(tmp_path, "dev")
    (tmp_path / "dev.csv").write_text("text,label\ngood,a\nbad,c\n")
    with pytest.raises(DataFormatError, match=r"dev\.csv:3: unknown label 'c'"):
        task.read(tmp_path, "dev")
    (tmp_path / "dev.csv").write_text("text,label\ngood,a,x\n")
    with pytest.raises(DataFormatError, match=r"dev\.csv:2: expected 2 fields"):
        task.read(tmp_path, "dev")
    with pytest.raises(DataFormatError, match=r"train\.csv:2: missing column 'sentence'"):
        get_task("text-classification", text_column="sentence").read(tmp_path, "train")
    with pytest.raises(BertkitError, match="unknown option"):
        get_task("text-classification", colour="red")


def test_label_count_must_match_the_checkpoint_head(model_dir, tmp_path):
    data = review_data(tmp_path / "data")
    task = get_task("text-classification", text_column="review", label_column="sentiment")
    finetune(task, model_dir, data, tmp_path / "out", FinetuneConfig(**{**FAST, "epochs": 1}))
    three = get_task("text-classification", text_column="review", label_column="sentiment",
                     labels="neg,pos,mixed")
    with pytest.raises(CheckpointError, match=r"head has 2 output\(s\) \(neg, pos\) but task "
                                              r"text-classification needs 3 \(neg, pos, mixed\)"):
        three.build_model(tmp_path / "out")
