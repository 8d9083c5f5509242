import subprocess
import sys
import textwrap
import threading

import pytest

from bertkit.training.prefetch import prefetch


def test_same_items_in_order():
    assert list(prefetch(iter(range(50)), depth=3)) == list(range(50))


def test_producer_error_reaches_the_consumer_in_place():
    def items():
        yield 1
        yield 2
        raise ValueError("bad item")

    seen = []
    with pytest.raises(ValueError, match="bad item"):
        for x in prefetch(items()):
            seen.append(x)
    assert seen == [1, 2]


def test_closing_stops_an_endless_producer():
    def endless():
        n = 0
        while True:
            yield n
            n += 1

    gen = prefetch(endless(), depth=2)
    assert [next(gen) for _ in range(5)] == [0, 1, 2, 3, 4]
    gen.close()  # returns only once the producer has stopped
    assert not any(t.name == "bertkit-prefetch" for t in threading.enumerate())



# The producer busy in torch ops (which release the GIL) while the interpreter exits: as a
# daemon thread this aborted the process ("terminate called without an active exception")
# in 5 of 5 tries; the producer must be finished or stop by itself before shutdown.
_EXIT_SCRIPT = textwrap.dedent("""
    import sys, torch
    from bertkit.training.prefetch import prefetch

    def batches():
        x = torch.randn(256, 256)
        while True:
            x = (x @ x).tanh()
            yield x.sum()

    gen = prefetch(batches(), depth=2)
    for _ in range(3):
        next(gen)
    if sys.argv[1] == "close":
        gen.close()
    else:
        sys.modules["__main__"].leaked = gen  # never closed: kept alive until shutdown
""")


@pytest.mark.parametrize("how", ["close", "leak"])
def test_process_exits_cleanly_while_the_producer_is_busy(how):
    for _ in range(3):
        proc = subprocess.run([sys.executable, "-c", _EXIT_SCRIPT, how],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "terminate called" not in proc.stderr
