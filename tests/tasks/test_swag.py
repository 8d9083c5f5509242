"""SWAG end to end on small files in the official CSV layout: four pairs per example, one
score each from [CLS], softmax over the four; training learns a toy version."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bertkit.cli.main import main
from bertkit.errors import DataFormatError
from bertkit.finetuning.config import FinetuneConfig
from bertkit.finetuning.loop import finetune
from bertkit.tasks import get_task
from bertkit.tokenizer import BertTokenizer
from tests.finetune_helpers import FAST, make_model, one_thread, write_swag  # noqa: F401


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def swag_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("swag")
    write_swag(root / "train.csv", 160, 1)
    write_swag(root / "val.csv", 40, 2)
    write_swag(root / "test.csv", 8, 3, labelled=False)
    return root


def test_each_choice_is_a_context_ending_pair(model_dir, swag_dir):
    tok = BertTokenizer.from_pretrained(model_dir)
    task = get_task("swag")
    examples = task.read(swag_dir, "dev")
    feats = task.featurize(examples, tok, 32)
    f, ex = feats.features[0], examples[0]
    assert f["input_ids"].shape[0] == 4 and int(f["labels"]) == ex.label
    for choice in range(4):
        ids = [i for i in f["input_ids"][choice].tolist() if i != tok.pad_token_id]
        expected = tok.encode(ex.context, f"{ex.start} {ex.endings[choice]}").input_ids
        assert ids == expected
        assert f["token_type_ids"][choice][: len(ids)].tolist() == \
            tok.encode(ex.context, f"{ex.start} {ex.endings[choice]}").token_type_ids
    batch = feats.collate([0, 1, 2])
    assert batch["input_ids"].shape[:2] == (3, 4)
    test = task.featurize(task.read(swag_dir, "test"), tok, 32)
    assert "labels" not in test.features[0]


def test_swag_learns_the_toy_task_and_predicts(model_dir, swag_dir, tmp_path):
    cfg = FinetuneConfig(**{**FAST, "epochs": 5})
    _, best = finetune(get_task("swag"), model_dir, swag_dir, tmp_path / "out", cfg)
    assert best.metrics["accuracy"] >= 0.6  # chance is 0.25
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["architectures"] == ["BertForMultipleChoice"] and config["finetuning_task"] == "swag"
    record = {"sent1": "the man", "sent2": "he", "ending0": "bad day", "ending1": "a good day",
              "ending2": "bad", "ending3": "she bad"}
    (tmp_path / "in.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    assert main(["predict", "swag", "--model", str(tmp_path / "out"), "--input", str(tmp_path / "in.jsonl"),
                 "--output", str(tmp_path / "p.jsonl"), "--no-progress"]) == 0
    pred = json.loads((tmp_path / "p.jsonl").read_text())
    assert len(pred["probabilities"]) == 4 and np.isclose(sum(pred["probabilities"]), 1, atol=1e-4)
    assert pred["label"] == int(np.argmax(pred["probabilities"])) and pred["sent1"] == "the man"


def test_bad_swag_rows_name_file_and_line(tmp_path):
    path = write_swag(tmp_path / "train.csv", 3, 1)
    lines = path.read_text().splitlines()
    lines[2] = lines[2].rsplit(",", 1)[0] + ",7"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFormatError, match=r"train\.csv:3: unknown label '7'"):
        get_task("swag").read(tmp_path, "train")
    lines[2] = lines[2] + ",extra"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFormatError, match=r"train\.csv:3: expected 12 fields"):
        get_task("swag").read(tmp_path, "train")
