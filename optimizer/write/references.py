"""Inline shared subtrees: each ``ReferenceRel`` becomes a copy of the plan relation it names.

For a target that does not read ``ReferenceRel`` (DataFusion 55, DuckDB 1.1.3, Acero). Every copy
computes the same rows as the shared subtree: the optimizer shares only deterministic subtrees
(``reduce_aggregate_input`` requires it), and a producer's shared subtree means the same relation
wherever it is referenced. The plan relations left unreferenced (the shared subtrees themselves) are
removed: only the roots remain, which are what a consumer runs.
"""

from __future__ import annotations

from substrait.proto import Plan, Rel

from optimizer.errors import PlanError, UnsupportedError
from optimizer.expr_utils import walk


def inline_references(plan: Plan, target_name: str = "") -> int:
    """Replace every ``ReferenceRel`` of ``plan`` by the subtree it names, in place; drop the plan
    relations that are not roots. Returns the number of references inlined."""
    from optimizer.plan_io import check_expanded_size

    if not any(m.DESCRIPTOR.full_name == "substrait.ReferenceRel" for m in walk(plan, enter_subqueries=True)):
        return 0
    try:
        check_expanded_size(plan)
    except PlanError as exc:
        raise UnsupportedError(f"{exc.message} (target '{target_name}' does not read shared subtrees)",
                               exc.path) from None
    shared = [entry.rel if entry.WhichOneof("rel_type") == "rel" else entry.root.input for entry in plan.relations]
    expanded: dict[int, Rel] = {}

    def subtree(ordinal: int, path: str, seen: tuple[int, ...]) -> Rel:
        if not 0 <= ordinal < len(shared):
            raise PlanError(f"ReferenceRel names subtree {ordinal}, the plan has {len(shared)}", path)
        if ordinal in seen:
            raise PlanError(f"cycle of references through subtree {ordinal}", path)
        if ordinal not in expanded:
            rel = Rel()
            rel.CopyFrom(shared[ordinal])
            expand(rel, path, (*seen, ordinal))
            expanded[ordinal] = rel
        return expanded[ordinal]

    count = 0

    def expand(message, path: str, seen: tuple[int, ...]) -> None:
        nonlocal count
        # Collect first: replacing a Rel in place while walking it would walk the copy too.
        refs = [m for m in walk(message, enter_subqueries=True)
                if m.DESCRIPTOR.full_name == "substrait.Rel" and m.WhichOneof("rel_type") == "reference"]
        for rel in refs:
            rel.CopyFrom(subtree(rel.reference.subtree_ordinal, path, seen))
            count += 1

    roots = [entry for entry in plan.relations if entry.WhichOneof("rel_type") == "root"]
    for i, entry in enumerate(roots):
        expand(entry.root.input, f"relations[{i}].root", ())
    kept = [type(entry)() for entry in roots]
    for new, old in zip(kept, roots, strict=True):
        new.CopyFrom(old)
    del plan.relations[:]
    plan.relations.extend(kept)
    return count
