"""SQuAD v1.1 / v2.0 JSON files: ``{"version", "data": [{"title", "paragraphs": [{"context",
"qas": [{"id", "question", "answers": [{"text", "answer_start"}], "is_impossible"}]}]}]}``.

Every answer is checked to sit at its ``answer_start`` in the context.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bertkit.errors import DataFormatError
from bertkit.tasks.formats.base import read_json

__all__ = ["SquadAnswer", "SquadExample", "read_squad"]


@dataclass
class SquadAnswer:
    """An answer span: ``context[answer_start : answer_start + len(text)] == text``."""

    text: str
    answer_start: int


@dataclass
class SquadExample:
    """One question on one context. ``answers`` is empty for an unanswerable (v2.0) question."""

    qid: str
    question: str
    context: str
    answers: list[SquadAnswer] = field(default_factory=list)
    is_impossible: bool = False
    title: str = ""


def _get(path, obj, key: str, kind, where: str):
    """``obj[key]`` checked to be a ``kind``; a clear DataFormatError otherwise."""
    if not isinstance(obj, dict) or key not in obj:
        raise DataFormatError(path, f"{where}: missing field {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise DataFormatError(path, f"{where}: field {key!r} should be {names}, "
                                    f"got {type(value).__name__}")
    return value


def _answer(path, raw, context: str, where: str) -> SquadAnswer:
    text = _get(path, raw, "text", str, where)
    start = _get(path, raw, "answer_start", int, where)
    found = context[start: start + len(text)] if start >= 0 else ""
    if found != text:
        raise DataFormatError(path, f"{where}: answer {text!r} is not at answer_start {start} "
                                    f"of the context (found {found!r} there)")
    return SquadAnswer(text, start)


def _question(path, qa, context: str, title: str, where: str) -> SquadExample:
    qid = str(_get(path, qa, "id", (str, int), where))
    where = f"question {qid}"
    answers = [_answer(path, a, context, where) for a in _get(path, qa, "answers", list, where)]
    impossible = bool(qa.get("is_impossible", False))
    if impossible and answers:
        raise DataFormatError(path, f"{where}: is_impossible is true but it has answers")
    return SquadExample(qid, _get(path, qa, "question", str, where), context, answers,
                        impossible, title)


def read_squad(path: str | Path) -> list[SquadExample]:
    """Every question of a SQuAD v1.1 or v2.0 file, in file order.

    Raises DataFormatError naming the file (and the line for JSON syntax errors, the
    question id for a bad question, e.g. an answer text not at its ``answer_start``).
    """
    data = _get(path, read_json(path), "data", list, "top level")
    examples = []
    for a, article in enumerate(data):
        where = f"article {a}"
        title = str(article.get("title", "")) if isinstance(article, dict) else ""
        for p, paragraph in enumerate(_get(path, article, "paragraphs", list, where)):
            where_p = f"{where} paragraph {p}"
            context = _get(path, paragraph, "context", str, where_p)
            for qa in _get(path, paragraph, "qas", list, where_p):
                examples.append(_question(path, qa, context, title, where_p))
    return examples
