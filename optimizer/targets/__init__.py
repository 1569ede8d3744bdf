"""Consumer targets: what the engine that will run an optimized plan reads, and how.

A target is a JSON profile (package data ``optimizer/data/targets/<name>.json`` for ``spark``,
``datafusion``, ``duckdb`` and ``acero``; a user writes their own and passes its path). The driver reads
it to choose the rules and the pricing (:mod:`optimizer.driver`), the write stage
(:func:`optimizer.write.write_for_target`) to adapt the plan to it. Format (every field but ``name``
optional; the defaults are the spec's reading)::

    {"name": "datafusion",
     "engine": "DataFusion 55.0.0 (datafusion.substrait.Consumer)",   # what the profile was checked on
     "evidence": ["...what was run and what the engine answered..."],
     "physical_relations": false,   # reads HashJoinRel, MergeJoinRel, NestedLoopJoinRel, TopNRel,
                                    # ConsistentPartitionWindowRel, ExchangeRel (only Spark's backend does)
     "reference_rel": false,        # reads ReferenceRel (shared subtrees); false: the writer inlines them
     "read": {"filter": "applied",            # ReadRel.filter: applied | pruning_only | unsupported
              "best_effort_filter": "ignored",  # used | ignored | unsupported
              "projection_mask": true},       # reads ReadRel.projection (a column mask)
     "join_types": ["INNER", "LEFT", "LEFT_SEMI"],   # JoinRel types it reads (null: all)
     "subqueries": true,            # reads subquery expressions (scalar, IN, EXISTS...)
     "switch_expressions": true,    # reads switch_expression (false: written as the searched CASE)
     "join_condition": "any",       # any | single_key: a join on one key comparison only (Acero); an
                                    #   inner join's other conjuncts go into a FilterRel above
     "window_functions": true,      # reads window function expressions (false: refused)
     "correlated_subqueries": true, # reads outer references (false: a correlated subquery is refused)
     "conjunct_order": "written",   # written | engine: whether the engine evaluates a filter's conjuncts
                                    #   in the order written (Spark) or in one of its own (DuckDB); only
                                    #   the first is what order_conjuncts prices, so it runs only there
     "scan_filters": "written",     # written | engine: whether a filter above a read stays there unless
                                    #   the plan moves it into ReadRel.filter, or the engine moves it into
                                    #   its scan itself (DuckDB, faster so): filter_into_read runs only
                                    #   for the first
     "max_set_inputs": null,        # a UNION of more inputs is nested (other set operations refused)
     "set_ops": null,               # the SetRel operations it reads (UNION_ALL, ...; null: all)
     "unsupported_relations": [],   # Rel kinds it does not read, by their field name in Rel ("cross")
     "read_types": null,            # the ReadRel kinds it reads (named_table, local_files,
                                    #   virtual_table, extension_table, iceberg_table; null: all)
     "functions": {"rename": {"like": "match_like"},   # our simple name -> the target's
                   "max_args": {"and": 2, "or": 2},   # variadic calls split into nested calls
                   "unsupported": ["substring"],       # refused (exit 3)
                   "supported": null,                  # or the only names it reads (others refused)
                   "enum_arguments": true,             # reads enum arguments (extract's 'YEAR')
                   "like": "keep",                     # keep | string_functions: like(a, 'x%') written as
                                                       #   starts_with, '%x' ends_with, '%x%' contains, 'x' equal
                   "like_null_escape": "keep",         # keep | drop: like(a, p, NULL) means no escape
                                                       #   character; drop writes like(a, p)
                   "coalesce": "keep",                 # keep | case: coalesce(a, b) is written as the CASE
                                                       #   WHEN a IS NOT NULL THEN a ELSE b END
                   "nullif": "keep",                   # keep | case: nullif(a, b) is written as the CASE
                                                       #   WHEN a = b THEN NULL ELSE a END it means
                   "fp_divide": "keep",                # keep | operator: divide of floating-point values
                                                       #   calls '/' (DuckDB's divide() gives NULL for x/0)
                   "extract": "enum",                  # enum | date_part: extract(YEAR, x) is written
                                                       #   date_part('year', x) (DataFusion)
                   "silent_overflow": false},          # true: arithmetic overflows its own way, so a call
                                                       #   asking SATURATE or ERROR is refused
     "encoding": {"project": "spec",          # spec | expressions_only (DuckDB 1.1.3: a ProjectRel
                                              #   outputs only its expressions and its emit is ignored)
                  "aggregate_phase": "any",   # any | result: only INITIAL_TO_RESULT (or unspecified) read, the
                                              #   partial phases refused (DuckDB and DataFusion ignore the
                                              #   phase) | initial_to_result: also written out where
                                              #   unspecified (Acero rejects the unspecified phase)
                  "window_distinct": true,    # false: a DISTINCT window function is refused (DataFusion
                                              #   counts every value)
                  "rounding": "any",          # any | tie_away_from_zero: a call whose rounding option
                                              #   allows only another rounding is refused | written: the
                                              #   target follows the option but rounds ties otherwise
                                              #   without one, so round() gets TIE_AWAY_FROM_ZERO written
                  "substring_start": "any",   # any | left_of_beginning | wrap_from_end: how the target's
                                              #   substring reads a start below 1, whatever the call's
                                              #   negative_start option says; a call asking another, whose
                                              #   start is not a literal of at least 1, is refused
                  "semi_join_conditions": "any",  # any | not_null: a semi join's condition NULL for a pair
                                              #   matches (DuckDB), so each conjunct that may be NULL gets
                                              #   IS NOT NULL of itself beside it
                  "mark_joins": "any",        # any | two_valued: the mark is true or false, never NULL
                                              #   (DataFusion); a mark join is refused unless NULL and false
                                              #   cannot change the answer
                  "comparison_sorts": true,   # false: a sort by a comparison function is refused
                                              #   (DataFusion panics on it)
                  "clustered_sorts": true,    # false: a CLUSTERED sort direction is refused (DataFusion
                                              #   panics on it)
                  "expression_references": true,  # false: a field reference into an expression's value
                                              #   (struct(k, s).field(1)) is refused (DuckDB reads the
                                              #   field of the input row instead)
                  "grouping_sets": "spec",    # spec | datafusion (its numbering of several grouping sets) |
                                              #   union (a UNION ALL of one aggregate per set) |
                                              #   refuse (an aggregate with several grouping sets)
                  "old_fields": false,        # also write the fields Substrait 0.53 had in place of
                                              #   today's (Grouping.grouping_expressions, FetchRel.count)
                  "explicit_direct": false,   # a RelCommon without emit says 'direct' (Acero rejects an
                                              #   unset emit kind: 'Invalid emit case')
                  "explicit_types": false,    # an aggregate measure without output_type gets its type
                  "explicit_else": false,     # a CASE without ELSE gets ELSE NULL of its type (Acero
                                              #   converts no if_then without else)
                  "literal_grouping_keys": true,  # false: a literal grouping key is computed by a
                                              #   project below (DuckDB binds GROUP BY 2 as a position)
                  "typed_schemas": false,     # true: a read's base_schema must give its columns' types
                                              #   (DataFusion 40 and 41 write names only; DataFusion and
                                              #   Acero then fail: 'Named struct must contain a struct')
                  "right_joins": "any",       # any | left: a RIGHT join is written as the LEFT join of its
                                              #   inputs swapped (DataFusion misreads a filter above a
                                              #   RIGHT join whose inputs share a column name)
                  "arithmetic": "arguments",  # declared: arithmetic computed in its declared output type
                                              #   (the Spark backend) | arguments: in its arguments'
                                              #   types, so each argument of another number kind is cast
                                              #   to the declared one (DataFusion, DuckDB: 1 / 2 = 0)
                  "local_files": "any",       # any | paths: file:// URIs of local files written as paths
                                              #   (DuckDB finds no file at a URI) | uris: absolute paths
                                              #   written as file:// URIs (Acero: 'URI has empty scheme')
                  "case_conditions": "any",   # any | not_null: each CASE condition c is written
                                              #   coalesce(c, false) (Acero takes a one-WHEN CASE whose
                                              #   condition is NULL to be NULL, not its ELSE)
                  "window_order": "kept",     # kept | lost: a project of window functions keeps its input's
                                              #   order; lost: the sort below is repeated above it
                  "transitive_join_keys": false,  # a join's a = b also gets a = c where an inner join
                                              #   directly below makes b = c (DataFusion keys on both then)
                  "semi_join_emits": false,   # a semi / anti join gets the explicit emit of its left
                                              #   columns (Acero counts both inputs' otherwise)
                  "explicit_join_conditions": false,  # a JoinRel without expression gets the condition
                                              #   true (DuckDB 1.1.3: 'Unsupported expression type 0')
                  "empty_virtual_tables": "any",  # any | filtered_row: a VALUES of no rows is written as
                                              #   a row of NULLs under a filter that keeps none (DuckDB)
                  "measure_filters": "any",   # any | case: a measure's filter becomes a CASE on its
                                              #   arguments (count, sum, avg, min, max; others refused)
                  "distinct_measures": "any",  # any | grouped: an aggregate of DISTINCT values is written
                                              #   as one over a grouping by its arguments (Acero reads
                                              #   no DISTINCT invocation)
                  "post_join_filters": "any", # any | filter_above: a JoinRel's post_join_filter is written
                                              #   as a FilterRel above it (DuckDB ignores the field)
                  "anti_joins": "any",        # any | left_join: a LEFT_ANTI join is written as a LEFT join
                                              #   to its right input marked by a constant, keeping the
                                              #   rows where the mark is NULL (DuckDB 1.1.3)
                  "scalar_subqueries": "any", # any | left_join: an uncorrelated scalar subquery of at
                                              #   most one row is written as a LEFT join on true to it
                  "in_predicates": "any",     # any | joins: a filter's conjunct x IN (S) / NOT x IN (S)
                                              #   is a semi / null-aware anti join to S
                  "cast_failure": "any",      # any | throw: an unspecified cast failure behavior is written
                                              #   THROW_EXCEPTION
                  "typed_nulls": false,       # every NULL literal has a type (the cast around it gives it)
                  "decimal_casts": "any",     # any | exact: only casts to a decimal that holds every
                                              #   value of the input; others refused (Acero neither fails
                                              #   nor rounds a narrowing decimal cast)
                  "unique_output_names": false,  # output columns of one name get new ones (a, a_1: DuckDB
                                              #   1.1.3's from_substrait returns a table)
                  "fixed_char_literals": true,  # false: a fixed_char literal is written as a string one
                  "i16_literals": true,       # false: an i16 literal is written as a cast of the i32 one
                  "literals": null,           # the literal kinds it reads (Expression.Literal's oneof:
                                              #   boolean, i32, string, ...; null: all); after the steps
                                              #   above, var_char is written as string where string is
                                              #   read and var_char is not, any other kind refused
                  "interval_literals": "any",  # any | days: intervals as whole days or months only |
                                               #   refuse: none (Acero adds none to a date)
                  "set_ops": "spec",  # spec | distinct: every SetRel is read as its distinct form
                                      #   (DuckDB 1.1.3 reads SET_OP_UNION_ALL as UNION)
                                               #   (DuckDB 1.1.3 ignores seconds, knows no compound)
                  "aggregate_arguments": "any",  # any | columns: measures and keys read plain columns
                                                 #   (Acero), computed by a ProjectRel below
                  "window_offsets": "any",    # any | old_field: a frame bound's offset_expr is written
                                              #   in the int64 offset field it replaced (DataFusion 55)
                  "set_input_columns": "any",  # any | projected: each SetRel input gets a project of
                                              #   its columns (Acero compares its inputs' column names,
                                              #   which it derives from their expressions)
                  "computed_decimal_measures": true},  # false: an aggregate of a computed decimal
                                                       #   expression is refused (Acero crashes on it)
                  "plan_version": null},      # [major, minor, patch]: the version the plan declares
     "capabilities": "spark-parquet"}  # reader capabilities for filter_into_read: a profile object or
                                       # the name of package data optimizer/data/capabilities/<name>.json

Bad input (an unknown name, a file that is not a profile, a field of the wrong kind) is a one-line
:class:`~optimizer.errors.PlanError` (exit 2) naming the file and the field.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from importlib import resources
from typing import Any

from substrait.proto import Expression, ReadRel, Rel

from optimizer.capabilities import Capabilities, default_capabilities
from optimizer.capabilities import from_dict as capabilities_from_dict
from optimizer.errors import PlanError

#: The targets shipped as package data.
TARGETS: tuple[str, ...] = ("spark", "datafusion", "datafusion-legacy", "duckdb", "acero")

READ_FILTER = ("applied", "pruning_only", "unsupported")
BEST_EFFORT = ("used", "ignored", "unsupported")
PROJECT_ENCODINGS = ("spec", "expressions_only")
AGGREGATE_PHASES = ("any", "result", "initial_to_result")
GROUPING_SETS = ("spec", "datafusion", "union", "refuse")
CONJUNCT_ORDERS = ("written", "engine")
SCAN_FILTERS = ("written", "engine")

#: The relations only an engine that reads physical plans (Spark's backend) takes.
PHYSICAL_RELATIONS = frozenset({"hash_join", "merge_join", "nested_loop_join", "top_n", "window", "exchange",
                                "expand", "duplicate_eliminated_join"})


@dataclass(frozen=True)
class Target:
    """A consumer target (see the module docstring for the JSON form)."""

    name: str
    engine: str = ""
    evidence: tuple[str, ...] = ()
    physical_relations: bool = True
    reference_rel: bool = True
    read_filter: str = "applied"
    best_effort_filter: str = "used"
    projection_mask: bool = True
    renames: dict[str, str] = field(default_factory=dict)
    max_args: dict[str, int] = field(default_factory=dict)
    unsupported_functions: frozenset[str] = frozenset()
    supported_functions: frozenset[str] | None = None
    join_types: frozenset[str] | None = None
    subqueries: bool = True
    enum_arguments: bool = True
    like_null_escape: str = "keep"
    like: str = "keep"
    nullif: str = "keep"
    coalesce: str = "keep"
    fp_divide: str = "keep"
    extract_encoding: str = "enum"
    silent_overflow: bool = False
    old_fields: bool = False
    switch_expressions: bool = True
    join_condition: str = "any"
    explicit_types: bool = False
    explicit_join_conditions: bool = False
    semi_join_emits: bool = False
    transitive_join_keys: bool = False
    window_order: str = "kept"
    anti_joins: str = "any"
    post_join_filters: str = "any"
    measure_filters: str = "any"
    distinct_measures: str = "any"
    explicit_else: bool = False
    case_conditions: str = "any"
    local_files: str = "any"
    arithmetic: str = "arguments"
    right_joins: str = "any"
    typed_schemas: bool = False
    literal_grouping_keys: bool = True
    empty_virtual_tables: str = "any"
    scalar_subqueries: str = "any"
    in_predicates: str = "any"
    cast_failure: str = "any"
    window_functions: bool = True
    max_set_inputs: int | None = None
    set_ops: frozenset[str] | None = None
    unsupported_relations: frozenset[str] = frozenset()
    read_types: frozenset[str] | None = None
    typed_nulls: bool = False
    decimal_casts: str = "any"
    unique_output_names: bool = False
    correlated_subqueries: bool = True
    conjunct_order: str = "written"
    scan_filters: str = "written"
    fixed_char_literals: bool = True
    i16_literals: bool = True
    literals: frozenset[str] | None = None
    set_input_columns: str = "any"
    window_offsets: str = "any"
    interval_literals: str = "any"
    set_op_reading: str = "spec"
    explicit_direct: bool = False
    aggregate_arguments: str = "any"
    computed_decimal_measures: bool = True
    project_encoding: str = "spec"
    aggregate_phase: str = "any"
    window_distinct: bool = True
    rounding: str = "any"
    substring_start: str = "any"
    expression_references: bool = True
    clustered_sorts: bool = True
    comparison_sorts: bool = True
    mark_joins: str = "any"
    semi_join_conditions: str = "any"
    grouping_sets: str = "spec"
    plan_version: tuple[int, int, int] | None = None
    capabilities: Capabilities | None = None
    source: str = ""

    @property
    def reader_capabilities(self) -> Capabilities:
        """The reader-capability profile ``filter_into_read`` uses for this target."""
        return self.capabilities if self.capabilities is not None else default_capabilities()


def _at(where: str, key: str) -> str:
    """``file: section.key`` (``file: key`` at the top level)."""
    return f"{where}{key}" if where.endswith(": ") else f"{where}.{key}"


def _choice(data: dict, key: str, choices: tuple[str, ...], default: str, where: str) -> str:
    value = data.get(key, default)
    if value not in choices:
        raise PlanError(f"must be one of {', '.join(choices)} (got {value!r})", _at(where, key))
    return value


def _bool(data: dict, key: str, default: bool, where: str) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise PlanError(f"must be true or false (got {value!r})", _at(where, key))
    return value


#: The ``encoding`` section: each JSON field, the ``Target`` attribute it sets and the values it takes
#: (``None``: true or false); the default is the attribute's.
_ENCODING: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "project": ("project_encoding", PROJECT_ENCODINGS),
    "aggregate_phase": ("aggregate_phase", AGGREGATE_PHASES),
    "window_distinct": ("window_distinct", None),
    "rounding": ("rounding", ("any", "tie_away_from_zero", "written")),
    "substring_start": ("substring_start", ("any", "left_of_beginning", "wrap_from_end")),
    "expression_references": ("expression_references", None),
    "clustered_sorts": ("clustered_sorts", None),
    "comparison_sorts": ("comparison_sorts", None),
    "mark_joins": ("mark_joins", ("any", "two_valued")),
    "semi_join_conditions": ("semi_join_conditions", ("any", "not_null")),
    "grouping_sets": ("grouping_sets", GROUPING_SETS),
    "old_fields": ("old_fields", None),
    "explicit_direct": ("explicit_direct", None),
    "explicit_types": ("explicit_types", None),
    "explicit_join_conditions": ("explicit_join_conditions", None),
    "semi_join_emits": ("semi_join_emits", None),
    "transitive_join_keys": ("transitive_join_keys", None),
    "window_order": ("window_order", ("kept", "lost")),
    "anti_joins": ("anti_joins", ("any", "left_join")),
    "post_join_filters": ("post_join_filters", ("any", "filter_above")),
    "measure_filters": ("measure_filters", ("any", "case")),
    "distinct_measures": ("distinct_measures", ("any", "grouped")),
    "explicit_else": ("explicit_else", None),
    "case_conditions": ("case_conditions", ("any", "not_null")),
    "local_files": ("local_files", ("any", "paths", "uris")),
    "arithmetic": ("arithmetic", ("declared", "arguments")),
    "right_joins": ("right_joins", ("any", "left")),
    "typed_schemas": ("typed_schemas", None),
    "literal_grouping_keys": ("literal_grouping_keys", None),
    "empty_virtual_tables": ("empty_virtual_tables", ("any", "filtered_row")),
    "scalar_subqueries": ("scalar_subqueries", ("any", "left_join")),
    "in_predicates": ("in_predicates", ("any", "joins")),
    "cast_failure": ("cast_failure", ("any", "throw")),
    "typed_nulls": ("typed_nulls", None),
    "decimal_casts": ("decimal_casts", ("any", "exact")),
    "unique_output_names": ("unique_output_names", None),
    "fixed_char_literals": ("fixed_char_literals", None),
    "i16_literals": ("i16_literals", None),
    "interval_literals": ("interval_literals", ("any", "days", "refuse")),
    "set_input_columns": ("set_input_columns", ("any", "projected")),
    "window_offsets": ("window_offsets", ("any", "old_field")),
    "set_ops": ("set_op_reading", ("spec", "distinct")),
    "aggregate_arguments": ("aggregate_arguments", ("any", "columns")),
    "computed_decimal_measures": ("computed_decimal_measures", None),
}

_SECTION_FIELDS = {
    "read": frozenset({"filter", "best_effort_filter", "projection_mask"}),
    "functions": frozenset({"rename", "max_args", "unsupported", "supported", "enum_arguments", "like_null_escape", "like",
                            "extract", "nullif", "coalesce", "fp_divide",
                            "silent_overflow"}),
    "encoding": frozenset(_ENCODING) | {"plan_version", "literals"},
}


def _encoding(encoding: dict, where: str) -> dict[str, Any]:
    """The ``Target`` attributes the ``encoding`` section sets (a field it lacks: the default)."""
    defaults = {f.name: f.default for f in fields(Target)}
    out: dict[str, Any] = {}
    for key, (attribute, choices) in _ENCODING.items():
        default = defaults[attribute]
        out[attribute] = (_bool(encoding, key, default, where) if choices is None
                          else _choice(encoding, key, choices, default, where))
    return out


def _section(data: dict, key: str, where: str) -> dict:
    """The object ``data[key]``; a field it does not know is refused (a misspelt one would be ignored)."""
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise PlanError("must be a JSON object", _at(where, key))
    unknown = sorted(set(value) - _SECTION_FIELDS[key])
    if unknown:
        raise PlanError(f"unknown field (known: {', '.join(sorted(_SECTION_FIELDS[key]))})",
                        _at(_at(where, key), unknown[0]))
    return value


def _names(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise PlanError("must be a list of function names", where)
    return value


def _capabilities(value: Any, where: str) -> Capabilities | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return capabilities_from_dict(value, where)
    if isinstance(value, str):
        try:
            text = resources.files("optimizer").joinpath(f"data/capabilities/{value}.json").read_text("utf-8")
        except (FileNotFoundError, OSError):
            raise PlanError(f"no capability profile named {value!r}", where) from None
        return capabilities_from_dict(json.loads(text), f"{value}.json")
    raise PlanError("must be a capability profile object or the name of one", where)


def _set_ops(value: Any, where: str) -> frozenset[str] | None:
    if value is None:
        return None
    from substrait.proto import SetRel

    known = {name.removeprefix("SET_OP_") for name, number in SetRel.SetOp.items() if number}
    if not isinstance(value, list) or not all(isinstance(v, str) and v in known for v in value):
        raise PlanError(f"must be a list of set operations ({', '.join(sorted(known))}) or null", f"{where}set_ops")
    return frozenset(value)


def _max_set_inputs(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 2:
        raise PlanError("must be an input count of at least 2, or null", f"{where}max_set_inputs")
    return value


_KNOWN = frozenset({"name", "engine", "evidence", "physical_relations", "reference_rel", "read", "functions",
                    "encoding", "capabilities", "description", "join_types", "subqueries", "switch_expressions",
                    "join_condition", "window_functions", "max_set_inputs", "set_ops",
                    "correlated_subqueries", "conjunct_order", "scan_filters", "unsupported_relations",
                    "read_types"})


def _oneof_names(value: Any, oneof: str, message: type, where: str, *, nullable: bool) -> frozenset[str] | None:
    """A list of the field names of ``message``'s oneof ``oneof`` (``null`` where ``nullable``)."""
    if value is None and nullable:
        return None
    known = {f.name for f in message.DESCRIPTOR.oneofs_by_name[oneof].fields}
    if not isinstance(value, list) or not all(isinstance(v, str) and v in known for v in value):
        raise PlanError(f"must be a list of {message.DESCRIPTOR.name} kinds ({', '.join(sorted(known))})"
                        + (" or null" if nullable else ""), where)
    return frozenset(value)


