"""Expression helpers shared by the rules and the cost model: conjuncts, field references, remapping,
boolean simplification (:func:`fold`).

Field references are positional. A subquery inside an expression refers to the enclosing
relation's input with ``outer_reference.steps_out`` = its nesting depth, so "the fields an
expression reads" and "renumber the fields" also look inside subqueries at the right depth.

>>> e = field(3)
>>> referenced_fields(e)
{3}
>>> referenced_fields(remap_fields(e, {3: 0}))
{0}
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import NamedTuple

from google.protobuf.message import Message
from substrait.proto import Expression, Plan, Rel, Type

from optimizer.load.functions import STANDARD_URN_PREFIX, FunctionTable, resolve

_SUBQUERY = "substrait.Expression.Subquery"
_REFERENCE_REL = "substrait.ReferenceRel"
_FIELD_REF = "substrait.Expression.FieldReference"
_EXPRESSION = "substrait.Expression"
_SCALAR_FUNCTION = "substrait.Expression.ScalarFunction"


def field(index: int) -> Expression:
    """A direct reference to input column ``index``."""
    e = Expression()
    e.selection.direct_reference.struct_field.field = index
    e.selection.root_reference.SetInParent()
    return e


def field_index(e: Expression) -> int | None:
    """The column of a plain top-level field reference (``$i``), else None."""
    if e.WhichOneof("rex_type") != "selection":
        return None
    sel = e.selection
    if sel.WhichOneof("root_type") not in (None, "root_reference") or sel.WhichOneof("reference_type") != "direct_reference":
        return None
    seg = sel.direct_reference
    if seg.WhichOneof("reference_type") != "struct_field" or seg.struct_field.HasField("child"):
        return None
    return seg.struct_field.field


def bool_literal(e: Expression) -> bool | None:
    """True/False for a non-null boolean literal, else None."""
    if e.WhichOneof("rex_type") == "literal" and e.literal.WhichOneof("literal_type") == "boolean":
        return e.literal.boolean
    return None


def int_literal(e: Expression) -> int | None:
    """The value of a non-null integer literal (i8 to i64), else None."""
    if e.WhichOneof("rex_type") != "literal":
        return None
    kind = e.literal.WhichOneof("literal_type")
    return getattr(e.literal, kind) if kind in ("i8", "i16", "i32", "i64") else None


def literal_true() -> Expression:
    e = Expression()
    e.literal.boolean = True
    return e


def function_name(e: Expression, functions: FunctionTable) -> str | None:
    if e.WhichOneof("rex_type") != "scalar_function":
        return None
    anchor = e.scalar_function.function_reference
    return functions.get(anchor).name if anchor in functions else None


def call_args(e: Expression) -> list[Expression] | None:
    """The value arguments of a scalar function (None if any argument is an enum or a type)."""
    out = []
    for a in e.scalar_function.arguments:
        if a.WhichOneof("arg_type") != "value":
            return None
        out.append(a.value)
    return out


def conjuncts(e: Expression, functions: FunctionTable) -> list[Expression]:
    """Split ``a AND (b AND c)`` into ``[a, b, c]``."""
    return _operands(e, "and", functions)


def disjuncts(e: Expression, functions: FunctionTable) -> list[Expression]:
    """Split ``a OR (b OR c)`` into ``[a, b, c]``."""
    return _operands(e, "or", functions)


def _operands(e: Expression, name: str, functions: FunctionTable) -> list[Expression]:
    """The operands of nested calls of the associative function ``name``, flattened (``[e]`` if ``e`` is
    not such a call, or has an enum or type argument)."""
    if function_name(e, functions) == name:
        args = call_args(e)
        if args is not None:
            out: list[Expression] = []
            for a in args:
                out.extend(_operands(a, name, functions))
            return out
    return [e]


#: Per protobuf field: 0 holds no sub-message to look into (a scalar, or a map: maps hold no
#: expressions), 1 one message, 2 repeated messages. Walkers look every field up here: asking the
#: descriptor each time costs more than the walk itself.
_FIELD_KIND: dict = {}


def _field_kind(f) -> int:
    kind = _FIELD_KIND.get(f)
    if kind is None:
        if f.type != f.TYPE_MESSAGE or f.message_type.GetOptions().map_entry:
            kind = 0
        else:
            kind = 2 if f.label == f.LABEL_REPEATED else 1
        _FIELD_KIND[f] = kind
    return kind


def argument_literal(arg) -> Expression.Literal | None:
    """The literal a function argument is, under any casts; None for another argument."""
    if arg.WhichOneof("arg_type") != "value":
        return None
    e = arg.value
    while e.WhichOneof("rex_type") == "cast":
        e = e.cast.input
    return e.literal if e.WhichOneof("rex_type") == "literal" else None


def positive_int_argument(arg) -> bool:
    """Whether a function argument is an integer literal of at least 1 (possibly cast)."""
    lit = argument_literal(arg)
    kind = lit.WhichOneof("literal_type") if lit is not None else None
    return kind in ("i8", "i16", "i32", "i64") and getattr(lit, kind) >= 1


def reference_field(ref: Expression.FieldReference) -> int | None:
    """The top-level column of a direct struct-field reference (whatever its root), else None."""
    if ref.WhichOneof("reference_type") != "direct_reference":
        return None
    seg = ref.direct_reference
    return seg.struct_field.field if seg.WhichOneof("reference_type") == "struct_field" else None


def _is_ours(ref, depth: int) -> bool:
    """Does this reference, found ``depth`` subqueries deep, read the expression's own input?"""
    root = ref.WhichOneof("root_type")
    if depth == 0:
        return root in (None, "root_reference")
    return root == "outer_reference" and ref.outer_reference.steps_out == depth


