"""The write stage: adapt an optimized plan to the consumer that will run it (a :class:`~optimizer.targets.Target`).

The flow is load -> DAG -> rules -> cost -> **write** -> backend or engine. :func:`write_for_target` runs
after the rewrites, on the plan they produced, and changes its encoding only -- never its answer:

1. shared subtrees (``ReferenceRel``) are inlined for a target that does not read them (every copy
   computes the same rows: the rules only share deterministic subtrees, and a producer's shared
   subtree is read the same wherever it is referenced);
2. a physical relation is refused for a target that reads logical relations only;
3. ``ReadRel.filter`` a target does not apply (DataFusion 55 prunes with it, Acero rejects it) is
   applied by a ``FilterRel`` above the read as well (kept in the read where the target prunes with it);
   a ``best_effort_filter`` the target rejects is removed (a consumer may skip one, so it only ever
   repeats what a filter above applies);
4. a column mask (``ReadRel.projection``) becomes a ``ProjectRel`` above the read for a target that does not read masks;
5. functions: refused when the target lacks them, renamed to the target's names, and variadic calls
   (``and``/``or`` with more arguments than the target takes) nested; literals the target reads
   otherwise (``fixed_char``, intervals) written as it reads them;
5a. joins: a condition beyond one key comparison goes into a ``FilterRel`` above an inner join for a
   target that joins on one key (Acero); a join without a condition gets ``true`` for a target that
   needs one, and an anti join becomes a left join keeping the unmatched rows for one that reads no
   anti join, an uncorrelated scalar subquery a left join to its one row for one that reads no
   subquery (DuckDB 1.1.3);
5b. set operations, for a target that reads every ``SetRel`` as its distinct form (DuckDB 1.1.3):
   written so that both readings give the same rows (:func:`~optimizer.write.joins.set_ops_as_distinct`);
6. aggregates: an aggregate with several grouping sets is refused where the target numbers them its
   own way; the aggregation phase is written out where the target rejects the unspecified one;
7. the projection convention: DuckDB 1.1.3 reads a ``ProjectRel`` as "only its expressions" and ignores
   its emit, so each project is written as the list of its output columns (and every other relation
   with an emit it does not read gets such a project above it);
8. the plan version, if the target declares one; where the plan is in the target's conventions rather
   than the spec's (DataFusion's grouping-set numbering, DuckDB's projects), its producer says so
   (``substrait-optimizer for datafusion``), and this tool's loader reads it in that convention.

What the target cannot express is an :class:`~optimizer.errors.UnsupportedError` (exit 3) naming the
relation or function and the target: never a plan that runs and answers something else. For a target
that reads everything the optimizer writes (``spark``) the plan is returned unchanged.
"""

from __future__ import annotations

from substrait.proto import AggregationPhase, Plan

from optimizer.errors import UnsupportedError
from optimizer.load.functions import FunctionTable, function_table
from optimizer.plan_io import PRODUCER
from optimizer.targets import PHYSICAL_RELATIONS, Target, as_target
from optimizer.write.encoding import (
    aggregate_arguments_as_columns,
    fill_measure_types,
    write_direct_emits,
    write_old_encoding,
    write_projects_as_expressions,
)
from optimizer.write.functions import (
    adapt_functions,
    cast_failures_throw,
    fixed_char_literals_as_strings,
    interval_literals_as_days,
    set_aggregation_phase,
    switch_to_if_then,
    type_null_literals,
)
from optimizer.write.grouping_sets import write_datafusion_grouping_sets
from optimizer.write.joins import (
    anti_joins_as_left_joins,
    explicit_join_conditions,
    nest_set_inputs,
    set_ops_as_distinct,
    single_key_joins,
)
from optimizer.write.reads import adapt_reads
from optimizer.write.references import inline_references
from optimizer.write.subqueries import scalar_subqueries_as_left_joins

__all__ = ["write_for_target"]


