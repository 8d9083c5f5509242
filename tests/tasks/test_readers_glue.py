"""GLUE TSV reader and task registry: real files, test-set files, and malformed input."""

from __future__ import annotations

import pytest

from bertkit.errors import DataFormatError
from bertkit.metrics import GLUE_METRICS
from bertkit.tasks.formats import GLUE_TASKS, find_glue_file, get_glue_task, read_glue

# SOURCES.md lists RTE train as 2,489, but the file holds indices 0..2489, i.e. 2,490 rows
# (the official GLUE RTE train size); every line has four fields, so 2,490 is right.
REAL = [
    ("sst2", "SST-2", "train.tsv", 67349),
    ("sst2", "SST-2", "dev.tsv", 872),
    ("cola", "CoLA", "train.tsv", 8551),
    ("cola", "CoLA", "dev.tsv", 527),
    ("stsb", "STS-B", "train.tsv", 5749),
    ("stsb", "STS-B", "dev.tsv", 1500),
    ("rte", "RTE", "train.tsv", 2490),
    ("rte", "RTE", "dev.tsv", 277),
    ("wnli", "WNLI", "train.tsv", 635),
    ("wnli", "WNLI", "dev.tsv", 71),
    ("mrpc", "MRPC", "msr_paraphrase_train.txt", 4076),
    ("mrpc", "MRPC", "msr_paraphrase_test.txt", 1725),
]


@pytest.mark.parametrize("task,folder,name,rows", REAL)
def test_real_glue_row_counts(shared, task, folder, name, rows):
    examples = read_glue(task, shared("glue", folder, name))
    assert len(examples) == rows
    spec = get_glue_task(task)
    assert all(e.label is not None for e in examples)
    assert all((e.text_b is None) == (len(spec.text_columns) == 1) for e in examples)


def test_real_files_keep_quotes_and_types(shared):
    mrpc = read_glue("mrpc", shared("glue", "MRPC", "msr_paraphrase_train.txt"))
    assert mrpc[0].text_a.startswith('Amrozi accused his brother, whom he called "the witness"')
    assert mrpc[0].label == "1" and mrpc[0].line == 2
    stsb = read_glue("sts-b", shared("glue", "STS-B", "dev.tsv"))
    assert stsb[0].label == 5.0 and stsb[0].guid == "0"
    cola = read_glue("CoLA", shared("glue", "CoLA", "dev.tsv"))
    assert cola[0].line == 1 and cola[0].text_a == "The sailors rode the breeze clear of the rocks."


def test_find_glue_file_falls_back_to_raw_mrpc(shared):
    root = shared("glue")
    assert find_glue_file("mrpc", root, "train").name == "msr_paraphrase_train.txt"
    assert find_glue_file("sst2", root / "SST-2", "dev").name == "dev.tsv"
    with pytest.raises(FileNotFoundError):
        find_glue_file("qnli", root, "train")


def test_registry_describes_every_task():
    assert set(GLUE_TASKS) == set(GLUE_METRICS)
    assert get_glue_task("MNLI").labels == ("contradiction", "entailment", "neutral")
    assert get_glue_task("mnli-mm").files["dev"] == ("dev_mismatched.tsv",)
    stsb = get_glue_task("stsb")
    assert stsb.is_regression and stsb.num_labels == 1 and stsb.main_metric == "spearman"
    assert get_glue_task("cola").main_metric == "mcc"
    assert get_glue_task("rte").label_id("not_entailment") == 1
    with pytest.raises(ValueError, match="unknown GLUE task"):
        get_glue_task("glue")


def _write(tmp_path, name, text, encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return path


def test_test_files_without_labels(tmp_path):
    cola = _write(tmp_path, "test.tsv", "index\tsentence\n0\tA \"quoted\" one.\n1\tTwo.\n")
    examples = read_glue("cola", cola)
    assert [(e.guid, e.text_a, e.label) for e in examples] == [
        ("0", 'A "quoted" one.', None), ("1", "Two.", None)]
    mnli = _write(tmp_path, "test_matched.tsv",
                  "index\tpromptID\tpairID\tgenre\tsentence1\tsentence2\n7\t1\t2\tx\tA.\tB.\n")
    [example] = read_glue("mnli", mnli)
    assert (example.guid, example.text_a, example.text_b, example.label) == ("7", "A.", "B.", None)


def test_mnli_labels(tmp_path):
    path = _write(tmp_path, "dev_matched.tsv",
                  "index\tsentence1\tsentence2\tlabel1\tgold_label\n0\tA\tB\tneutral\tneutral\n")
    assert read_glue("mnli", path)[0].label == "neutral"


def test_wrong_field_count_names_file_and_line(tmp_path):
    path = _write(tmp_path, "dev.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta\tb\n")
    with pytest.raises(DataFormatError, match=r"dev.tsv:3: expected 4 tab-separated fields, found 3"):
        read_glue("rte", path)


def test_unknown_label_names_line(tmp_path):
    path = _write(tmp_path, "train.tsv", "sentence\tlabel\ngood\t1\nbad\tpositive\n")
    with pytest.raises(DataFormatError, match=r"train.tsv:3: unknown label 'positive'") as info:
        read_glue("sst2", path)
    assert info.value.line == 3


def test_bad_regression_score(tmp_path):
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    path = _write(tmp_path, "dev.tsv", header + "0\tg\tf\ty\t0\tn\tn\tA\tB\thigh\n")
    with pytest.raises(DataFormatError, match=r"dev.tsv:2: label 'high' is not a number"):
        read_glue("stsb", path)


def test_missing_header_column(tmp_path):
    path = _write(tmp_path, "dev.tsv", "index\tfirst\tsecond\tlabel\n")
    with pytest.raises(DataFormatError, match=r"dev.tsv:1: rte: header lacks"):
        read_glue("rte", path)


def test_undecodable_bytes_name_the_line(tmp_path):
    path = _write(tmp_path, "train.tsv", b"sentence\tlabel\ngood\t1\nbad \xff\t0\n")
    with pytest.raises(DataFormatError, match=r"train.tsv:3: not valid UTF-8"):
        read_glue("sst2", path)


@pytest.mark.parametrize("score", ["nan", "inf", "-inf", "1e999", "1e30"])
def test_a_non_finite_or_overflowing_regression_score_names_its_line(tmp_path, score):
    """2026-11-25 faults #386-390: these scores trained with a NaN or infinite loss, exit 0."""
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    path = _write(tmp_path, "train.tsv", header + "0\tg\tf\ty\t0\tn\tn\tA\tB\t3.2\n"
                  f"1\tg\tf\ty\t1\tn\tn\tA\tB\t{score}\n")
    with pytest.raises(DataFormatError, match=rf"train.tsv:3: label '{score}' is not a finite number"):
        read_glue("stsb", path)