class _ColumnFacts(NamedTuple):
    own: frozenset[int]  # input columns read (plain top-level columns)
    unresolvable: bool  # reads its input other than by a plain top-level column
    outer: bool  # holds an outer reference (inside a subquery too)
    escapes: bool  # an outer reference steps out further than the subqueries it sits in
    subquery: bool  # holds a subquery
    calls: frozenset[int]  # anchors of the scalar functions it calls (inside a subquery too)
    #: per plain reference to an input column: the path to it (field name, index in a repeated field
    #: or -1) and the column, for :func:`remap_fields`
    own_paths: tuple[tuple[tuple[tuple[str, int], ...], int], ...]


#: Column facts by message content (type name, serialized bytes): rules and the estimator ask the
#: same expressions again and again, and serializing is a C call where walking is Python.
_FACTS: dict[tuple[str, bytes], _ColumnFacts] = {}
_FACTS_LIMIT = 8192  # entries, then the table starts again
_FACTS_KEY_BYTES = 2048  # a larger message is walked each time (at most 16 MiB of keys)


def _column_facts(e: Message) -> _ColumnFacts:
    data = e.SerializeToString()
    key = (e.DESCRIPTOR.full_name, data)
    found = _FACTS.get(key) if len(data) <= _FACTS_KEY_BYTES else None
    if found is not None:
        return found
    own: set[int] = set()
    calls: set[int] = set()
    paths: list[tuple[tuple[tuple[str, int], ...], int]] = []
    unresolvable = outer = escapes = subquery = False
    stack: list[tuple[Message, int, tuple[tuple[str, int], ...]]] = [(e, 0, ())]
    while stack:
        m, depth, path = stack.pop()
        name = m.DESCRIPTOR.full_name
        if name == _SCALAR_FUNCTION:
            calls.add(m.function_reference)
        elif name == _FIELD_REF:
            if _is_ours(m, depth):
                i = reference_field(m)
                if i is None:
                    unresolvable = True
                else:
                    own.add(i)
                    paths.append((path, i))
            if m.WhichOneof("root_type") == "outer_reference":
                outer = True
                escapes = escapes or m.outer_reference.steps_out > depth
        elif name == _SUBQUERY:
            subquery = True
            depth += 1
        for f, value in m.ListFields():
            kind = _field_kind(f)
            if kind == 1:
                stack.append((value, depth, (*path, (f.name, -1))))
            elif kind == 2:
                stack.extend((item, depth, (*path, (f.name, k))) for k, item in enumerate(value))
    facts = _ColumnFacts(frozenset(own), unresolvable, outer, escapes, subquery, frozenset(calls), tuple(paths))
    if len(data) <= _FACTS_KEY_BYTES:
        if len(_FACTS) >= _FACTS_LIMIT:
            _FACTS.clear()
        _FACTS[key] = facts
    return facts


