"""Options declared once in a dataclass field: flags, ranges and config checks from one place."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from bertkit.errors import BertkitError, OptionError
from bertkit.options import (
    add_options,
    bounded,
    check_config,
    option,
    option_of,
    options_from_args,
    range_error,
    range_text,
)


@dataclasses.dataclass
class Toy:
    size: int = option(4, "how many", ge=1, flag="--toy-size")
    rate: float = option(0.5, "a share", ge=0, lt=1)
    mode: str = option("a", "which mode", choices=("a", "b"))
    fast: bool = option(False, "go fast")
    limit: int | None = option(None, "optional cap", gt=0)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="toy")
    add_options(p, Toy)
    return p


def test_range_text_and_error_words():
    assert range_text(ge=1) == ">= 1"
    assert range_text(gt=0) == "> 0"
    assert range_text(ge=0, lt=1) == "in [0, 1)"
    assert range_text(gt=0, le=2) == "in (0, 2]"
    assert range_error(0, ge=1) == "must be >= 1 (got 0)"
    assert range_error(1.0, ge=0, lt=1) == "must be in [0, 1) (got 1)"
    assert range_error(float("nan")) is not None
    assert range_error(3, ge=1) is None


def test_flags_come_from_the_fields_with_defaults_and_ranges_in_the_help():
    p = parser()
    args = p.parse_args([])
    assert options_from_args(Toy, args) == {"size": 4, "rate": 0.5, "mode": "a", "fast": False, "limit": None}
    args = p.parse_args(["--toy-size", "7", "--rate", "0", "--mode", "b", "--fast", "--limit", "3"])
    assert Toy(**options_from_args(Toy, args)) == Toy(7, 0.0, "b", True, 3)
    text = p.format_help()
    assert "--toy-size TOY_SIZE" in text and "how many; >= 1 (default: 4)" in text
    assert "a share; in [0, 1) (default: 0.5)" in text
    assert "--fast, --no-fast" in text


@pytest.mark.parametrize("argv, message", [
    (["--toy-size", "0"], "argument --toy-size: must be >= 1 (got 0)"),
    (["--toy-size", "-2"], "argument --toy-size: must be >= 1 (got -2)"),
    (["--rate", "1"], "argument --rate: must be in [0, 1) (got 1)"),
    (["--rate", "nan"], "argument --rate: must be in [0, 1) (got nan)"),
    (["--limit", "0"], "argument --limit: must be > 0 (got 0)"),
    (["--toy-size", "x"], "argument --toy-size: invalid int value: 'x'"),
])
def test_out_of_range_values_are_refused_while_parsing(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parser().parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_suppressed_defaults_leave_absent_flags_out():
    p = argparse.ArgumentParser()
    add_options(p, Toy, suppress_defaults=True, skip=("mode",))
    assert options_from_args(Toy, p.parse_args(["--rate", "0.2"])) == {"rate": 0.2}
    assert "--mode" not in p.format_help()


def test_check_config_applies_the_same_ranges_and_choices_to_filled_configs():
    check_config(Toy())
    with pytest.raises(BertkitError, match=r"run.yaml: size must be >= 1 \(got 0\)"):
        check_config(Toy(size=0), "run.yaml")
    with pytest.raises(BertkitError, match="mode must be one of a, b"):
        check_config(Toy(mode="c"))


def test_bounded_is_the_check_for_flags_no_dataclass_declares():
    assert bounded(int, ge=1)("3") == 3
    with pytest.raises(argparse.ArgumentTypeError, match=r"must be >= 1 \(got 0\)"):
        bounded(int, ge=1)("0")


@dataclasses.dataclass
class Grid:
    rates: tuple[float, ...] = option((0.5, 0.25), "rates", gt=0, le=1)
    names: tuple[str, ...] = option(("a",), "names")


def test_tuple_fields_take_comma_lists_checked_per_value():
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_options(parser, Grid)
    args = parser.parse_args(["--rates", "0.1, 1", "--names", "x,y"])
    assert options_from_args(Grid, args) == {"rates": (0.1, 1.0), "names": ("x", "y")}
    assert parser.parse_args([]).rates == (0.5, 0.25)
    for bad in ("0.1,0", "2", ","):
        with pytest.raises(argparse.ArgumentError):
            parser.parse_args(["--rates", bad])
    with pytest.raises(BertkitError, match="rates must be in"):
        check_config(Grid(rates=(0.5, 1.5)), "grid.yaml")
    check_config(Grid())


@dataclasses.dataclass
class Job:
    """A second job: takes Toy's ``size`` and ``rate`` declarations, adds its own."""

    size: int = option_of(Toy, "size")
    rate: float = option_of(Toy, "rate")
    source: str = option("", "where from", required=True, metavar="DIR")
    lowercase: bool = option(True, "lower-case", negative="--cased")
    length: int = option(128, "tokens", ge=3)
    notes: dict = dataclasses.field(default_factory=dict)  # no option(): not a flag


def job_parser(**kwargs) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="job", exit_on_error=False)
    add_options(p, Job, **kwargs)
    return p


def test_option_of_takes_the_whole_declaration_of_another_config():
    fields = {f.name: f for f in dataclasses.fields(Job)}
    toy = {f.name: f for f in dataclasses.fields(Toy)}
    for name in ("size", "rate"):
        assert fields[name].metadata == toy[name].metadata and fields[name].default == toy[name].default
    args = job_parser().parse_args(["--source", "d", "--toy-size", "3"])  # Toy's flag name too
    assert Job(**options_from_args(Job, args)) == Job(3, 0.5, "d", True, 128)
    with pytest.raises(argparse.ArgumentError, match=r"must be >= 1 \(got 0\)"):
        job_parser().parse_args(["--source", "d", "--toy-size", "0"])
    with pytest.raises(TypeError, match="not declared with option"):
        option_of(Job, "notes")


def test_required_negative_and_resolved_flags(capsys):
    p = job_parser(resolved={"length": "the model's, else 128"})
    text = p.format_help()
    assert "--notes" not in text  # a field without option() is no flag
    assert "where from" in text and "(default: )" not in text
    assert "tokens; >= 3 (default: the model's, else 128)" in text
    assert "--cased" in text and "the opposite of --lowercase" in text
    args = p.parse_args(["--source", "d"])
    assert args.length is None and args.lowercase is True  # the command resolves the length
    assert p.parse_args(["--source", "d", "--cased"]).lowercase is False
    assert p.parse_args(["--source", "d", "--lowercase"]).lowercase is True
    with pytest.raises(SystemExit):
        argparse_exit = argparse.ArgumentParser(prog="job")
        add_options(argparse_exit, Job)
        argparse_exit.parse_args([])
    assert "required: --source" in capsys.readouterr().err
    with pytest.raises(argparse.ArgumentError, match="not allowed with"):
        p.parse_args(["--source", "d", "--cased", "--lowercase"])


def test_check_config_by_flag_names_the_flag_and_is_a_value_error():
    with pytest.raises(OptionError, match=r"job: --toy-size must be >= 1 \(got 0\)"):
        check_config(Job(size=0), "job", by_flag=True)
    with pytest.raises(ValueError, match=r"job: length must be >= 3 \(got 2\)"):
        check_config(Job(length=2), "job")
    with pytest.raises(OptionError, match=r"--rate must be in \[0, 1\) \(got nan\)"):
        check_config(Job(rate=float("nan")), "job", by_flag=True)
