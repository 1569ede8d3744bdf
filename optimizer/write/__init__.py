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
   otherwise (``fixed_char``, ``var_char``, intervals) written as it reads them, and a literal of a
   kind it reads in no form refused;
5a. joins: a condition beyond one key comparison goes into a ``FilterRel`` above an inner join for a
   target that joins on one key (Acero); a join without a condition gets ``true`` for a target that
   needs one, and an anti join becomes a left join keeping the unmatched rows for one that reads no
   anti join, an uncorrelated scalar subquery a left join to its one row for one that reads no
   subquery (DuckDB 1.1.3);
5b. set operations, for a target that reads every ``SetRel`` as its distinct form (DuckDB 1.1.3):
   written so that both readings give the same rows (:func:`~optimizer.write.joins.set_ops_as_distinct`); for a target that compares
   its inputs' column names (Acero), each input is written as a project of its columns;
6. aggregates: an aggregate with several grouping sets is refused where the target numbers them its
   own way; the aggregation phase is written out where the target rejects the unspecified one; an
   aggregate of DISTINCT values becomes one over a grouping by its arguments where the target reads no
   DISTINCT invocation (Acero);
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

from collections.abc import Callable
from dataclasses import dataclass

from substrait.proto import AggregationPhase, Plan

from optimizer.errors import UnsupportedError
from optimizer.load.functions import FunctionTable
from optimizer.load.pipeline import PRODUCER, LoadedPlan, load
from optimizer.targets import PHYSICAL_RELATIONS, Target, as_target
from optimizer.write.distinct_measures import distinct_measures_grouped
from optimizer.write.encoding import (
    aggregate_arguments_as_columns,
    empty_virtual_tables_as_a_filtered_row,
    fill_measure_types,
    literal_grouping_keys_as_columns,
    sorts_after_window_projects,
    window_offsets_in_old_field,
    write_direct_emits,
    write_old_encoding,
    write_projects_as_expressions,
)
from optimizer.write.functions import (
    adapt_functions,
    arithmetic_in_declared_types,
    call_types_written,
    case_conditions_not_null,
    case_else_written,
    cast_failures_throw,
    coalesce_as_case,
    fixed_char_literals_as_strings,
    fp_division_as_operator,
    i16_literals_as_casts,
    interval_literals_as_days,
    likes_as_string_functions,
    literals_as_read,
    measure_filters_as_cases,
    nullif_as_case,
    refuse_ignored_settings,
    refuse_inexact_decimal_casts,
    round_ties_written,
    set_aggregation_phase,
    switch_to_if_then,
    type_null_literals,
)
from optimizer.write.grouping_sets import write_datafusion_grouping_sets
from optimizer.write.grouping_union import grouping_sets_as_union
from optimizer.write.joins import (
    anti_joins_as_left_joins,
    explicit_join_conditions,
    nest_set_inputs,
    post_join_filters_above,
    refuse_null_marks,
    right_joins_mirrored,
    right_outer_joins_as_left,
    semi_join_conditions_true,
    semi_join_emits,
    set_inputs_projected,
    set_ops_as_distinct,
    single_key_joins,
    transitive_join_keys,
)
from optimizer.write.reads import adapt_reads, local_files_in_target_form
from optimizer.write.references import inline_references
from optimizer.write.subqueries import in_predicates_as_joins, scalar_subqueries_as_left_joins

__all__ = ["write_for_target"]


@dataclass(frozen=True)
class _Step:
    """One step of the write stage: what it does, for which targets, and how."""

    what: str
    applies: Callable[[Target], bool]
    run: Callable[[Plan, Target, FunctionTable], object]


def _stamp_version(plan: Plan, target: Target, _functions: FunctionTable) -> None:
    assert target.plan_version is not None
    plan.version.major_number, plan.version.minor_number, plan.version.patch_number = target.plan_version


