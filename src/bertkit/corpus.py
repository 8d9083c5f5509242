"""The built-in default corpus: English docstrings of Python's own standard library.

Every machine with Python has it, so ``make demo`` needs no download. Sources are parsed
with :mod:`ast` (never imported, so no module's side effects run); each module is one
document, each docstring sentence one line, in BERT's pre-training layout (one sentence
per line, a blank line between documents).
"""

from __future__ import annotations

import ast
import re
import sysconfig
import warnings
from collections.abc import Iterator
from pathlib import Path

from tqdm.auto import tqdm

from bertkit.fileio import atomic_write

_SKIP_PARTS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__",
               "lib2to3", "turtledemo", "ensurepip", "venv"}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
_DOCTEST = re.compile(r"^\s*(>>>|\.\.\.)")


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences at ``.``, ``!`` or ``?`` followed by a capital."""
    text = " ".join(text.split())
    return [s for s in _SENTENCE_END.split(text) if s]


def _docstring_paragraphs(source: str) -> Iterator[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # old escape sequences in some stdlib sources
        tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node)
            if not doc:
                continue
            for paragraph in re.split(r"\n\s*\n", doc):
                lines = [ln for ln in paragraph.splitlines() if not _DOCTEST.match(ln)]
                text = " ".join(ln.strip() for ln in lines).strip()
                # Prose only: skip code listings, tables and signatures.
                if len(text) > 20 and text[0].isalpha() and text.count("  ") == 0:
                    yield text


def stdlib_documents(max_documents: int | None = None, progress: bool = True) -> list[list[str]]:
    """Documents (lists of sentences) from the docstrings of the standard library."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if not _SKIP_PARTS & set(p.relative_to(root).parts))
    documents = []
    for path in tqdm(files, desc="reading stdlib docstrings", unit=" modules", disable=not progress):
        try:
            source = path.read_text(encoding="utf-8")
            sentences = [s for p in _docstring_paragraphs(source) for s in split_sentences(p)]
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        if len(sentences) >= 2:
            documents.append(sentences)
            if max_documents and len(documents) >= max_documents:
                break
    return documents


def write_corpus(documents: list[list[str]], path: str | Path) -> Path:
    """Write documents in BERT's layout: a sentence per line, a blank line between documents."""
    with atomic_write(path) as f:
        f.write("\n\n".join("\n".join(doc) for doc in documents) + "\n")
    return Path(path)
