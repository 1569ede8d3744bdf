"""Producer habits outside the Substrait spec whose meaning is clear: rewritten at load time into the
spec's encoding, so that everything downstream (schemas, rules, backends) reads plain Substrait.

* **DataFusion's simple CASE** (``CASE x WHEN v1 THEN r1 ... ELSE e END``): DataFusion 55 writes an
  ``IfThen`` whose first clause has an ``if`` (the operand ``x``) and no ``then``, followed by one clause
  per ``WHEN`` with the compared value as ``if``. Its consumer reads a first clause without ``then`` as
  the operand (``from_substrait_rex``, ``RexType::IfThen``). The spec wants a boolean ``if`` and a
  ``then`` in every clause, so it becomes the searched CASE ``WHEN equal(x, v1) THEN r1 ...``: the same
  answer, a NULL operand matching no ``WHEN`` as in SQL. The operand is copied into each clause, which
  is only the same for a deterministic operand (otherwise an :class:`UnsupportedError`).
* **DataFusion's two-valued mark joins**: DataFusion 55 writes EXISTS and IN that it cannot turn into a
  semi join (under OR, NOT) as a ``LEFT_MARK`` join whose mark it computes, and declares, as true or
  false: never NULL (its ``not(mark)`` is declared non-nullable). The spec's mark is NULL where no row
  matches and the condition was NULL for one. So in a plan DataFusion wrote, each mark is read as
  ``coalesce(mark, false)``, a project above the join (:func:`conform_two_valued_marks`): ``NOT (k > 0
  AND EXISTS (...))`` keeps the rows DataFusion and SQL keep.
* **DataFusion's substring** counts a start below 1 as positions before the string (``substr('abc', -1, 3)``
  is ``'a'`` in DataFusion 55, ``'c'`` in DuckDB), and it writes no option: in a plan DataFusion wrote, a
  ``substring`` whose start is not a literal of at least 1 gets ``negative_start: LEFT_OF_BEGINNING``
  (:func:`conform_substring_start`), where the option left out means ``WRAP_FROM_END`` (docs/semantics.md).
* **Projects without emit** of DuckDB and of DataFusion before 2024
  (:data:`~optimizer.schema.check.LEGACY_PROJECT_PRODUCERS`): their ``ProjectRel`` without ``emit`` outputs
  only its expressions, where the spec says input columns and then the expressions; each gets the
  explicit emit of its expressions (:func:`conform_legacy_projects`).
"""

from __future__ import annotations

from google.protobuf.message import Message
from substrait.proto import Expression, Plan

from optimizer.errors import PlanError, UnsupportedError
from optimizer.expr_utils import FunctionRegistrar, boolean_type, is_deterministic
from optimizer.load.functions import FunctionTable
from optimizer.schema.check import checked_tree_schema, legacy_project_producer, legacy_projects
from optimizer.schema.derivation import plan_functions

_IF_THEN = Expression.IfThen.DESCRIPTOR.full_name
_SCALAR_FUNCTION = Expression.ScalarFunction.DESCRIPTOR.full_name


def conform_simple_case(plan: Plan, functions: FunctionTable | None = None) -> int:
    """Rewrite every ``IfThen`` whose first clause has no ``then`` (DataFusion's simple CASE) into the
    searched CASE the spec defines, in place. Returns the number rewritten. ``functions``: the plan's
    table (the ``equal`` declared for the rewrite is declared there too); built from the plan if None."""
    found: list[tuple[Message, str]] = []
    _find(plan, "", found)
    if not found:
        return 0
    registrar = FunctionRegistrar(plan, functions if functions is not None else plan_functions(plan))
    for if_then, path in found:  # innermost first: an operand holding a simple CASE is already rewritten
        clauses = list(if_then.ifs)
        if len(clauses) < 2:
            raise PlanError("if_then has a clause without 'then' and no other clause", f"{path}.ifs[0]")
        operand = Expression()
        operand.CopyFrom(clauses[0].__getattribute__("if"))
        if not is_deterministic(operand, registrar.table):
            raise UnsupportedError("a simple CASE on a nondeterministic operand", f"{path}.ifs[0].if")
        rewritten = []
        for i, clause in enumerate(clauses[1:], start=1):
            if not clause.HasField("then"):
                raise PlanError("if_then clause without 'then' after the first", f"{path}.ifs[{i}]")
            new = Expression.IfThen.IfClause()
            condition = registrar.call("equal", "functions_comparison",
                                       [operand, getattr(clause, "if")], boolean_type(), "equal:any_any")
            getattr(new, "if").CopyFrom(condition)
            new.then.CopyFrom(clause.then)
            rewritten.append(new)
        del if_then.ifs[:]
        if_then.ifs.extend(rewritten)
    return len(found)


def _find(msg: Message, path: str, out: list[tuple[Message, str]]) -> None:
    """Every IfThen with a first clause without ``then``, children before parents."""
    for field, value in msg.ListFields():
        if field.type != field.TYPE_MESSAGE or field.message_type.GetOptions().map_entry:
            continue
        sub = f"{path}.{field.name}" if path else field.name
        if field.label == field.LABEL_REPEATED:
            for i, item in enumerate(value):
                _find(item, f"{sub}[{i}]", out)
        else:
            _find(value, sub, out)
    if msg.DESCRIPTOR.full_name == _IF_THEN and len(msg.ifs) and not msg.ifs[0].HasField("then"):
        out.append((msg, path))


