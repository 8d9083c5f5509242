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
from bertkit.pretraining.documents import split_into_sentences

_SKIP_PARTS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__",
               "lib2to3", "turtledemo", "ensurepip", "venv"}
_DOCTEST = re.compile(r"^\s*(>>>|\.\.\.)")


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


def stdlib_modules(max_documents: int | None = None,
                   progress: bool = True) -> list[tuple[str, list[str]]]:
    """``(module name, sentences)`` for each standard-library module with docstring prose."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if not _SKIP_PARTS & set(p.relative_to(root).parts))
    modules = []
    for path in tqdm(files, desc="reading stdlib docstrings", unit=" modules", disable=not progress):
        try:
            source = path.read_text(encoding="utf-8")
            sentences = [s for p in _docstring_paragraphs(source) for s in split_into_sentences(" ".join(p.split()))]
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        if len(sentences) >= 2:
            name = ".".join(path.relative_to(root).with_suffix("").parts)
            modules.append((name.removesuffix(".__init__"), sentences))
            if max_documents and len(modules) >= max_documents:
                break
    return modules


def stdlib_documents(max_documents: int | None = None, progress: bool = True) -> list[list[str]]:
    """Documents (lists of sentences) from the docstrings of the standard library."""
    return [sentences for _, sentences in stdlib_modules(max_documents, progress)]


def package_classification(modules: list[tuple[str, list[str]]], n_labels: int = 4,
                           dev_every: int = 5) -> tuple[list[dict], list[dict], list[str]]:
    """A built-in labelled task: which top-level package does a docstring sentence come from?

    The ``n_labels`` packages with the most sentences are the labels; every
    ``dev_every``-th sentence of a package goes to dev, the rest to train.
    Returns ``(train, dev, labels)``; rows are ``{"text": ..., "label": ...}``.
    """
    by_package: dict[str, list[tuple[str, list[str]]]] = {}
    for name, sentences in modules:
        if "." in name:
            by_package.setdefault(name.split(".")[0], []).append((name, sentences))
    sizes = {p: sum(len(s) for _, s in mods) for p, mods in by_package.items()}
    labels = sorted(sorted(sizes, key=lambda p: (-sizes[p], p))[:n_labels])
    train, dev = [], []
    for label in labels:
        sentences = [s for _, module_sentences in by_package[label] for s in module_sentences]
        for index, sentence in enumerate(sentences):
            row = {"text": sentence, "label": label}
            (dev if index % dev_every == dev_every - 1 else train).append(row)
    return train, dev, labels


def write_corpus(documents: list[list[str]], path: str | Path) -> Path:
    """Write documents in BERT's layout: a sentence per line, a blank line between documents."""
    with atomic_write(path) as f:
        f.write("\n\n".join("\n".join(doc) for doc in documents) + "\n")
    return Path(path)
