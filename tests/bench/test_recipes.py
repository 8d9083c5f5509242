"""Experiment recipes are files (bench/recipes/*.env) the scripts read: the defaults of
bench/table5.sh are its recipe, a --recipe replaces them and flags replace the recipe's."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import ROOT, shared_path


def table5_command(tmp_path, *flags: str) -> str:
    """The command line table5.sh records for ``flags`` (it stops at its first bertkit call:
    BERTKIT is ``false``, so nothing runs)."""
    shared_path("corpus")
    out = tmp_path / "run"
    env = {**os.environ, "BERTKIT": "false", "PYTHON": "true"}
    done = subprocess.run(["bash", "bench/table5.sh", "bert", "--out", str(out), "--max-docs", "2", *flags],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0  # stopped at `false`, after recording the command
    return (out / "commands.txt").read_text()


def test_table5_defaults_are_its_recipe_and_flags_win(tmp_path):
    plain = table5_command(tmp_path)
    assert "--precision auto" in plain and "--epochs 3" in plain and "--recipe" not in plain
    recipe = ROOT / "bench" / "recipes" / "table5-fp32-seeds.env"
    seeds = table5_command(tmp_path, "--recipe", str(recipe), "--seed", "2")
    assert f"--recipe {recipe}" in seeds and "--precision fp32" in seeds and "--epochs 8" in seeds
    assert "--seed 2" in seeds
    overridden = table5_command(tmp_path, "--recipe", str(recipe), "--epochs", "4")
    assert "--epochs 4" in overridden.splitlines()[-1]


def test_a_missing_recipe_is_refused(tmp_path):
    done = subprocess.run(["bash", "bench/table5.sh", "bert", "--recipe", str(tmp_path / "no.env")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--recipe: no file" in done.stderr
    assert not pytest.importorskip("pathlib").Path(tmp_path / "no.env").exists()


@pytest.mark.parametrize("setting, named", [({"STAGES": "tabel"}, "STAGES: unknown stage 'tabel'"),
                                            ({"ROWS": "domian", "STAGES": "finetune"}, "ROWS: unknown row 'domian'")])
def test_dapt_refuses_a_misspelt_stage_or_row(tmp_path, setting, named):
    """2026-11-25 faults #383-384: STAGES=tabel ran nothing and exited 0; ROWS=domian said so
    and still exited 0. Nothing is written (BERTKIT and PYTHON would fail if called)."""
    env = {**os.environ, "BERTKIT": "false", "PYTHON": "false", **setting}
    done = subprocess.run(["bash", "bench/dapt.sh", str(tmp_path / "out")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and named in done.stderr
    assert not (tmp_path / "out").exists()
