"""Rule ``simplify_predicates`` (phase ``normalise``): flatten and constant-fold filter conditions.

Matches a ``FilterRel``. Its condition is rewritten bottom-up with exact three-valued-logic
identities on ``and``/``or``/``not``:

* nested ``and``/``or`` calls are flattened (``a AND (b AND c)`` -> ``and(a, b, c)``) and duplicate
  deterministic operands dropped;
* ``x AND true`` -> ``x``, ``x AND false`` -> ``false``, ``x OR false`` -> ``x``,
  ``x OR true`` -> ``true``, ``NOT true`` -> ``false``, ``NOT NOT x`` -> ``x``. Each holds for
  ``x`` NULL as well (``NULL AND false`` is ``false``, ``NULL OR true`` is ``true``);
* conjuncts common to every branch of an ``or`` are factored out:
  ``(a AND b) OR (a AND c)`` -> ``a AND (b OR c)``, ``a OR (a AND c)`` -> ``a`` (distributivity and
  absorption hold in three-valued logic too). TPC-H Q19 written as three ORed blocks that each
  repeat ``p_partkey = l_partkey`` thereby gets an equi-join condition the other rules can use.

Then, because a filter keeps only the rows whose condition is *true* (NULL drops the row like false):

* a condition that folds to ``true`` removes the filter: it is replaced by its input (an ``emit`` on
  the filter is kept by selecting the same columns from the input);
* a condition with a ``false`` or NULL-literal conjunct can keep no row: the filter and its input
  are replaced by an empty ``VirtualTable`` read with the filter's output schema.

The rewrite of the condition is :func:`optimizer.expr_utils.fold`, which the selectivity estimate
shares. The rule fires only when the condition changes, so it reaches a fixed point.
"""

from __future__ import annotations

import networkx as nx
from substrait.proto import Expression, Rel

from optimizer.dag import inputs
from optimizer.engine import NewRel, Replacement, Rule, RuleContext
from optimizer.expr_utils import bool_literal, conjuncts, fold, key
from optimizer.relations import emit_of, rel_copy, select_columns
from optimizer.schema.record import Schema, unique_names


def simplify_predicates(g: nx.DiGraph, node: int, ctx: RuleContext) -> Replacement | None:
    """Flatten and constant-fold a filter's condition; drop a filter that is always true.

    A filter that can keep no row (a ``false`` or NULL conjunct) becomes an empty virtual table
    with the filter's output schema. Returns None when the condition is already simple. Before (left)
    and after (right):

    >>> from testing.builder import Builder, before_after, filter_, lit, read, ref
    >>> b, t = Builder(), read("t", [("a", "i64"), ("b", "i64")])
    >>> a_gt_5, b_gt_a = b.call("gt", ref(0), lit(5)), b.call("gt", ref(1), ref(0))
    >>> cond = b.call("and", b.call("and", lit(True, "bool"), a_gt_5), b_gt_a)
    >>> print(before_after(b.plan(filter_(t, cond), ["a", "b"]), RULE))
    Filter(((true AND (a#0 > 5)) AND (b#1 > a#0))) | Filter(((a#0 > 5) AND (b#1 > a#0)))
      Read(t)                                      |   Read(t)
    """
    rel = g.nodes[node]["rel"]
    condition = rel.filter.condition
    folded = fold(condition, ctx.functions)
    parts = conjuncts(folded, ctx.functions)
    if any(is_false_or_null(c) for c in parts):
        return NewRel(_empty_table(g.nodes[node]["schema"]))
    child = inputs(g, node)[0]
    if bool_literal(folded) is True:
        return select_columns(g, child, emit_of(rel))
    if key(folded) == key(condition):
        return None
    new = rel_copy(g, node)
    new.filter.condition.CopyFrom(folded)
    return NewRel(new, [child])


RULE = Rule(name="simplify_predicates", phase="normalise", kinds=frozenset({"filter"}), apply=simplify_predicates,
            description="flatten AND/OR, fold true/false; remove always-true filters, empty always-false ones")


def is_false_or_null(e: Expression) -> bool:
    """A ``false`` literal or a NULL literal: as a filter conjunct it keeps no row."""
    if e.WhichOneof("rex_type") != "literal":
        return False
    lit = e.literal
    return lit.WhichOneof("literal_type") == "null" or bool_literal(e) is False


def _empty_table(schema) -> Rel:
    # A join's columns may repeat a name (both inputs' ``a``); a read's names are its own to choose, and
    # consumers resolve columns by them (DataFusion: 'Ambiguous reference to unqualified field a').
    rel = Rel()
    rel.read.base_schema.CopyFrom(Schema(unique_names(schema.names), schema.types,
                                         schema.nested_name_lists()).to_named_struct())
    rel.read.virtual_table.SetInParent()
    return rel
