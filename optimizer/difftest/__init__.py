"""Differential testing of the optimizer: the original and the optimized plan must give the same answer.

* :func:`compare` (:mod:`optimizer.difftest.harness`): optimize a plan, run both forms on Spark (the
  optimized one with best-effort filters ignored), compare the results -> :class:`DiffResult`.
* :mod:`optimizer.difftest.strategies`: Hypothesis strategies for valid plans over random tables
  (:mod:`~optimizer.difftest.values`), with lying statistics and reader-capability profiles
  (:mod:`~optimizer.difftest.profiles`) (needs ``hypothesis``).
* :mod:`optimizer.difftest.fuzz`: ``python -m optimizer.difftest.fuzz [--long]`` generates plans, runs
  :func:`compare` on each and saves shrunk failing cases as regressions.
* ``substrait-opt diff`` (:mod:`optimizer.cli.diff`): the same comparison for plan files.

See ``docs/difftest.md``.
"""

from __future__ import annotations

from optimizer.difftest import harness
from optimizer.difftest.harness import *  # noqa: F403 - the package's names are the harness's public ones

__all__ = list(harness.__all__)
