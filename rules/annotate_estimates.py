"""Estimates into ``hint.stats``: each relation's estimated rows and row width written into its plan.

**Matches** every relation that has a ``common`` (``RelCommon``), when
``OptimizerConfig.annotate_estimates`` is on.

**Produces** nothing: it never replaces a relation. It writes the cardinality estimator's rows and
row width into the relation's ``common.hint.stats`` (``row_count``, ``record_size``), so that
whoever reads the plan next (a consumer, ``substrait-opt explain``) sees what the optimizer assumed.

**Why it is equivalent**: hints are advice to the consumer, never part of a relation's answer.
It is the one rule that changes the relation it is given, and it runs in the last phase
(``annotate``), after every rewrite, so the estimates it writes are those of the final plan.
"""

from __future__ import annotations

import networkx as nx
from substrait.proto import Rel

from optimizer.engine import Replacement, Rule, RuleContext


def annotate_estimates(g: nx.DiGraph, node: int, ctx: RuleContext) -> Replacement | None:
    """Write the estimate of ``node`` into its ``hint.stats``; never a replacement.

    >>> from testing.builder import Builder, filter_, ints, lit, ref, rewrite
    >>> b = Builder()
    >>> plan = b.plan(filter_(ints(1, 2, 3), b.call("gt", ref(0), lit(1))), ["x"])
    >>> after = rewrite(plan, RULE, annotate_estimates=True)
    >>> stats = after.relations[0].root.input.filter.common.hint.stats
    >>> (stats.row_count, stats.record_size)
    (2.0, 8.0)
    """
    if not ctx.config.annotate_estimates:
        return None
    rel = g.nodes[node]["rel"]
    body = getattr(rel, g.nodes[node]["kind"])
    if not hasattr(body, "common"):
        return None
    est = ctx.estimate(node)
    body.common.hint.stats.row_count = float(est.rows)
    body.common.hint.stats.record_size = float(est.width)
    return None


RULE = Rule(
    name="annotate_estimates",
    phase="annotate",
    kinds=frozenset(f.name for f in Rel.DESCRIPTOR.oneofs_by_name["rel_type"].fields),
    apply=annotate_estimates,
    description="write each relation's estimated rows and row width into its hint.stats",
)

