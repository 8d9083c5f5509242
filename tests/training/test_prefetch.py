import threading
import time

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
    gen.close()
    deadline = time.time() + 2
    while any(t.name == "bertkit-prefetch" for t in threading.enumerate()) and time.time() < deadline:
        time.sleep(0.02)
    assert not any(t.name == "bertkit-prefetch" for t in threading.enumerate())
