"""Bounds on the work a plan can ask of the tool: checked while a plan is read, before the expensive work.

An untrusted plan can be small on disk and ask for hours (a 200-way join over one key, an ``or`` of
50,000 arguments) or be large enough to take gigabytes while it is parsed. Every plan the loader reads
(:func:`optimizer.plan_io.load_plan`, and so every CLI command) is checked against a :class:`Limits`:
its size in bytes before it is parsed, then its relations, expression nodes, the arguments of one call
and the rows of one virtual table, counted in one pass over the JSON document or the protobuf wire
format (before the plan's messages are built). Past a limit the plan is refused with a
:class:`~optimizer.errors.PlanError` (exit 2) naming the limit and how to raise it.

The limits in force are :func:`current` (:data:`DEFAULT` unless a caller set others):

>>> from optimizer.load.limits import Limits, applied, current
>>> current().relations
10000
>>> with applied(Limits(relations=50_000)):
...     current().relations
50000

The CLI takes ``--limit NAME=VALUE`` (repeatable, on every command), e.g. ``--limit relations=50000``;
the Python API ``load_plan(source, limits=Limits(relations=50_000))`` or ``with applied(...)``.
How join orders are searched in a wide join graph is bounded by the optimizer's configuration
(:class:`optimizer.engine.OptimizerConfig`: ``dp_join_limit``, ``dp_pair_budget``, ``greedy_pair_budget``).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

from optimizer.errors import PlanError


@dataclass(frozen=True)
class Limits:
    """The most a plan may hold (each a positive integer). See docs/security.md for what each costs."""

    #: Bytes of the plan file (JSON or binary), checked before it is read whole.
    input_bytes: int = 16 * 1024 * 1024
    #: ``Rel`` messages in the plan as written (references not expanded: see ``plan_io.MAX_EXPANDED_RELATIONS``).
    relations: int = 10_000
    #: ``Expression`` messages in the whole plan (every literal, field reference, call...). A join of a
    #: 150-table clique (11,175 equalities, 33,673 nodes) peaks at 1 GB while it is optimized.
    expression_nodes: int = 40_000
    #: Arguments of one function call, or options of one IN list (``SingularOrList``/``MultiOrList``).
    call_arguments: int = 10_000
    #: Rows of one virtual table (``ReadRel.virtual_table``, VALUES), also rows of no columns.
    virtual_table_rows: int = 40_000

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"limit {f.name} must be a positive integer, not {value!r}")

    def exceeded(self, name: str, what: str, where: str | None = None) -> PlanError:
        """The error for a plan past the limit ``name``: what it holds, the limit and how to raise it."""
        return PlanError(f"{what} (the limit {name}; raise it with --limit {name}=N, or Limits({name}=N) in the "
                         "Python API)", where)


#: The limits when nobody set others.
DEFAULT = Limits()

_current: contextvars.ContextVar[Limits] = contextvars.ContextVar("substrait_optimizer_limits", default=DEFAULT)


def current() -> Limits:
    """The limits in force in this context (thread, task): :data:`DEFAULT` unless :func:`applied` set others."""
    return _current.get()


@contextlib.contextmanager
def applied(limits: Limits) -> Iterator[Limits]:
    """Within this block, in this context only, plans are loaded under ``limits``."""
    token = _current.set(limits)
    try:
        yield limits
    finally:
        _current.reset(token)


NAMES = tuple(f.name for f in dataclasses.fields(Limits))


def parse_settings(settings: list[str], base: Limits = DEFAULT) -> Limits:
    """``base`` with ``NAME=VALUE`` settings applied (the CLI's ``--limit``); a bad one is a PlanError."""
    changes: dict[str, int] = {}
    for setting in settings:
        name, sep, text = setting.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in NAMES:
            raise PlanError(f"--limit takes NAME=VALUE with NAME one of {', '.join(NAMES)}, not {setting!r}")
        try:
            value = int(text.strip().replace("_", ""))
        except ValueError:
            value = 0
        if value < 1:
            raise PlanError(f"--limit {name} must be a positive integer, not {text!r}")
        changes[name] = value
    return dataclasses.replace(base, **changes)
