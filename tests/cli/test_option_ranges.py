"""Every command refuses an out-of-range option while parsing, naming it and the range;
every option has help text, and --help shows the defaults."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from bertkit.cli.main import build_parser, main

FINETUNE = ["finetune", "sst2", "--model", "m", "--data", "d", "--out", "o"]
DISTILL = ["distill", "sst2", "--teacher", "t", "--student-layers", "1", "--data", "d", "--out", "o"]
PRETRAIN = ["pretrain", "--data", "d", "--out", "o"]
PRETRAIN_DATA = ["pretrain-data", "--input", "f", "--vocab", "v", "--output", "o"]
PRUNE = ["prune", "m", "--task", "sst2", "--data", "d", "--heads", "1", "--out", "o"]
DOWNSTREAM = ["downstream", "m"]

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
    (PRETRAIN_DATA, "--masked-lm-prob", "1.5", "in (0, 1)"),  # MaskingConfig's: 0 and 1 never passed
    (PRETRAIN_DATA, "--dupe-factor", "0", ">= 1"),
    (PRETRAIN_DATA, "--shard-size", "0", ">= 1"),
    (PRETRAIN_DATA, "--max-predictions-per-seq", "0", ">= 1"),
    (PRETRAIN_DATA, "--short-seq-prob", "1.5", "in [0, 1]"),
    (PRETRAIN_DATA, "--seed", "-1", ">= 0"),
    (PRETRAIN_DATA, "--chunk-sentences", "0", ">= 1"),
    (PRUNE, "--importance-examples", "0", ">= 1"),
    (PRUNE, "--curve", "1", "in [0, 1)"),
    (PRUNE, "--finetune-epochs", "-1", ">= 0"),
    (PRUNE, "--lr", "-1e-5", ">= 0"),
    (PRUNE, "--batch-size", "0", ">= 1"),
    (PRUNE, "--max-train-examples", "0", ">= 1"),
    (PRUNE, "--seed", "-1", ">= 0"),
    (DISTILL, "--student-layers", "0", ">= 1"),
    (DOWNSTREAM, "--batch-size", "0", ">= 1"),
    (DOWNSTREAM, "--max-train-examples", "0", ">= 1"),
    # one declaration of the fine-tuning length (FinetuneConfig.max_seq_length) for every job
    *((cmd, "--max-seq-length", "2", ">= 3") for cmd in (
        FINETUNE, DISTILL, PRUNE, DOWNSTREAM, ["predict", "sst2", "--model", "m", "--input", "i",
                                               "--output", "o"])),
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
    from tests.finetune_helpers import make_model, write_sst2

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


def _job_configs():
    """command -> (its CLI module, the config dataclasses whose fields are its flags)."""
    from bertkit.finetuning.config import DistillConfig, FinetuneConfig, PruneConfig
    from bertkit.finetuning.downstream import DownstreamConfig
    from bertkit.pretraining.data_config import CreationSettings

    return {"prune": ("prune", [PruneConfig]),
            "distill": ("distill", [DistillConfig, FinetuneConfig]),
            "downstream": ("downstream", [DownstreamConfig]),
            "pretrain-data": ("pretrain_data", [CreationSettings])}


def _hand_written_flags(module: str) -> set[str]:
    """Every ``--flag`` and ``dest=`` named in an ``add_argument`` call of ``bertkit/cli/<module>.py``."""
    import ast
    import importlib

    source = importlib.import_module(f"bertkit.cli.{module}").__file__
    names = set()
    for node in ast.walk(ast.parse(open(source, encoding="utf-8").read())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            names |= {a.value for a in node.args if isinstance(a, ast.Constant)}
            names |= {k.value.value for k in node.keywords if k.arg == "dest"}
    return names


@pytest.mark.parametrize("command", ["prune", "distill", "downstream", "pretrain-data"])
def test_every_flag_of_a_job_comes_from_its_config_declaration(command):
    """Each option() field of the job's configs is a flag of the command, typed, helped and
    defaulted from that declaration; the command's module writes no add_argument for one."""
    from bertkit.options import flag_name, is_option

    module, configs = _job_configs()[command]
    parser = build_parser()._subparsers._group_actions[0].choices[command]
    actions = {flag: a for a in parser._actions for flag in a.option_strings}
    hand = _hand_written_flags(module)
    for cls in configs:
        for field in dataclasses.fields(cls):
            if not is_option(field):
                continue
            action = actions.get(flag_name(field))
            assert action is not None, f"{command}: {cls.__name__}.{field.name} is no flag"
            assert action.dest == field.name
            assert action.help.startswith(field.metadata["help"].replace("%", "%%")), field.name
            assert action.required == bool(field.metadata["required"])
            assert action.default in (field.default, None)  # None: required, or resolved later
            negative = field.metadata.get("negative")
            assert negative is None or actions[negative].dest == field.name
            names = {flag_name(field), field.name, negative}
            assert not names & hand, f"{command}: {sorted(names & hand)} declared again by hand"


def test_jobs_take_the_fine_tuning_declarations_and_ranges_name_the_option(tmp_path):
    """DownstreamConfig and PruneConfig hold FinetuneConfig's declarations, not copies; a filled
    config out of range is refused naming the option."""
    from bertkit.errors import BertkitError
    from bertkit.finetuning.config import DistillConfig, FinetuneConfig, PruneConfig
    from bertkit.finetuning.downstream import DownstreamConfig
    from bertkit.finetuning.prune import prune
    from bertkit.pretraining.data_config import CreationSettings, MaskingConfig

    finetune = {f.name: f for f in dataclasses.fields(FinetuneConfig)}
    shared = {DownstreamConfig: {"epochs": "epochs", "batch_size": "batch", "device": "device",
                                 "max_seq_length": "max_seq_length", "precision": "precision",
                                 "max_train_examples": "max_train_examples"},
              PruneConfig: {n: n for n in ("max_seq_length", "batch", "eval_batch", "lr", "seed",
                                           "max_train_examples", "device")},
              CreationSettings: {}}
    for cls, names in shared.items():
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for name, source in names.items():
            assert fields[name].metadata == finetune[source].metadata, (cls.__name__, name)
            assert fields[name].default == finetune[source].default
    masking = {f.name: f.metadata for f in dataclasses.fields(MaskingConfig)}
    for field in dataclasses.fields(CreationSettings):
        if field.name in masking:
            assert field.metadata == masking[field.name]
    with pytest.raises(BertkitError, match=r"downstream: max_seq_length must be >= 3 \(got 2\)"):
        DownstreamConfig(max_seq_length=2).validate()
    with pytest.raises(BertkitError, match=r"prune: --curve must be in \[0, 1\) \(got 1.5\)"):
        prune(None, tmp_path / "model", tmp_path / "data", tmp_path / "out",
              PruneConfig(curve=(0.5, 1.5)))
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match=r"pretrain-data: max_seq_length must be >= 5 \(got 4\)"):
        CreationSettings(max_seq_length=4)
    with pytest.raises(ValueError, match=r"masking: masked_lm_prob must be in \(0, 1\) \(got 0\)"):
        MaskingConfig(masked_lm_prob=0.0)
    with pytest.raises(BertkitError, match=r"distill: --student-layers must be >= 1 \(got 0\)"):
        DistillConfig("t", student_layers=0).check()
