"""The calibration file of ``serve --runtime openvino --precision int8`` is read with a bound
(the faults report: ``--calibration /dev/zero`` read until the kernel killed the server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bertkit.errors import BertkitError
from bertkit.inference import openvino


def test_a_calibration_file_is_read_with_a_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(openvino, "CALIBRATION_MAX_BYTES", 1000)
    (tmp_path / "big.txt").write_text("a text\n" * 200)
    with pytest.raises(BertkitError, match="larger than"):
        openvino.read_calibration(tmp_path / "big.txt")
    if Path("/dev/zero").exists():
        with pytest.raises(BertkitError, match="larger than"):
            openvino.read_calibration("/dev/zero")
    (tmp_path / "small.txt").write_text("a text\nanother\n")
    assert openvino.read_calibration(tmp_path / "small.txt") == ["a text", "another"]
