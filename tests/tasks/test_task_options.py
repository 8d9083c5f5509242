"""Task options: one declaration (TaskOptions) gives the flags and the typed ``-o KEY=VALUE``."""

from __future__ import annotations

import re

import pytest

from bertkit.cli.main import build_parser
from bertkit.errors import BertkitError
from bertkit.tasks.task_options import parse_task_option, task_options_from

BASE = ["finetune", "squad2", "--model", "m", "--data", "d", "--out", "o"]


def test_flags_and_dash_o_give_the_same_typed_values():
    parser = build_parser()
    by_flag = parser.parse_args([*BASE, "--doc-stride", "64", "--labels", "a,b",
                                 "--null-score-diff-threshold", "-1.5", "--bio"])
    by_o = parser.parse_args([*BASE, "-o", "doc_stride=64", "-o", "labels=a,b",
                              "-o", "null-score-diff-threshold=-1.5", "-o", "bio=true"])
    expected = {"doc_stride": 64, "labels": ["a", "b"], "null_score_diff_threshold": -1.5,
                "bio": True}
    assert task_options_from(by_flag) == expected == task_options_from(by_o)


def test_saved_options_then_flags_then_dash_o():
    args = build_parser().parse_args([*BASE, "--doc-stride", "64", "-o", "doc_stride=32"])
    assert task_options_from(args, {"doc_stride": 128, "n_best_size": 5}) == {
        "doc_stride": 32, "n_best_size": 5}


def test_json_list_still_accepted_for_a_list_option():
    assert parse_task_option('labels=["O","B-PER"]') == ("labels", ("O", "B-PER"))


@pytest.mark.parametrize("item, message", [
    ("colour=red", "unknown task option 'colour'; known: text_column"),
    ("doc_stride=0", "task option doc_stride: must be >= 1 (got 0)"),
    ("doc_stride=many", "task option doc_stride: invalid literal"),
    ("bio=maybe", "task option bio: expected true or false"),
    ("long_sentences=drop", "task option long_sentences: must be one of split, truncate"),
    ("doc_stride", "expected KEY=VALUE"),
])
def test_bad_dash_o_is_named(item, message):
    with pytest.raises(BertkitError, match=re.escape(message)):
        parse_task_option(item)


def test_flag_ranges_are_checked_while_parsing(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([*BASE, "--max-query-length", "0"])
    assert "argument --max-query-length: must be >= 1 (got 0)" in capsys.readouterr().err
