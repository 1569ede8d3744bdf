"""Join conditions a target reads only as one key comparison (``join_condition = "single_key"``: Acero).

Acero takes a ``JoinRel`` whose expression is one ``equal`` (or ``is_not_distinct_from``) of a column of
each input ("Only `equal` or `is_not_distinct_from` are supported for join key comparison but got
and_kleene"). An inner join on ``k AND rest`` is the inner join on ``k`` with ``rest`` applied to its
output by a ``FilterRel`` above (the same rows: an inner join outputs exactly the pairs its condition
holds for), which also takes the join's ``post_join_filter`` and emit. Any other join type whose
condition is not one key comparison is refused: moving part of an outer, semi or anti join's condition
above it changes its answer.
"""

from __future__ import annotations

from substrait.proto import JoinRel, Plan, Rel

from optimizer.errors import UnsupportedError
from optimizer.expr_utils import (
    FunctionRegistrar,
    call_args,
    conjuncts,
    field_index,
    function_name,
    join_type_name,
    make_and,
    rels_with_paths,
)
from optimizer.targets import Target

_KEY_COMPARISONS = ("equal", "is_not_distinct_from")


def _key(c, functions, n_left: int) -> bool:
    """Is ``c`` a key comparison of a column of each side?"""
    if function_name(c, functions) not in _KEY_COMPARISONS:
        return False
    args = call_args(c)
    if args is None or len(args) != 2:
        return False
    a, b = (field_index(x) for x in args)
    return a is not None and b is not None and (a < n_left) != (b < n_left)


def single_key_joins(plan: Plan, target: Target) -> int:
    """Rewrite, in place, every join whose condition is more than one key comparison (see the module
    docstring); the number of joins changed."""
    from optimizer.schema import plan_schemas

    registrar = FunctionRegistrar(plan)
    schemas = None
    changed = 0
    for rel, path in list(rels_with_paths(plan)):  # children first: a rewrite keeps its ancestors' paths
        if rel.WhichOneof("rel_type") != "join":
            continue
        join = rel.join
        functions = registrar.table
        conds = conjuncts(join.expression, functions) if join.HasField("expression") else []
        if schemas is None:
            schemas = plan_schemas(plan)
        n_left = len(schemas[f"{path}.join.left"].types)
        if len(conds) == 1 and _key(conds[0], functions, n_left) and not join.HasField("post_join_filter"):
            continue
        jt = join_type_name(join)
        keys = [i for i, c in enumerate(conds) if _key(c, functions, n_left)]
        if join.type != JoinRel.JOIN_TYPE_INNER or not keys:
            raise UnsupportedError(f"JoinRel of type {jt} on a condition that is not one comparison of a column "
                                   f"of each side: target '{target.name}' joins on one key only", path)
        rest = [c for i, c in enumerate(conds) if i != keys[0]]
        if join.HasField("post_join_filter"):
            rest.append(join.post_join_filter)
        emit = list(join.common.emit.output_mapping) if join.common.WhichOneof("emit_kind") == "emit" else None
        join.expression.CopyFrom(conds[keys[0]])
        join.ClearField("post_join_filter")
        join.common.ClearField("emit_kind")
        top = Rel()
        top.filter.input.CopyFrom(rel)
        top.filter.condition.CopyFrom(make_and(rest, registrar))
        if emit is not None:
            top.filter.common.emit.output_mapping.extend(emit)
        rel.CopyFrom(top)
        changed += 1
    return changed


def nest_set_inputs(plan: Plan, target: Target) -> int:
    """A ``UNION ALL`` / ``UNION DISTINCT`` of more inputs than the target takes becomes nested unions of
    that many (the same rows: both are associative, and a distinct union of distinct unions is the
    distinct union of all); another set operation with too many inputs is refused. In place; the number
    of set relations changed."""
    from substrait.proto import SetRel

    limit = target.max_set_inputs
    changed = 0
    for rel, path in list(rels_with_paths(plan)):
        if rel.WhichOneof("rel_type") != "set" or limit is None or len(rel.set.inputs) <= limit:
            continue
        body = rel.set
        if body.op not in (SetRel.SET_OP_UNION_ALL, SetRel.SET_OP_UNION_DISTINCT):
            raise UnsupportedError(f"SetRel ({SetRel.SetOp.Name(body.op)}) of {len(body.inputs)} inputs: target "
                                   f"'{target.name}' takes at most {limit}", path)
        inputs = list(body.inputs)
        while len(inputs) > limit:
            inner = Rel()
            inner.set.op = body.op
            inner.set.inputs.extend(inputs[:limit])
            inputs = [inner, *inputs[limit:]]
        del body.inputs[:]
        body.inputs.extend(inputs)
        changed += 1
    return changed
