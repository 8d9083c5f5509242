"""Fine-tuning commands: ``finetune``, ``evaluate``, ``predict`` (any task of ``bertkit.tasks.TASKS``).

``finetune TASK --model DIR --data DIR --out DIR`` trains (one point, or ``--grid``) and keeps
the best model in ``--out``; ``evaluate TASK --model DIR --data DIR`` scores a fine-tuned
model on the task's dev split(s); ``predict TASK --model DIR --input F.jsonl --output F.jsonl``
writes each input record with the prediction fields added. A fine-tuned model directory
remembers its task options (columns, labels) and ``max_seq_length``; flags override them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import warnings

from bertkit.cli.long_text import check_window_flags
from bertkit.cli.parsing import (
    accept_negative_lists,
    add_calibration_flag,
    add_compile_flag,
    add_progress_flag,
)
from bertkit.errors import BertkitError
from bertkit.finetuning.config import FinetuneConfig
from bertkit.options import add_options, bounded, options_from_args
from bertkit.precision import HELP as PRECISION_HELP
from bertkit.precision import INFERENCE as INFERENCE_PRECISIONS
from bertkit.precision import INFERENCE_DEFAULT
from bertkit.tasks.task_options import GROUPS, TaskOptions, task_options_from
from bertkit.tokenizer.settings import add_tokenizer_flags

# FinetuneConfig fields that are not plain ``finetune`` flags: the grid has its own syntax,
# the rest are shared with evaluate/predict (declared in _common)
_NOT_FLAGS = ("grid", "max_seq_length", "device", "precision", "progress", "bucket")

def _task_help() -> str:
    from bertkit.tasks import TASKS

    return "task: " + ", ".join(TASKS)


def _common(parser: argparse.ArgumentParser, data: bool = True, inference: bool = False) -> None:
    parser.add_argument("task", metavar="TASK", help=_task_help())
    parser.add_argument("--model", required=True, metavar="DIR",
                        help="model directory (bertkit or Hugging Face BERT)")
    if data:
        parser.add_argument("--data", required=True, metavar="DIR",
                            help="data folder (GLUE: the task folder or the GLUE root)")
    parser.add_argument("--vocab", metavar="FILE", help="vocab.txt when the model has none")
    add_tokenizer_flags(parser)  # checked against the settings saved with the vocabulary
    add_options(parser, FinetuneConfig, only=("max_seq_length",), resolved={"max_seq_length": (
        "the fine-tuned model's, else the task's: 128, SQuAD 384" if inference
        else "the task's: 128, SQuAD 384, at most the model's positions")})
    if inference:  # evaluate / predict also run INT8 (bertkit.modeldir.int8), training does not
        add_options(parser, FinetuneConfig, only=("device",))
        parser.add_argument("--precision", default=INFERENCE_DEFAULT, choices=INFERENCE_PRECISIONS,
                            help=f"autocast precision ({PRECISION_HELP}); int8: dynamic "
                                 "quantisation on the CPU (default: %(default)s, as every "
                                 "inference door)")
        add_compile_flag(parser)
        add_calibration_flag(parser)
    else:
        add_options(parser, FinetuneConfig, only=("device", "precision"))
    parser.add_argument("--threads", type=bounded(int, ge=1), default=None, metavar="N",
                        help="CPU threads for torch (default: torch's)")
    add_progress_flag(parser)
    parser.add_argument("-o", "--task-option", action="append", default=[], metavar="KEY=VALUE",
                        help="a task option by its name (the flags below: e.g. -o doc_stride=64), "
                             "typed and checked as its flag; repeatable")
    for title, names in GROUPS.items():  # task options: one declaration, tasks/task_options.py
        add_options(parser.add_argument_group(title), TaskOptions, only=names)
    accept_negative_lists(parser)


def register(subparsers) -> None:
    """Add ``finetune``, ``evaluate`` and ``predict``."""
    ft = subparsers.add_parser(
        "finetune", help="fine-tune a model on a task (GLUE, SWAG, generic, NER, SQuAD)",
        description="Fine-tune with the BERT paper's recipe (AdamW, 10% warm-up then linear "
                    "decay, dropout 0.1); keep the best epoch (by the dev main metric) as a "
                    "model directory in --out, with log.jsonl, results.json and dev predictions.")
    _common(ft)
    ft.add_argument("--out", required=True, metavar="DIR", help="output model directory")
    ft.add_argument("--grid", nargs="*", default=None, metavar="KEY=V1,V2",
                    help="grid search: bare --grid is the paper's lr 5e-5,3e-5,2e-5 x batch 16,32 x "
                         "epochs 2,3,4; or e.g. --grid lr=5e-5,3e-5 batch=32 epochs=3 seed=1,2 "
                         "(missing keys take the single values)")
    add_options(ft, FinetuneConfig, skip=_NOT_FLAGS)
    ft.set_defaults(func=run_finetune)

    ev = subparsers.add_parser("evaluate", help="score a fine-tuned model on a task's dev data",
                               description="Evaluate a fine-tuned model on the task's evaluation "
                                           "split(s) and print the metrics (main metric first).")
    _common(ev, inference=True)
    ev.add_argument("--split", action="append", default=None,
                    help="split(s) to score (default: the task's dev split(s))")
    ev.add_argument("--batch-size", type=bounded(int, ge=1), default=64, help="evaluation batch size")
    ev.add_argument("--output", metavar="FILE.json", help="also write the metrics as JSON")
    ev.add_argument("--predictions", metavar="DIR", help="write predictions_<split>.jsonl there")
    ev.set_defaults(func=run_evaluate)

    pr = subparsers.add_parser("predict", help="predict labels for a JSON Lines file",
                               description="Read FILE.jsonl (one input per line, fields as the task's "
                                           "data: e.g. sentence / sentence1+sentence2 / text+text_pair), "
                                           "write each record with its prediction fields added.")
    _common(pr, data=False, inference=True)
    pr.add_argument("--input", required=True, metavar="FILE.jsonl", help="inputs, one JSON object a line")
    pr.add_argument("--output", required=True, metavar="FILE.jsonl", help="where to write the predictions")
    pr.add_argument("--batch-size", type=bounded(int, ge=1), default=64, help="batch size")
    pr.set_defaults(func=run_predict)


# ------------------------------------------------------------------ helpers
@contextlib.contextmanager
def _plain_warnings():
    """Warnings as one ``bertkit: warning: ...`` line each (no source lines)."""
    from bertkit.cli.boundary import quiet_third_party

    with warnings.catch_warnings():
        warnings.simplefilter("default")
        quiet_third_party()
        warnings.showwarning = lambda message, *a, **k: print(f"bertkit: warning: {message}",
                                                              file=sys.stderr)
        yield


def _setup(args, for_training: bool):
    """(task, saved finetune entry) for the command's model and task."""
    import torch

    from bertkit.modeldir.entry import FINETUNE_KEY, read_model_config, saved_task_options
    from bertkit.tasks import canonical_name, get_task

    if args.threads:
        torch.set_num_threads(args.threads)
    name = canonical_name(args.task)
    config = read_model_config(args.model)
    limit = config.get("max_position_embeddings")
    if args.max_seq_length and limit and args.max_seq_length > limit:
        raise BertkitError(f"argument --max-seq-length: must be <= {limit}, the positions of "
                           f"{args.model} (got {args.max_seq_length})")
    entry = config.get(FINETUNE_KEY) or {}
    trained_on, saved = saved_task_options(args.model)
    task = get_task(name, **task_options_from(args, saved if trained_on == name and not for_training
                                              else None))
    check_window_flags(args, task.options)
    return task, entry


