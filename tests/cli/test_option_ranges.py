"""Every command refuses an out-of-range option while parsing, naming it and the range;
every option has help text, and --help shows the defaults."""

from __future__ import annotations

import argparse

import pytest

from bertkit.cli.main import build_parser, main

FINETUNE = ["finetune", "sst2", "--model", "m", "--data", "d", "--out", "o"]
DISTILL = ["distill", "sst2", "--teacher", "t", "--student-layers", "1", "--data", "d", "--out", "o"]
PRETRAIN = ["pretrain", "--data", "d", "--out", "o"]
PRETRAIN_DATA = ["pretrain-data", "--input", "f", "--vocab", "v", "--output", "o"]

CASES = [
    (FINETUNE, "--batch-size", "0", ">= 1"),
    (FINETUNE, "--batch-size", "-4", ">= 1"),
    (FINETUNE, "--epochs", "0", ">= 1"),
    (FINETUNE, "--warmup", "2", "in [0, 1)"),
    (FINETUNE, "--lr", "-1e-5", ">= 0"),
    (FINETUNE, "--eval-batch-size", "0", ">= 1"),
    (FINETUNE, "--dropout", "1", "in [0, 1)"),
    (FINETUNE, "--seed", "-1", ">= 0"),
    (FINETUNE, "--max-seq-length", "2", ">= 3"),
    (FINETUNE, "--threads", "0", ">= 1"),
    (FINETUNE, "--log-every", "0", ">= 1"),
    (["evaluate", "sst2", "--model", "m", "--data", "d"], "--batch-size", "0", ">= 1"),
    (["evaluate", "sst2", "--model", "m", "--data", "d"], "--max-seq-length", "0", ">= 3"),
    (["predict", "sst2", "--model", "m", "--input", "i", "--output", "o"], "--batch-size", "0", ">= 1"),
    (DISTILL, "--hidden-weight", "-1", ">= 0"),
    (DISTILL, "--attention-weight", "-0.5", ">= 0"),
    (DISTILL, "--alpha", "1.5", "in [0, 1]"),
    (DISTILL, "--temperature", "0", "> 0"),
    (DISTILL, "--stride", "0", ">= 1"),
    (["serve", "m"], "--stride", "0", ">= 1"),
    (["embed", "m", "--input", "i", "--output", "o"], "--stride", "-2", ">= 1"),
    (PRETRAIN, "--steps", "0", ">= 1"),
    (PRETRAIN, "--batch-size", "0", ">= 1"),
    (PRETRAIN, "--grad-accum", "0", ">= 1"),
    (PRETRAIN, "--lr", "-1", ">= 0"),
    (PRETRAIN, "--warmup-fraction", "2", "in [0, 1)"),
    (PRETRAIN, "--warmup-steps", "-1", ">= 0"),
    (PRETRAIN, "--keep", "0", ">= 1"),
    (PRETRAIN, "--dropout", "1.5", "in [0, 1)"),
    (PRETRAIN_DATA, "--workers", "0", ">= 1"),
    (PRETRAIN_DATA, "--max-seq-length", "4", ">= 5"),
    (PRETRAIN_DATA, "--masked-lm-prob", "1.5", "in [0, 1]"),
    (PRETRAIN_DATA, "--dupe-factor", "0", ">= 1"),
    (PRETRAIN_DATA, "--shard-size", "0", ">= 1"),
    (["fill-mask", "m", "x [MASK]"], "--top-k", "0", ">= 1"),
    (["fill-mask", "m", "x [MASK]"], "--batch-size", "0", ">= 1"),
    (["embed", "m", "--input", "f", "--output", "o.npy"], "--batch-size", "-1", ">= 1"),
    (["embed", "m", "--input", "f", "--output", "o.npy"], "--max-length", "1", ">= 2"),
    (["tokenize", "x", "--vocab", "v"], "--max-length", "1", ">= 2"),
    (["tokenizer", "train", "--corpus", "f"], "--vocab-size", "0", ">= 1"),
    (["demo"], "--steps", "0", ">= 1"),
    (["demo"], "--finetune-epochs", "0", ">= 1"),
]


@pytest.mark.parametrize("command, flag, value, allowed", CASES,
                         ids=[f"{c[0][0]} {c[1]} {c[2]}" for c in CASES])
def test_bad_option_values_stop_at_parsing_naming_the_option_and_range(command, flag, value, allowed,
                                                                       capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*command, flag, value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"error: argument {flag}: must be {allowed} (got {float(value):g})" in err


def test_finetune_refuses_a_max_seq_length_beyond_the_models_positions(tmp_path, capsys):
    from tests.tasks.finetune_helpers import make_model, write_sst2

    model = make_model(tmp_path / "model")  # max_position_embeddings 64
    data = write_sst2(tmp_path / "data", train=8, dev=4)
    code = main(["finetune", "sst2", "--model", str(model), "--data", str(data),
                 "--out", str(tmp_path / "out"), "--max-seq-length", "65"])
    assert code == 1
    err = capsys.readouterr().err
    assert "--max-seq-length: must be <= 64" in err and "(got 65)" in err
    assert not (tmp_path / "out").exists()


def _commands(parser: argparse.ArgumentParser, path=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))
    if path:
        yield " ".join(path), parser


def test_every_option_has_help_and_the_help_shows_defaults():
    for name, parser in _commands(build_parser()):
        text = parser.format_help()
        for action in parser._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"bertkit {name} {action.option_strings[0]} has no help text"
            default = action.default
            shows = action.nargs != 0 and default not in (None, False, argparse.SUPPRESS, [])
            if shows:
                assert "default" in action.help or "default" in text, (name, action.option_strings)
    help_text = build_parser()._subparsers._group_actions[0].choices["finetune"].format_help()
    assert "training batch size; >= 1 (default: 32)" in help_text
    fill = build_parser()._subparsers._group_actions[0].choices["fill-mask"].format_help()
    assert "(default: 5)" in fill
