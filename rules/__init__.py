"""The rules, one concern per module. ``RULES`` is the list the driver runs: phase by phase (in the
order of :data:`optimizer.engine.PHASES`). Within a phase the engine visits the nodes parents first and
tries the phase's rules on each in the order listed here: the first that fires on a node wins, so the
order matters between rules that match the same kind of relation.

Each module has one public function whose docstring shows a before/after example (run as a doctest),
and a ``RULE`` saying what it matches and in which phase it runs.
"""

from __future__ import annotations

from optimizer.rules import (
    annotate_estimates,
    comma_join_order,
    decorrelate_scalar_subquery,
    distinct_semi_join_to_inner,
    eager_aggregation,
    eliminate_joins,
    eliminate_outer_joins,
    exists_to_semi_join,
    extract_join_conditions,
    filter_into_read,
    implement_joins,
    in_subquery_to_semi_join,
    join_order,
    merge_global_aggregates,
    order_conjuncts,
    push_filters,
    push_semi_joins,
    reduce_aggregate_input,
    share_repeated_subtrees,
    simplify_predicates,
    sort_fetch_to_topn,
    window_to_consistent_partition,
)

from optimizer.engine import Rule

RULES: list[Rule] = [
    # normalise
    # Flattened, folded conditions: the conjuncts the rules after it split and move stand on their own.
    simplify_predicates.RULE,
    # IN (subquery) becomes a semi join: the subquery's relations join the DAG, where the rules see them.
    in_subquery_to_semi_join.RULE,
    # [NOT] EXISTS (correlated subquery) becomes a semi (anti) join, for the same reason.
    exists_to_semi_join.RULE,
    # A correlated scalar subquery becomes a join before the joins get their conditions and order.
    decorrelate_scalar_subquery.RULE,
    # A filter over a comma join becomes the join's condition: joins get keys before anything is moved.
    extract_join_conditions.RULE,
    # After extract_join_conditions (the joins hold their conditions): a comma join whose FROM order puts
    # two tables no condition joins side by side is written in the order Spark joins it, so that every
    # rule after it, and the estimates that judge them, see the joins Spark runs.
    comma_join_order.RULE,
    # After extract_join_conditions: a comma join's condition over an outer join's column is a join
    # condition now. Outer joins whose null rows a condition above rejects become inner joins, which
    # join_order may move (Spark does the same to SQL: the plan is priced as Spark runs it).
    eliminate_outer_joins.RULE,
    # logical
    # First in the logical phase, before push_filters moves the filters the merged inputs differ by (they
    # are compared where the producer wrote them): cross-joined global aggregates over the same relations
    # become one aggregate over one pass of them.
    merge_global_aggregates.RULE,
    # Copies of a subtree (a CTE the producer inlined) are compared as the producer wrote them, before
    # any rule treats one copy apart from the others (a filter moved, a join order chosen, a join
    # implemented): the subtree shared is then ordered and implemented once, for every reader.
    share_repeated_subtrees.RULE,
    # Filters go down to the reads and into the joins, so the join order sees the filtered sizes.
    push_filters.RULE,
    # After push_filters (a join's condition holds every conjunct it can): a join to an input unique on
    # the join columns that nothing above reads goes (outer) or becomes a semi join (inner); before
    # push_semi_joins, which moves that semi join, and join_order, which has one input fewer to order.
    eliminate_joins.RULE,
    # A semi join goes below the inner joins to the input its condition reads, as a filter would: before
    # join_order, which then orders the joins over the filtered input, and before implement_joins, which
    # sizes them by it. Priced rewrite by rewrite (the whole plan), so the phase is not undone for it.
    push_semi_joins.RULE,
    # join_order
    # Before join_order: a semi join under a DISTINCT becomes an inner join, which join_order may move.
    distinct_semi_join_to_inner.RULE,
    # The order of inner joins is chosen on logical joins, before any is given an implementation.
    join_order.RULE,
    # physical
    # After join_order (in the logical phase a pre-aggregation splits the join region before the order is
    # chosen, and the plan join_order then makes can be costlier), before implement_joins: it needs the
    # join below logical (parents first: the aggregate is tried before its joins are implemented), and
    # implement_joins then sizes the new join by the groups. Priced on the whole plan too.
    eager_aggregation.RULE,
    # Before implement_joins: both match a JoinRel, and this one needs it logical.
    reduce_aggregate_input.RULE,
    # Filters over reads: no other physical rule matches a FilterRel, so its place among them is free.
    filter_into_read.RULE,
    # After filter_into_read: a filter's conjuncts are ordered where they end up (in the read or not).
    order_conjuncts.RULE,
    # After reduce_aggregate_input: every join still logical gets its implementation (hash, merge, loop).
    implement_joins.RULE,
    # Fetches only (Sort + Fetch -> TopN): no other physical rule matches a FetchRel.
    sort_fetch_to_topn.RULE,
    # Projects only (window functions out of them): no other physical rule matches a ProjectRel.
    window_to_consistent_partition.RULE,
    # annotate
    # Last: the estimates written into the plan are those of the final plan.
    annotate_estimates.RULE,
]
