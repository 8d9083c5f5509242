"""The calibration file of static INT8 (`serve --runtime openvino --precision int8`) is read with a bound
(the faults report: ``--calibration /dev/zero`` read until the kernel killed the server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bertkit.errors import BertkitError
from bertkit.inference import calibration, openvino


def test_a_calibration_file_is_read_with_a_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(calibration, "CALIBRATION_MAX_BYTES", 1000)
    (tmp_path / "big.txt").write_text("a text\n" * 200)
    with pytest.raises(BertkitError, match="larger than"):
        calibration.read_calibration(tmp_path / "big.txt")
    if Path("/dev/zero").exists():
        with pytest.raises(BertkitError, match="larger than"):
            calibration.read_calibration("/dev/zero")
    (tmp_path / "small.txt").write_text("a text\nanother\n")
    assert calibration.read_calibration(tmp_path / "small.txt") == ["a text", "another"]


def test_a_calibration_of_too_few_distinct_or_the_wrong_kind_of_inputs_is_refused(tmp_path):
    """2026-11-25 faults #211, #213, #215, #221: one line, 30 identical lines and sentence
    pairs for a single-text model were all accepted (two of them flipped SST-2's answers), and
    INT8 on a masked-LM checkpoint said int8 while every route ran on PyTorch fp32."""
    from bertkit.errors import DataFormatError
    from tests.task_models import make_task_model

    (tmp_path / "one.txt").write_text("one line\n")
    with pytest.raises(DataFormatError, match=r"one.txt: 1 distinct calibration input\(s\)"):
        calibration.read_calibration(tmp_path / "one.txt", calibration.MIN_CALIBRATION_INPUTS)
    (tmp_path / "same.txt").write_text("good\x00film\n" * 30)
    with pytest.raises(DataFormatError, match=r"same.txt: 1 distinct"):
        calibration.read_calibration(tmp_path / "same.txt", calibration.MIN_CALIBRATION_INPUTS)
    (tmp_path / "pairs.txt").write_text("".join(f"a man plays {k}\ta man is playing\n" for k in range(20)))
    pairs = calibration.read_calibration(tmp_path / "pairs.txt", calibration.MIN_CALIBRATION_INPUTS)
    sst2 = make_task_model(tmp_path, "sst2")
    with pytest.raises(DataFormatError, match=r"pairs.txt: holds tab-separated pairs, but .* sst2, which takes single"):
        openvino.check_calibration_fits(sst2, pairs, tmp_path / "pairs.txt")
    openvino.check_calibration_fits(sst2, [f"text {k}" for k in range(20)], "texts.txt")
    mlm = make_task_model(tmp_path, "mlm")
    with pytest.raises(BertkitError, match="quantises a task head, and this model has none"):
        openvino.check_calibration_fits(mlm, [f"text {k}" for k in range(20)], "texts.txt")