def referenced_fields(e: Message) -> set[int]:
    """Input columns an expression (or any message holding expressions) reads."""
    return set(_column_facts(e).own)


def reads_and_unsure(e: Message) -> tuple[frozenset[int], bool]:
    """:func:`referenced_fields` of ``e`` and whether it holds a subquery or an outer reference (what
    a column pruning cannot follow), from one walk (an expression over the cache's key size is walked
    at each question)."""
    facts = _column_facts(e)
    return facts.own, facts.subquery or facts.outer


def has_outer_refs(e: Message) -> bool:
    """True if it reads a column of an enclosing query (an ``outer_reference``)."""
    return _column_facts(e).outer


def escapes_scope(msg: Message) -> bool:
    """Does anything in ``msg`` (a relation's own fields or an expression, its subqueries included)
    read a column of a query enclosing it: an outer reference stepping out further than the
    subqueries it sits in?"""
    return _column_facts(msg).escapes


def reads_scopes(e: Message) -> set[str]:
    """What the column references of ``e`` (subqueries not entered) read: ``own`` (the input),
    ``outer`` (the query one level out) or ``other`` (further out, or not a plain column)."""
    out: set[str] = set()
    for m in walk(e, enter_subqueries=False):
        if m.DESCRIPTOR.full_name != _FIELD_REF:
            continue
        root = m.WhichOneof("root_type")
        if root in (None, "root_reference") and m.WhichOneof("reference_type") == "direct_reference":
            out.add("own")
        elif root == "outer_reference" and m.outer_reference.steps_out == 1:
            out.add("outer")
        else:
            out.add("other")
    return out


def outer_to_own(e: Expression) -> Expression:
    """A copy of ``e`` (no subquery in it) whose references one level out read the input instead."""
    out = Expression()
    out.CopyFrom(e)
    for m in walk(out, enter_subqueries=False):
        if m.DESCRIPTOR.full_name == _FIELD_REF and m.WhichOneof("root_type") == "outer_reference":
            m.root_reference.SetInParent()
    return out


def reads_shared_relation(msg: Message) -> bool:
    """Does ``msg`` (a relation tree or an expression, subqueries included) hold a ``ReferenceRel``?"""
    return contains(msg, lambda m: m.DESCRIPTOR.full_name == _REFERENCE_REL, enter_subqueries=True)


def has_unresolvable_refs(e: Message) -> bool:
    """True if it reads something other than plain top-level columns (expression-based references)."""
    return _column_facts(e).unresolvable


def resolved_fields(e: Message) -> set[int] | None:
    """:func:`referenced_fields` of ``e``, or None if it :func:`has_unresolvable_refs` (from one lookup)."""
    facts = _column_facts(e)
    return None if facts.unresolvable else set(facts.own)


def remap_fields(e: Message, mapping: Mapping[int, int] | Callable[[int], int]):
    """A copy of ``e`` with every input column ``i`` read as ``mapping[i]``."""
    out = type(e)()
    out.CopyFrom(e)
    get = mapping if callable(mapping) else mapping.__getitem__
    for path, i in _column_facts(e).own_paths:
        ref = out
        for name, k in path:
            ref = getattr(ref, name)
            if k >= 0:
                ref = ref[k]
        ref.direct_reference.struct_field.field = get(i)
    return out


