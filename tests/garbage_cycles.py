"""What the garbage collector would have to find: cycles the optimizer's own functions leave behind."""

from __future__ import annotations

import gc
import inspect
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Garbage made inside stays for :func:`optimizer_functions_in_garbage` to find (collected first, and
    the collector's state restored after)."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def optimizer_functions_in_garbage() -> list[str]:
    """The functions of the optimizer's own modules among what the garbage collector finds now
    (networkx's dispatch and the warnings machinery leave garbage of their own: not counted)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return [f.__qualname__ for f in gc.garbage
                if inspect.isfunction(f) and f.__module__.startswith("optimizer")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
