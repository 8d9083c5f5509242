"""Property-based fuzzing of ``bertkit serve`` from its own OpenAPI description: schemathesis
(``pip install schemathesis``; skipped without it) with every check, positive and negative
data, against a real server on a tiny classifier and a tiny masked-LM encoder: no failure.
A seed and a small number of examples keep it repeatable and within about a minute."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("schemathesis")
pytest.importorskip("uvicorn")

from bertkit.serve import ServeConfig, create_app  # noqa: E402

from ..task_models import make_task_model  # noqa: E402
from .server import running  # noqa: E402

CLI = Path(sys.executable).with_name("schemathesis")


@pytest.mark.parametrize("kind", ["classify", "mlm"])
def test_schemathesis_finds_nothing_with_all_checks(tmp_path, kind):
    # a 512-position model: the fuzzer's texts stay under its token limit (the one rule the
    # description cannot state: a longer text with "truncate": false is a 413)
    directory = make_task_model(tmp_path, kind, max_positions=512)
    with running(create_app(ServeConfig(model=str(directory)))) as url:
        run = subprocess.run(
            [str(CLI), "run", f"{url}/openapi.json", "--checks", "all", "--max-examples", "8",
             "--seed", "36", "--suppress-health-check", "too_slow", "--no-color"],
            capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "No issues found" in run.stdout
