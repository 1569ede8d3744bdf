"""The rows a generated relation outputs, as far as a small evaluator can tell: it steers generation.

The plan generator (:mod:`testing.strategies`) asks, for a relation it has built over the
case's tables, which rows come out, so that a filter, a read's filter or a fetch's offset it draws
next keeps some rows instead of emptying the answer (an empty answer hides most wrong plans). The
evaluator knows the expressions and relations the generator writes; anything else (window functions,
subqueries, a function it does not model, NaN) is :data:`UNKNOWN`, and a relation whose rows it cannot
tell is ``None``. A predicate that is ``UNKNOWN`` for a row may keep it. It never decides an answer:
Spark runs both plans; a mistake here only makes the generator's choices less well aimed.

>>> from optimizer.difftest.harness import ColumnSpec, Database, TableSpec
>>> db = Database(); db.tables["t0"] = TableSpec("t0", [ColumnSpec("c0", "i32", nullable=True)], [(1,), (None,)])
>>> rel = Rel(); rel.read.named_table.names.append("t0")
>>> RowEvaluator(Plan(), db, FunctionTable([])).rows(rel)
[(1,), (None,)]
"""

from __future__ import annotations

import datetime
import decimal
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence

from substrait.proto import Expression, JoinRel, Plan, Rel, SetRel

from optimizer.difftest.harness import Database
from optimizer.load.functions import FunctionTable


class _Unknown:
    """A value the evaluator cannot tell."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()

Row = tuple
Rows = list[Row] | None

_EPOCH = datetime.datetime(1970, 1, 1)
_EPOCH_DAY = datetime.date(1970, 1, 1)
_D = decimal.Context(prec=80)
_CMP: dict[str, Callable] = {
    "equal": lambda a, b: a == b, "not_equal": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "gt": lambda a, b: a > b, "lte": lambda a, b: a <= b, "gte": lambda a, b: a >= b,
}


def truth(value) -> bool | None:
    """``True`` when a predicate's value keeps a row for sure, ``False`` when it drops it for sure
    (false or NULL), ``None`` when it cannot tell."""
    if value is UNKNOWN:
        return None
    return value is True


def literal_value(e: Expression):
    """A literal expression's Python value (``None`` for a null, :data:`UNKNOWN` for the unmodelled)."""
    lit = e.literal
    kind = lit.WhichOneof("literal_type")
    if kind == "null":
        return None
    if kind in ("i8", "i16", "i32", "i64", "fp32", "fp64", "string", "boolean"):
        value = getattr(lit, kind)
        return UNKNOWN if isinstance(value, float) and math.isnan(value) else value
    if kind == "decimal":
        unscaled = int.from_bytes(lit.decimal.value, "little", signed=True)
        return decimal.Decimal(unscaled).scaleb(-lit.decimal.scale, context=_D)
    if kind == "date":
        return _EPOCH_DAY + datetime.timedelta(days=lit.date)
    if kind == "precision_timestamp" and lit.precision_timestamp.precision == 6:
        return _EPOCH + datetime.timedelta(microseconds=lit.precision_timestamp.value)
    return UNKNOWN


def _connective(values: Sequence, deciding: bool) -> object:
    """SQL's AND (``deciding`` False) or OR (True) of ``values``: one ``deciding`` value decides, else
    UNKNOWN or NULL spread, else the other truth value."""
    if any(v is deciding for v in values):
        return deciding
    if any(v is UNKNOWN for v in values):
        return UNKNOWN
    return None if any(v is None for v in values) else not deciding


def _and(values: Sequence) -> object:
    return _connective(values, False)


def _or(values: Sequence) -> object:
    return _connective(values, True)


#: joins and cross products with more candidate pairs than this are not evaluated (generation stays fast)
MAX_PAIRS = 4096


def rows_share_value(left: Sequence[Row], i: int, right: Sequence[Row], j: int) -> bool:
    """Whether column ``i`` of ``left`` and column ``j`` of ``right`` hold an equal non-null value."""
    values = [row[i] for row in left if i < len(row) and row[i] is not None and row[i] is not UNKNOWN]
    for row in right:
        v = row[j] if j < len(row) else None
        if v is None or v is UNKNOWN:
            continue
        if any(_comparable(v, w) and v == w for w in values):
            return True
    return False


