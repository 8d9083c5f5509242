"""Shared fixtures: the real data beside the project (skipped when absent) and tiny vocabularies."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Fuzz tests (hypothesis): small and reproducible in CI, longer on demand.
#   ci (default): 60 examples per test, derandomized (the same examples every run), no
#                 example database written;
#   long:         HYPOTHESIS_PROFILE=long, 1000 examples per test, random, database kept
#                 in .hypothesis/ so a failure found once is replayed first next time.
_FUZZ = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                   HealthCheck.function_scoped_fixture])
settings.register_profile("ci", max_examples=60, derandomize=True, database=None, **_FUZZ)
settings.register_profile("long", max_examples=1000, **_FUZZ)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

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


@pytest.fixture(autouse=True, scope="session")
def _compiled_package_cache(tmp_path_factory):
    """Compiled static-INT8 packages go to the session's own folder, not the user's cache."""
    os.environ["BERTKIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("bertkit-cache"))


# The CPU classes the precision-sensitive tests run as, whatever this machine is
# (bertkit.cpu's BERTKIT_CPU_CLASS): one without native bf16, where `auto` is fp32, and one
# with it, where `auto` is bf16 for a model wide enough.
CPU_SETTINGS = ("avx2", "amx")


@pytest.fixture(params=CPU_SETTINGS)
def cpu_class(request, monkeypatch) -> str:
    """Run the test as on each class of :data:`CPU_SETTINGS` (the override of bertkit.cpu)."""
    from bertkit.cpu import CPU_CLASS_ENV

    monkeypatch.setenv(CPU_CLASS_ENV, request.param)
    return request.param


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