def target_from_dict(data: Any, source: str = "<target>") -> Target:
    """A target from its JSON object; ``source`` names the file in errors."""
    if not isinstance(data, dict):
        raise PlanError("a target profile is a JSON object", source)
    unknown = sorted(set(data) - _KNOWN)
    if unknown:
        raise PlanError(f"unknown field (known: {', '.join(sorted(_KNOWN))})", f"{source}: {unknown[0]}")
    where = f"{source}: "
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise PlanError("a target profile needs a 'name' (a non-empty string)", f"{where}name")
    evidence = data.get("evidence", [])
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        raise PlanError("must be a list of strings", f"{where}evidence")
    read = _section(data, "read", where)
    functions = _section(data, "functions", where)
    encoding = _section(data, "encoding", where)
    renames = functions.get("rename", {})
    if not isinstance(renames, dict) or not all(isinstance(k, str) and isinstance(v, str) and v
                                                for k, v in renames.items()):
        raise PlanError("must map function names to function names", f"{where}functions.rename")
    max_args = functions.get("max_args", {})
    if not isinstance(max_args, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 2 for v in max_args.values()):
        raise PlanError("must map function names to an argument count of at least 2", f"{where}functions.max_args")
    version = encoding.get("plan_version")
    if version is not None:
        if (not isinstance(version, list) or len(version) != 3
                or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in version)):
            raise PlanError("must be [major, minor, patch] (non-negative integers) or null",
                            f"{where}encoding.plan_version")
        version = tuple(version)
    join_types = data.get("join_types")
    if join_types is not None:
        from substrait.proto import JoinRel

        known = {v.name.removeprefix("JOIN_TYPE_") for v in JoinRel.JoinType.DESCRIPTOR.values if v.number}
        if not isinstance(join_types, list) or not all(isinstance(t, str) and t in known for t in join_types):
            raise PlanError(f"must be a list of join types ({', '.join(sorted(known))}) or null",
                            f"{where}join_types")
        join_types = frozenset(join_types)
    return Target(
        name=name,
        join_types=join_types,
        subqueries=_bool(data, "subqueries", True, where),
        switch_expressions=_bool(data, "switch_expressions", True, where),
        join_condition=_choice(data, "join_condition", ("any", "single_key"), "any", where),
        window_functions=_bool(data, "window_functions", True, where),
        correlated_subqueries=_bool(data, "correlated_subqueries", True, where),
        conjunct_order=_choice(data, "conjunct_order", CONJUNCT_ORDERS, "written", where),
        scan_filters=_choice(data, "scan_filters", SCAN_FILTERS, "written", where),
        max_set_inputs=_max_set_inputs(data.get("max_set_inputs"), where),
        set_ops=_set_ops(data.get("set_ops"), where),
        unsupported_relations=_oneof_names(data.get("unsupported_relations", []), "rel_type", Rel,
                                           f"{where}unsupported_relations", nullable=False),
        read_types=_oneof_names(data.get("read_types"), "read_type", ReadRel, f"{where}read_types", nullable=True),
        enum_arguments=_bool(functions, "enum_arguments", True, f"{where}functions"),
        like_null_escape=_choice(functions, "like_null_escape", ("keep", "drop"), "keep", f"{where}functions"),
        like=_choice(functions, "like", ("keep", "string_functions"), "keep", f"{where}functions"),
        nullif=_choice(functions, "nullif", ("keep", "case"), "keep", f"{where}functions"),
        coalesce=_choice(functions, "coalesce", ("keep", "case"), "keep", f"{where}functions"),
        fp_divide=_choice(functions, "fp_divide", ("keep", "operator"), "keep", f"{where}functions"),
        extract_encoding=_choice(functions, "extract", ("enum", "date_part"), "enum", f"{where}functions"),
        silent_overflow=_bool(functions, "silent_overflow", False, f"{where}functions"),
        engine=str(data.get("engine", "")),
        evidence=tuple(evidence),
        physical_relations=_bool(data, "physical_relations", True, where),
        reference_rel=_bool(data, "reference_rel", True, where),
        read_filter=_choice(read, "filter", READ_FILTER, "applied", f"{where}read"),
        best_effort_filter=_choice(read, "best_effort_filter", BEST_EFFORT, "used", f"{where}read"),
        projection_mask=_bool(read, "projection_mask", True, f"{where}read"),
        renames=dict(renames),
        max_args=dict(max_args),
        unsupported_functions=frozenset(_names(functions.get("unsupported", []), f"{where}functions.unsupported")),
        supported_functions=(None if functions.get("supported") is None else
                             frozenset(_names(functions["supported"], f"{where}functions.supported"))),
        **_encoding(encoding, f"{where}encoding"),
        literals=_oneof_names(encoding.get("literals"), "literal_type", Expression.Literal,
                              f"{where}encoding.literals", nullable=True),
        plan_version=version,
        capabilities=_capabilities(data.get("capabilities"), f"{where}capabilities"),
        source=source,
    )


