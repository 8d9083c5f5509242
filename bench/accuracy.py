"""Accuracy kept by inference precision: fp32, bf16, INT8 (PyTorch dynamic), INT8 static
(``bertkit.inference.static_int8``, PyTorch 2's export route), ONNX Runtime fp32/INT8 and
OpenVINO INT8 (NNCF static quantisation); both static routes are calibrated on the first 300
examples of the task's *train* split, and each column is left out with a note when its
packages (torchao; openvino/nncf) are absent.

Evaluates fine-tuned model directories on their task's dev split with the same featurisation,
batching and metrics as ``bertkit evaluate``, once per precision, and prints the main metric
of each with its drop from fp32 (in points: x100, SQuAD as its scorer gives it)::

    python bench/accuracy.py sst2=runs/sst2 mrpc=runs/mrpc stsb=runs/stsb ner=runs/ner \\
        --data sst2=../shared/data/glue/SST-2 --data mrpc=../shared/data/glue/MRPC ...

``--data`` defaults: GLUE tasks under ``../shared/data/glue/<TASK>``, ner under
``../shared/data/conll2003``. SQuAD (``squad``, ``squad2``) has no train split in the shared
data, so it needs ``--data squad=DIR``: a split by article of the dev file, the one the model
was fine-tuned on (``bertkit.tasks.squad.split_articles``, docs/tasks-ner-squad.md).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
GLUE_DIRS = {"sst2": "SST-2", "mrpc": "MRPC", "stsb": "STS-B", "cola": "CoLA", "rte": "RTE"}
VARIANTS = ("fp32", "bf16", "int8", "int8 static", "onnx fp32", "onnx int8", "ov int8")
CALIBRATION = 300  # train examples OpenVINO's static INT8 is calibrated on


def default_data(task: str) -> Path:
    if task in ("squad", "squad2"):
        raise SystemExit(f"accuracy.py: {task} needs --data {task}=DIR, the article split the model was "
                         "fine-tuned on (bertkit.tasks.squad.split_articles)")
    return DATA / "conll2003" if task in ("ner", "conll2003") else DATA / "glue" / GLUE_DIRS.get(task, task)


def calibration_features(task, model_dir: Path, data: Path) -> list:
    """The features of the first :data:`CALIBRATION` examples of the task's train split, as
    the model was fine-tuned on them: what both static INT8 routes calibrate on."""
    from bertkit.checkpoint import load_tokenizer
    from bertkit.tasks.base import featurize

    examples = task.read(data, "train")[:CALIBRATION]
    max_len = int((json.loads((model_dir / "config.json").read_text()).get("bertkit_finetune") or {})
                  .get("max_seq_length") or 128)
    return featurize(task, examples, load_tokenizer(model_dir), max_len, False, "train").features


def openvino_int8(task, model_dir: Path, data: Path, tmp: Path):
    """The OpenVINO INT8 model calibrated on the task's train split, or None (with a note)."""
    try:
        from bertkit.inference import openvino as bov
        bov.require_openvino()
        import nncf  # noqa: F401
    except Exception as e:  # noqa: BLE001  (optional engine)
        print(f"(ov int8 left out: {e})", flush=True)
        return None
    calibration = bov.calibration_batches(calibration_features(task, model_dir, data))
    return bov.OvModel(bov.convert(model_dir, tmp / "ov", int8=True, calibration=calibration), "int8")


def static_int8(task, model_dir: Path, data: Path):
    """bertkit's static INT8 (PyTorch 2's export route) calibrated on the task's train split,
    or None (with a note)."""
    from bertkit.inference import static_int8 as route

    if route.blocker():
        print(f"(int8 static left out: {route.blocker()})", flush=True)
        return None
    model = task.build_model(model_dir)
    route.quantize_static(model, route.calibration_batches(calibration_features(task, model_dir, data)))
    route.warm_up(model)
    return model


def variants(task, model_dir: Path, tmp: Path, data: Path):
    """``(name, model, autocast precision)`` for every column of the table."""
    from bertkit.inference.export import OrtModel, export_onnx
    from bertkit.modeldir.int8 import quantize_int8

    model = task.build_model(model_dir)
    yield "fp32", model, "fp32"
    yield "bf16", model, "bf16"
    yield "int8", quantize_int8(task.build_model(model_dir)), "fp32"
    quantised = static_int8(task, model_dir, data)
    if quantised is not None:
        yield "int8 static", quantised, "fp32"
    yield "onnx fp32", OrtModel(export_onnx(model_dir, tmp / "m.onnx")), "fp32"
    yield "onnx int8", OrtModel(export_onnx(model_dir, tmp / "q.onnx", int8=True)), "fp32"
    ov = openvino_int8(task, model_dir, data, tmp)
    if ov is not None:
        yield "ov int8", ov, "fp32"


def evaluate(name: str, model_dir: Path, data: Path, batch_size: int) -> dict:
    from bertkit.checkpoint import load_tokenizer
    from bertkit.finetuning.evaluate import evaluate_sets, load_eval_sets
    from bertkit.modeldir.entry import saved_task_options
    from bertkit.tasks import get_task

    saved_name, options = saved_task_options(model_dir)
    task = get_task(saved_name or name, **options)
    config = json.loads((model_dir / "config.json").read_text())
    max_len = int((config.get("bertkit_finetune") or {}).get("max_seq_length") or 128)
    sets = load_eval_sets(task, data, load_tokenizer(model_dir), max_len, [task.eval_splits()[0]])
    # points = metric x 100, except SQuAD, whose official scorers already report percent
    row = {"task": name, "metric": task.main_metric, "examples": len(sets[0].examples),
           "scale": 1.0 if task.name in ("squad", "squad2") else 100.0}
    with tempfile.TemporaryDirectory() as tmp:
        for variant, model, precision in variants(task, model_dir, Path(tmp), data):
            start = time.perf_counter()
            metrics, _ = evaluate_sets(task, model, sets, batch_size, "cpu", precision, progress=False)
            row[variant] = metrics[task.main_metric]
            row[f"{variant} s"] = time.perf_counter() - start
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="+", metavar="TASK=DIR", help="fine-tuned model directories")
    p.add_argument("--data", action="append", default=[], metavar="TASK=DIR", help="dev data folder")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--json", help="also write the rows as JSON")
    args = p.parse_args(argv)
    data = dict(x.split("=", 1) for x in args.data)
    rows = []
    header = f"{'task':<6} {'metric':<10} " + " ".join(f"{v:>16}" for v in VARIANTS)
    print(header)
    for spec in args.models:
        name, directory = spec.split("=", 1)
        row = evaluate(name, Path(directory), Path(data[name]) if name in data else default_data(name),
                       args.batch_size)
        rows.append(row)
        k = row["scale"]
        cells = [f"{k * row['fp32']:16.2f}"] + [
            f"{k * row[v]:9.2f} ({k * (row[v] - row['fp32']):+5.2f})" if v in row else f"{'-':>16}"
            for v in VARIANTS[1:]]
        print(f"{name:<6} {row['metric']:<10} " + " ".join(cells), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