def conform_legacy_projects(plan: Plan, functions: FunctionTable | None = None) -> int:
    """Make the projects of a DuckDB / older DataFusion plan say what their producer meant, in place.

    Those producers write a ``ProjectRel`` without ``emit`` meaning "only the expressions"; Substrait reads
    it as "input columns, then the expressions". This gives each such project the explicit
    ``emit = [n_in .. n_in + n_expr - 1]`` (children first, so the widths are right). Plans of other
    producers are left alone. Returns the number of projects changed. ``functions``: the plan's table;
    if None, built from the plan (a declaration naming an undeclared URN: the functions unknown, as
    :func:`~optimizer.schema.check.check_plan` has them).
    """
    if legacy_project_producer(plan) is None:
        return 0
    if functions is None:
        functions = plan_functions(plan, problems=[])
    changed = 0
    for rel, path in list(legacy_projects(plan)):
        width, problems = checked_tree_schema(
            rel.project.input, functions, f"{path}.project.input", plan.relations
        )
        if width is None:
            raise PlanError(
                "cannot tell how many columns the project's input has: " + "; ".join(map(str, problems[:1])),
                f"{path}.project",
            )
        n = len(width)
        # SetInParent: a project of no expressions outputs no columns, which an empty emit must say.
        rel.project.common.emit.SetInParent()
        rel.project.common.emit.output_mapping.extend(range(n, n + len(rel.project.expressions)))
        changed += 1
    return changed



#: Producers whose mark joins give true or false, never NULL (``plan.version.producer``).
TWO_VALUED_MARK_PRODUCERS = ("datafusion",)


def conform_two_valued_marks(plan: Plan, functions: FunctionTable | None = None) -> int:
    """In a plan of a producer of :data:`TWO_VALUED_MARK_PRODUCERS`, put over each ``LEFT_MARK`` /
    ``RIGHT_MARK`` join a project that outputs its columns with the mark as ``coalesce(mark, false)``,
    in place (the join's emit moves to the project). Returns the number rewritten."""
    from substrait.proto import JoinRel, Rel

    from optimizer.expr_utils import field, rels_with_paths

    if plan.version.producer.strip().lower() not in TWO_VALUED_MARK_PRODUCERS:
        return 0
    marks = [(rel, path) for rel, path in rels_with_paths(plan) if rel.WhichOneof("rel_type") == "join"
             and rel.join.type in (JoinRel.JOIN_TYPE_LEFT_MARK, JoinRel.JOIN_TYPE_RIGHT_MARK)]
    if not marks:
        return 0
    registrar = FunctionRegistrar(plan, functions if functions is not None else plan_functions(plan))
    false = Expression()
    false.literal.boolean = False
    for rel, path in marks:  # children first: a rewrite keeps its ancestors' paths
        side = "left" if rel.join.type == JoinRel.JOIN_TYPE_LEFT_MARK else "right"
        schema, problems = checked_tree_schema(getattr(rel.join, side), registrar.table, f"{path}.join.{side}",
                                               plan.relations)
        if schema is None:
            raise PlanError(f"the {side} input of a mark join has no known columns", f"{path}.join.{side}")
        width = len(schema.types) + 1
        common = rel.join.common
        emit = common.emit.output_mapping if common.WhichOneof("emit_kind") == "emit" else range(width)
        mapping = [width if i == width - 1 else i for i in emit]
        join = Rel()
        join.CopyFrom(rel)
        join.join.common.ClearField("emit_kind")
        project = Rel()
        project.project.input.CopyFrom(join)
        project.project.expressions.append(
            registrar.call("coalesce", "functions_comparison", [field(width - 1), false], boolean_type(),
                           "coalesce:any"))
        project.project.common.emit.output_mapping.extend(mapping)
        rel.CopyFrom(project)
    return len(marks)


#: Producers whose ``substring`` reads a start below 1 as positions before the string, without saying so.
LEFT_OF_BEGINNING_PRODUCERS = ("datafusion",)


def conform_substring_start(plan: Plan, functions: FunctionTable | None = None) -> int:
    """In a plan of a producer of :data:`LEFT_OF_BEGINNING_PRODUCERS`, give each ``substring`` call without a
    ``negative_start`` option, whose start may be below 1, the option ``LEFT_OF_BEGINNING``, in place.
    Returns the number changed."""
    from substrait.proto import FunctionOption

    from optimizer.expr_utils import positive_int_argument, walk

    if plan.version.producer.strip().lower() not in LEFT_OF_BEGINNING_PRODUCERS:
        return 0
    table = functions if functions is not None else plan_functions(plan)
    changed = 0
    for m in walk(plan, enter_subqueries=True):
        if m.DESCRIPTOR.full_name != _SCALAR_FUNCTION or len(m.arguments) < 2:
            continue
        info = table.get(m.function_reference)
        if info is None or info.name not in ("substring", "substr"):
            continue
        if any(option.name == "negative_start" for option in m.options) or positive_int_argument(m.arguments[1]):
            continue
        m.options.append(FunctionOption(name="negative_start", preference=["LEFT_OF_BEGINNING"]))
        changed += 1
    return changed

