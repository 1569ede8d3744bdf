"""The rewrite rules, one concern per module. ``RULES`` is the list the driver runs, by phase.

Each module has one public rewrite function whose docstring shows a before/after example (run as a
doctest), and a ``RULE`` describing what it matches and in which phase it runs.
"""

from __future__ import annotations

import importlib

from optimizer.engine import Rule

# In the order they are tried within a phase.
_RULE_MODULES = [
    # normalise
    "simplify_predicates",
    "extract_join_conditions",
    # logical
    "push_filters",
    # join_order
    "join_order",
    # physical
    "reduce_aggregate_input",
    "filter_into_read",
    "implement_joins",
    "sort_fetch_to_topn",
    "window_to_consistent_partition",
]

RULES: list[Rule] = [importlib.import_module(f"rules.{m}").RULE for m in _RULE_MODULES]
