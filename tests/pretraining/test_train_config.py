import json

import pytest

from bertkit.cli.main import build_parser
from bertkit.cli.pretrain import config_from_args
from bertkit.errors import BertkitError
from bertkit.pretraining.train_config import PretrainConfig, load_config_file


def _args(*argv):
    return config_from_args(build_parser().parse_args(["pretrain", *argv]))


def test_yaml_file_then_flags(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("data: d\nout: o\nbatch-size: 16\nlr: 2.0e-4\nobjective: mlm\n")
    config = _args("--config", str(path), "--lr", "5e-4", "--no-progress")
    assert (config.data, config.batch_size, config.lr, config.objective, config.progress) == (
        "d", 16, 5e-4, "mlm", False)


def test_toml_file_with_table(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('[pretrain]\ndata = "d"\nout = "o"\nsteps = 7\ncompile = true\n')
    config = _args("--config", str(path))
    assert config.steps == 7 and config.compile is True


@pytest.mark.parametrize("name,text", [("run.yaml", "data: d\nout: o\nlearning_rate: 1\n"),
                                        ("run.toml", 'data = "d"\nlearning_rate = 1\n')])
def test_unknown_field_is_named(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(BertkitError, match=rf"{name}: unknown field 'learning_rate'"):
        _args("--config", str(path))


def test_wrong_type_is_named(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("data: d\nout: o\nsteps: ten\n")
    with pytest.raises(BertkitError, match="field 'steps' must be an integer, got 'ten'"):
        _args("--config", str(path))
    assert PretrainConfig.from_dict({"lr": 1, "dropout": None}).lr == 1.0


def test_json_config_is_a_model_config(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"hidden_size": 64}))
    assert _args("--config", str(path), "--data", "d", "--out", "o").model_config == str(path)


def test_bad_values_are_clear():
    with pytest.raises(BertkitError, match="missing setting 'data'"):
        _args("--out", "o")
    with pytest.raises(BertkitError, match="steps must be >= 1"):
        PretrainConfig(data="d", out="o", steps=0).validate()
    with pytest.raises(BertkitError, match="warmup_steps"):
        PretrainConfig(data="d", out="o", steps=5, warmup_steps=9).validate()
    with pytest.raises(SystemExit):
        build_parser().parse_args(["pretrain", "--objective", "xlnet"])


def test_unreadable_file(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("data: [unclosed\n")
    with pytest.raises(BertkitError, match="not a readable configuration"):
        load_config_file(path)
    with pytest.raises(BertkitError, match=".yaml, .yml or .toml"):
        (tmp_path / "run.ini").write_text("x")
        load_config_file(tmp_path / "run.ini")
