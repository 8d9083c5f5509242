"""``bertkit export-onnx``: a bad --out is refused before the export, named as given, and no
temporary file is left."""

from __future__ import annotations

import pytest

from bertkit.cli.main import main
from tests.task_models import make_task_model

pytest.importorskip("onnx")


def test_out_an_existing_directory_is_refused_by_its_name(tmp_path, capsys):
    model = make_task_model(tmp_path, "sst2")
    target = tmp_path / "existing_dir"
    target.mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["export-onnx", str(model), "--out", str(target)]) == 1
    err = capsys.readouterr().err
    assert f"{target}: the --out ONNX file is a directory" in err and ".tmp" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