def load_target(name_or_path: str | os.PathLike) -> Target:
    """The target named ``name_or_path`` (one of :data:`TARGETS`) or read from that JSON file."""
    text = os.fspath(name_or_path)
    if text in TARGETS:
        data = resources.files("optimizer").joinpath(f"data/targets/{text}.json").read_text("utf-8")
        return target_from_dict(json.loads(data), f"{text}.json")
    if not os.path.isfile(text):
        raise PlanError(f"no such target (a name: {', '.join(TARGETS)}; or a profile JSON file)", text)
    try:
        with open(text, encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as exc:
        raise PlanError(f"not valid JSON: {exc}", text) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanError(f"cannot read the target profile: {exc}", text) from None
    except RecursionError:  # the file, not the plan, is nested too deeply
        raise PlanError("JSON nested too deeply for this tool (Python's recursion limit)", text) from None
    except ValueError as exc:  # a 5000-digit integer
        raise PlanError(f"not usable JSON: {' '.join(str(exc).split())[:120]}", text) from None
    return target_from_dict(data, text)


def as_target(value: Target | str | os.PathLike | None) -> Target:
    """A target from what a caller passed: None (``spark``), a :class:`Target`, a name or a path."""
    if value is None:
        return load_target("spark")
    if isinstance(value, Target):
        return value
    if isinstance(value, str | os.PathLike):
        return load_target(value)
    raise TypeError(f"not a target: {type(value).__name__}")