def _train_max_len(args, task) -> int:
    """``--max-seq-length``, else the task's default capped at the model's positions (a
    small model with 64 positions trains at 64 without a word; an explicit larger value is
    refused by ``finetune``): :func:`~bertkit.tasks.base.resolve_max_seq_length` without the
    saved value (training starts a new one)."""
    return _max_len(args, {}, task)


def _max_len(args, entry: dict, task=None) -> int:
    """``--max-seq-length``, else the model's saved one, else the task's default (128; SQuAD
    384), capped at the model's positions: :func:`~bertkit.tasks.base.resolve_max_seq_length`."""
    from bertkit.checkpoint import load_config
    from bertkit.modeldir.entry import resolve_max_seq_length

    positions = load_config(args.model).max_position_embeddings
    return resolve_max_seq_length(args.max_seq_length, entry, task.default_max_seq_length if task else None,
                                  positions)


# ------------------------------------------------------------------ handlers
def run_finetune(args) -> int:
    """Handler of ``finetune``: prints the grid table and where the best model went."""
    from bertkit.finetuning.loop import finetune, format_table, parse_grid

    with _plain_warnings():
        from bertkit.checkpoint import load_tokenizer

        task, _ = _setup(args, for_training=True)
        tokenizer = load_tokenizer(args.model, args.vocab, args.lowercase, args.strip_accents)
        cfg = FinetuneConfig(**{
            **options_from_args(FinetuneConfig, args),  # every flag FinetuneConfig declares
            "grid": parse_grid(args.grid) if args.grid is not None else None,
            "max_seq_length": _train_max_len(args, task)})
        runs, best = finetune(task, args.model, args.data, args.out, cfg, tokenizer=tokenizer)
    if os.environ.get("RANK", "0") != "0":  # under torchrun: rank 0 prints the table
        return 0
    print(format_table(runs, task.main_metric))
    print(f"best: {task.main_metric}={best.metrics[task.main_metric]:.4f} (lr={best.hyper.lr:g} "
          f"batch={best.hyper.batch} epochs={best.hyper.epochs} seed={best.hyper.seed}, "
          f"epoch {best.epoch}) -> {args.out}")
    for finding in task.findings(best.metrics):  # also in results.json's "findings"
        print(f"bertkit: warning: {finding}", file=sys.stderr)
    return 0


