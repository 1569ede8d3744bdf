"""Functions as the target names them: refused where it lacks them, renamed, variadic calls nested.

* ``functions.unsupported``: a call of one of these (scalar, aggregate or window) is an
  :class:`~optimizer.errors.UnsupportedError` naming the function, the relation and the target;
  ``functions.supported``, when given, the same for a call of any name it does not list (Acero reads the
  names ``pyarrow.substrait.get_supported_functions()`` lists, and no other);
* ``functions.rename``: the declaration's simple name is replaced (a compound name keeps its
  signature: ``like:str_str`` -> ``<new>:str_str``);
* ``functions.max_args``: a call of ``and`` / ``or`` with more arguments becomes nested calls
  (``and(a, b, c)`` -> ``and(and(a, b), c)``: the same three-valued result, both are associative).
  Only associative functions can be split this way; another name is refused.

* ``functions.extract``: ``date_part`` writes ``extract(COMPONENT, x)`` as ``date_part('component', x)``
  (see :func:`_extract_as_date_part`).

Also :func:`refuse_inexact_decimal_casts` (``encoding.decimal_casts``) and :func:`set_aggregation_phase`: the phase of every aggregate and window call left unspecified is
written out (Acero accepts ``INITIAL_TO_RESULT`` only, and rejects the unspecified phase; a plan that
aggregates in one relation means exactly that phase).
"""

from __future__ import annotations

from collections.abc import Iterator

from google.protobuf.message import Message
from substrait.proto import AggregateFunction, AggregationPhase, Expression, Plan, Type

from optimizer.dag import strip_inputs
from optimizer.errors import UnsupportedError
from optimizer.expr_utils import (
    FunctionRegistrar,
    argument_literal,
    positive_int_argument,
    rels_with_paths,
    walk,
)
from optimizer.load.functions import FunctionTable, declared_functions, resolve
from optimizer.targets import Target

#: Functions whose nested form means the same as the variadic call.
ASSOCIATIVE = frozenset({"and", "or"})

_SCALAR, _EXPRESSION, _LITERAL = "substrait.Expression.ScalarFunction", "substrait.Expression", "substrait.Expression.Literal"
_CALLS = frozenset({_SCALAR, "substrait.AggregateFunction", "substrait.Expression.WindowFunction"})


def _messages(plan: Plan, *full_names: str) -> Iterator[Message]:
    """The messages of the types ``full_names`` anywhere in ``plan`` (in subqueries too), parents first;
    the caller may change each one in place as it comes."""
    for m in walk(plan, enter_subqueries=True):
        if m.DESCRIPTOR.full_name in full_names:
            yield m


def adapt_functions(plan: Plan, target: Target, functions: FunctionTable) -> None:
    """Refuse, rename and split the plan's function calls for ``target``, in place; ``functions``, the
    plan's table, is updated with the new names."""
    if not (target.unsupported_functions or target.supported_functions is not None or target.renames
            or target.max_args or not target.enum_arguments or target.like_null_escape == "drop"
            or target.extract_encoding != "enum"):
        return
    if target.extract_encoding == "date_part":
        _extract_as_date_part(plan, functions)
    names = {info.anchor: info.name for info in functions}
    if target.like_null_escape == "drop":
        for m in _messages(plan, _SCALAR):
            if (names.get(m.function_reference) in ("like", "ilike") and len(m.arguments) == 3
                    and _is_null(m.arguments[2])):
                del m.arguments[2]
    if target.unsupported_functions or target.supported_functions is not None or target.max_args \
            or not target.enum_arguments:
        for rel, path in rels_with_paths(plan):
            own = strip_inputs(rel)  # this relation's expressions (a subquery's relations come on their own)
            for m in walk(own, enter_subqueries=False):
                if m.DESCRIPTOR.full_name in _CALLS:
                    name = names.get(m.function_reference)
                    if not target.enum_arguments and any(a.WhichOneof("arg_type") == "enum" for a in m.arguments):
                        raise UnsupportedError(f"function '{name}' with an enum argument: target '{target.name}' "
                                               "reads value arguments only", path)
                    if name in target.unsupported_functions or (
                            target.supported_functions is not None and name not in target.supported_functions):
                        kind = rel.WhichOneof("rel_type")
                        article = "an" if kind[0] in "aeiou" else "a"
                        raise UnsupportedError(f"function '{name}' in {article} {kind} relation: target "
                                               f"'{target.name}' has no such function", path)
                    limit = target.max_args.get(name or "")
                    if (limit is not None and m.DESCRIPTOR.full_name == _SCALAR
                            and len(m.arguments) > limit and name not in ASSOCIATIVE):
                        raise UnsupportedError(f"function '{name}' with {len(m.arguments)} arguments: target "
                                               f"'{target.name}' takes at most {limit}", path)
        if target.max_args:
            calls = list(_messages(plan, _SCALAR))
            for call in reversed(calls):  # arguments before the calls that hold them
                limit = target.max_args.get(names.get(call.function_reference, ""))
                if limit is not None and len(call.arguments) > limit:
                    _nest(call, limit)
    for fn, urn in declared_functions(plan):
        simple, colon, signature = fn.name.partition(":")
        if simple in target.renames:
            fn.name = target.renames[simple] + colon + signature
            functions.declare(resolve(fn.function_anchor, fn.name, urn))


