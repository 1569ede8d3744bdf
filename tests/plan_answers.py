"""The answers of plans run on the test session's Spark, memoised for the whole session.

A plan is run once per data set: ``tests/test_backend_acceptance.py`` runs every corpus and TPC-H plan as
written, and its part 3 then compares each optimized plan with the same original
answer instead of running the original again. The memo is keyed by the data set, the backend's
best-effort-filter mode (for a plan that has such a filter) and the plan *without its estimates*
(``hint`` fields, and a ``common`` left empty by removing them): the backend reads no hint, so two
plans that differ only there are one query.
An optimized plan that only gained estimates is therefore not run a second time -- its answer is the
original's by construction. A failure is memoised too and raised again to every caller.
"""

from __future__ import annotations

import threading
from typing import Any

from google.protobuf.message import Message
from substrait.proto import Plan


def without_estimates(plan: Plan) -> tuple[bytes, bool]:
    """The plan's bytes (deterministic) with every ``hint`` removed and each ``common`` left empty by
    that, and whether the plan has a ``best_effort_filter`` (only then does the backend's mode matter)."""
    copy = Plan()
    copy.CopyFrom(plan)
    best_effort = _strip(copy)
    return copy.SerializeToString(deterministic=True), best_effort


def _strip(message: Message) -> bool:
    """Remove the hints under ``message``; whether a ``best_effort_filter`` is there."""
    best_effort = False
    for fd, value in message.ListFields():
        if fd.type != fd.TYPE_MESSAGE:
            continue
        if fd.name == "hint" and fd.message_type.name == "Hint":
            message.ClearField("hint")
            continue
        best_effort |= fd.name == "best_effort_filter"
        single = isinstance(value, Message)
        for item in (value,) if single else value:
            if isinstance(item, Message):  # not a map's scalar key
                best_effort |= _strip(item)
        if fd.name == "common" and single and not value.ListFields():
            message.ClearField("common")
    return best_effort


class PlanAnswers:
    """``run(backend, data, plan)``: the plan's answer on ``backend`` (over data set ``data``), run once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key_locks: dict[tuple, threading.Lock] = {}
        self._memo: dict[tuple, tuple[Any, BaseException | None]] = {}
        self.runs = 0
        self.hits = 0

    def run(self, backend: Any, data: str, plan: Plan) -> Any:
        text, best_effort = without_estimates(plan)
        ignoring = best_effort and bool(getattr(backend, "ignore_best_effort_filter", False))
        key = (data, ignoring, text)
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            if key in self._memo:
                self.hits += 1
            else:
                self.runs += 1
                table, error = None, None
                try:
                    table = backend.execute(plan)
                except Exception as exc:  # kept and raised to every caller
                    error = exc
                self._memo[key] = (table, error)
        table, error = self._memo[key]
        if error is not None:
            raise error
        return table


class MemoBackend:
    """A backend whose ``execute`` goes through :class:`PlanAnswers` (for ``optimizer.difftest.compare``)."""

    def __init__(self, answers: PlanAnswers, backend: Any, data: str) -> None:
        self.answers, self.backend, self.data = answers, backend, data
        self.ignore_best_effort_filter = bool(getattr(backend, "ignore_best_effort_filter", False))

    def execute(self, plan: Plan) -> Any:
        return self.answers.run(self.backend, self.data, plan)