def write_for_target(plan: Plan, target: Target | str | None) -> Plan:
    """``plan`` as ``target`` reads it (a copy; ``plan`` itself when nothing needs to change)."""
    target = as_target(target)
    if _reads_everything(target):
        return plan
    out = Plan()
    out.CopyFrom(plan)
    if not target.reference_rel:
        inline_references(out, target.name)
    # The copy's function table, built once: the steps that declare or rename a function update it.
    functions = function_table(out)
    if target.anti_joins == "left_join":
        anti_joins_as_left_joins(out, target, functions)
    if target.scalar_subqueries == "left_join":
        scalar_subqueries_as_left_joins(out, functions)
    _check_relations(out, target)
    adapt_reads(out, target, functions)
    if target.join_condition == "single_key":
        single_key_joins(out, target, functions)
    if target.explicit_join_conditions:
        explicit_join_conditions(out)
    if target.set_op_reading == "distinct":
        set_ops_as_distinct(out, target, functions)
    if target.max_set_inputs is not None:
        nest_set_inputs(out, target)
    adapt_functions(out, target, functions)
    if target.aggregate_phase == "initial_to_result":
        set_aggregation_phase(out, AggregationPhase.AGGREGATION_PHASE_INITIAL_TO_RESULT)
    if target.explicit_types:
        fill_measure_types(out, functions)
    if target.cast_failure == "throw":
        cast_failures_throw(out)
    if target.typed_nulls:
        type_null_literals(out, target)
    if not target.fixed_char_literals:
        fixed_char_literals_as_strings(out)
    if target.interval_literals == "days":
        interval_literals_as_days(out, target)
    _check_written(out, target, functions)
    if target.grouping_sets == "datafusion":
        write_datafusion_grouping_sets(out, target.name)
    if not target.switch_expressions:
        switch_to_if_then(out, target, functions)
    if target.project_encoding == "expressions_only":
        write_projects_as_expressions(out, target, functions)
    if target.old_fields:
        write_old_encoding(out)
    if target.aggregate_arguments == "columns":
        aggregate_arguments_as_columns(out, target, functions)
    if target.explicit_direct:
        write_direct_emits(out)
    if target.plan_version is not None:
        out.version.major_number, out.version.minor_number, out.version.patch_number = target.plan_version
    if target.grouping_sets == "datafusion" or target.project_encoding == "expressions_only":
        # The plan is in the target's conventions now, not the spec's: its version says whose, so that
        # this tool, reading the file back, conforms it again (optimizer.load.grouping_sets,
        # optimizer.schema.check.legacy_project_producer) and it means the same there as on the target.
        out.version.producer = f"{PRODUCER} for {target.name}"
    return out


def _check_written(plan: Plan, target: Target, functions: FunctionTable) -> None:
    """The adapted plan, still in the spec's reading, must type-check: a writer that broke a reference is
    a bug, reported as such (exit 3), never a plan handed on to run."""
    from optimizer.errors import OptimizerError
    from optimizer.schema import plan_schemas

    try:
        plan_schemas(plan, functions)
    except OptimizerError as exc:
        raise UnsupportedError(f"the plan written for target '{target.name}' does not type-check (a bug of "
                               f"the write stage): {exc.message}", exc.path) from None


def _reads_everything(target: Target) -> bool:
    return (target.physical_relations and target.reference_rel and target.read_filter == "applied"
            and target.best_effort_filter != "unsupported" and target.projection_mask and not target.renames
            and not target.max_args and not target.unsupported_functions and target.project_encoding == "spec"
            and target.aggregate_phase == "any" and target.grouping_sets == "spec" and target.plan_version is None
            and target.join_types is None and target.subqueries and target.enum_arguments
            and target.like_null_escape == "keep" and target.extract_encoding == "enum"
            and not target.old_fields and not target.explicit_direct
            and target.aggregate_arguments == "any" and target.switch_expressions
            and target.join_condition == "any" and not target.explicit_types
            and not target.explicit_join_conditions and target.anti_joins == "any"
            and target.scalar_subqueries == "any"
            and target.cast_failure == "any" and target.window_functions and target.max_set_inputs is None
            and target.set_ops is None and not target.typed_nulls and target.correlated_subqueries
            and target.fixed_char_literals and target.interval_literals == "any"
            and target.set_op_reading == "spec")