#: ``extract``'s components that DataFusion's ``date_part`` reads with the same meaning (the calendar
#: field as an integer); the others (weeks, days of the week, seconds with their fraction...) differ or
#: are unknown to it, and are left to be refused as enum arguments.
_DATE_PART_COMPONENTS = {"YEAR": "year", "QUARTER": "quarter", "MONTH": "month", "DAY": "day",
                         "DAY_OF_YEAR": "doy", "HOUR": "hour", "MINUTE": "minute"}


def _extract_as_date_part(plan: Plan, functions: FunctionTable) -> int:
    """Every ``extract(COMPONENT, x)`` of a component in :data:`_DATE_PART_COMPONENTS` becomes
    ``date_part('component', x)``, in place; the number rewritten. DataFusion 55 reads no enum argument
    ("Function argument non-Value type not supported"); its own producer writes ``EXTRACT(YEAR FROM x)`` as
    ``date_part`` of the component's name as a string literal, which its consumer reads."""
    registrar = FunctionRegistrar(plan, functions)
    names = {info.anchor: info.name for info in functions}
    changed = 0
    for m in list(_messages(plan, _SCALAR)):
        # The spec's options are upper case; DuckDB writes them in lower case ('year').
        if (names.get(m.function_reference) != "extract" or len(m.arguments) != 2
                or m.arguments[0].WhichOneof("arg_type") != "enum"
                or m.arguments[0].enum.upper() not in _DATE_PART_COMPONENTS):
            continue
        component = _DATE_PART_COMPONENTS[m.arguments[0].enum.upper()]
        m.arguments[0].ClearField("enum")
        m.arguments[0].value.literal.string = component
        m.function_reference = registrar.anchor("date_part", "functions_datetime", "date_part:str_any")
        changed += 1
    return changed


def _refuse_overflow_options(plan: Plan, target: Target, names: dict[int, str]) -> None:
    """A call whose ``overflow`` option allows only ``SATURATE`` or ``ERROR`` is refused for a target whose
    arithmetic overflows its own way whatever the option says (DataFusion 55: ``add(i8 -128, i8 -128)``
    with ``overflow: SATURATE`` did not give -128; found by the fuzzer against Spark)."""
    for rel, path in rels_with_paths(plan):
        for m in walk(strip_inputs(rel), enter_subqueries=False):
            if m.DESCRIPTOR.full_name not in _CALLS:
                continue
            for option in m.options:
                if option.name == "overflow" and option.preference and "SILENT" not in option.preference:
                    raise UnsupportedError(f"function '{names.get(m.function_reference)}' with overflow "
                                           f"{'/'.join(option.preference)}: target '{target.name}' ignores the "
                                           "option", path)


#: The aggregation phases a target of ``aggregate_phase`` result or initial_to_result reads: a whole
#: aggregation over raw values.
_WHOLE_PHASES = (AggregationPhase.AGGREGATION_PHASE_UNSPECIFIED, AggregationPhase.AGGREGATION_PHASE_INITIAL_TO_RESULT)


def refuse_ignored_settings(plan: Plan, target: Target, functions: FunctionTable) -> None:
    """Refuse the calls whose settings the target reads past, answering as if they were not there: a
    partial aggregation phase (DuckDB and DataFusion count raw values where INTERMEDIATE_TO_RESULT merges
    partial counts: 5 instead of 160), a DISTINCT window function (DataFusion's count(DISTINCT v) OVER ()
    counts every value: 5 instead of 4), a rounding option the target's round does not follow (both round
    2.5 to 3.0 whatever TIE_TO_EVEN asks); a field reference into an expression's value (DuckDB reads
    struct(k, s).field(1) as the input row's field 1); a CLUSTERED sort or a sort by a comparison function
    (DataFusion panics); an overflow option the target's arithmetic does not follow."""
    names = {info.anchor: info.name for info in functions}
    if target.silent_overflow:
        _refuse_overflow_options(plan, target, names)
    for rel, path in rels_with_paths(plan):
        kind = rel.WhichOneof("rel_type")
        if not target.clustered_sorts and kind in ("sort", "top_n") and any(
                s.direction == s.SORT_DIRECTION_CLUSTERED for s in getattr(rel, kind).sorts):
            raise UnsupportedError(f"a CLUSTERED sort direction: target '{target.name}' does not read it", path)
        for m in walk(strip_inputs(rel), enter_subqueries=False):
            full_name = m.DESCRIPTOR.full_name
            if (full_name == "substrait.SortField" and not target.comparison_sorts
                    and m.WhichOneof("sort_kind") == "comparison_function_reference"):
                raise UnsupportedError(f"a sort by a comparison function: target '{target.name}' does not read it",
                                       path)
            if (full_name == "substrait.Expression.FieldReference" and not target.expression_references
                    and m.WhichOneof("root_type") == "expression"):
                raise UnsupportedError(f"a field reference into the value of an expression: target '{target.name}' "
                                       "reads fields of the input row only", path)
            if full_name not in _CALLS:
                continue
            name = names.get(m.function_reference)
            if (target.aggregate_phase != "any" and full_name != _SCALAR and m.phase not in _WHOLE_PHASES):
                raise UnsupportedError(f"'{name}' in aggregation phase {AggregationPhase.Name(m.phase)}: target "
                                       f"'{target.name}' reads whole aggregations (INITIAL_TO_RESULT) only", path)
            if (not target.window_distinct and full_name == "substrait.Expression.WindowFunction"
                    and m.invocation == AggregateFunction.AGGREGATION_INVOCATION_DISTINCT):
                raise UnsupportedError(f"window function '{name}' of DISTINCT values: target '{target.name}' "
                                       "reads past the DISTINCT", path)
            if (target.substring_start != "any" and full_name == _SCALAR and name in ("substring", "substr")
                    and len(m.arguments) >= 2 and not positive_int_argument(m.arguments[1])):
                wanted = target.substring_start.upper()
                asked = next((list(o.preference) for o in m.options if o.name == "negative_start"), None)
                if wanted not in (asked or ["WRAP_FROM_END"]):
                    raise UnsupportedError(
                        f"'{name}' with negative_start {'/'.join(asked) if asked else 'WRAP_FROM_END (left out)'} "
                        f"and a start that may be below 1: target '{target.name}' reads such a start as "
                        f"{wanted} whatever the option says", path)
            if target.rounding == "tie_away_from_zero":
                for option in m.options:
                    if (option.name == "rounding" and option.preference
                            and "TIE_AWAY_FROM_ZERO" not in option.preference):
                        raise UnsupportedError(f"'{name}' with rounding {'/'.join(option.preference)}: target "
                                               f"'{target.name}' rounds ties away from zero whatever the "
                                               "option says", path)


