"""GLUE tasks: inputs as the paper builds them, every task's head and metrics, the CLI
(finetune / evaluate / predict), clear errors on bad data and mismatched heads."""

from __future__ import annotations

import json

import pytest

from bertkit.cli.main import main
from bertkit.errors import DataFormatError
from bertkit.tasks import TASKS, get_task
from bertkit.tokenizer import BertTokenizer
from tests.finetune_helpers import make_model, one_thread, toy_rows, write_sst2  # noqa: F401

GLUE = ["cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "mnli-mm", "qnli", "rte", "wnli"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def tok(model_dir):
    return BertTokenizer.from_pretrained(model_dir)


def test_every_glue_task_is_registered_with_its_head_and_metrics():
    for name in GLUE:
        assert TASKS[name] == "bertkit.tasks.glue"
        task = get_task(name)
        assert task.num_labels == {"stsb": 1, "mnli": 3, "mnli-mm": 3}.get(name, 2)
    assert get_task("SST-2").name == "sst2" and get_task("sts-b").regression
    assert get_task("mrpc").metric_names == ("f1", "accuracy")
    assert get_task("stsb").main_metric == "spearman"
    assert get_task("mnli").eval_splits() == ("dev", "dev_mismatched")


def test_single_sentences_and_pairs_are_encoded_as_in_the_paper(tok, tmp_path):
    (tmp_path / "SST-2").mkdir()
    (tmp_path / "SST-2" / "dev.tsv").write_text("sentence\tlabel\nthe man went\t1\n", encoding="utf-8")
    sst2 = get_task("sst2")
    feats = sst2.featurize(sst2.read(tmp_path / "SST-2", "dev"), tok, 32)
    ids = feats.features[0]["input_ids"].tolist()
    assert tok.convert_ids_to_tokens(ids) == ["[CLS]", "the", "man", "went", "[SEP]"]
    assert feats.features[0]["token_type_ids"].tolist() == [0] * 5
    assert int(feats.features[0]["labels"]) == 1
    (tmp_path / "RTE").mkdir()
    (tmp_path / "RTE" / "dev.tsv").write_text(
        "index\tsentence1\tsentence2\tlabel\n0\the was good\tshe is\tnot_entailment\n", encoding="utf-8")
    rte = get_task("rte")
    feats = rte.featurize(rte.read(tmp_path, "dev"), tok, 32)  # the GLUE root works too
    f = feats.features[0]
    assert tok.convert_ids_to_tokens(f["input_ids"].tolist()) == [
        "[CLS]", "he", "was", "good", "[SEP]", "she", "is", "[SEP]"]
    assert f["token_type_ids"].tolist() == [0, 0, 0, 0, 0, 1, 1, 1]
    assert int(f["labels"]) == rte.labels.index("not_entailment")


def test_stsb_is_regression_and_mrpc_reads_the_raw_msr_files(tok, tmp_path):
    (tmp_path / "STS-B").mkdir()
    (tmp_path / "STS-B" / "dev.tsv").write_text(
        "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
        "0\tmain\tx\t2012\t0\tnone\tnone\tthe man\ta man\t4.750\n", encoding="utf-8")
    stsb = get_task("stsb")
    feats = stsb.featurize(stsb.read(tmp_path / "STS-B", "dev"), tok, 32)
    assert feats.features[0]["labels"].dtype.kind == "f" and float(feats.features[0]["labels"]) == 4.75
    mrpc_dir = tmp_path / "MRPC"
    mrpc_dir.mkdir()
    header = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    (mrpc_dir / "msr_paraphrase_train.txt").write_text(header + "1\t1\t2\tthe man\ta man\n", encoding="utf-8")
    (mrpc_dir / "msr_paraphrase_test.txt").write_text(header + "0\t3\t4\the is\tshe was\n", encoding="utf-8")
    mrpc = get_task("mrpc")
    assert [e.label for e in mrpc.read(mrpc_dir, "train")] == ["1"]
    assert [(e.text_a, e.label) for e in mrpc.read(tmp_path, "dev")] == [("he is", "0")]


def test_mnli_reads_matched_and_mismatched_dev(tmp_path):
    header = "index\tpromptID\tpairID\tgenre\tsentence1\tsentence2\tgold_label\n"
    (tmp_path / "dev_matched.tsv").write_text(header + "0\t1\t1\tx\ta\tb\tneutral\n", encoding="utf-8")
    (tmp_path / "dev_mismatched.tsv").write_text(header + "0\t1\t1\tx\tc\td\tentailment\n", encoding="utf-8")
    mnli = get_task("mnli")
    assert [e.label for e in mnli.read(tmp_path, "dev")] == ["neutral"]
    assert [e.label for e in mnli.read(tmp_path, "dev_mismatched")] == ["entailment"]


def test_malformed_rows_and_unknown_labels_name_file_and_line(tmp_path):
    (tmp_path / "train.tsv").write_text("sentence\tlabel\ngood day\t1\nbad\tday\t0\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"train\.tsv:3: expected 2 tab-separated fields, found 3"):
        get_task("sst2").read(tmp_path, "train")
    (tmp_path / "train.tsv").write_text("sentence\tlabel\ngood day\t1\nbad day\tmaybe\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"train\.tsv:3: unknown label 'maybe'"):
        get_task("sst2").read(tmp_path, "train")


def _cli(*args) -> int:
    return main([str(a) for a in args])


def test_cli_finetune_evaluate_predict(model_dir, tmp_path, capsys):
    data = write_sst2(tmp_path / "SST-2")
    out = tmp_path / "out"
    assert _cli("finetune", "sst2", "--model", model_dir, "--data", data, "--out", out,
                "--lr", "5e-3", "--batch-size", "16", "--epochs", "4", "--max-seq-length", "32",
                "--no-progress") == 0
    printed = capsys.readouterr().out
    assert "accuracy" in printed and "best: accuracy=" in printed
    assert _cli("evaluate", "sst2", "--model", out, "--data", data, "--output", tmp_path / "m.json",
                "--no-progress") == 0
    metrics = json.loads((tmp_path / "m.json").read_text())["metrics"]["dev"]
    assert metrics["accuracy"] >= 0.9
    rows = [{"sentence": s, "extra": i} for i, (s, _) in enumerate(toy_rows(20, 9))]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert _cli("predict", "sst2", "--model", out, "--input", tmp_path / "in.jsonl",
                "--output", tmp_path / "pred.jsonl", "--batch-size", "3", "--no-progress") == 0
    preds = [json.loads(x) for x in (tmp_path / "pred.jsonl").read_text().splitlines()]
    assert [p["extra"] for p in preds] == list(range(20))  # input fields kept, order kept
    gold = [["negative", "positive"][int(y)] for _, y in toy_rows(20, 9)]  # SST-2's 0/1 by name
    assert sum(p["label"] == y for p, y in zip(preds, gold)) >= 16
    assert abs(sum(preds[0]["probabilities"].values()) - 1) < 1e-4


def test_cli_reports_bad_input_and_mismatched_heads(model_dir, tmp_path, capsys):
    data = write_sst2(tmp_path / "SST-2")
    (data / "dev.tsv").write_text("sentence\tlabel\ngood\t1\nbad\t2\n", encoding="utf-8")
    assert _cli("finetune", "sst2", "--model", model_dir, "--data", data, "--out", tmp_path / "o",
                "--epochs", "1", "--no-progress") == 1
    assert "dev.tsv:3: unknown label '2'" in capsys.readouterr().err
    (tmp_path / "in.jsonl").write_text('{"text": "good"}\n{"sentence": 3}\n', encoding="utf-8")
    fine = tmp_path / "fine"
    write_sst2(tmp_path / "ok")
    assert _cli("finetune", "sst2", "--model", model_dir, "--data", tmp_path / "ok", "--out", fine,
                "--epochs", "1", "--no-progress") == 0
    assert _cli("predict", "sst2", "--model", fine, "--input", tmp_path / "in.jsonl",
                "--output", tmp_path / "p.jsonl", "--no-progress") == 1
    assert "in.jsonl:2: field 'sentence' should be a string" in capsys.readouterr().err
    header = "index\tpromptID\tpairID\tgenre\tsentence1\tsentence2\tgold_label\n"
    (tmp_path / "dev_matched.tsv").write_text(header + "0\t1\t1\tx\ta\tb\tneutral\n", encoding="utf-8")
    assert _cli("evaluate", "mnli", "--model", fine, "--data", tmp_path, "--no-progress") == 1
    assert "head has 2 output(s) (negative, positive) but task mnli needs 3" in capsys.readouterr().err


def test_help_of_every_command(capsys):
    for command in ("finetune", "evaluate", "predict"):
        with pytest.raises(SystemExit) as exit_:
            main([command, "--help"])
        assert exit_.value.code == 0
        assert "TASK" in capsys.readouterr().out


def test_real_rte_dev_reads_and_featurizes(shared):
    data = shared("glue", "RTE")
    tok = BertTokenizer.from_pretrained(shared("models", "bert-tiny-splade"))
    rte = get_task("rte")
    examples = rte.read(data, "dev")
    feats = rte.featurize(examples, tok, 128)
    assert len(examples) == 277 and len(feats) == 277
    assert 0 < feats.num_truncated < 60 and feats.lengths.max() == 128