def shift_fields(e: Message, offset: int, start: int = 0):
    """Add ``offset`` to every column index ``>= start``."""
    return remap_fields(e, lambda i: i + offset if i >= start else i)


def sub_messages(msg: Message, *, enter_subqueries: bool) -> list[Message]:
    """The sub-messages of ``msg`` in field order (map entries left out: they hold no expressions; without
    ``enter_subqueries``, subqueries left out too). Each field's kind is looked up once per process:
    asking its descriptor costs more than the walk."""
    if enter_subqueries:
        return _children(msg)
    out: list[Message] = []
    for f, value in msg.ListFields():
        kind = _OUTSIDE_KIND.get(f)
        if kind is None:
            kind = _OUTSIDE_KIND[f] = 0 if f.type == f.TYPE_MESSAGE and f.message_type.full_name == _SUBQUERY \
                else _field_kind(f)
        if kind == 1:
            out.append(value)
        elif kind == 2:
            out.extend(value)
    return out


#: :data:`_FIELD_KIND` with the fields that hold a subquery at 0.
_OUTSIDE_KIND: dict = {}


def _children(msg: Message) -> list[Message]:
    """The sub-messages of ``msg`` in field order (map entries left out: they hold no expressions)."""
    out: list[Message] = []
    for f, value in msg.ListFields():
        kind = _field_kind(f)
        if kind == 1:
            out.append(value)
        elif kind == 2:
            out.extend(value)
    return out


def rels_with_paths(msg: Message, path: str = "") -> Iterator[tuple[Rel, str]]:
    """Every ``Rel`` inside ``msg`` (subqueries included), children before parents, with its path
    (``relations[0].root.input.filter.input``).

    >>> from testing.builder import Builder, filter_, lit, read
    >>> plan = Builder().plan(filter_(read("t", [("a", "i64")]), lit(True)), ["a"])
    >>> [(rel.WhichOneof("rel_type"), path) for rel, path in rels_with_paths(plan)]
    [('read', 'relations[0].root.input.filter.input'), ('filter', 'relations[0].root.input')]
    """
    # Iterative (a plan may nest deeper than Python's recursion), and only into the fields whose type can
    # hold a Rel: types, literals and names, most of a plan's messages, are not entered.
    stack: list[tuple[Message, str, bool]] = [(msg, path, False)]
    while stack:
        m, at, done = stack.pop()
        if done:
            yield m, at  # type: ignore[misc]
            continue
        if isinstance(m, Rel):
            stack.append((m, at, True))
        children = []
        for f, value in m.ListFields():
            kind = _REL_FIELD_KIND.get(f)
            if kind is None:
                kind = _REL_FIELD_KIND[f] = _field_kind(f) if _may_hold_rel(f.message_type) else 0
            if kind == 1:
                children.append((value, f"{at}.{f.name}" if at else f.name, False))
            elif kind == 2:
                children.extend((item, f"{at}.{f.name}[{i}]" if at else f"{f.name}[{i}]", False)
                                for i, item in enumerate(value))
        children.reverse()
        stack.extend(children)


#: :data:`_FIELD_KIND` with the fields whose type cannot hold a Rel at 0.
_REL_FIELD_KIND: dict = {}


def _may_hold_rel(descriptor) -> bool:
    return descriptor is not None and type_may_hold(descriptor, is_rel_type)


def is_rel_type(descriptor) -> bool:
    """The message type ``substrait.Rel``."""
    return descriptor.full_name == Rel.DESCRIPTOR.full_name


def has_enum_field(descriptor) -> bool:
    """A message type with a field of an enum type."""
    return any(f.type == f.TYPE_ENUM for f in descriptor.fields)


@functools.cache
def type_may_hold(descriptor, itself: Callable[[object], bool]) -> bool:
    """Whether a message of type ``descriptor`` can hold, at any depth, a message whose type ``itself``
    accepts (:func:`is_rel_type`, :func:`has_enum_field`): a walk that enters only such fields skips the
    types, literals and names that are most of a plan's messages."""
    seen: set[str] = set()
    todo = [descriptor]
    while todo:
        d = todo.pop()
        if itself(d):
            return True
        if d.full_name in seen:
            continue
        seen.add(d.full_name)
        todo.extend(f.message_type for f in d.fields if f.message_type is not None)
    return False


