"""Negative layer lists parse as values, not options."""

from bertkit.cli.main import build_parser


def test_feature_layers_and_embed_layers_accept_negative_lists():
    parser = build_parser()
    args = parser.parse_args(["finetune", "ner", "--model", "m", "--data", "d", "--out", "o",
                              "--feature-based", "--feature-layers", "-1,-2,-3,-4", "--combine", "sum"])
    assert (args.feature_based, args.feature_layers, args.combine) == (True, "-1,-2,-3,-4", "sum")
    args = parser.parse_args(["embed", "m", "--input", "f", "--output", "o.npy", "--layers", "-1,-2"])
    assert args.layers == "-1,-2"
