"""The process-group helpers outside torchrun, and what rank 0's error becomes on the others
(under torchrun: tests/finetuning/test_finetune_distributed.py)."""

import errno

import pytest

from bertkit.errors import BertkitError
from bertkit.training import distributed as dist


def test_on_main_in_one_process_runs_and_raises_as_called():
    assert dist.on_main(lambda: 42) == 42
    with pytest.raises(BertkitError, match="refused"):
        dist.on_main(lambda: (_ for _ in ()).throw(BertkitError("refused")))


class _NeedsTwo(Exception):
    def __init__(self, a, b):  # pickles, but cannot be rebuilt from its args
        super().__init__(f"{a} and {b}")


def test_errors_travel_as_themselves_or_as_their_message():
    os_error = dist._portable(OSError(errno.EACCES, "Permission denied", "/x/out"))
    assert type(os_error) is PermissionError and (os_error.errno, os_error.filename) == (errno.EACCES, "/x/out")
    same = dist._portable(BertkitError("out already holds a fine-tuned model"))
    assert type(same) is BertkitError and str(same) == "out already holds a fine-tuned model"
    odd = dist._portable(_NeedsTwo(1, 2))
    assert type(odd) is BertkitError and str(odd) == "1 and 2"


def test_the_collective_timeout_is_pytorchs_unless_bounded_by_the_environment(monkeypatch):
    from datetime import timedelta

    from bertkit.training.distributed import DIST_TIMEOUT_ENV, dist_timeout

    monkeypatch.delenv(DIST_TIMEOUT_ENV, raising=False)
    assert dist_timeout() is None
    monkeypatch.setenv(DIST_TIMEOUT_ENV, "90")
    assert dist_timeout() == timedelta(seconds=90)
    for bad in ("0", "-5", "soon", "nan"):
        monkeypatch.setenv(DIST_TIMEOUT_ENV, bad)
        with pytest.raises(BertkitError, match=DIST_TIMEOUT_ENV):
            dist_timeout()


def test_an_endless_or_instant_collective_timeout_is_refused_by_name(monkeypatch):
    """2026-11-25 faults #367, #368, #370: 'inf' and '1e999' were an internal OverflowError,
    '0.001' gloo's 'client socket has timed out after 1ms', neither naming the variable."""
    from datetime import timedelta

    from bertkit.training.distributed import DIST_TIMEOUT_ENV, dist_timeout

    for bad, why in (("inf", "at most"), ("1e999", "at most"), ("1e13", "at most"), ("0.001", "at least 1 s")):
        monkeypatch.setenv(DIST_TIMEOUT_ENV, bad)
        with pytest.raises(BertkitError, match=f"{DIST_TIMEOUT_ENV}='{bad}': {why}"):
            dist_timeout()
    monkeypatch.setenv(DIST_TIMEOUT_ENV, "1e12")  # the report's largest working value
    assert dist_timeout() == timedelta(seconds=1e12)
    monkeypatch.setenv(DIST_TIMEOUT_ENV, " 30 ")
    assert dist_timeout() == timedelta(seconds=30)