def _check_relations(plan: Plan, target: Target) -> None:
    """Refuse what the target cannot read: physical relations (for a logical-only target), aggregates
    with several grouping sets (where the target numbers their output its own way)."""
    from optimizer.expr_utils import rels_with_paths

    for rel, path in rels_with_paths(plan):
        kind = rel.WhichOneof("rel_type")
        if kind in PHYSICAL_RELATIONS and not target.physical_relations:
            raise UnsupportedError(f"{_REL_NAMES.get(kind, kind)} is a physical relation, which target "
                                   f"'{target.name}' does not read (it reads logical relations only)", path)
        if kind == "aggregate" and len(rel.aggregate.groupings) > 1 and target.grouping_sets == "refuse":
            raise UnsupportedError(f"AggregateRel with {len(rel.aggregate.groupings)} grouping sets: target "
                                   f"'{target.name}' numbers the output of several grouping sets its own way",
                                   path)
        if kind == "set" and target.set_ops is not None:
            from substrait.proto import SetRel

            op = SetRel.SetOp.Name(rel.set.op).removeprefix("SET_OP_") if rel.set.op in SetRel.SetOp.values() else "?"
            if op not in target.set_ops:
                raise UnsupportedError(f"SetRel {op}: target '{target.name}' reads set operations "
                                       f"{', '.join(sorted(target.set_ops)) or '(none)'} only", path)
        if kind == "join" and target.join_types is not None:
            from optimizer.expr_utils import join_type_name

            jt = join_type_name(rel.join)
            if jt not in target.join_types:
                raise UnsupportedError(f"JoinRel of type {jt}: target '{target.name}' reads join types "
                                       f"{', '.join(sorted(target.join_types))} only", path)
        if not target.subqueries or not target.window_functions or not target.correlated_subqueries:
            from optimizer.dag import strip_inputs
            from optimizer.expr_utils import walk

            for m in walk(strip_inputs(rel), enter_subqueries=False):
                if m.DESCRIPTOR.full_name == "substrait.Expression.Subquery" and not target.subqueries:
                    raise UnsupportedError(f"subquery expression ({m.WhichOneof('subquery_type')}) in a {kind} "
                                           f"relation: target '{target.name}' does not read subqueries", path)
                if (m.DESCRIPTOR.full_name == "substrait.Expression.FieldReference"
                        and m.WhichOneof("root_type") == "outer_reference" and not target.correlated_subqueries):
                    raise UnsupportedError(f"a correlated subquery (an outer reference) in a {kind} relation: "
                                           f"target '{target.name}' does not read it right", path)
                if m.DESCRIPTOR.full_name == "substrait.Expression.WindowFunction" and not target.window_functions:
                    raise UnsupportedError(f"window function in a {kind} relation: target '{target.name}' does not "
                                           "read window functions", path)
        if kind == "reference" and not target.reference_rel:  # pragma: no cover - inlined before
            raise UnsupportedError(f"ReferenceRel: target '{target.name}' does not read shared subtrees", path)
        if kind is None:
            raise UnsupportedError(f"a relation of a kind this tool does not know, for target '{target.name}'", path)


_REL_NAMES = {"hash_join": "HashJoinRel", "merge_join": "MergeJoinRel", "nested_loop_join": "NestedLoopJoinRel",
              "top_n": "TopNRel", "window": "ConsistentPartitionWindowRel", "exchange": "ExchangeRel",
              "expand": "ExpandRel", "duplicate_eliminated_join": "DuplicateEliminatedJoinRel"}