def _stamp_producer(plan: Plan, target: Target, _functions: FunctionTable) -> None:
    # The plan is in the target's conventions now, not the spec's: its version says whose, so that this
    # tool, reading the file back, conforms it again (optimizer.load.grouping_sets,
    # optimizer.schema.check.legacy_project_producer) and it means the same there as on the target.
    plan.version.producer = f"{PRODUCER} for {target.name}"


#: The write stage in order. Relations are rewritten into ones the target reads before the check that
#: refuses what is left; the checked plan is then adapted expression by expression and type-checked in
#: the spec's reading; the encodings that leave the spec's reading (grouping-set numbering, DuckDB's
#: projects, 0.53's fields) come last, and the version says so.
_STEPS: tuple[_Step, ...] = (
    _Step("inline shared subtrees", lambda t: not t.reference_rel, lambda p, t, f: inline_references(p, t.name)),
    _Step("post-join filters as filters above", lambda t: t.post_join_filters == "filter_above",
          lambda p, t, f: post_join_filters_above(p)),
    _Step("right semi and anti joins as left ones", lambda t: t.join_types is not None, right_joins_mirrored),
    _Step("right joins as left ones", lambda t: t.right_joins == "left", right_outer_joins_as_left),
    _Step("IN predicates as semi and anti joins", lambda t: t.in_predicates == "joins",
          lambda p, t, f: in_predicates_as_joins(p, f)),
    _Step("anti joins as left joins", lambda t: t.anti_joins == "left_join", anti_joins_as_left_joins),
    _Step("scalar subqueries as left joins", lambda t: t.scalar_subqueries == "left_join",
          lambda p, t, f: scalar_subqueries_as_left_joins(p, f)),
    _Step("grouping sets as a union", lambda t: t.grouping_sets == "union",
          lambda p, t, f: grouping_sets_as_union(p, f)),
    _Step("refuse relations the target does not read",
          lambda t: (not t.physical_relations or t.grouping_sets == "refuse" or t.set_ops is not None
                     or t.typed_schemas
                     or t.unsupported_relations or t.read_types is not None
                     or t.join_types is not None or not t.subqueries or not t.window_functions
                     or not t.correlated_subqueries),
          lambda p, t, f: _check_relations(p, t)),
    _Step("mark joins whose NULL mark matters refused", lambda t: t.mark_joins == "two_valued", refuse_null_marks),
    _Step("empty virtual tables as a filtered row", lambda t: t.empty_virtual_tables == "filtered_row",
          lambda p, t, f: empty_virtual_tables_as_a_filtered_row(p)),
    _Step("reads: filters applied above, masks as projects",
          lambda t: t.read_filter != "applied" or t.best_effort_filter == "unsupported" or not t.projection_mask,
          adapt_reads),
    _Step("local files named as the target opens them", lambda t: t.local_files != "any", local_files_in_target_form),
    _Step("joins on one key", lambda t: t.join_condition == "single_key", single_key_joins),
    _Step("join keys implied by the joins below written out", lambda t: t.transitive_join_keys,
          transitive_join_keys),
    _Step("join conditions written out", lambda t: t.explicit_join_conditions,
          lambda p, t, f: explicit_join_conditions(p)),
    _Step("semi and anti joins emit their left columns", lambda t: t.semi_join_emits,
          lambda p, t, f: semi_join_emits(p, f)),
    _Step("semi join conditions true or false", lambda t: t.semi_join_conditions == "not_null",
          semi_join_conditions_true),
    _Step("set operations as distinct ones", lambda t: t.set_op_reading == "distinct", set_ops_as_distinct),
    _Step("set operations nested", lambda t: t.max_set_inputs is not None, lambda p, t, f: nest_set_inputs(p, t)),
    _Step("measure filters as CASE", lambda t: t.measure_filters == "case", measure_filters_as_cases),
    _Step("literal grouping keys as columns", lambda t: not t.literal_grouping_keys,
          lambda p, t, f: literal_grouping_keys_as_columns(p, f)),
    _Step("DISTINCT aggregates as a grouping by their arguments", lambda t: t.distinct_measures == "grouped",
          distinct_measures_grouped),
    _Step("nullif as CASE", lambda t: t.nullif == "case", lambda p, t, f: nullif_as_case(p, t, f)),
    _Step("coalesce as CASE", lambda t: t.coalesce == "case", lambda p, t, f: coalesce_as_case(p, t, f)),
    _Step("arithmetic in its declared type", lambda t: t.arithmetic == "arguments", arithmetic_in_declared_types),
    _Step("floating-point division as the operator", lambda t: t.fp_divide == "operator", fp_division_as_operator),
    _Step("round's rounding written out", lambda t: t.rounding == "written", round_ties_written),
    _Step("LIKE of plain patterns as string functions", lambda t: t.like == "string_functions",
          likes_as_string_functions),
    _Step("functions refused, renamed, split",
          lambda t: bool(t.unsupported_functions or t.supported_functions is not None or t.renames or t.max_args
                         or not t.enum_arguments or t.like_null_escape == "drop" or t.extract_encoding != "enum"),
          adapt_functions),
    _Step("settings the target reads past refused",
          lambda t: (t.aggregate_phase != "any" or not t.window_distinct or t.rounding != "any"
                     or not t.expression_references or not t.clustered_sorts or not t.comparison_sorts
                     or t.silent_overflow or t.substring_start != "any"),
          refuse_ignored_settings),
    _Step("aggregation phase written out", lambda t: t.aggregate_phase == "initial_to_result",
          lambda p, t, f: set_aggregation_phase(p, AggregationPhase.AGGREGATION_PHASE_INITIAL_TO_RESULT)),
    _Step("measure types written out", lambda t: t.explicit_types, lambda p, t, f: fill_measure_types(p, f)),
    _Step("function types written out", lambda t: t.explicit_types, call_types_written),
    _Step("cast failures throw", lambda t: t.cast_failure == "throw", lambda p, t, f: cast_failures_throw(p)),
    _Step("NULL literals typed", lambda t: t.typed_nulls, type_null_literals),
    _Step("decimal casts that hold every value only", lambda t: t.decimal_casts == "exact",
          refuse_inexact_decimal_casts),
    _Step("fixed_char literals as strings", lambda t: not t.fixed_char_literals,
          lambda p, t, f: fixed_char_literals_as_strings(p)),
    _Step("i16 literals as casts", lambda t: not t.i16_literals, lambda p, t, f: i16_literals_as_casts(p, t)),
    _Step("interval literals in days", lambda t: t.interval_literals != "any",
          lambda p, t, f: interval_literals_as_days(p, t)),
    _Step("literals the target reads", lambda t: t.literals is not None, lambda p, t, f: literals_as_read(p, t)),
    _Step("window frame offsets in the old field", lambda t: t.window_offsets == "old_field",
          lambda p, t, f: window_offsets_in_old_field(p, t)),
    _Step("sorts repeated after window projects", lambda t: t.window_order == "lost",
          lambda p, t, f: sorts_after_window_projects(p, f)),
    _Step("output names made unique", lambda t: t.unique_output_names, lambda p, t, f: _unique_output_names(p, f)),
    _Step("set inputs as projects of their columns", lambda t: t.set_input_columns == "projected",
          lambda p, t, f: set_inputs_projected(p, f)),
    _Step("aggregate arguments as columns", lambda t: t.aggregate_arguments == "columns",
          aggregate_arguments_as_columns),
    _Step("type-check in the spec's reading", lambda t: True, lambda p, t, f: _check_written(p, t, f)),
    _Step("DataFusion's grouping-set numbering", lambda t: t.grouping_sets == "datafusion",
          lambda p, t, f: write_datafusion_grouping_sets(p, t.name)),
    _Step("switch expressions as if-then", lambda t: not t.switch_expressions, switch_to_if_then),
    _Step("CASE written with its ELSE", lambda t: t.explicit_else, case_else_written),
    _Step("CASE conditions NULL as false", lambda t: t.case_conditions == "not_null", case_conditions_not_null),
    _Step("DuckDB's project convention", lambda t: t.project_encoding == "expressions_only",
          write_projects_as_expressions),
    _Step("Substrait 0.53's fields", lambda t: t.old_fields, lambda p, t, f: write_old_encoding(p, t.name)),
    _Step("emit kinds written out", lambda t: t.explicit_direct, lambda p, t, f: write_direct_emits(p)),
    _Step("plan version", lambda t: t.plan_version is not None, _stamp_version),
    _Step("producer names the convention",
          lambda t: t.grouping_sets == "datafusion" or t.project_encoding == "expressions_only", _stamp_producer),
)


