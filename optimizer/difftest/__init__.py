"""Differential testing of the optimizer: the original and the optimized plan must give the same answer.

* :func:`compare` (:mod:`optimizer.difftest.harness`): optimize a plan, run both forms on Spark (the
  optimized one with best-effort filters ignored), compare the results -> :class:`DiffResult`;
  :mod:`optimizer.difftest.results` compares two answers.
* ``substrait-opt diff`` (:mod:`optimizer.cli.diff`): the same comparison for plan files.

The plan generators (Hypothesis strategies) and the fuzzer that drive :func:`compare` are test support, in
the repository's ``testing/`` folder (not installed): ``python -m testing.fuzz [--long]`` from a checkout.

See ``docs/difftest.md``.
"""

from __future__ import annotations

from optimizer.difftest import harness
from optimizer.difftest.harness import *  # noqa: F403 - the package's names are the harness's public ones

__all__ = list(harness.__all__)