def _is_null(arg) -> bool:
    """A ``NULL`` literal argument (possibly cast): DataFusion's "no escape character" in ``like``."""
    lit = argument_literal(arg)
    return lit is not None and lit.WhichOneof("literal_type") == "null"


def _nest(call: Expression.ScalarFunction, limit: int) -> None:
    """``f(a1, ..., an)`` -> ``f(f(a1, .., a_limit), ...)``, in place: the first ``limit`` arguments
    become one call until at most ``limit`` are left (left-deep)."""
    args = list(call.arguments)
    while len(args) > limit:
        inner = Expression()
        inner.scalar_function.function_reference = call.function_reference
        inner.scalar_function.output_type.CopyFrom(call.output_type)
        inner.scalar_function.arguments.extend(args[:limit])
        first = type(args[0])()
        first.value.CopyFrom(inner)
        args = [first, *args[limit:]]
    del call.arguments[:]
    call.arguments.extend(args)


def set_aggregation_phase(plan: Plan, phase: int = AggregationPhase.AGGREGATION_PHASE_INITIAL_TO_RESULT) -> int:
    """Write ``phase`` into every aggregate and window call whose phase is unspecified; the count."""
    changed = 0
    for m in _messages(plan, "substrait.AggregateFunction", "substrait.Expression.WindowFunction"):
        if m.phase == AggregationPhase.AGGREGATION_PHASE_UNSPECIFIED:
            m.phase = phase
            changed += 1
    return changed


