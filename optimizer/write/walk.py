"""What the write stage's steps share: the relations of one kind, children first, and the plan's schemas
derived once, on first use."""

from __future__ import annotations

from substrait.proto import Plan, Rel

from optimizer.expr_utils import rels_with_paths
from optimizer.load.functions import FunctionTable


def rels_of_kind(plan: Plan, *kinds: str) -> list[tuple[Rel, str]]:
    """The relations of ``plan`` of the ``kinds`` (``"join"``...) with their paths, children before
    parents: a step that rewrites one in place leaves the paths of those still to come (its ancestors)
    as they are."""
    return [(rel, path) for rel, path in rels_with_paths(plan) if rel.WhichOneof("rel_type") in kinds]


class LazySchemas:
    """``plan_schemas(plan, functions)``, derived on the first lookup (a step that finds nothing to rewrite
    derives none); keyed by relation path."""

    def __init__(self, plan: Plan, functions: FunctionTable) -> None:
        self._plan, self._functions, self._schemas = plan, functions, None

    def width(self, path: str) -> int:
        """The number of columns of the relation at ``path`` (as the plan was when first looked up)."""
        if self._schemas is None:
            from optimizer.schema import plan_schemas

            self._schemas = plan_schemas(self._plan, self._functions)
        return len(self._schemas[path].types)
