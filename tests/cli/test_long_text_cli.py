"""``--stride`` / ``--pool-windows`` without windows are refused, not ignored (issue 25 #93)."""

from __future__ import annotations

import pytest

from bertkit.cli.main import main
from tests.task_models import make_task_model


@pytest.mark.parametrize("flags, ok", [(["--stride", "10"], False), (["--pool-windows", "max"], False),
                                       (["--long-text", "truncate", "--stride", "10"], False),
                                       (["--long-text", "window", "--stride", "10"], True)])
def test_window_flags_need_windows(tmp_path, capsys, flags, ok):
    model = make_task_model(tmp_path, "sst2")
    (tmp_path / "p.jsonl").write_text('{"sentence": "the man went to the store"}\n')
    code = main(["predict", "sst2", "--model", str(model), "--input", str(tmp_path / "p.jsonl"),
                 "--output", str(tmp_path / "o.jsonl"), "--no-progress", *flags])
    err = capsys.readouterr().err
    if ok:
        assert code == 0, err
    else:
        assert code == 1 and "only apply with --long-text window" in err and flags[-2] in err


def test_embed_refuses_a_stride_without_windows(tmp_path, capsys):
    model = make_task_model(tmp_path, "sst2")
    (tmp_path / "t.txt").write_text("the man went\n")
    code = main(["embed", str(model), "--input", str(tmp_path / "t.txt"), "--output",
                 str(tmp_path / "e.npy"), "--stride", "4"])
    assert code == 1 and "--stride 4 only apply" in capsys.readouterr().err
    assert not (tmp_path / "e.npy").exists()