def walk(msg: Message, *, enter_subqueries: bool) -> Iterator[Message]:
    """``msg`` and every message inside it, parents first (depth first, in field order).

    Without ``enter_subqueries`` a subquery is yielded but not looked into: what it holds belongs
    to another query (its window functions, its columns).
    """
    stack = [msg]
    while stack:
        m = stack.pop()
        yield m
        if enter_subqueries or m.DESCRIPTOR.full_name != _SUBQUERY:
            children = _children(m)
            children.reverse()
            stack.extend(children)


def contains(msg: Message, match: Callable[[Message], bool], *, enter_subqueries: bool) -> bool:
    """True if ``match`` holds for ``msg`` or a message inside it (see :func:`walk`).

    >>> contains(field(2), lambda m: m.DESCRIPTOR.full_name == _FIELD_REF, enter_subqueries=False)
    True
    """
    return any(match(m) for m in walk(msg, enter_subqueries=enter_subqueries))


def expressions(msg: Message, *, enter_subqueries: bool) -> Iterator[Expression]:
    """Every ``Expression`` in ``msg`` (itself included), parents first."""
    for m in walk(msg, enter_subqueries=enter_subqueries):
        if m.DESCRIPTOR.full_name == _EXPRESSION:
            yield m


def is_window_call(msg: Message) -> bool:
    return msg.DESCRIPTOR.full_name == _EXPRESSION and msg.WhichOneof("rex_type") == "window_function"


def has_window_function(msg: Message, *, enter_subqueries: bool) -> bool:
    """Is there a window function in ``msg`` (in its subqueries too with ``enter_subqueries``)?

    >>> e = Expression()
    >>> e.subquery.scalar.input.project.expressions.add().window_function.function_reference = 1
    >>> has_window_function(e, enter_subqueries=True), has_window_function(e, enter_subqueries=False)
    (True, False)
    """
    return contains(msg, is_window_call, enter_subqueries=enter_subqueries)


def has_subquery(e: Message) -> bool:
    return _column_facts(e).subquery


def is_constant(e: Message) -> bool:
    """No column of any record is read (literals and calls on literals; a subquery never is)."""
    return not contains(e, lambda m: m.DESCRIPTOR.full_name in (_FIELD_REF, _SUBQUERY), enter_subqueries=False)


_NONDETERMINISTIC = frozenset({"random", "rand", "uuid", "now", "current_timestamp"})


def is_deterministic(e: Message, functions: FunctionTable) -> bool:
    """False if the expression, or a subquery in it, calls a function known to give different answers per call."""
    return _deterministic(_column_facts(e), functions)


def _deterministic(facts: _ColumnFacts, functions: FunctionTable) -> bool:
    return not any(anchor in functions and functions.get(anchor).name in _NONDETERMINISTIC for anchor in facts.calls)


def key(e: Expression) -> bytes:
    """Identity of an expression for de-duplication."""
    return e.SerializeToString(deterministic=True)


def movable(e: Expression, functions: FunctionTable) -> bool:
    """May this conjunct be evaluated somewhere else in the plan (on other, equal rows)?

    Not when it calls a nondeterministic function, holds a subquery (never duplicated or moved),
    reads columns through expression-based references, or reads no column at all (a constant:
    moving it below an aggregate would change the aggregate's one row over empty input).
    """
    facts = _column_facts(e)  # one lookup for the four questions
    return _deterministic(facts, functions) and not facts.subquery and not facts.unresolvable and bool(facts.own)


