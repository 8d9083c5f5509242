"""Negative layer lists parse as values, not options."""

import pytest

from bertkit.cli.main import build_parser


def test_feature_layers_and_embed_layers_accept_negative_lists():
    parser = build_parser()
    args = parser.parse_args(["finetune", "ner", "--model", "m", "--data", "d", "--out", "o",
                              "--feature-based", "--feature-layers", "-1,-2,-3,-4", "--combine", "sum"])
    assert (args.feature_based, args.feature_layers, args.combine) == (True, "-1,-2,-3,-4", "sum")
    args = parser.parse_args(["embed", "m", "--input", "f", "--output", "o.npy", "--layers", "-1,-2"])
    assert args.layers == "-1,-2"


@pytest.mark.parametrize("command", [
    ["pretrain"], ["pretrain-data", "--input", "c.txt", "--vocab", "v.txt", "--output", "o"],
    ["tokenizer", "train", "--corpus", "c.txt", "--vocab-size", "9"],
    ["embed", "m", "--input", "i.txt", "--output", "o.npy"], ["fill-mask", "m", "a [MASK]"],
    ["finetune", "sst2", "--model", "m", "--data", "d", "--out", "o"],
    ["evaluate", "sst2", "--model", "m", "--data", "d"],
    ["predict", "sst2", "--model", "m", "--input", "i", "--output", "o"],
])
def test_one_progress_switch_everywhere_default_only_on_a_terminal(command):
    from bertkit.cli.main import build_parser
    from bertkit.runlog import bar_disabled

    parser = build_parser()
    default = vars(parser.parse_args(command)).get("progress")
    assert default is None and bar_disabled(default) is None  # tqdm: bars only on a TTY
    assert parser.parse_args([*command, "--no-progress"]).progress is False
    assert parser.parse_args([*command, "--progress"]).progress is True


def test_old_quiet_switch_still_works_but_is_hidden():
    from bertkit.cli.main import build_parser

    parser = build_parser()
    args = parser.parse_args(["pretrain-data", "--input", "c", "--vocab", "v", "--output", "o", "--quiet"])
    assert args.progress is False
