"""Scoring commands: ``squad-eval`` (the official SQuAD v2.0 script) and ``conll-eval``."""

from __future__ import annotations

import argparse
import json

from bertkit.errors import DataFormatError


def register(subparsers) -> None:
    """Add the ``squad-eval`` and ``conll-eval`` commands."""
    squad = subparsers.add_parser(
        "squad-eval",
        help="score SQuAD predictions exactly as the official v2.0 evaluation script",
        description="Score SQuAD v1.1/v2.0 predictions; prints the official script's JSON.",
    )
    squad.add_argument("data_file", metavar="DATA.json", help="SQuAD dataset file (official JSON layout)")
    squad.add_argument("pred_file", metavar="PREDICTIONS.json",
                       help='predictions as {"question id": "answer text"}; "" means no answer')
    squad.add_argument("--na-prob", dest="na_prob_file", metavar="FILE", default=None,
                       help="JSON {question id: no-answer probability or null odds}; enables the "
                            "best-threshold search")
    squad.add_argument("--na-prob-thresh", type=float, default=1.0, metavar="T",
                       help="predict no answer when the no-answer probability exceeds T (default 1.0)")
    squad.add_argument("--out-file", default=None, metavar="F",
                       help="write the metrics JSON to F instead of printing it")
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


def check_squad_dataset(path, dataset: dict) -> None:
    """The fields the scorer reads, with the JSON path of the first wrong one named:
    ``data`` (list) -> ``paragraphs`` (list) -> ``qas`` (list) -> ``id`` (str) and
    ``answers`` (list of objects with a string ``text``)."""
    def need(value, kind, where: str):
        if not isinstance(value, kind):
            found = "missing" if value is None else f"a {type(value).__name__}"
            raise DataFormatError(path, f"not a SQuAD dataset: {where} should be a "
                                        f"{kind.__name__}, found {found}")
        return value

    for a, article in enumerate(need(dataset.get("data"), list, "data")):
        need(article, dict, f"data[{a}]")
        for p, paragraph in enumerate(need(article.get("paragraphs"), list, f"data[{a}].paragraphs")):
            where = f"data[{a}].paragraphs[{p}]"
            need(paragraph, dict, where)
            for q, qa in enumerate(need(paragraph.get("qas"), list, f"{where}.qas")):
                need(qa, dict, f"{where}.qas[{q}]")
                qid = need(qa.get("id"), str, f"{where}.qas[{q}].id")
                for n, answer in enumerate(need(qa.get("answers"), list, f"question {qid}: answers")):
                    need(need(answer, dict, f"question {qid}: answers[{n}]").get("text"), str,
                         f"question {qid}: answers[{n}].text")


def run_squad_eval(args: argparse.Namespace) -> int:
    """Handler of ``squad-eval``: official JSON to stdout (indent 2) or to ``--out-file``."""
    from bertkit.fileio import atomic_write, check_writable
    from bertkit.metrics.squad import squad_evaluate
    from bertkit.tasks.formats.base import read_json

    if args.out_file:
        check_writable(args.out_file, "--out-file")

    dataset = _mapping(args.data_file, read_json(args.data_file), "a SQuAD dataset")
    predictions = _mapping(args.pred_file, read_json(args.pred_file), "predictions")
    bad = next((qid for qid, text in predictions.items() if not isinstance(text, str)), None)
    if bad is not None:
        raise DataFormatError(args.pred_file, f"the prediction for {bad} is not a string")
    check_squad_dataset(args.data_file, dataset)
    na_probs = None
    if args.na_prob_file:
        na_probs = _mapping(args.na_prob_file, read_json(args.na_prob_file), "no-answer probabilities")
        bad = next(((q, p) for q, p in na_probs.items()
                    if not isinstance(p, int | float) or isinstance(p, bool)), None)
        if bad is not None:
            raise DataFormatError(args.na_prob_file, f"the no-answer probability of {bad[0]} is "
                                                     f"{bad[1]!r}, not a number")
    try:
        result = squad_evaluate(dataset, predictions, na_probs, args.na_prob_thresh)
    except (KeyError, TypeError) as e:
        raise DataFormatError(args.data_file, f"not a SQuAD dataset (bad or missing field {e})") from None
    except ValueError as e:
        raise DataFormatError(args.pred_file, str(e)) from None
    if args.out_file:
        with atomic_write(args.out_file) as f:
            json.dump(result, f)
    else:
        print(json.dumps(result, indent=2))
    return 0


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
