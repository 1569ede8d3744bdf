"""How ``run``, ``diff --time`` and their kind time a plan: warm, then the median of ``--repeat`` runs.

The first plan of a session pays the JVM's warm-up (class loading, code generation: up to several
times the plan's own time), so a time is taken only after one untimed run, and the median of several
runs says more than one. Every printed time says how it was taken (:func:`how`)."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def add_repeat_argument(p: argparse.ArgumentParser, default: int, what: str) -> None:
    p.add_argument("--repeat", type=_positive, default=default, metavar="N",
                   help=f"time {what} as the median of N runs, after one untimed warm-up run (default {default})")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of runs, got {text!r}") from None
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"expected 1 to 1000 runs, got {value}")
    return value


def timed(step: Callable[[], T]) -> tuple[T, float]:
    """``step()`` and the seconds it took (wall clock)."""
    start = time.perf_counter()
    value = step()
    return value, time.perf_counter() - start


def median(seconds: Sequence[float]) -> float:
    return statistics.median(seconds)


def how(runs: int, *, interleaved: bool = False) -> str:
    """``warm, median of 3 runs`` / ``warm, 1 run``: how a printed time was taken."""
    if runs == 1:
        return "warm, 1 run"
    return f"warm, median of {runs}{' interleaved' if interleaved else ''} runs"


def seconds_text(seconds: float) -> str:
    return f"{seconds:.3f} s" if seconds < 1 else f"{seconds:.2f} s"