def _setup_trained(args):
    """(task, saved entry, the model loaded by the inference engine) of a trained model: the
    one loader every inference door uses (:func:`bertkit.inference.load`, here with the
    command's task, whose head the model must have), so ``predict``/``evaluate`` run at the
    precision ``load()`` and ``serve`` resolve and answer as they do."""
    from bertkit.inference import load
    from bertkit.modeldir.marker import check_model

    task, entry = _setup(args, for_training=False)
    check_model(args.model, task)  # unfinished, no trained head, another task: warnings
    from bertkit.inference.calibration import calibration_option

    calibration = calibration_option(args.calibration, args.precision, args.command, args.model)
    bert = load(args.model, args.vocab, args.lowercase, device=args.device,
                precision=args.precision, task=task, strip_accents=args.strip_accents,
                compile=args.compile, calibration=calibration)
    return task, entry, bert


def run_evaluate(args) -> int:
    """Handler of ``evaluate``: ``split key=value ...`` lines, then the JSON."""
    from pathlib import Path

    from bertkit.fileio import check_writable
    from bertkit.finetuning.evaluate import load_eval_sets, score_sets, write_predictions

    if args.output:
        check_writable(args.output, "--output")
    if args.predictions:
        check_writable(args.predictions, "--predictions directory", directory=True)
    with _plain_warnings():
        task, entry, bert = _setup_trained(args)
        results = {}
        for split in args.split or task.eval_splits():
            sets = load_eval_sets(task, args.data, bert.tokenizer, _max_len(args, entry, task), [split])
            raw = [bert.run_features(task, s.features, args.batch_size, args.progress, desc=f"eval {s.split}")
                   for s in sets]
            metrics = score_sets(task, sets, raw)
            results[split] = metrics
            print(f"{split} " + " ".join(f"{k}={v:.4f}" for k, v in metrics.items()))
            for finding in task.findings(metrics, saved=True):
                warnings.warn(f"{split}: {finding}", stacklevel=1)
            if args.predictions:
                write_predictions(task, sets, raw, Path(args.predictions))
    if args.output:
        from bertkit.fileio import atomic_write

        with atomic_write(args.output) as f:
            json.dump({"task": task.name, "model": args.model, "metrics": results}, f, indent=2)
    print(json.dumps(results))
    return 0


def run_predict(args) -> int:
    """Handler of ``predict``: one output record per input record, input fields kept."""
    from bertkit.fileio import atomic_write, check_not_input, check_writable
    from bertkit.tasks.base import featurize
    from bertkit.tasks.formats.base import iter_jsonl

    check_writable(args.output, "--output")
    check_not_input(args.output, args.input)

    with _plain_warnings():
        task, entry, bert = _setup_trained(args)
        records = [record for _, record in iter_jsonl(args.input)]
        if not records:
            raise BertkitError(f"{args.input}: no input records")
        examples = task.read_input(args.input)
        features = featurize(task, examples, bert.tokenizer, _max_len(args, entry, task), False, "input")
        outputs = bert.run_features(task, features, args.batch_size, args.progress, desc="predict")
        predictions = task.predict(examples, features, outputs)
        if len(predictions) != len(records):
            raise BertkitError(f"{args.input}: {len(records)} records but {len(predictions)} "
                               f"predictions ({task.name} read {len(examples)} inputs)")
        with atomic_write(args.output) as f:
            for record, prediction in zip(records, predictions):
                f.write(json.dumps({**record, **prediction}, ensure_ascii=False) + "\n")
    print(f"wrote {len(predictions)} predictions to {args.output}", file=sys.stderr)
    return 0
