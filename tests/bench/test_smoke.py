"""Every benchmark kept current (bench/README.md) runs, at a tiny shape, in seconds: a moved
module or a changed signature can never again break one unseen (bench/pretrain.py once failed
at its start for days). These check that a script runs and prints its table, not its figures."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow
TIMEOUT = 300

RUNS = {
    "pretrain": ["--sizes", "tiny", "--seq", "16", "--batch", "2", "--steps", "1", "--warmup", "0",
                 "--vocab", "2000", "--contenders", "bertkit", "--precision", "fp32"],
    "int8_kernels": ["--rows", "1,8", "--rounds", "1", "--seconds", "0.01", "--threads", "1"],
    "precision_crossover": ["--sizes", "tiny", "--shapes", "1x16", "--train-shape", "2x16",
                            "--rounds", "1", "--min-time", "0.01"],
    "inference": ["--shapes", "tiny", "--seq-len", "16", "--batch-sizes", "2", "--rounds", "1",
                  "--min-time", "0.01", "--text-limit", "8", "--no-eager", "--threads", "1"],
    "profile_routes": ["--shape", "tiny", "--batch", "2x8", "--routes", "fp32,int8", "--iterations", "1"],
    "attention_calls": ["--heads", "2,4", "--seconds", "0.001"],
    "attention_products": ["--shapes", "1x32", "--model-shapes", "2x16", "--preset", "tiny", "--heads", "2",
                           "--rounds", "1", "--seconds", "0.01"],
}
PRINTS = {"pretrain": "bertkit", "int8_kernels": "x86/onednn", "precision_crossover": "fp32/bf16",
          "inference": "seq/s", "profile_routes": "ms per batch", "attention_calls": "ATTENTION_COST_BY_CLASS",
          "attention_products": "products/kernel"}


@pytest.mark.parametrize("script", sorted(RUNS))
def test_a_benchmark_runs_at_a_tiny_shape(script):
    done = subprocess.run([sys.executable, str(ROOT / "bench" / f"{script}.py"), *RUNS[script]],
                          capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert PRINTS[script] in done.stdout, done.stdout[-2000:]


@pytest.mark.parametrize("script", ["accuracy", "finetune_precision", "model_speed", "serve",
                                    "tokenizer", "tokenizer_train", "doors", "linear_probe",
                                    "embedding_train", "embedding_step", "static_int8_forms", "serve_cpu", "openvino_counters",
                                    "embedding_parity"])
def test_a_benchmark_answers_help(script):
    """The heavier ones (real models, data or servers): at least their imports and flags."""
    done = subprocess.run([sys.executable, str(ROOT / "bench" / f"{script}.py"), "--help"],
                          capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert done.returncode == 0 and "usage" in done.stdout, done.stderr[-2000:]


def test_the_embedding_training_benchmark_runs_on_toy_pairs(tmp_path):
    """bench/embedding_train.py at a tiny shape: a toy model and toy STS-B pairs, one seed."""
    for module in ("sentence_transformers", "datasets", "accelerate"):
        pytest.importorskip(module)
    from tests.finetune_helpers import make_model
    from tests.tasks.test_embedding import write_stsb

    model, data = make_model(tmp_path / "model"), write_stsb(tmp_path / "data", 32, 12)
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "embedding_train.py"), "--model", str(model),
                           "--data", str(data), "--out", str(tmp_path / "out"), "--seeds", "1", "--epochs", "1"],
                          capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| **sentence-transformers** | mean |" in done.stdout and "| **bertkit** | mean |" in done.stdout


def test_the_embedding_parity_check_runs_on_a_toy_masked_lm(tmp_path):
    """bench/embedding_parity.py's sparse half: a toy masked-LM model, toy STS-B sentences,
    /embed_sparse and --pooling splade's /embed against sentence-transformers' SparseEncoder."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("fastapi")
    from tests.task_models import make_task_model
    from tests.tasks.test_embedding import write_stsb

    model, data = make_task_model(tmp_path, "mlm"), write_stsb(tmp_path / "data", 32, 12)
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "embedding_parity.py"), "--sparse-model",
                           str(model), "--data", str(data), "--count", "10"],
                          capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "same non-zero terms 10/10" in done.stdout, done.stdout


