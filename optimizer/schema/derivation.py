"""The state of one derivation of types and schemas: strict (the first problem raises) or checking
(every problem recorded as a :class:`Problem`, the derivation going on with an unknown type).

Expressions hold relation trees (subqueries) and relations hold expressions. Expression typing
(:mod:`optimizer.schema.expressions`) sits below relation outputs (:mod:`optimizer.schema.relations`):
it reaches a subquery's tree through :meth:`Derivation.subtree`, which calls the ``tree`` function the
derivation was made with (:func:`optimizer.schema.relations.tree_output`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import overload

from substrait.proto import Expression, Plan, PlanRel, Rel, Type

from optimizer.errors import PlanError
from optimizer.load.functions import FunctionTable, function_table
from optimizer.schema.record import Schema
from optimizer.schema.types import UNKNOWN

#: Derives the output schema of a relation tree (whose path is the ``str``); None when checking found it
#: unknowable.
TreeOutput = Callable[[Rel, "Derivation", str], "Schema | None"]


@dataclass(frozen=True)
class Problem:
    """One problem found by :func:`~optimizer.schema.check.check_plan`: where (a path) and what. A ``quirk``
    is a known producer habit with a clear meaning (read as documented in docs/semantics.md): reported,
    never an error."""

    path: str
    message: str
    quirk: bool = False

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@overload
def plan_functions(plan: Plan) -> FunctionTable: ...
@overload
def plan_functions(plan: Plan, problems: list[Problem]) -> FunctionTable | None: ...


def plan_functions(plan: Plan, problems: list[Problem] | None = None) -> FunctionTable | None:
    """The function table of a plan that comes in as a message, to be checked, typed, conformed at load
    or run (a DAG has its own, ``g.graph["functions"]``; the write stage builds its copy's): built here,
    once per such entry, and handed on. With ``problems``, a declaration that names an undeclared URN is
    recorded there and the functions are unknown (None); without, it is raised."""
    try:
        return function_table(plan)
    except PlanError as exc:
        if problems is None:
            raise
        problems.append(Problem(exc.path or "extensions", exc.message))
        return None


class Derivation:
    """State of one derivation: strict (raise) or checking (collect problems and walk everything)."""

    def __init__(
        self,
        functions: FunctionTable | None = None,
        *,
        problems: list[Problem] | None = None,
        full: bool = False,
        plan_relations: Sequence[PlanRel] | None = None,
        outer: Sequence[Schema] | None = None,
        anchors: dict[int, Schema] | None = None,
        schemas: dict[str, Schema] | None = None,
        detached: Sequence[Expression] | None = None,
        tree: TreeOutput | None = None,
        casts: list[tuple[str, Type, Type]] | None = None,
        unstated: list[tuple[Expression.IfThen | Expression.ScalarFunction, Type]] | None = None,
        calls: list[tuple[Expression.ScalarFunction, list[Type]]] | None = None,
    ) -> None:
        self.functions = functions
        #: When a list: each cast met in a full derivation, as (path, the input's type, the cast's type).
        self.casts = casts
        #: When a list: each ``if_then`` without ``else`` and each scalar function without ``output_type``
        #: met, as (the message in the plan, its type).
        self.unstated = unstated
        #: When a list: each scalar function met, as (the message in the plan, its value arguments' types).
        self.calls = calls
        self.tree = tree
        self.problems = problems
        self.full = full or problems is not None
        self.plan_relations = plan_relations
        self.outer: list[Schema] = list(outer or [])
        self.anchors: dict[int, Schema] = dict(anchors or {})
        self.schemas = schemas
        self.detached = detached
        self.lambdas: list[Type.Struct] = []
        self.ref_cache: dict[int, Schema | None] = {}
        self.ref_active: set[int] = set()
        self.detached_active: set[int] = set()

    @property
    def checking(self) -> bool:
        return self.problems is not None

    def quiet(self) -> Derivation:
        """A checking derivation in the same scope (outer records, anchors, lambdas) whose problems are
        dropped: for a type that is only a hint (a missing output type derived from the arguments)."""
        quiet = Derivation(self.functions, problems=[], outer=self.outer, anchors=self.anchors, tree=self.tree)
        quiet.lambdas = self.lambdas
        return quiet

    def subtree(self, rel: Rel, outer: Schema, path: str) -> Schema | None:
        """Schema of a subquery's relation tree, with ``outer`` pushed as the innermost enclosing record."""
        assert self.tree is not None, "a derivation that may meet a subquery is made with a tree function"
        self.outer.append(outer)
        try:
            return self.tree(rel, self, path)
        finally:
            self.outer.pop()

    def fail(self, path: str, message: str) -> Type:
        """Report a problem: raise in strict mode, record it (and go on with an unknown type) when checking."""
        if self.problems is None:
            raise PlanError(message, path)
        self.problems.append(Problem(path, message))
        return UNKNOWN

    def warn(self, path: str, message: str) -> None:
        """Report a problem that does not prevent deriving schemas: recorded when checking, else ignored."""
        if self.problems is not None:
            self.problems.append(Problem(path, message))

    def function(self, anchor: int, path: str) -> None:
        """Report an anchor the plan's extensions do not declare (when the function table is known)."""
        if self.functions is None:
            return
        try:
            self.functions.get(anchor, path)
        except PlanError as exc:
            self.fail(path, exc.message)