class FunctionRegistrar:
    """Finds or declares extension functions in a plan, so a rule can build ``and(...)`` and friends.

    Reuses the plan's own anchor when it already declares the function (under any URN or none, as
    DataFusion does), otherwise declares the standard one. ``functions`` is the plan's table (built where
    the plan entered); a function declared here is declared in it too, so it stays the plan's.
    """

    def __init__(self, plan: Plan, functions: FunctionTable) -> None:
        self.plan = plan
        self._table = functions

    @property
    def table(self) -> FunctionTable:
        return self._table

    def anchor(self, name: str, urn_stem: str, signature: str | None = None) -> int:
        existing = self._table.anchor_for(name)
        if existing is not None:
            return existing
        urn = STANDARD_URN_PREFIX + urn_stem
        urn_anchor = next((u.extension_urn_anchor for u in self.plan.extension_urns if u.urn == urn), None)
        if urn_anchor is None:
            urn_anchor = max([u.extension_urn_anchor for u in self.plan.extension_urns] + [0]) + 1
            self.plan.extension_urns.add(extension_urn_anchor=urn_anchor, urn=urn)
        used = [d.extension_function.function_anchor for d in self.plan.extensions if d.HasField("extension_function")]
        anchor = max(used + [0]) + 1
        decl = self.plan.extensions.add().extension_function
        decl.extension_urn_reference = urn_anchor
        decl.function_anchor = anchor
        decl.name = signature or name
        self._table.declare(resolve(anchor, decl.name, urn))
        return anchor

    def call(self, name: str, urn_stem: str, args: Iterable[Expression], output_type: Type,
             signature: str | None = None) -> Expression:
        e = Expression()
        e.scalar_function.function_reference = self.anchor(name, urn_stem, signature)
        for a in args:
            e.scalar_function.arguments.add().value.CopyFrom(a)
        e.scalar_function.output_type.CopyFrom(output_type)
        return e


def boolean_type(nullable: bool = True) -> Type:
    t = Type()
    t.bool.nullability = Type.NULLABILITY_NULLABLE if nullable else Type.NULLABILITY_REQUIRED
    return t


def make_and(exprs: list[Expression], registrar: FunctionRegistrar) -> Expression:
    """``a AND b AND ...`` (one conjunct is returned as is; none is ``true``)."""
    if not exprs:
        return literal_true()
    if len(exprs) == 1:
        return exprs[0]
    return registrar.call("and", "functions_boolean", exprs, boolean_type(), "and:bool")


# -------------------------------------------------------------------------- boolean simplification


def _literal_bool(value: bool) -> Expression:
    e = Expression()
    e.literal.boolean = value
    return e


def _rebuild_call(template: Expression, args: list[Expression]) -> Expression:
    """``template`` (a call) with other value arguments; everything else (options...) kept."""
    out = Expression()
    out.CopyFrom(template)
    del out.scalar_function.arguments[:]
    for a in args:
        out.scalar_function.arguments.add().value.CopyFrom(a)
    return out


def _factor_or(template: Expression, branches: list[Expression], functions: FunctionTable) -> Expression | None:
    """``(a AND b) OR (a AND c)`` -> ``a AND (b OR c)``; ``a OR (a AND c)`` -> ``a`` (None: no common term).

    Distributivity and absorption hold in SQL's three-valued logic (a distributive lattice), so the
    result is exact; only deterministic terms are factored out.
    """
    and_template = None
    terms: list[list[Expression]] = []
    for d in branches:
        if function_name(d, functions) == "and" and call_args(d) is not None:
            and_template = and_template or d
            terms.append(list(call_args(d)))
        else:
            terms.append([d])
    if and_template is None:
        return None
    keys = [{key(t) for t in ts} for ts in terms]
    common = [t for t in terms[0] if is_deterministic(t, functions) and all(key(t) in k for k in keys[1:])]
    if not common:
        return None
    common_keys = {key(t) for t in common}
    rests = [[t for t in ts if key(t) not in common_keys] for ts in terms]

    def conj(parts: list[Expression]) -> Expression:
        return parts[0] if len(parts) == 1 else _rebuild_call(and_template, parts)

    if any(not r for r in rests):  # one disjunct is just the common part: absorption
        return conj(common)
    return conj(common + [_rebuild_call(template, [conj(r) for r in rests])])


