"""The CPU work of large requests, off the event loop and one request at a time.

Tokenising long inputs, rendering large answers and ``/attention``'s forward pass hold the
GIL for most of their run. Given to Starlette's thread pool (40 threads), twelve clients
asking at once for big ``/embed_all`` answers made twelve threads contend for the GIL with
the event loop, and a short ``/embed`` beside them waited ~10x a big request's own time
(2026-11-26, ``tests/serve/test_connections.py``). In one thread they queue behind each other
instead: the event loop, the batcher's forward passes and this one thread share the GIL
whatever the number of large requests, and a short request, tokenised and rendered in the
loop, is not behind them.

:func:`run` sends ``fn`` to that thread when the request is large (more than
:data:`OFF_LOOP_CHARS` characters in, :data:`INLINE_VALUES` numbers out) and runs it in place
otherwise: a short request's work costs less than a thread hand-off.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

OFF_LOOP_CHARS = 20_000  # requests with more characters are tokenised off the loop
INLINE_VALUES = 20_000  # answers with more numbers are rendered off the loop
_LANE = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bertkit-offload")


async def off_loop(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in the one off-loop thread, awaited."""
    return await asyncio.get_running_loop().run_in_executor(_LANE, functools.partial(fn, *args))


async def run(large: bool, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``: in the off-loop thread when ``large``, else in place."""
    return await off_loop(fn, *args) if large else fn(*args)