def run_bench(script: str, *args) -> str:
    """``bench/SCRIPT.py ARGS`` run to its end (exit 0): its stdout."""
    done = subprocess.run([sys.executable, str(ROOT / "bench" / f"{script}.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def sentences_tsv(path, sentence: str, count: int):
    """A dev.tsv of ``count`` numbered copies of ``sentence`` (``{i}`` in it), SST-2's columns."""
    path.write_text("sentence\tlabel\n" + "".join(sentence.format(i=i) + "\t1\n" for i in range(count)))
    return path


def test_the_masked_lm_heads_benchmark_runs_on_a_toy_masked_lm(tmp_path):
    """bench/mlm_heads.py: embed_sparse and fill-mask against sentence-transformers and the
    transformers pipeline on a toy masked-LM model, the answers compared before the table."""
    pytest.importorskip("sentence_transformers")
    from tests.task_models import make_task_model

    data = sentences_tsv(tmp_path / "dev.tsv", "the man went to the store {i} .", 6)
    out = run_bench("mlm_heads", "--model", make_task_model(tmp_path, "mlm"), "--data", data,
                    "--texts", 6, "--batch", 4, "--rounds", 1)
    assert "same non-zero terms 6/6" in out and "| fill-mask | transformers |" in out, out


def test_the_bf16_cls_only_check_runs_on_a_toy_classifier(tmp_path):
    """bench/cls_only_bf16.py on a toy classifier and toy sentences: its four gaps and timing."""
    from tests.task_models import make_task_model

    data = sentences_tsv(tmp_path / "dev.tsv", "the man went to the store {i} and he is good .", 8)
    out = run_bench("cls_only_bf16", "--model", make_task_model(tmp_path, "classify"), "--data", data,
                    "--sentences", 8, "--batch", 8, "--rounds", 1)
    assert "[CLS] only vs full, the same batches:" in out and "ms a row" in out, out
    assert "unpadded vs padded, the same batches (full):" in out, out


def test_the_server_cpu_benchmark_runs_both_apps_on_a_toy_model(tmp_path):
    """bench/serve_cpu.py: both apps (bertkit's and the pipeline's) answer a toy SST-2 model's
    requests in process, and the table has a row for each."""
    pytest.importorskip("transformers")
    from tests.task_models import make_task_model

    model = make_task_model(tmp_path, "sst2")
    data = tmp_path / "SST-2"
    data.mkdir()
    (data / "dev.tsv").write_text("sentence\tlabel\n" + "".join(f"the movie is good {i}\t1\n" for i in range(8)),
                                  encoding="utf-8")
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "serve_cpu.py"), "--model", str(model), "--data",
                           str(data), "--requests", "400", "--concurrency", "4", "--rounds", "1",
                           "--servers", "bertkit,bertkit process,hf,bertkit int8 uncut"],
                          capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {line.split("|")[1].strip(): line for line in done.stdout.splitlines() if line.startswith("| ")}
    assert {"bertkit", "bertkit process", "hf", "bertkit int8 uncut"} <= set(rows), done.stdout[-2000:]
    assert float(rows["bertkit process"].split("|")[6]) > 0  # the model process's CPU is counted
    assert "Task was destroyed" not in done.stderr  # the apps are shut down, not dropped


def test_the_batch_cut_benchmark_runs_on_a_toy_model(tmp_path):
    """bench/batch_cut.py: a toy SST-2 model's groups run whole and cut, and the table compares them."""
    from tests.task_models import make_task_model

    model = make_task_model(tmp_path, "sst2")
    data = tmp_path / "SST-2"
    data.mkdir()
    (data / "dev.tsv").write_text("sentence\tlabel\n" + "".join(f"the movie {'is ' * (i % 5)}good\t1\n"
                                                                for i in range(12)), encoding="utf-8")
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "batch_cut.py"), "--model", str(model), "--data",
                           str(data), "--precision", "int8", "--rows", "6", "--groups", "3", "--pass-tokens", "0,2",
                           "--rounds", "1"], capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| cut, a pass = 0 tokens |" in done.stdout and "| whole | 1.00 |" in done.stdout, done.stdout[-2000:]
