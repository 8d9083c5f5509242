"""Shared fixtures: the real data beside the project (skipped when absent) and tiny vocabularies."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


def shared_path(*parts: str) -> Path:
    """Path under ../shared/data, or skip the calling test when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real data not available: {path}")
    return path


@pytest.fixture
def shared():
    return shared_path


TINY_VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "the", "man", "went", "to", "store", "a", "un", "##want", "##ed", "want", ",", ".", "!",
    "runn", "##ing", "run", "he", "she", "is", "was", "good", "bad", "day", "night", "cafe",
    "中", "国", "?", "'", "s", "##s", "hello", "world", "##ly", "quick",
]


@pytest.fixture
def tiny_vocab_file(tmp_path) -> Path:
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(TINY_VOCAB) + "\n", encoding="utf-8")
    return path