def write_for_target(plan: Plan | LoadedPlan, target: Target | str | None) -> Plan:
    """``plan`` as ``target`` reads it (a copy; ``plan`` itself when nothing needs to change). ``plan``: a
    loaded plan (:func:`optimizer.load.pipeline.load`; the driver's, with the table its rules kept), or a
    ``Plan`` message, which is loaded first."""
    target = as_target(target)
    if _reads_everything(target):
        return plan.plan if isinstance(plan, LoadedPlan) else plan
    loaded = load(plan)
    out = Plan()
    out.CopyFrom(loaded.plan)
    # The copy's table, a copy of the plan's: the steps that declare or rename a function update it.
    functions = loaded.functions.copy()
    for step in _STEPS:
        if step.applies(target):
            step.run(out, target, functions)
    return out


def _reads_everything(target: Target) -> bool:
    """No step but the type check applies: the target reads every plan the optimizer writes."""
    return not any(step.applies(target) for step in _STEPS if step.what != "type-check in the spec's reading")


def _unique_output_names(plan: Plan, functions: FunctionTable) -> None:
    """Each plan root's output columns of one name get new ones (``a``, ``a_1``), as DuckDB names the
    columns of a table made from a query (``SELECT x.a, y.a``: DuckDB 1.1.3's from_substrait returns a
    table, and refuses the plan with 'duplicate column name "a"')."""
    from optimizer.schema import plan_schemas
    from optimizer.schema.record import Schema, unique_names

    schemas = plan_schemas(plan, functions)
    for i, rel in enumerate(plan.relations):
        if not rel.HasField("root"):
            continue
        schema = schemas[f"relations[{i}].root"]
        names = unique_names(schema.names)
        if names != schema.names:
            del rel.root.names[:]
            rel.root.names.extend(Schema(names, schema.types, schema.nested_name_lists()).to_named_struct().names)


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


