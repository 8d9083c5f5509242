"""Scoring commands: ``squad-eval`` (the official SQuAD v1.1 / v2.0 scripts) and ``conll-eval``."""

from __future__ import annotations

import argparse
import json
import sys

from bertkit.errors import DataFormatError
from bertkit.options import bounded


def register(subparsers) -> None:
    """Add the ``squad-eval`` and ``conll-eval`` commands."""
    squad = subparsers.add_parser(
        "squad-eval",
        help="score SQuAD predictions exactly as the official v1.1 / v2.0 evaluation scripts",
        description="Score SQuAD predictions by the official script of the dataset's version "
                    "(its 'version' field, or --squad-version); prints that script's JSON. "
                    "v1.1 rules: a question without a prediction scores 0 and counts in the "
                    "total. v2.0 rules: it is left out of the total.",
    )
    squad.add_argument("data_file", metavar="DATA.json", help="SQuAD dataset file (official JSON layout)")
    squad.add_argument("pred_file", metavar="PREDICTIONS.json",
                       help='predictions as {"question id": "answer text"}; "" means no answer')
    squad.add_argument("--na-prob", dest="na_prob_file", metavar="FILE", default=None,
                       help="JSON {question id: no-answer probability or null odds}; enables the "
                            "best-threshold search")
    squad.add_argument("--na-prob-thresh", type=bounded(float), default=1.0, metavar="T",
                       help="predict no answer when the no-answer probability exceeds T")
    squad.add_argument("--out-file", default=None, metavar="F",
                       help="write the metrics JSON to F instead of printing it")
    squad.add_argument("--squad-version", default=None, choices=("1.1", "2.0", "v1.1", "v2.0"),
                       help="score by this version's official rules instead of those of the "
                            "dataset's 'version' field (default: the field)")
    squad.set_defaults(func=run_squad_eval)

    conll = subparsers.add_parser(
        "conll-eval",
        help="entity-level precision/recall/F1 of tagged text, as conlleval",
        description="Score a CoNLL-style file whose last two columns are the gold and the "
                    "predicted tag (blank line between sentences); prints conlleval's report.",
    )
    conll.add_argument("file", metavar="FILE", help="token lines '... GOLD PRED', blank line between sentences")
    conll.add_argument("--json", action="store_true", help="print the metrics as JSON instead of the report")
    conll.set_defaults(func=run_conll_eval)


def _mapping(path, value, what: str) -> dict:
    """``value`` checked to be a JSON object."""
    if not isinstance(value, dict):
        raise DataFormatError(path, f"expected a JSON object of {what}")
    return value


def run_squad_eval(args: argparse.Namespace) -> int:
    """Handler of ``squad-eval``: official JSON to stdout (indent 2) or to ``--out-file``."""
    from bertkit.fileio import atomic_write, check_writable
    from bertkit.metrics.squad import (
        check_dataset,
        missing_predictions,
        squad_evaluate,
        squad_rules,
    )
    from bertkit.tasks.formats.base import read_json

    if args.out_file:
        check_writable(args.out_file, "--out-file")

    dataset = _mapping(args.data_file, read_json(args.data_file), "a SQuAD dataset")
    try:
        check_dataset(dataset)
        rules = squad_rules(dataset, args.squad_version)
    except ValueError as e:
        hint = "" if "version" not in str(e) else " (--squad-version 1.1 or 2.0)"
        raise DataFormatError(args.data_file, f"{e}{hint}") from None
    predictions = _mapping(args.pred_file, read_json(args.pred_file), "predictions")
    bad = next((qid for qid, text in predictions.items() if not isinstance(text, str)), None)
    if bad is not None:
        raise DataFormatError(args.pred_file, f"the prediction for {bad} is not a string")
    na_probs = None
    if args.na_prob_file:
        na_probs = _na_probs(args.na_prob_file, dataset, predictions)
    if rules == "v1.1" and (na_probs is not None or args.na_prob_thresh != 1.0):
        raise DataFormatError(args.data_file, "--na-prob and --na-prob-thresh need the v2.0 "
                                              "rules; this dataset is scored by the v1.1 rules")
    missing = missing_predictions(dataset, predictions)
    try:
        result = squad_evaluate(dataset, predictions, na_probs, args.na_prob_thresh, rules)
    except ValueError as e:
        raise DataFormatError(args.pred_file, str(e)) from None
    _report_missing(rules, missing)
    if args.out_file:
        with atomic_write(args.out_file) as f:
            json.dump(result, f)
    else:
        print(json.dumps(result, indent=2))
    return 0


def _na_probs(path, dataset, predictions) -> dict:
    """The ``--na-prob`` file checked: a number for every question with a prediction."""
    from bertkit.metrics.squad import missing_predictions
    from bertkit.tasks.formats.base import read_json

    na_probs = _mapping(path, read_json(path), "no-answer probabilities")
    bad = next((k for k, v in na_probs.items()
                if not isinstance(v, int | float) or isinstance(v, bool)), None)
    if bad is not None:
        raise DataFormatError(path, f"the no-answer probability for {bad} is not a number")
    lacking = [q for q in missing_predictions(dataset, na_probs) if q in predictions]
    if lacking:
        raise DataFormatError(path, f"{len(lacking)} questions with a prediction lack a "
                                    f"no-answer probability, e.g. {lacking[0]}")
    return na_probs


def _report_missing(rules: str, missing: list[str], shown: int = 20) -> None:
    """Say on stderr which questions lack a prediction and what the rules do with them.

    The official scripts print one line per question (v1.1 on stderr, v2.0 on stdout):
    the same lines go to stderr here, the first ``shown`` of them, then a count.
    """
    line = ("Unanswered question {} will receive score 0." if rules == "v1.1"
            else "Missing prediction for {} (left out of the total, as the v2.0 rules do).")
    for qid in missing[:shown]:
        print(line.format(qid), file=sys.stderr)
    if len(missing) > shown:
        print(f"... and {len(missing) - shown} more questions without a prediction "
              f"({len(missing)} in all).", file=sys.stderr)


def conll_report(scores: dict) -> str:
    """conlleval's text report (percentages, two decimals) of :func:`entity_scores` output."""
    lines = [
        f"processed {scores['num_tokens']} tokens with {scores['num_gold']} phrases; "
        f"found: {scores['num_pred']} phrases; correct: {scores['num_correct']}.",
        f"accuracy: {100 * scores['accuracy']:6.2f}%; precision: {100 * scores['precision']:6.2f}%; "
        f"recall: {100 * scores['recall']:6.2f}%; FB1: {100 * scores['f1']:6.2f}",
    ]
    for kind, s in scores["per_type"].items():
        lines.append(f"{kind:>17}: precision: {100 * s['precision']:6.2f}%; "
                     f"recall: {100 * s['recall']:6.2f}%; FB1: {100 * s['f1']:6.2f}  {s['predicted']}")
    return "\n".join(lines)


def run_conll_eval(args: argparse.Namespace) -> int:
    """Handler of ``conll-eval``: gold = second-to-last column, prediction = last."""
    from bertkit.metrics.ner import entity_scores
    from bertkit.tasks.formats.conll import check_tags, conll_blocks

    gold, pred = [], []
    for first, rows in conll_blocks(args.file):
        for column, out in ((-2, gold), (-1, pred)):
            tags = [r[column] for r in rows]
            check_tags(args.file, first, tags, None, bio=True)
            out.append(tags)
    if not gold:
        raise DataFormatError(args.file, "no tagged tokens")
    scores = entity_scores(gold, pred)
    print(json.dumps(scores, indent=2) if args.json else conll_report(scores))
    return 0