def fold(e: Expression, functions: FunctionTable) -> Expression:
    """``e`` with its ``and``/``or``/``not`` structure flattened and constant-folded (exact in 3VL).

    Bottom-up: nested ``and``/``or`` calls are flattened and duplicate deterministic operands dropped;
    ``x AND true`` -> ``x``, ``x AND false`` -> ``false``, ``x OR false`` -> ``x``, ``x OR true`` ->
    ``true``, ``NOT true`` -> ``false``, ``NOT NOT x`` -> ``x`` (each holds for ``x`` NULL too); the
    conjuncts common to every branch of an ``or`` are factored out (:func:`_factor_or`). Only the boolean
    connectives are rewritten; other expressions are kept as they are. The rule
    ``simplify_predicates`` applies it to filter conditions; the selectivity estimate fingerprints
    predicates with it, so that ``a AND (b AND c)`` and ``and(a, b, c)`` are the same predicate.
    """
    name = function_name(e, functions)
    if name in ("and", "or"):
        args = call_args(e)
        if args is None:
            return e
        absorbing, neutral = (False, True) if name == "and" else (True, False)
        flat: list[Expression] = []
        for a in args:
            a = fold(a, functions)
            if function_name(a, functions) == name and call_args(a) is not None:
                flat.extend(call_args(a))
            else:
                flat.append(a)
        out: list[Expression] = []
        seen: set[bytes] = set()
        for a in flat:
            value = bool_literal(a)
            if value is absorbing:
                return _literal_bool(absorbing)
            if value is neutral:
                continue
            k = key(a)
            if k in seen and is_deterministic(a, functions):
                continue
            seen.add(k)
            out.append(a)
        if not out:
            return _literal_bool(neutral)
        if len(out) == 1:
            return out[0]
        if name == "or":
            factored = _factor_or(e, out, functions)
            if factored is not None:
                return factored
        return _rebuild_call(e, out)
    if name == "not":
        args = call_args(e)
        if args is None or len(args) != 1:
            return e
        inner = fold(args[0], functions)
        value = bool_literal(inner)
        if value is not None:
            return _literal_bool(not value)
        if inner.WhichOneof("rex_type") == "literal" and inner.literal.WhichOneof("literal_type") == "null":
            return inner
        if function_name(inner, functions) == "not" and call_args(inner) is not None and len(call_args(inner)) == 1:
            return call_args(inner)[0]
        return _rebuild_call(e, [inner])
    return e


# ----------------------------------------------------------------------------- join types by name
# JoinRel, HashJoinRel, MergeJoinRel and NestedLoopJoinRel each have their own JoinType enum, with
# the same names but different numbers (JOIN_TYPE_LEFT_ANTI is 6 in JoinRel and 7 in HashJoinRel),
# so join types are compared and converted by name.

_PREFIX = "JOIN_TYPE_"


def join_type_name(body: Message) -> str | None:
    """The join type of a join relation's body without its prefix (``INNER``, ``LEFT_SEMI``...).

    None when it is unspecified or a number its enum does not have.

    >>> from substrait.proto import HashJoinRel, JoinRel
    >>> join_type_name(JoinRel(type=JoinRel.JOIN_TYPE_LEFT_ANTI))
    'LEFT_ANTI'
    >>> join_type_value(HashJoinRel, "LEFT_ANTI") == HashJoinRel.JOIN_TYPE_LEFT_ANTI
    True
    >>> join_type_name(JoinRel()) is None
    True
    """
    enum = body.DESCRIPTOR.fields_by_name["type"].enum_type
    value = enum.values_by_number.get(body.type)
    if value is None or value.number == 0:
        return None
    return value.name.removeprefix(_PREFIX)


def join_type_value(rel_type: type[Message], name: str) -> int:
    """The number of join type ``name`` (as :func:`join_type_name` gives it) in ``rel_type``'s enum."""
    return rel_type.JoinType.Value(_PREFIX + name)