def _check_relations(plan: Plan, target: Target) -> None:
    """Refuse what the target cannot read: physical relations (for a logical-only target), aggregates
    with several grouping sets (where the target numbers their output its own way)."""
    from optimizer.expr_utils import rels_with_paths
    from optimizer.schema.record import top_level_names

    for rel, path in rels_with_paths(plan):
        kind = rel.WhichOneof("rel_type")
        if kind in PHYSICAL_RELATIONS and not target.physical_relations:
            raise UnsupportedError(f"{_REL_NAMES.get(kind, kind)} is a physical relation, which target "
                                   f"'{target.name}' does not read (it reads logical relations only)", path)
        if kind in target.unsupported_relations:
            raise UnsupportedError(f"{kind.title()}Rel: target '{target.name}' does not read it", path)
        if kind == "read" and target.typed_schemas and (
                len(rel.read.base_schema.struct.types) != len(top_level_names(rel.read.base_schema))):
            raise UnsupportedError(f"ReadRel whose base_schema names its columns without their types (as "
                                   f"DataFusion 40 and 41 write it): target '{target.name}' needs the types", path)
        if kind == "read" and target.read_types is not None:
            read_type = rel.read.WhichOneof("read_type")
            if read_type not in target.read_types:
                raise UnsupportedError(f"ReadRel of a {read_type}: target '{target.name}' reads "
                                       f"{', '.join(sorted(target.read_types))} only", path)
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

