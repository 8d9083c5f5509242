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


def _features() -> list[dict]:
    """Task features: single rows, and one multiple-choice feature of two rows padded to 6."""
    import numpy as np

    single = [{"input_ids": np.array([2, 5 + k, 6 + k, 3]), "token_type_ids": np.zeros(4, dtype=int)} for k in range(20)]
    choice = {"input_ids": np.array([[2, 7, 8, 3, 9, 3], [2, 7, 3, 9, 0, 0]]),
              "token_type_ids": np.array([[0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 0, 0]]),
              "attention_mask": np.array([[1] * 6, [1, 1, 1, 1, 0, 0]])}
    return single + [choice, single[0]]  # a duplicate too


def test_finetune_saves_distinct_training_rows_that_calibration_saved_reads(tmp_path):
    """``bertkit finetune`` writes ``calibration.jsonl``; ``--calibration saved`` reads it back:
    each row the tokens of one encoder input (a multiple-choice feature's rows each, without
    their padding), no duplicate, at most ``count``."""
    written = calibration.save_calibration(tmp_path, _features())
    rows = calibration.saved_calibration(tmp_path)
    assert written == len(rows) == 22  # 20 single rows + 2 choices; the duplicate once
    assert {"input_ids": [2, 7, 3, 9], "token_type_ids": [0, 0, 0, 1]} in rows  # padding cut
    assert len({tuple(r["input_ids"]) for r in rows}) == 22
    assert calibration.save_calibration(tmp_path, _features(), count=5) == 5
    assert len(calibration.saved_calibration(tmp_path)) == 5
    assert calibration.saved_calibration(tmp_path / "absent") is None


def test_calibration_saved_names_the_missing_short_or_broken_file(tmp_path):
    from bertkit.errors import DataFormatError

    with pytest.raises(BertkitError, match="--calibration is for --precision int8"):
        calibration.calibration_option("saved", "fp32", "predict", tmp_path)
    with pytest.raises(BertkitError, match=r"predict: --calibration saved: .* has no calibration.jsonl"):
        calibration.calibration_option("saved", "int8", "predict", tmp_path)
    calibration.save_calibration(tmp_path, _features(), count=5)
    with pytest.raises(DataFormatError, match="calibration.jsonl: 5 calibration input"):
        calibration.calibration_option("saved", "int8", "predict", tmp_path)
    calibration.save_calibration(tmp_path, _features())
    assert len(calibration.calibration_option("saved", "int8", "predict", tmp_path)) == 22
    path = tmp_path / calibration.CALIBRATION_FILE
    path.write_text(path.read_text() + '{"input_ids": [2, 3], "token_type_ids": [0]}\n')
    with pytest.raises(DataFormatError, match=r"calibration.jsonl:23: one JSON object per line"):
        calibration.saved_calibration(tmp_path)


def test_saved_rows_must_fit_the_model_they_calibrate(tmp_path):
    rows = [{"input_ids": [2, 5 + k, 3], "token_type_ids": [0, 0, 0]} for k in range(20)]
    assert calibration.encoder_rows(rows, None, 8, 100) == rows
    with pytest.raises(BertkitError, match="line 20 does not fit this model"):
        calibration.encoder_rows(rows, None, 8, 24)  # id 24 of a 24-token vocabulary
    with pytest.raises(BertkitError, match="line 1 does not fit"):
        calibration.encoder_rows(rows, None, 2, 100)