def _like(pattern: str) -> re.Pattern:
    r"""A SQL ``LIKE`` pattern (``%``, ``_``, ``\`` escapes) as a regular expression.

    >>> bool(_like("a%c_").fullmatch("abbcd")), bool(_like("a\\%").fullmatch("ab"))
    (True, False)
    """
    out = []
    chars = iter(pattern)
    for ch in chars:
        if ch == "\\":
            out.append(re.escape(next(chars, "\\")))
        elif ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
    return re.compile("".join(out), re.S)


def _comparable(a, b) -> bool:
    numbers = (int, float, decimal.Decimal)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    if isinstance(a, numbers) and isinstance(b, numbers):
        return not any(isinstance(v, float) and math.isnan(v) for v in (a, b))
    return type(a) is type(b)


class RowEvaluator:
    """Rows of relations and values of expressions of one plan over one :class:`Database`."""

    def __init__(self, plan: Plan, database: Database, function_name: Callable[[int], str] | FunctionTable,
                 *, sure: bool = False) -> None:
        """``function_name``: an anchor's function name, or the plan's :class:`FunctionTable` to read it from
        (a generator that declares functions as it goes passes its own lookup).

        ``sure``: a row whose predicate is ``UNKNOWN`` is dropped, so that every row told is one the
        relation outputs (a value may be ``UNKNOWN``): ``[]`` then means "no row is sure", not "empty".
        By default such a row is kept: the rows told are the ones the relation may output."""
        self.plan = plan
        self.sure = sure
        self.database = database
        if isinstance(function_name, FunctionTable):
            table = function_name

            def declared(anchor: int) -> str:
                return table.get(anchor).name if anchor in table else ""

            function_name = declared
        self.function_name: Callable[[int], str] = function_name

    # ------------------------------------------------------------------------------ expressions

    def value(self, e: Expression, row: Row):
        kind = e.WhichOneof("rex_type")
        if kind == "literal":
            return literal_value(e)
        if kind == "selection":
            ref = e.selection
            if ref.WhichOneof("root_type") != "root_reference" or ref.WhichOneof("reference_type") != "direct_reference":
                return UNKNOWN
            seg = ref.direct_reference
            if seg.WhichOneof("reference_type") != "struct_field" or seg.struct_field.HasField("child"):
                return UNKNOWN
            i = seg.struct_field.field
            return row[i] if i < len(row) else UNKNOWN
        if kind == "scalar_function":
            return self._call(e.scalar_function, row)
        if kind == "singular_or_list":
            v = self.value(e.singular_or_list.value, row)
            return _or([self._compare("equal", v, self.value(o, row)) for o in e.singular_or_list.options])
        if kind == "if_then":
            for clause in e.if_then.ifs:
                cond = self.value(getattr(clause, "if"), row)
                if cond is UNKNOWN:
                    return UNKNOWN
                if cond is True:
                    return self.value(clause.then, row)
            return self.value(getattr(e.if_then, "else"), row)
        if kind == "cast":
            return self._cast(e.cast, self.value(e.cast.input, row))
        return UNKNOWN

    def _compare(self, name: str, a, b):
        if a is UNKNOWN or b is UNKNOWN:
            return UNKNOWN
        if a is None or b is None:
            return None
        if not _comparable(a, b):
            return UNKNOWN
        return _CMP[name](a, b)

    def _call(self, sf, row: Row):
        name = self.function_name(sf.function_reference)
        args = [self.value(a.value, row) if a.WhichOneof("arg_type") == "value" else UNKNOWN for a in sf.arguments]
        if name in _CMP:
            return self._compare(name, *args[:2])
        if name == "and":
            return _and(args)
        if name == "or":
            return _or(args)
        if name == "not":
            return UNKNOWN if args[0] is UNKNOWN else (None if args[0] is None else not args[0])
        if name in ("is_null", "is_not_null"):
            if args[0] is UNKNOWN:
                return UNKNOWN
            return (args[0] is None) == (name == "is_null")
        if name in ("is_not_distinct_from", "is_distinct_from"):
            a, b = args[:2]
            if a is UNKNOWN or b is UNKNOWN:
                return UNKNOWN
            if a is None or b is None:
                same = a is None and b is None
            elif not _comparable(a, b):
                return UNKNOWN
            else:
                same = a == b
            return same == (name == "is_not_distinct_from")
        if name == "between":
            return _and([self._compare("gte", args[0], args[1]), self._compare("lte", args[0], args[2])])
        if any(a is UNKNOWN for a in args):
            return UNKNOWN
        if name == "coalesce":
            return next((a for a in args if a is not None), None)
        if any(a is None for a in args):
            return None
        if name == "is_nan":
            return isinstance(args[0], float) and math.isnan(args[0])
        if name in ("add", "subtract", "multiply") and all(isinstance(a, int) and not isinstance(a, bool)
                                                          for a in args[:2]):
            a, b = args[:2]
            out = a + b if name == "add" else a - b if name == "subtract" else a * b
            return out if -(2**31) <= out < 2**31 else UNKNOWN  # saturation depends on the width
        if name in ("add", "subtract", "multiply") and all(isinstance(a, float) for a in args[:2]):
            # fp64 arithmetic as Spark's double (an fp32 column may round differently: a guess)
            a, b = args[:2]
            return a + b if name == "add" else a - b if name == "subtract" else a * b
        if name == "like" and all(isinstance(a, str) for a in args[:2]):
            return _like(args[1]).fullmatch(args[0]) is not None
        if name == "char_length" and isinstance(args[0], str):
            return len(args[0])
        if name == "concat" and all(isinstance(a, str) for a in args):
            return "".join(args)
        if name == "starts_with" and all(isinstance(a, str) for a in args[:2]):
            return args[0].startswith(args[1])
        return UNKNOWN

    @staticmethod
    def _cast(cast, v):
        if v is None or v is UNKNOWN:
            return v
        target = cast.type.WhichOneof("kind")
        if target == "fp64" and isinstance(v, int | float | decimal.Decimal) and not isinstance(v, bool):
            return float(v)
        if target == "i64" and isinstance(v, int) and not isinstance(v, bool):
            return v
        if target == "string" and isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        return UNKNOWN

    def keeps(self, condition: Expression, rows: Sequence[Row]) -> tuple[int, int]:
        """How many of ``rows`` the condition keeps for sure (or may keep), and how many it drops for sure."""
        kept = dropped = 0
        for row in rows:
            t = truth(self.value(condition, row))
            if t is False:
                dropped += 1
            else:
                kept += 1
        return kept, dropped

    # -------------------------------------------------------------------------------- relations

    def rows(self, rel: Rel) -> Rows:
        """The rows ``rel`` outputs (their order not meant), or ``None`` when the evaluator cannot tell."""
        kind = rel.WhichOneof("rel_type")
        method = getattr(self, "_" + kind, None) if kind else None
        if method is None:
            return None
        body = getattr(rel, kind)
        out = method(body)
        if out is None:
            return None
        if "common" in body.DESCRIPTOR.fields_by_name and body.common.HasField("emit"):
            mapping = list(body.common.emit.output_mapping)
            out = [tuple(row[i] for i in mapping) for row in out]
        return out

    def _filtered(self, rows: Rows, condition: Expression) -> Rows:
        if rows is None:
            return None
        if self.sure:
            return [row for row in rows if truth(self.value(condition, row)) is True]
        return [row for row in rows if truth(self.value(condition, row)) is not False]

    def _read(self, r) -> Rows:
        kind = r.WhichOneof("read_type")
        if kind == "named_table":
            table = self.database.tables.get(".".join(r.named_table.names))
            if table is None:
                return None
            rows: Rows = [tuple(row) for row in table.rows]
        elif kind == "virtual_table":
            rows = [tuple(literal_value(f) if f.WhichOneof("rex_type") == "literal" else UNKNOWN for f in row.fields)
                    for row in r.virtual_table.expressions]
        else:
            return None
        if r.HasField("filter"):
            rows = self._filtered(rows, r.filter)
        if self.sure and r.HasField("best_effort_filter"):  # it may drop what it rejects
            rows = self._filtered(rows, r.best_effort_filter)
        if r.HasField("projection"):
            positions = [item.field for item in r.projection.select.struct_items]
            rows = [tuple(row[i] for i in positions) for row in rows]
        return rows

    def _filter(self, r) -> Rows:
        return self._filtered(self.rows(r.input), r.condition)

    def _project(self, r) -> Rows:
        rows = self.rows(r.input)
        if rows is None:
            return None
        out = []
        for row in rows:
            extended = row
            for e in r.expressions:
                extended = extended + (self.value(e, extended[:len(row)]),)
            out.append(extended)
        return out

    def _sort(self, r) -> Rows:
        return self.rows(r.input)

    def _fetch(self, r) -> Rows:
        rows = self.rows(r.input)
        if rows is None:
            return None
        offset = literal_value(r.offset_expr) if r.HasField("offset_expr") else 0
        count = literal_value(r.count_expr) if r.HasField("count_expr") else None
        if not isinstance(offset, int) or (count is not None and not isinstance(count, int)):
            return None
        end = None if count is None or count < 0 else offset + count
        if offset <= 0 and (end is None or end >= len(rows)):
            return rows  # every row, whatever the order
        # the order is the sort's; the evaluator keeps the input's order, so the values are a guess,
        # the number of rows is right
        return [tuple(UNKNOWN for _ in row) for row in rows[offset:end]]

    def _reference(self, r) -> Rows:
        if r.subtree_ordinal >= len(self.plan.relations):
            return None
        return self.rows(self.plan.relations[r.subtree_ordinal].rel)

    def _cross(self, r) -> Rows:
        left, right = self.rows(r.left), self.rows(r.right)
        if left is None or right is None or len(left) * len(right) > MAX_PAIRS:
            return None
        return [a + b for a in left for b in right]

    def _join(self, r) -> Rows:
        left, right = self.rows(r.left), self.rows(r.right)
        if left is None or right is None or len(left) * len(right) > MAX_PAIRS:
            return None
        jt = JoinRel.JoinType.Name(r.type).removeprefix("JOIN_TYPE_")
        width_left = len(left[0]) if left else None
        width_right = len(right[0]) if right else None
        has_condition = r.HasField("expression")

        def match(a: Row, b: Row) -> bool | None:
            return truth(self.value(r.expression, a + b)) if has_condition else True

        if jt in ("RIGHT_SEMI", "RIGHT_ANTI", "RIGHT_SINGLE", "RIGHT_MARK"):  # the left's mirror
            out = self._one_side(right, left, lambda b, a: match(a, b), "LEFT" + jt[len("RIGHT"):], width_left)
            if out is None or jt != "RIGHT_SINGLE":
                return out
            out = [row[len(row) - (width_left or 0):] + row[:len(row) - (width_left or 0)] for row in out]
        elif jt in ("INNER", "LEFT", "OUTER", "RIGHT", "LEFT_SINGLE", "LEFT_SEMI", "LEFT_ANTI", "LEFT_MARK"):
            out = self._one_side(left, right, match, jt, width_right)
            if out is None:
                return None
        else:
            return None
        if jt in ("RIGHT", "OUTER"):
            matched = {k for a in left for k, b in enumerate(right) if match(a, b) is not False}
            for k, b in enumerate(right):
                if k not in matched:
                    if width_left is None:
                        return None
                    out.append((None,) * width_left + b)
                elif self.sure and not any(match(a, b) is True for a in left):
                    if width_left is None:
                        return None
                    out.append((UNKNOWN,) * width_left + b)  # matched or padded: a row either way
        if r.HasField("post_join_filter"):
            out = self._filtered(out, r.post_join_filter)
        return out

    def _one_side(self, rows: list[Row], other: list[Row], match, jt: str, width_other: int | None) -> Rows:
        """The rows of a join that keeps each of ``rows`` (``INNER`` keeps the matching pairs; ``LEFT``,
        ``OUTER``, ``RIGHT``, ``LEFT_SINGLE``, ``LEFT_SEMI``, ``LEFT_ANTI``, ``LEFT_MARK``), ``match(row,
        other_row)`` telling whether two rows match."""
        out: list[Row] = []
        for a in rows:
            hits = [(k, match(a, b)) for k, b in enumerate(other)]
            sure = [k for k, t in hits if t is True]
            maybe = [k for k, t in hits if t is not False]
            if jt in ("INNER", "LEFT", "OUTER", "RIGHT", "LEFT_SINGLE"):
                out += [a + other[k] for k in (sure if self.sure else maybe)]
                if not maybe and jt in ("LEFT", "OUTER", "LEFT_SINGLE"):
                    if width_other is None:
                        return None
                    out.append(a + (None,) * width_other)
                elif self.sure and maybe and not sure and jt in ("LEFT", "OUTER", "LEFT_SINGLE"):
                    if width_other is None:
                        return None
                    out.append(a + (UNKNOWN,) * width_other)  # matched or padded: a row either way
            elif jt == "LEFT_SEMI":
                if sure if self.sure else maybe:
                    out.append(a)
            elif jt == "LEFT_ANTI":
                if not (maybe if self.sure else sure):
                    out.append(a)
            elif jt == "LEFT_MARK":
                out.append(a + (True if sure else UNKNOWN if maybe else False,))
        return out

    def _aggregate(self, r) -> Rows:
        rows = self.rows(r.input)
        if rows is None:
            return None
        keys = list(r.grouping_expressions)
        sets = [list(g.expression_references) for g in r.groupings]
        measures = (UNKNOWN,) * len(r.measures)
        if not sets:
            return [measures]
        out: list[Row] = []
        for ordinal, refs in enumerate(sets):
            groups: dict[Row, None] = {}
            for row in rows:
                key = tuple(self.value(keys[i], row) if i in refs else None for i in range(len(keys)))
                if any(v is UNKNOWN for v in key):
                    if not self.sure:
                        return None
                    groups = {(UNKNOWN,) * len(keys): None}  # at least one group
                    break
                groups.setdefault(key, None)
            if not refs and not groups:
                groups[(None,) * len(keys)] = None  # a grouping set of no keys: one row even over no rows
            tail = (ordinal,) if len(sets) > 1 else ()
            out += [key + measures + tail for key in groups]
        return out

    def _set(self, r) -> Rows:
        op = SetRel.SetOp.Name(r.op).removeprefix("SET_OP_")
        inputs = [self.rows(i) for i in r.inputs[:1]]
        # a minus removes the rows the other inputs may hold: sure rows of the first, maybe rows of the rest
        rest = self if not (self.sure and op.startswith("MINUS")) else \
            RowEvaluator(self.plan, self.database, self.function_name)
        inputs += [rest.rows(i) for i in r.inputs[1:]]
        if any(i is None for i in inputs) or not inputs:
            return None
        if op == "UNION_ALL":
            return [row for i in inputs for row in i]
        if any(v is UNKNOWN for i in inputs for row in i for v in row):
            if self.sure and op == "UNION_DISTINCT":
                return [row for i in inputs for row in i][:1]
            return None
        counts = [Counter(i) for i in inputs]
        first, rest = counts[0], counts[1:]
        if op == "UNION_DISTINCT":
            return list(dict.fromkeys(row for i in inputs for row in i))
        if op == "MINUS_PRIMARY":
            return [row for row in first if not any(row in c for c in rest)]
        if op == "MINUS_PRIMARY_ALL":
            return [row for row, n in first.items() for _ in range(max(0, n - sum(c[row] for c in rest)))]
        if op == "MINUS_MULTISET":
            return [row for row in first if not all(row in c for c in rest)]
        if op == "INTERSECTION_PRIMARY":
            return [row for row in first if any(row in c for c in rest)]
        if op == "INTERSECTION_MULTISET":
            return [row for row in first if all(row in c for c in rest)]
        if op == "INTERSECTION_MULTISET_ALL":
            return [row for row, n in first.items() for _ in range(min([n] + [c[row] for c in rest]))]
        return None