def switch_to_if_then(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Every ``switch_expression`` written as the searched CASE it means, in place (DataFusion 55:
    "This feature is not implemented: Switch expression not supported"): ``CASE x WHEN v1 THEN r1 ...
    ELSE e END`` -> ``CASE WHEN equal(x, v1) THEN r1 ... ELSE e END``. A NULL ``x`` matches no ``WHEN``
    in both. The match is evaluated once per clause, the same only for a deterministic match (else
    refused). ``functions`` is the plan's table (``equal`` is declared in it where the plan lacks it).
    Returns the number rewritten."""
    from optimizer.expr_utils import FunctionRegistrar, boolean_type, is_deterministic

    found = [m for m in _messages(plan, _EXPRESSION) if m.WhichOneof("rex_type") == "switch_expression"]
    if not found:
        return 0
    registrar = FunctionRegistrar(plan, functions)
    for e in reversed(found):  # inner switches first: an outer one copies them
        sw = e.switch_expression
        if not is_deterministic(sw.match, registrar.table):
            raise UnsupportedError(f"a switch expression on a nondeterministic value: target '{target.name}' "
                                   "reads no switch expression, and its CASE form would evaluate it per clause")
        if_then = Expression()
        for clause in sw.ifs:
            value = Expression()
            value.literal.CopyFrom(getattr(clause, "if"))
            new = if_then.if_then.ifs.add()
            getattr(new, "if").CopyFrom(registrar.call("equal", "functions_comparison", [sw.match, value],
                                                        boolean_type(), "equal:any_any"))
            new.then.CopyFrom(clause.then)
        if sw.HasField("else"):
            getattr(if_then.if_then, "else").CopyFrom(getattr(sw, "else"))
        e.CopyFrom(if_then)
    return len(found)


def case_else_written(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Every ``if_then`` without an ``else`` gets the ``else`` it means, a NULL of its type, in place; the
    number written. Acero converts no CASE without one (``conversion to arrow::compute::Expression from
    Substrait expression ... if_then``: DataFusion writes SQL's ``CASE WHEN c THEN x END`` so)."""
    from optimizer.schema import plan_unstated_types
    from optimizer.schema.types import is_known, with_nullability

    cases = [(m, t) for m, t in plan_unstated_types(plan, functions) if isinstance(m, Expression.IfThen)]
    for body, result in cases:
        if not is_known(result):
            raise UnsupportedError(f"a CASE without ELSE whose type is not known: target '{target.name}' needs "
                                   "its ELSE written, a NULL of that type")
        getattr(body, "else").literal.null.CopyFrom(with_nullability(result, Type.NULLABILITY_NULLABLE))
    return len(cases)


def likes_as_string_functions(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Every ``like(a, p)`` (or with a NULL escape, DataFusion's "none") whose pattern ``p`` is a string
    literal without ``_`` or backslash and with ``%`` only at its ends is written as the call it means,
    in place: ``'x%'`` as ``starts_with(a, 'x')``, ``'%x'`` ``ends_with``, ``'%x%'`` ``contains``, ``'x'``
    ``equal(a, 'x')``; the number rewritten. Each is NULL for a NULL ``a`` as ``like`` is, and compares
    case as ``like`` does (a call asking another case sensitivity is left as it is). Acero has no
    ``like`` ('No conversion function exists to convert the Substrait function like'); it has these."""
    from optimizer.expr_utils import boolean_type

    changed = 0
    for e, args, registrar in _calls_inner_first(plan, functions, "like"):
        call = e.scalar_function
        if args is None or len(args) not in (2, 3) or (len(args) == 3 and not _is_null(call.arguments[2])):
            continue
        if any(o.name != "case_sensitivity" or list(o.preference) != ["CASE_SENSITIVE"] for o in call.options):
            continue
        pattern = args[1]
        if pattern.WhichOneof("rex_type") != "literal" or pattern.literal.WhichOneof("literal_type") not in (
                "string", "var_char"):
            continue
        kind = pattern.literal.WhichOneof("literal_type")
        text = pattern.literal.string if kind == "string" else pattern.literal.var_char.value
        core = text.strip("%")
        if not core or "%" in core or "_" in core or "\\" in core:
            continue
        starts, ends = text.startswith("%"), text.endswith("%")
        name, stem = {(False, False): ("equal", "functions_comparison"), (False, True): ("starts_with", "functions_string"),
                      (True, False): ("ends_with", "functions_string"),
                      (True, True): ("contains", "functions_string")}[(starts, ends)]
        value = Expression()
        value.CopyFrom(pattern)
        if kind == "string":
            value.literal.string = core
        else:
            value.literal.var_char.value = core
            value.literal.var_char.length = len(core)
        signature = "equal:any_any" if name == "equal" else f"{name}:{'str_str' if kind == 'string' else 'vchar_vchar'}"
        # DataFusion leaves like's output type empty, which Acero cannot convert
        out = call.output_type if call.output_type.WhichOneof("kind") else boolean_type()
        e.CopyFrom(registrar.call(name, stem, [args[0], value], out, signature))
        changed += 1
    return changed


def call_types_written(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Every scalar function without an ``output_type`` gets the type the spec derives for it, in place;
    the number written. DataFusion leaves some empty (``not``, ``like``), which Acero cannot convert
    ('conversion to arrow::DataType from Substrait type')."""
    from optimizer.schema import plan_unstated_types
    from optimizer.schema.types import is_known

    calls = [(m, t) for m, t in plan_unstated_types(plan, functions) if isinstance(m, Expression.ScalarFunction)]
    for call, result in calls:
        if not is_known(result):
            raise UnsupportedError(f"a function call without an output type the spec derives: target "
                                   f"'{target.name}' needs each call's type")
        call.output_type.CopyFrom(result)
    return len(calls)


def fp_division_as_operator(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Every ``divide`` of floating-point values calls ``/``, in place; the number rewritten. DuckDB 1.1.3
    binds the name ``divide`` to its function ``divide()``, which gives NULL for a division by zero
    (``divide(1.0, 0.0)``), where its operator ``/`` gives IEEE 754's inf, -inf and NaN, the reading of an
    unstated ``on_division_by_zero`` for floating point (docs/semantics.md; found by the cross-engine
    sweep: ``f / 0.0`` NULL for inf). A call whose option asks NULL before IEEE keeps ``divide``; one that
    asks neither (ERROR) is refused."""
    from optimizer.schema import plan_calls

    names = {info.anchor: info.name for info in functions}
    registrar = FunctionRegistrar(plan, functions)
    changed = 0
    for call, types in plan_calls(plan, functions):
        if names.get(call.function_reference) != "divide" or not types or any(
                t.WhichOneof("kind") not in ("fp32", "fp64") for t in types):
            continue
        asked = next((list(o.preference) for o in call.options if o.name == "on_division_by_zero"), None) or ["IEEE"]
        chosen = next((v for v in asked if v in ("IEEE", "NULL")), None)
        if chosen is None:
            raise UnsupportedError(f"'divide' of floating-point values with on_division_by_zero {'/'.join(asked)}: "
                                   f"target '{target.name}' gives NULL or IEEE 754's values for a division by zero")
        if chosen == "IEEE":
            signature = "_".join(t.WhichOneof("kind") for t in types)
            call.function_reference = registrar.anchor("/", "functions_arithmetic", f"/:{signature}")
            changed += 1
    return changed


def round_ties_written(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Every ``round`` call without a ``rounding`` option gets ``TIE_AWAY_FROM_ZERO``, the reading of an
    unspecified one here (docs/semantics.md: SQL's ROUND of every producer), in place; the number
    written. Acero follows the option and otherwise rounds ties to even (``round(-2.25, 1)`` -2.2 for
    -2.3, ``round(0.5)`` 0 for 1; found by the random SQL sweep)."""
    names = {info.anchor: info.name for info in functions}
    written = 0
    for m in _messages(plan, _SCALAR):
        if names.get(m.function_reference) == "round" and not any(o.name == "rounding" for o in m.options):
            m.options.add(name="rounding", preference=["TIE_AWAY_FROM_ZERO"])
            written += 1
    return written


def case_conditions_not_null(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Every ``if_then`` condition ``c`` written as ``coalesce(c, false)``, in place; the number written.
    A CASE takes a clause whose condition is NULL as not taken; Acero reads a CASE of one clause as its
    ``if_else`` kernel, which gives NULL for a NULL condition (``CASE WHEN s > 'b' THEN 1 ELSE 0 END``
    NULL for a NULL ``s``; found by the random SQL sweep). ``coalesce(c, false)`` is false where ``c`` is
    NULL and ``c`` elsewhere: the same clause taken."""
    from optimizer.expr_utils import FunctionRegistrar, boolean_type

    registrar = FunctionRegistrar(plan, functions)  # declares coalesce in ``functions`` as it is first used
    written = 0
    for m in list(_messages(plan, _EXPRESSION)):
        if m.WhichOneof("rex_type") != "if_then":
            continue
        for clause in m.if_then.ifs:
            condition = getattr(clause, "if")
            if (condition.WhichOneof("rex_type") == "scalar_function"
                    and condition.scalar_function.function_reference in functions
                    and functions.get(condition.scalar_function.function_reference).name == "coalesce"):
                continue  # already so written (a plan written twice)
            false = Expression()
            false.literal.boolean = False
            coalesced = registrar.call("coalesce", "functions_comparison", [condition, false], boolean_type(False),
                                       "coalesce:any_any")
            condition.CopyFrom(coalesced)
            written += 1
    return written


#: Arithmetic whose declared output type says what it is computed in (docs/semantics.md; the Spark
#: backend computes it so).
_ARITHMETIC = frozenset({"add", "subtract", "multiply", "divide", "modulus"})
_NUMBERS = frozenset({"i8", "i16", "i32", "i64", "fp32", "fp64"})


def arithmetic_in_declared_types(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Each argument of ``add``, ``subtract``, ``multiply``, ``divide``, ``modulus`` whose number kind is
    not the call's declared output kind is cast to it, in place; the number of calls changed. A plan
    means the arithmetic in its declared type (ibis-substrait writes true division of integers as
    ``divide:i32_i32`` declared ``fp64``; this tool computes 0.5 for 1 / 2, as ibis means); an engine
    computes it in its arguments' types (DataFusion and DuckDB gave 0). With the arguments cast, every
    reading gives the declared type's answer. Decimals keep their arguments (their precision is the
    function's own derivation)."""
    from optimizer.schema import plan_calls
    from optimizer.schema.types import with_nullability

    names = {info.anchor: info.name for info in functions}
    changed = 0
    for call, types in plan_calls(plan, functions):
        out = call.output_type.WhichOneof("kind")
        if names.get(call.function_reference) not in _ARITHMETIC or out not in _NUMBERS:
            continue
        values = [a for a in call.arguments if a.WhichOneof("arg_type") == "value"]
        if len(values) != len(types) or not any(t.WhichOneof("kind") in _NUMBERS and t.WhichOneof("kind") != out
                                                for t in types):
            continue
        for a, t in zip(values, types, strict=True):
            kind = t.WhichOneof("kind")
            if kind in _NUMBERS and kind != out:
                cast = Expression()
                cast.cast.type.CopyFrom(with_nullability(call.output_type, getattr(t, kind).nullability))
                cast.cast.input.CopyFrom(a.value)
                cast.cast.failure_behavior = Expression.Cast.FAILURE_BEHAVIOR_THROW_EXCEPTION
                a.value.CopyFrom(cast)
        changed += 1
    return changed


def _calls_inner_first(plan: Plan, functions: FunctionTable, name: str) -> Iterator[tuple[Expression, list | None,
                                                                                         FunctionRegistrar]]:
    """Each expression of ``plan`` that calls the scalar function ``name``, with its arguments and a registrar
    of the plan's functions, inner calls first (an outer call that copies its arguments copies them
    rewritten); the caller may replace each expression in place."""
    from optimizer.expr_utils import call_args

    names = {info.anchor: info.name for info in functions}
    found = [m for m in _messages(plan, _EXPRESSION) if m.WhichOneof("rex_type") == "scalar_function"
             and names.get(m.scalar_function.function_reference) == name]
    registrar = FunctionRegistrar(plan, functions) if found else None
    for e in reversed(found):
        yield e, call_args(e), registrar


def nullif_as_case(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Every ``nullif(a, b)`` becomes ``CASE WHEN a = b THEN NULL ELSE a END`` (SQL defines it so), in
    place, with the call's output type on both branches; the number rewritten. DuckDB 1.1.3 binds
    DataFusion's ``nullif`` of strings to a macro of its own and fails ("Positional parameters cannot come
    after parameters with a default value!"); its own producer writes the CASE. ``a`` is evaluated twice:
    a nondeterministic one is refused."""
    from optimizer.expr_utils import boolean_type, is_deterministic

    changed = 0
    for e, args, registrar in _calls_inner_first(plan, functions, "nullif"):
        changed += 1
        if args is None or len(args) != 2 or not is_deterministic(args[0], registrar.table):
            raise UnsupportedError(f"nullif of other than two deterministic values: target '{target.name}' "
                                   "reads it as a CASE, which evaluates its first argument twice")
        out = Type()
        out.CopyFrom(e.scalar_function.output_type)
        case = Expression()
        clause = case.if_then.ifs.add()
        getattr(clause, "if").CopyFrom(registrar.call("equal", "functions_comparison", args, boolean_type(),
                                                      "equal:any_any"))
        clause.then.literal.null.CopyFrom(out)
        otherwise = getattr(case.if_then, "else")
        otherwise.cast.type.CopyFrom(out)
        otherwise.cast.input.CopyFrom(args[0])
        otherwise.cast.failure_behavior = Expression.Cast.FAILURE_BEHAVIOR_THROW_EXCEPTION
        e.CopyFrom(case)
    return changed


def coalesce_as_case(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Every ``coalesce(a1, ..., an)`` becomes ``CASE WHEN a1 IS NOT NULL THEN a1 ... ELSE an END`` (SQL
    defines it so), in place; the number rewritten. DuckDB 1.1.3's consumer has no function ``coalesce``
    ('Scalar Function with name coalesce does not exist!', found by the random SQL sweep): its SQL's
    COALESCE is an operator. Each argument but the last is evaluated twice: a nondeterministic one is
    refused."""
    from optimizer.expr_utils import boolean_type, is_deterministic

    changed = 0
    for e, args, registrar in _calls_inner_first(plan, functions, "coalesce"):
        changed += 1
        if args is None or not args or not all(is_deterministic(a, registrar.table) for a in args[:-1]):
            raise UnsupportedError(f"coalesce of other than deterministic values: target '{target.name}' reads "
                                   "it as a CASE, which evaluates its arguments twice")
        if len(args) == 1:
            e.CopyFrom(args[0])
            continue
        case = Expression()
        for a in args[:-1]:
            clause = case.if_then.ifs.add()
            getattr(clause, "if").CopyFrom(registrar.call("is_not_null", "functions_comparison", [a],
                                                          boolean_type(False), "is_not_null:any"))
            clause.then.CopyFrom(a)
        getattr(case.if_then, "else").CopyFrom(args[-1])
        e.CopyFrom(case)
    return changed


def cast_failures_throw(plan: Plan) -> int:
    """Every cast whose failure behavior is unspecified says ``THROW_EXCEPTION``, in place (Acero: "Cast::
    FailureBehavior unspecified; must be FAILURE_BEHAVIOR_RETURN_NULL or FAILURE_BEHAVIOR_THROW_EXCEPTION").
    Unspecified leaves the choice to the consumer; throwing is the choice that never turns a failing
    cast into an answer. Returns the number of casts changed."""
    changed = 0
    for m in _messages(plan, "substrait.Expression.Cast"):
        if m.failure_behavior == Expression.Cast.FAILURE_BEHAVIOR_UNSPECIFIED:
            m.failure_behavior = Expression.Cast.FAILURE_BEHAVIOR_THROW_EXCEPTION
            changed += 1
    return changed


#: The decimal digits every value of an integer type needs.
_INTEGER_DIGITS = {"i8": 3, "i16": 5, "i32": 10, "i64": 19}


def refuse_inexact_decimal_casts(plan: Plan, target: Target, functions: FunctionTable) -> None:
    """Refuse each cast to a decimal that the target would not compute as Substrait means it
    (``encoding.decimal_casts: exact``): only casts that hold every value of their input are written, an
    integer to a decimal with as many integer digits (i64 to decimal(19 + S, S)), a decimal to one with
    no fewer integer digits and no smaller scale. Acero (pyarrow 26) casts decimal(15,2) 12345.67 to
    decimal(5,2) as 12345.67, a value its type cannot hold, where Substrait's cast fails; to decimal(15,1)
    it cuts to 12345.6, where DuckDB and Spark round to 12345.7; a float to decimal(5,2) it leaves unchecked;
    and it refuses int64 to decimal(15,4) before reading a value (TPC-DS Q90)."""
    from optimizer.schema import plan_casts
    from optimizer.schema.types import type_kind, type_name

    for path, source, cast_type in plan_casts(plan, functions):
        if type_kind(cast_type) != "decimal":
            continue
        precision, scale = cast_type.decimal.precision, cast_type.decimal.scale
        kind = type_kind(source)
        if kind in _INTEGER_DIGITS:
            exact = precision - scale >= _INTEGER_DIGITS[kind]
        elif kind == "decimal":
            exact = scale >= source.decimal.scale and precision - scale >= source.decimal.precision - source.decimal.scale
        else:
            exact = False
        if not exact:
            raise UnsupportedError(f"a cast of {type_name(source, False)} to {type_name(cast_type, False)}: target "
                                   f"'{target.name}' casts only to a decimal that holds every value of the input "
                                   "(its narrowing casts neither fail nor round as Substrait's do)", path)


def type_null_literals(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """A NULL literal without a type (DuckDB writes ``CAST(NULL AS T)`` with an empty type on the NULL) gets
    the type of the cast around it, in place: the same NULL of ``T``. DataFusion 55 rejects an empty type
    ("This feature is not implemented: `None` Substrait kind is not supported"); a NULL without a type and
    without such a cast is refused. Returns the number typed."""
    from substrait.proto import Type

    from optimizer.schema.types import with_nullability

    typed = 0
    for m in _messages(plan, _EXPRESSION):
        if m.WhichOneof("rex_type") == "cast":
            inner = m.cast.input
            if (inner.WhichOneof("rex_type") == "literal" and inner.literal.WhichOneof("literal_type") == "null"
                    and inner.literal.null.WhichOneof("kind") is None and m.cast.type.WhichOneof("kind")):
                inner.literal.null.CopyFrom(with_nullability(m.cast.type, Type.NULLABILITY_NULLABLE))
                typed += 1
    typed += _type_union_nulls(plan, functions)
    for m in _messages(plan, _LITERAL):
        if m.WhichOneof("literal_type") == "null" and m.null.WhichOneof("kind") is None:
            raise UnsupportedError(f"a NULL literal without a type: target '{target.name}' needs the type of "
                                   "each NULL")
    return typed


def _type_union_nulls(plan: Plan, functions: FunctionTable) -> int:
    """A NULL without a type that a project under a set operation outputs as a column (DuckDB's TPC-DS Q27:
    ``NULL AS i_item_id`` in a UNION ALL branch) gets the type another input gives that column: the set's
    column type, which every input's column has. Returns the number typed."""
    from substrait.proto import Type

    from optimizer.schema import plan_schemas
    from optimizer.schema.types import with_nullability

    sets = [(rel, path) for rel, path in rels_with_paths(plan) if rel.WhichOneof("rel_type") == "set"]
    if not sets:
        return 0
    schemas = plan_schemas(plan, functions)
    typed = 0
    for rel, path in sets:
        branches = [schemas[f"{path}.set.inputs[{i}]"].types for i in range(len(rel.set.inputs))]
        for i, child in enumerate(rel.set.inputs):
            if child.WhichOneof("rel_type") != "project":
                continue
            project = child.project
            n_in = len(schemas[f"{path}.set.inputs[{i}].project.input"].types)
            mapping = (list(project.common.emit.output_mapping) if project.common.WhichOneof("emit_kind") == "emit"
                       else range(n_in + len(project.expressions)))
            for column, m in enumerate(mapping):
                if m < n_in:
                    continue
                e = project.expressions[m - n_in]
                if not (e.WhichOneof("rex_type") == "literal" and e.literal.WhichOneof("literal_type") == "null"
                        and e.literal.null.WhichOneof("kind") is None):
                    continue
                known = next((types[column] for types in branches
                              if column < len(types) and types[column].WhichOneof("kind") is not None), None)
                if known is not None:
                    e.literal.null.CopyFrom(with_nullability(known, Type.NULLABILITY_NULLABLE))
                    typed += 1
    return typed


def fixed_char_literals_as_strings(plan: Plan) -> int:
    """Every ``fixed_char`` literal written as the ``string`` literal of the same text, in place (DuckDB
    1.1.3: "INTERNAL Error: 21"; Isthmus writes SQL's character literals so). The same value the Spark
    backend gives such a literal (``optimizer/spark/expressions.py``); the text keeps its spaces."""
    changed = 0
    for m in _messages(plan, _LITERAL):
        if m.WhichOneof("literal_type") == "fixed_char":
            text = m.fixed_char
            m.string = text
            changed += 1
    return changed


#: Aggregate functions that skip NULL arguments: a measure filter can become a CASE on their argument.
_NULL_SKIPPING = frozenset({"count", "sum", "sum0", "avg", "min", "max"})


def measure_filters_as_cases(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Every aggregate measure with a ``filter`` is written without it, each argument ``x`` becoming
    ``CASE WHEN filter THEN x END`` (``count(*)``: ``count(CASE WHEN filter THEN 1 END)``); in place, the
    number changed. The same result for an aggregate that skips NULL arguments (count, sum, avg, min,
    max; DISTINCT too): the rows the filter does not keep (false or NULL) give NULL, which it skips.
    Another function with a filter is refused. DuckDB 1.1.3 ignores ``AggregateRel.Measure.filter``
    (``count(*) FILTER (WHERE c0 = 0)`` over 0, 0, 1: 3 instead of 2; found by the fuzzer against
    Spark)."""
    from optimizer.expr_utils import FunctionRegistrar
    from optimizer.schema import expression_type, plan_schemas

    schemas = None
    registrar = FunctionRegistrar(plan, functions)
    names = {info.anchor: info.name for info in functions}
    changed = 0
    for rel, path in rels_with_paths(plan):
        if rel.WhichOneof("rel_type") != "aggregate":
            continue
        for j, m in enumerate(rel.aggregate.measures):
            if not m.HasField("filter"):
                continue
            name = names.get(m.measure.function_reference)
            if name not in _NULL_SKIPPING or any(a.WhichOneof("arg_type") != "value" for a in m.measure.arguments):
                raise UnsupportedError(f"aggregate '{name}' with a filter: target '{target.name}' ignores measure "
                                       "filters, and only an aggregate that skips NULLs can take it as a CASE",
                                       f"{path}.aggregate.measures[{j}]")
            if schemas is None:
                schemas = plan_schemas(plan, functions)
            source = schemas[f"{path}.aggregate.input"]
            if not m.measure.arguments:  # count(*): count(CASE WHEN filter THEN 1 END)
                if name != "count":
                    raise UnsupportedError(f"aggregate '{name}' without arguments with a filter: target "
                                           f"'{target.name}' ignores measure filters", f"{path}.aggregate.measures[{j}]")
                m.measure.function_reference = registrar.anchor("count", "functions_aggregate_generic", "count:any")
                one = Expression()
                one.literal.i32 = 1
                m.measure.arguments.add().value.CopyFrom(one)
            for a in m.measure.arguments:
                case = Expression()
                clause = case.if_then.ifs.add()
                getattr(clause, "if").CopyFrom(m.filter)
                clause.then.CopyFrom(a.value)
                value_type = expression_type(a.value, source, functions)
                kind = value_type.WhichOneof("kind")
                nullable = Type()
                nullable.CopyFrom(value_type)
                getattr(nullable, kind).nullability = Type.NULLABILITY_NULLABLE
                getattr(case.if_then, "else").literal.null.CopyFrom(nullable)
                a.value.CopyFrom(case)
            m.ClearField("filter")
            changed += 1
    return changed


def i16_literals_as_casts(plan: Plan, target: Target) -> int:
    """Every ``i16`` literal expression written as the cast of the ``i32`` literal of the same value to
    ``i16``, in place; the number changed. DuckDB 1.1.3 reads no ``i16`` literal ("INTERNAL Error: 3",
    the literal's field number; ``i8`` and the cast are read). An ``i16`` inside a nested literal (a
    list or struct of them) cannot be so written: refused."""
    changed = 0
    for m in list(_messages(plan, _EXPRESSION)):
        if m.WhichOneof("rex_type") == "literal" and m.literal.WhichOneof("literal_type") == "i16":
            value, nullable = m.literal.i16, m.literal.nullable
            cast = Expression()
            cast.cast.input.literal.i32 = value
            cast.cast.type.i16.nullability = (Type.NULLABILITY_NULLABLE if nullable
                                              else Type.NULLABILITY_REQUIRED)
            cast.cast.failure_behavior = Expression.Cast.FAILURE_BEHAVIOR_THROW_EXCEPTION
            m.CopyFrom(cast)
            changed += 1
    if any(m.WhichOneof("literal_type") == "i16" for m in _messages(plan, _LITERAL)):
        raise UnsupportedError(f"an i16 value inside a nested literal: target '{target.name}' reads no i16 literal")
    return changed


def interval_literals_as_days(plan: Plan, target: Target) -> int:
    """Every interval literal written as DuckDB 1.1.3 reads one, in place: ``interval_day_to_second`` with
    ``days`` only, or ``interval_year_to_month`` with ``months`` only (it reads no ``years``: 1 year 2
    months added to 2022-01-08 gave 2022-03-08; found by the spec coverage sweep). Its consumer knows no ``interval_compound``
    (DataFusion's ``INTERVAL '5 days'``: "INTERNAL Error: 0", the literal read as unset) and reads no
    ``seconds`` or ``subseconds`` of a day-to-second interval (432000 seconds added to a date: the date
    unchanged, no error). A whole number of days in seconds is written as days; an interval with a
    part of a day, or with both months and days, cannot be written so: refused. For a target whose
    ``interval_literals`` is ``refuse`` every interval literal is refused. Returns the literals
    changed."""
    changed = 0
    for m in _messages(plan, _LITERAL):
        kind = m.WhichOneof("literal_type")
        if target.interval_literals == "refuse" and kind is not None and kind.startswith("interval_"):
            raise UnsupportedError(f"an interval literal ({kind}): target '{target.name}' reads none")
        if kind == "interval_compound":
            ym, ds = m.interval_compound.interval_year_to_month, m.interval_compound.interval_day_to_second
        elif kind == "interval_day_to_second":
            ym, ds = None, m.interval_day_to_second
        elif kind == "interval_year_to_month":
            ym, ds = m.interval_year_to_month, None
        else:
            continue
        months = ym.years * 12 + ym.months if ym is not None else 0
        extra_days, rest = divmod(ds.seconds, 86400) if ds is not None else (0, 0)
        days = (ds.days if ds is not None else 0) + extra_days
        if rest or (ds is not None and ds.subseconds):
            raise UnsupportedError(f"an interval literal with a part of a day ({ds.seconds} s, {ds.subseconds} "
                                   f"subseconds): target '{target.name}' reads whole days of an interval only")
        if months and days:
            raise UnsupportedError(f"an interval literal of both months and days ({months} months, {days} days): "
                                   f"target '{target.name}' reads one or the other")
        nullable, variation = m.nullable, m.type_variation_reference
        m.ClearField("literal_type")
        if months or kind == "interval_year_to_month":
            # in months alone: DuckDB 1.1.3 reads no years (1 year 2 months added to a date: 2 months later)
            m.interval_year_to_month.months = months
        else:
            m.interval_day_to_second.days = days
        m.nullable, m.type_variation_reference = nullable, variation
        changed += 1
    return changed


def literals_as_read(plan: Plan, target: Target) -> int:
    """Every literal of a kind ``target`` does not read (``encoding.literals``) written as one it reads, or
    refused by name with the relation's path; in place, the number changed. A ``var_char`` literal is
    written as the ``string`` literal of its text (the value the Spark backend gives it); any other kind
    has no literal of the same value the target reads. DuckDB 1.1.3 fails on a timestamp, list, map,
    binary, uuid or var_char literal with 'INTERNAL Error: N' (N the literal's field number); DataFusion
    55 on a time, uuid, var_char or user-defined one. Runs after the steps that write fixed_char, i16 and
    interval literals in the target's kinds."""
    assert target.literals is not None
    changed = 0
    if "var_char" not in target.literals and "string" in target.literals:
        for m in _messages(plan, _LITERAL):
            if m.WhichOneof("literal_type") == "var_char":
                m.string = m.var_char.value  # the oneof: var_char is cleared
                changed += 1
    for rel, path in rels_with_paths(plan):
        for m in walk(strip_inputs(rel), enter_subqueries=False):
            if m.DESCRIPTOR.full_name == _LITERAL:
                kind = m.WhichOneof("literal_type")
                if kind is not None and kind not in target.literals:
                    raise UnsupportedError(f"a literal of kind {kind}: target '{target.name}' reads no "
                                           "literal of that kind", path)
    return changed
