"""Why the chosen plan is not the fastest one we know: `make bench`'s reports read per query and producer.

Reads the reports of ``benchmarks/tpch.py`` (``docs/benchmarks/tpch.json``: TPC-H, three producers;
``docs/benchmarks/tpcds_sf1.json``: TPC-DS, DataFusion's 99 plans). Every query entry holds the timed runs
of each variant (``spark_default``, ``spark_cbo``, ``<producer>/original``, ``<producer>/optimized``) and the
cost model's price of each producer's original and optimized plan. Three parts:

* **chosen / fastest.** The chosen plan of a query and producer is ``<producer>/optimized``; the fastest is
  the variant with the lowest median time (a variant whose answer was not equal does not count). The
  ratio per plan, which variant is fastest, the geomean per producer and per suite, and the room the
  issue reads (per query the fastest variant over Spark CBO, geomean).
* **ranking.** For the variants the model prices (each producer's original and optimized plan of a query),
  every pair whose median times differ by more than ``--noise`` (10 %: beyond run-to-run noise) is ranked
  right when the cheaper by the model is the faster. Pairs the model prices equal are counted apart.
* **physical plans** (skipped with ``--no-explain``). For the worst plans with chosen / fastest over
  ``--explain-above`` (at most ``--explain-max`` per suite), both variants are built again at the report's
  scale, as ``benchmarks/tpch.py`` builds them (the optimized plan by today's optimizer with the same
  statistics; Spark CBO in a session of ANALYZEd catalog tables), and Spark's physical plan of each is
  taken from ``DataFrame.explain(mode="formatted")`` without running the query. From each: the join tree
  (tables in join-tree order), the join strategies, build sides, exchanges, scans with their pushed
  filters; and what differs. With AQE on, this is the plan before execution: AQE may still turn a
  sort-merge join into a broadcast at run time.

Writes ``docs/benchmarks/chosen_vs_fastest.json`` and ``.md``.

Usage: ``python benchmarks/chosen_vs_fastest.py [--tpch docs/benchmarks/tpch.json]
[--tpcds docs/benchmarks/tpcds_sf1.json] [--explain-above 1.15] [--explain-max 12] [--no-explain]
[--reprice PLANS_DIR] [--out docs/benchmarks] [--name chosen_vs_fastest]``.

``--reprice PLANS_DIR`` ranks by today's cost model instead of the prices the reports recorded: each
producer's original and optimized plan is priced again (``driver.estimated_cost`` with the report's
statistics). The plans priced are the ones timed: read from ``PLANS_DIR`` where a run before wrote them,
else built (the original by its producer, the optimized plan by today's optimizer) and written there. Run
it once at the report's commit, and a change of the model is then measured on the same plans.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402

#: Two medians closer than this (relative to the faster) are within run-to-run noise on 2 cores.
NOISE = 0.10
#: Plans whose chosen / fastest exceeds this get their physical plans compared.
EXPLAIN_ABOVE = 1.15
EXPLAIN_MAX = 12
SUITE_REPORTS = {"tpch": common.REPORT_DIR / "tpch.json", "tpcds": common.REPORT_DIR / "tpcds_sf1.json"}
COMMAND = "python benchmarks/chosen_vs_fastest.py"
#: Where the reading of this report (causes, fix candidates) is written up.
DOC_SECTION = ("docs/benchmarks.md", "../benchmarks.md#why-the-chosen-plan-is-not-the-fastest-one-we-know")


# ------------------------------------------------------------------------------------------ chosen / fastest


def variant_medians(entry: dict) -> dict[str, float]:
    """``{variant: median seconds}`` of a query entry, without variants whose answer was not equal."""
    wrong = {k for k in ("spark_default", "spark_cbo") if entry.get(f"{k}_equal") is False}
    for producer, info in entry.get("plans", {}).items():
        wrong |= {f"{producer}/{label}" for label in ("original", "optimized") if info.get(f"{label}_equal") is False}
    return {k: common.median(v) for k, v in entry.get("times_s", {}).items() if v and k not in wrong}


def fastest_kind(chosen: str, fastest: str) -> str:
    """How the fastest variant relates to the chosen one (``duckdb/optimized``).

    >>> fastest_kind("duckdb/optimized", "spark_cbo"), fastest_kind("duckdb/optimized", "duckdb/original")
    ('Spark SQL', 'own original')
    >>> fastest_kind("duckdb/optimized", "isthmus/optimized")
    "another producer's optimized"
    """
    if fastest == chosen:
        return "chosen"
    if fastest.startswith("spark_"):
        return "Spark SQL"
    producer, label = fastest.split("/")
    if producer == chosen.split("/")[0]:
        return "own original"
    return f"another producer's {label}"


def comparable(a: str, b: str, query: int, other_sql: set[tuple[str, int]]) -> bool:
    """Whether variants ``a`` and ``b`` of ``query`` answer the same SQL: a plan made from another text than
    the benchmark's (Isthmus' corpus plans of TPC-H Q1 and Q11 have their own substitution parameters) is
    compared only with its own producer's other plan.

    >>> comparable("isthmus/original", "duckdb/optimized", 11, {("isthmus", 11)})
    False
    >>> comparable("isthmus/original", "isthmus/optimized", 11, {("isthmus", 11)})
    True
    """
    def text(v: str) -> str | None:
        producer = v.split("/")[0]
        return producer if (producer, query) in other_sql else None

    return text(a) == text(b)


def chosen_rows(report: dict, other_sql: set[tuple[str, int]] = frozenset()) -> list[dict]:
    """Per query and producer with a timed optimized plan: the chosen and the fastest variant that answers
    the same SQL, their ratio, and the confirmation runs' ratio to Spark CBO where the report has one."""
    rows = []
    for entry in report["queries"]:
        medians = variant_medians(entry)
        cbo = medians.get("spark_cbo")
        for producer, info in entry.get("plans", {}).items():
            chosen = f"{producer}/optimized"
            if chosen not in medians:
                continue
            candidates = {k: v for k, v in medians.items() if comparable(chosen, k, entry["query"], other_sql)}
            fastest = min(candidates, key=lambda k: candidates[k])
            rows.append({
                "query": entry["query"], "producer": producer, "chosen_s": medians[chosen],
                "fastest": fastest, "fastest_s": medians[fastest], "fastest_kind": fastest_kind(chosen, fastest),
                "chosen_vs_fastest": medians[chosen] / medians[fastest],
                "chosen_vs_spark_cbo": common.ratio(medians[chosen], cbo),
                "fastest_vs_spark_cbo": common.ratio(medians[fastest], cbo),
                "confirmed_chosen_vs_spark_cbo": info.get("confirmed_optimized_vs_spark_cbo"),
                "rules_fired": info.get("rules_fired", {}),
                "other_sql": (producer, entry["query"]) in other_sql,
            })
    return rows


def room(report: dict) -> float | None:
    """Per query the fastest variant's median over Spark CBO's, geomean (the issue's "room")."""
    values = []
    for entry in report["queries"]:
        medians = variant_medians(entry)
        if medians.get("spark_cbo"):
            values.append(min(medians.values()) / medians["spark_cbo"])
    return common.geomean(values)


def chosen_summary(report: dict, rows: list[dict], above: float) -> dict:
    producers = list(dict.fromkeys(r["producer"] for r in rows))
    confirmed = [r for r in rows if r.get("confirmed_chosen_vs_spark_cbo") is not None]
    return {
        "plans": len(rows),
        "geomean_chosen_vs_fastest": common.geomean(r["chosen_vs_fastest"] for r in rows),
        "by_producer": {p: {"plans": sum(1 for r in rows if r["producer"] == p),
                            "geomean_chosen_vs_fastest": common.geomean(
                                r["chosen_vs_fastest"] for r in rows if r["producer"] == p),
                            "geomean_chosen_vs_spark_cbo": common.geomean(
                                r["chosen_vs_spark_cbo"] for r in rows if r["producer"] == p)}
                        for p in producers},
        "chosen_is_fastest": sum(1 for r in rows if r["fastest_kind"] == "chosen"),
        "fastest_kinds": dict(Counter(r["fastest_kind"] for r in rows).most_common()),
        "fastest_variants": dict(Counter(r["fastest"] for r in rows).most_common()),
        f"plans_over_{above:g}": sum(1 for r in rows if r["chosen_vs_fastest"] > above),
        "room_fastest_vs_spark_cbo": room(report),
        # the plans slowest against Spark CBO in the main runs, timed again: how much of the gap was noise
        "confirmed": {"plans": len(confirmed),
                      "geomean_main_chosen_vs_spark_cbo": common.geomean(r["chosen_vs_spark_cbo"] for r in confirmed),
                      "geomean_confirmed_chosen_vs_spark_cbo": common.geomean(
                          r["confirmed_chosen_vs_spark_cbo"] for r in confirmed)},
        "geomean_chosen_vs_spark_cbo": common.geomean(r["chosen_vs_spark_cbo"] for r in rows),
    }


# ------------------------------------------------------------------------------------------ ranking


def reprice(suite_name: str, report: dict, plans_dir: Path, spark: Any) -> tuple[dict, dict]:
    """``report`` with each producer's ``estimated_cost_original`` and ``_optimized`` priced by today's
    model, and what was done: ``{"priced": n, "plans_built": n, "plans_read": n, "errors": {...}}``.
    The plans are read from ``plans_dir/<suite>/`` (``<producer>_q<N>_<label>.binpb``) when there, else
    built as ``benchmarks/tpch.py`` builds them and written there (see the module doc)."""
    import copy

    from substrait.proto import Plan

    from benchmarks import tpch
    from optimizer.capabilities import default_capabilities
    from optimizer.driver import Optimizer
    from optimizer.plan_io import load_plan
    from optimizer.spark.statistics import default_statistics

    suite = tpch.SUITES[suite_name]
    data_dir, tables = tpch.suite_data(suite, report["config"]["scale_factor"])
    statistics = default_statistics(spark=spark, tables=tables)
    capabilities = default_capabilities()
    folder = Path(plans_dir) / suite_name
    folder.mkdir(parents=True, exist_ok=True)
    out = copy.deepcopy(report)
    done = {"priced": 0, "plans_built": 0, "plans_read": 0, "errors": {}}
    wanted = [(e["query"], p) for e in out["queries"] for p, info in e.get("plans", {}).items()
              if "estimated_cost_original" in info]
    missing = sorted({p for q, p in wanted
                      if not all((folder / f"{p}_q{q}_{label}.binpb").exists() for label in ("original", "optimized"))})
    built: dict = {}
    if missing:
        errors: dict = {}
        built = tpch.suite_plans(suite, data_dir, tables, missing, sorted({q for q, _ in wanted}), errors)
    for entry in out["queries"]:
        q = entry["query"]
        for producer, info in entry.get("plans", {}).items():
            if "estimated_cost_original" not in info:
                continue
            plans = {}
            for label in ("original", "optimized"):
                path = folder / f"{producer}_q{q}_{label}.binpb"
                if path.exists():
                    plans[label] = Plan.FromString(path.read_bytes())
                    done["plans_read"] += 1
                    continue
                if (producer, q) not in built:
                    break
                plan = built[(producer, q)]
                if label == "optimized":
                    plan = Optimizer(statistics=statistics, capabilities=capabilities).run(plan).plan
                plan = load_plan(plan) if not isinstance(plan, Plan) else plan
                path.write_bytes(plan.SerializeToString(deterministic=True))
                plans[label] = plan
                done["plans_built"] += 1
            if len(plans) < 2:
                done["errors"][f"{producer} Q{q}"] = "no plan"
                continue
            for label, plan in plans.items():
                info[f"estimated_cost_{label}"] = tpch._plan_cost(plan, statistics)
                done["priced"] += 1
    return out, done


def priced_variants(entry: dict) -> dict[str, tuple[float, float, dict]]:
    """``{variant: (estimated cost, median seconds, rules fired in its producer's optimized plan)}``."""
    medians = variant_medians(entry)
    out = {}
    for producer, info in entry.get("plans", {}).items():
        for label in ("original", "optimized"):
            key, cost = f"{producer}/{label}", info.get(f"estimated_cost_{label}")
            if cost is not None and key in medians:
                out[key] = (cost, medians[key], info.get("rules_fired", {}) if label == "optimized" else {})
    return out


def ranking(report: dict, noise: float = NOISE, other_sql: set[tuple[str, int]] = frozenset()) -> dict:
    """Pairwise concordance of the model's price and the measured time within each query.

    A pair counts when the slower median exceeds the faster by more than ``noise``; it is ranked right when
    the cheaper by the model is the faster, wrong when it is the slower, and ``tied`` when the model prices
    both the same (often the same plan: the optimizer changed nothing, and the time difference is noise).
    """
    right = wrong = tied = within_noise = not_comparable = 0
    wrong_pairs, tied_pairs = [], []
    by_kind: dict[str, Counter] = {}
    for entry in report["queries"]:
        priced = sorted(priced_variants(entry).items())
        for i, (a, (cost_a, t_a, rules_a)) in enumerate(priced):
            for b, (cost_b, t_b, rules_b) in priced[i + 1:]:
                if not comparable(a, b, entry["query"], other_sql):
                    not_comparable += 1
                    continue
                if max(t_a, t_b) <= min(t_a, t_b) * (1 + noise):
                    within_noise += 1
                    continue
                kind = "same producer" if a.split("/")[0] == b.split("/")[0] else "across producers"
                counts = by_kind.setdefault(kind, Counter())
                faster, slower = (a, b) if t_a < t_b else (b, a)
                costs = {a: cost_a, b: cost_b}
                times = {a: t_a, b: t_b}
                pair = {"query": entry["query"], "faster": faster, "slower": slower,
                        "time_ratio": times[slower] / times[faster],
                        "cost_ratio": costs[slower] / costs[faster] if costs[faster] else None,
                        "kind": kind}
                if cost_a == cost_b:
                    tied += 1
                    counts["tied"] += 1
                    tied_pairs.append(pair)
                elif (cost_a < cost_b) == (t_a < t_b):
                    right += 1
                    counts["right"] += 1
                else:
                    wrong += 1
                    counts["wrong"] += 1
                    pair["rules_fired_in_faster"] = rules_a if faster == a else rules_b
                    pair["rules_fired_in_slower"] = rules_b if faster == a else rules_a
                    wrong_pairs.append(pair)
    wrong_pairs.sort(key=lambda p: -p["time_ratio"])
    rules_in_wrong = Counter()
    for p in wrong_pairs:  # the optimizer's rewrites in a plan the model prices cheaper but that runs slower
        if p["slower"].endswith("/optimized"):
            rules_in_wrong.update(p["rules_fired_in_slower"].keys())
    ranked = right + wrong
    # a wrong pair priced within the noise threshold of each other: the model all but calls them equal
    near_tie = sum(1 for p in wrong_pairs if p["cost_ratio"] is not None and 1 / (1 + noise) <= p["cost_ratio"])
    return {"noise": noise, "pairs_right": right, "pairs_wrong": wrong, "pairs_tied": tied,
            "pairs_within_noise": within_noise, "pairs_of_other_sql": not_comparable,
            "share_right": right / ranked if ranked else None, "wrong_priced_within_noise": near_tie,
            "by_kind": {k: dict(v) for k, v in sorted(by_kind.items())},
            "rules_fired_in_wrongly_cheaper_optimized": dict(rules_in_wrong.most_common()),
            "wrong": wrong_pairs, "tied": tied_pairs}


# ------------------------------------------------------------------------------------------ physical plans


_TREE_LINE = re.compile(r"^(?P<prefix>[ :+\-]*)(?P<name>\w+)(?P<args>.*?)\s*\((?P<id>\d+)\)\s*$")
_DETAIL_HEAD = re.compile(r"^\((?P<id>\d+)\) (?P<name>\w+)")


@dataclass
class Node:
    id: int
    name: str
    args: str
    depth: int
    children: list[Node] = field(default_factory=list)
    details: dict[str, str] = field(default_factory=dict)


def _parse_section(text: str) -> tuple[list[Node], dict[int, dict[str, str]]]:
    """The trees (roots) of one explain section and the details of each operator id."""
    roots: list[Node] = []
    stack: list[Node] = []
    details: dict[int, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in text.splitlines():
        head = _DETAIL_HEAD.match(line)
        if head:
            current = details.setdefault(int(head.group("id")), {"name": head.group("name")})
            current["head"] = line[head.end():].strip()
            continue
        if current is not None:
            if not line.strip():
                current = None
            elif ":" in line:
                key, _, value = line.partition(":")
                current[key.strip()] = value.strip()
            continue
        m = _TREE_LINE.match(line)
        if not m or line.startswith(("==", "Subquery:")):
            continue
        node = Node(int(m.group("id")), m.group("name"), m.group("args").strip(), len(m.group("prefix")))
        while stack and stack[-1].depth >= node.depth:
            stack.pop()
        (stack[-1].children if stack else roots).append(node)
        stack.append(node)
    return roots, details


def _walk(node: Node):
    yield node
    for child in node.children:
        yield from _walk(child)


def _scan_table(node: Node) -> str:
    """The table a scan reads: its file's name (``.../lineitem.parquet``) or its catalog name."""
    location = node.details.get("Location", "")
    m = re.search(r"\[(?:file:)?([^,\]]+)", location)
    if m:
        return Path(m.group(1).strip()).stem
    ident = (node.args or node.details.get("head", "").replace("Scan parquet", "")).strip()
    return ident.split(".")[-1] if ident else node.name


def _join_tree(node: Node, by_id: dict[int, Node], ordered: bool = True) -> str:
    """The tables under ``node`` as nested joins, ``(a ⋈ b)``; a join other than inner names its type.
    ``ordered=False`` sorts each join's two sides (the same tree whatever side each input is on)."""
    if node.name.endswith("Join") or node.name == "CartesianProduct":
        sides = [_join_tree(c, by_id, ordered) for c in node.children]
        if not ordered:
            sides.sort()
        join_type = node.details.get("Join type", node.args.split(" ")[0] if node.args else "")
        if join_type in ("Inner", "Cross", ""):  # a Cross join Spark plans on equality keys is an inner join
            keyed = node.name in ("BroadcastHashJoin", "ShuffledHashJoin", "SortMergeJoin")
            op = "⋈" if keyed else "×"
        else:
            op = f"⋈[{join_type}]"
        return "(" + f" {op} ".join(sides) + ")"
    if node.name.startswith("Scan") or node.name in ("FileScan", "BatchScan"):
        return _scan_table(node)
    if node.name == "ReusedExchange":
        m = re.search(r"Reuses operator id: (\d+)", node.details.get("head", "") + node.args)
        if m and int(m.group(1)) in by_id:
            return "reused:" + _join_tree(by_id[int(m.group(1))], by_id, ordered)
        return "reused"
    parts = [_join_tree(c, by_id, ordered) for c in node.children]
    parts = [p for p in parts if p]
    if node.name == "Union":
        return "union(" + ", ".join(parts) + ")"
    if not node.children:
        return node.name if node.name not in ("LocalTableScan",) else "values"
    return parts[0] if len(parts) == 1 else "(" + ", ".join(parts) + ")"


JOIN_ABBREVIATIONS = {"BroadcastHashJoin": "BHJ", "SortMergeJoin": "SMJ", "ShuffledHashJoin": "SHJ",
                      "BroadcastNestedLoopJoin": "BNLJ", "CartesianProduct": "CP"}


def parse_physical_plan(text: str) -> dict:
    """What a ``DataFrame.explain(mode="formatted")`` text says about a plan: the join tree of the main
    plan (and of each subquery), its joins in pre-order (strategy, type, build side), join strategy counts,
    exchanges (shuffle, broadcast, reused) and the scans with their pushed filters."""
    main, _, subqueries = text.partition("===== Subqueries =====")
    trees: list[Node] = []
    by_id: dict[int, Node] = {}
    seen_roots: set[int] = set()
    for section in [main] + re.split(r"\n(?=Subquery:\d+ )", subqueries):
        roots, details = _parse_section(section)
        for root in roots:
            if root.id in seen_roots:  # one subquery is listed once per operator that hosts it
                continue
            seen_roots.add(root.id)
            trees.append(root)
            for node in _walk(root):
                node.details = details.get(node.id, {})
                by_id[node.id] = node
    nodes = [n for t in trees for n in _walk(t)]
    joins = []
    for n in nodes:
        if n.name.endswith("Join") or n.name == "CartesianProduct":
            words = n.args.split()
            build = next((w for w in words if w.startswith("Build")), None)
            joins.append({"strategy": n.name, "type": n.details.get("Join type", words[0] if words else None),
                          "build": build})
    scans = [{"table": _scan_table(n), "pushed_filters": n.details.get("PushedFilters", "[]")}
             for n in nodes if n.name.startswith("Scan") or n.name in ("FileScan", "BatchScan")]
    return {
        "join_tree": _join_tree(trees[0], by_id) if trees else None,
        "join_tree_unordered": _join_tree(trees[0], by_id, ordered=False) if trees else None,
        "subquery_join_trees": [_join_tree(t, by_id) for t in trees[1:]],
        "joins": joins,
        "join_strategies": dict(Counter(j["strategy"] for j in joins)),
        "build_sides": [f"{JOIN_ABBREVIATIONS.get(j['strategy'], j['strategy'])} {j['type']}"
                        + (f" {j['build']}" if j["build"] else "") for j in joins],
        "exchanges": {kind: sum(1 for n in nodes if n.name == kind)
                      for kind in ("Exchange", "BroadcastExchange", "ReusedExchange")},
        "scans": scans,
        "operators": len(nodes),
        "adaptive": "AdaptiveSparkPlan" in text,
    }


def _pushed(filters: str) -> list[str]:
    inner = filters.strip()[1:-1] if filters.strip().startswith("[") else filters
    parts, depth, cur = [], 0, ""
    for ch in inner:  # split on the top-level commas of "[IsNotNull(a), EqualTo(b,1)]"
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return [p for p in parts if not p.startswith("IsNotNull(")]


def plan_differences(chosen: dict, fastest: dict) -> list[str]:
    """What differs between two parsed physical plans, in plain words (chosen first, then the fastest)."""
    out = []
    if chosen["join_tree_unordered"] != fastest["join_tree_unordered"]:
        out.append(f"join order: chosen {chosen['join_tree']}; fastest {fastest['join_tree']}")
    elif chosen["join_tree"] != fastest["join_tree"]:
        out.append("join sides: the same join tree, inputs on other sides")
    if chosen["join_strategies"] != fastest["join_strategies"]:
        def fmt(s: dict) -> str:
            return ", ".join(f"{JOIN_ABBREVIATIONS.get(k, k)} {v}" for k, v in sorted(s.items())) or "none"
        out.append(f"join strategies: chosen {fmt(chosen['join_strategies'])}; "
                   f"fastest {fmt(fastest['join_strategies'])}")
    elif chosen["build_sides"] != fastest["build_sides"]:
        out.append(f"build sides: chosen {', '.join(chosen['build_sides'])}; "
                   f"fastest {', '.join(fastest['build_sides'])}")
    for kind, label in (("Exchange", "shuffle exchanges"), ("BroadcastExchange", "broadcasts")):
        a, b = chosen["exchanges"][kind], fastest["exchanges"][kind]
        if a != b:
            out.append(f"{label}: chosen {a}, fastest {b}")
    tables_a = Counter(s["table"] for s in chosen["scans"])
    tables_b = Counter(s["table"] for s in fastest["scans"])
    if tables_a != tables_b:
        more = tables_a - tables_b
        fewer = tables_b - tables_a
        words = []
        if more:
            words.append("chosen scans more often: " + ", ".join(f"{t} +{n}" for t, n in sorted(more.items())))
        if fewer:
            words.append("fastest scans more often: " + ", ".join(f"{t} +{n}" for t, n in sorted(fewer.items())))
        out.append("scans: " + "; ".join(words))
    filters_a = {s["table"]: set() for s in chosen["scans"]}
    filters_b = {s["table"]: set() for s in fastest["scans"]}
    for scans, filters in ((chosen["scans"], filters_a), (fastest["scans"], filters_b)):
        for s in scans:
            filters[s["table"]] |= set(_pushed(s["pushed_filters"]))
    for table in sorted(set(filters_a) & set(filters_b)):
        only_a, only_b = filters_a[table] - filters_b[table], filters_b[table] - filters_a[table]
        if only_a or only_b:
            out.append(f"pushed filters on {table}: only chosen {sorted(only_a) or '[]'}; "
                       f"only fastest {sorted(only_b) or '[]'}")
    return out


def explain_text(df: Any) -> str:
    """Spark's formatted physical plan of ``df`` (public ``DataFrame.explain``; the query does not run)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        df.explain(mode="formatted")
    return buf.getvalue()


def explain_tree(text: str) -> str:
    """The operator trees of an explain text (main plan and subqueries), without the per-operator details
    (the parsed plan keeps what the report uses of them)."""
    return "\n".join(line for line in text.splitlines()
                     if line.startswith(("==", "Subquery:")) or _TREE_LINE.match(line) and not _DETAIL_HEAD.match(line))


#: Above this confirmed chosen / Spark CBO a plan is slower than Spark CBO beyond noise.
CONFIRMED_NOISE = 1.1


def reason(item: dict) -> str:
    """The main difference of an explained pair, in a few words (what the findings group by)."""
    diffs = item.get("differences")
    if diffs is None:
        return "not explained"
    confirmed = item.get("confirmed_chosen_vs_spark_cbo")
    # the confirmation runs time the chosen plan against Spark CBO: they speak for a Spark SQL fastest only
    held = confirmed is None or not item["fastest"].startswith("spark_") or confirmed > CONFIRMED_NOISE
    if not diffs:
        return "same physical plan (noise)"
    kinds = [d.split(":")[0].split(" on ")[0] for d in diffs]
    if all(k == "pushed filters" for k in kinds):
        return "only the form of pushed filters" + ("" if held else " (noise)")
    if "join strategies" in kinds:
        return "join strategy" + ("" if held else " (did not hold up when confirmed)")
    if "join order" in kinds:
        return "join order" + ("" if held else " (did not hold up when confirmed)")
    return "build side / exchanges" + ("" if held else " (did not hold up when confirmed)")


def explain_targets(rows: list[dict], above: float, limit: int) -> list[dict]:
    return sorted((r for r in rows if r["chosen_vs_fastest"] > above), key=lambda r: -r["chosen_vs_fastest"])[:limit]


def explain_suite(suite_name: str, report: dict, targets: list[dict], spark: Any) -> dict:
    """Spark's physical plans of the chosen and the fastest variant of each target, built as
    ``benchmarks/tpch.py`` builds them, at the report's scale; nothing is executed but statistics."""
    from benchmarks import tpch
    from optimizer.capabilities import default_capabilities
    from optimizer.spark import SparkBackend
    from optimizer.spark.statistics import default_statistics

    suite = tpch.SUITES[suite_name]
    scale = report["config"]["scale_factor"]
    timings: dict[str, float] = {}
    started = time.perf_counter()
    data_dir, tables = tpch.suite_data(suite, scale)
    texts = tpch.suite_texts(suite)
    queries = sorted({t["query"] for t in targets})
    variants = {(t["query"], v) for t in targets for v in (f"{t['producer']}/optimized", t["fastest"])}
    producers = sorted({v.split("/")[0] for _, v in variants if "/" in v})
    errors: dict = {}
    plans = tpch.suite_plans(suite, data_dir, tables, producers, queries, errors)
    timings["plans_s"] = time.perf_counter() - started

    common.register_temp_views(spark, tables)
    cbo = None
    if any(v == "spark_cbo" for _, v in variants):
        needed = sorted({t for q in queries for t in tables if re.search(rf"\b{t}\b", texts[q], re.IGNORECASE)})
        database = f"chosen_vs_fastest_{suite.name}_sf{scale:g}".replace(".", "_")
        timings["analyze_s"], cbo = common.timed(
            lambda: common.analyzed_session(spark, tables, database, analyze=needed))
    t0 = time.perf_counter()
    statistics = default_statistics(spark=spark, tables=tables)
    capabilities = default_capabilities()
    backend = SparkBackend(spark, tables=tables)
    optimized: dict[tuple[str, int], Any] = {}

    def dataframe(q: int, variant: str):
        """The variant's DataFrame, made under the confs it runs with (Spark parses the SQL at once)."""
        sql = texts[q]
        if variant == "spark_default":
            with common.conf_set(spark, dict(suite.sql_conf)):
                return spark.sql(sql), dict(suite.sql_conf), spark
        if variant == "spark_cbo":
            conf = {**common.CBO_CONF, **dict(suite.sql_conf)}
            with common.conf_set(cbo, conf):
                return cbo.sql(sql), conf, cbo
        producer, label = variant.split("/")
        plan = plans[(producer, q)]
        if label == "optimized":
            if (producer, q) not in optimized:
                optimized[(producer, q)] = tpch._optimize(plan, statistics, capabilities, 1)[0]
            plan = optimized[(producer, q)]
        return backend.to_dataframe(plan), {}, spark

    def cost_now(q: int, variant: str) -> float | None:
        if "/" not in variant or (variant.split("/")[0], q) not in plans:
            return None
        producer, label = variant.split("/")
        plan = optimized.get((producer, q)) if label == "optimized" else plans[(producer, q)]
        return tpch._plan_cost(plan, statistics) if plan is not None else None

    out = []
    for t in targets:
        q = t["query"]
        item: dict[str, Any] = {k: t[k] for k in ("query", "producer", "chosen_vs_fastest", "fastest",
                                                  "fastest_kind", "chosen_s", "fastest_s",
                                                  "confirmed_chosen_vs_spark_cbo", "rules_fired")}
        item["chosen"] = f"{t['producer']}/optimized"
        entry = next(e for e in report["queries"] if e["query"] == q)
        for role, variant in (("chosen", item["chosen"]), ("fastest", t["fastest"])):
            try:
                if "/" in variant and (variant.split("/")[0], q) not in plans:
                    raise LookupError(errors.get((variant.split("/")[0], q), "no plan"))
                df, conf, session = dataframe(q, variant)
                with common.conf_set(session, conf):
                    text = explain_text(df)
            except Exception as exc:  # a plan Spark or a producer refuses is a result: said, not fatal
                item[f"{role}_error"] = common.one_line(exc)
                continue
            item[f"{role}_plan"] = parse_physical_plan(text)
            item[f"{role}_explain_tree"] = explain_tree(text)
            if "/" in variant:
                producer, label = variant.split("/")
                reported = entry["plans"][producer].get(f"estimated_cost_{label}")
                now = cost_now(q, variant)
                item[f"{role}_estimated_cost"] = now
                item[f"{role}_estimated_cost_in_report"] = reported
                item[f"{role}_plan_changed_since_report"] = (
                    None if now is None or reported is None else abs(now - reported) > 1e-6 * max(1.0, reported))
        if "chosen_plan" in item and "fastest_plan" in item:
            item["differences"] = plan_differences(item["chosen_plan"], item["fastest_plan"])
        item["reason"] = reason(item)
        out.append(item)
    timings["explain_s"] = time.perf_counter() - t0
    return {"scale_factor": scale, "data_dir": str(data_dir),
            "seconds": {k: round(v, 1) for k, v in timings.items()}, "plans": out}


# ------------------------------------------------------------------------------------------ findings


def explain_findings(explained: list[dict]) -> dict:
    """Counts over the explained pairs: how often each kind of difference shows, and in which direction."""
    both = [e for e in explained if "differences" in e]
    counts: Counter = Counter()
    more_shuffles = fewer_shuffles = more_smj = fewer_smj = 0
    for e in both:
        kinds = {d.split(":")[0].split(" on ")[0] for d in e["differences"]}
        counts.update(kinds)
        a, b = e["chosen_plan"], e["fastest_plan"]
        d = a["exchanges"]["Exchange"] - b["exchanges"]["Exchange"]
        more_shuffles += d > 0
        fewer_shuffles += d < 0
        s = a["join_strategies"].get("SortMergeJoin", 0) - b["join_strategies"].get("SortMergeJoin", 0)
        more_smj += s > 0
        fewer_smj += s < 0
    reasons: dict[str, list[str]] = {}
    for e in explained:
        reasons.setdefault(e["reason"], []).append(f"Q{e['query']} {e['producer']}")
    return {"explained": len(both), "difference_kinds": dict(counts.most_common()), "reasons": reasons,
            "confirmed_within_noise": sum(1 for e in explained if e.get("confirmed_chosen_vs_spark_cbo") is not None
                                          and e["confirmed_chosen_vs_spark_cbo"] <= CONFIRMED_NOISE),
            "confirmed": sum(1 for e in explained if e.get("confirmed_chosen_vs_spark_cbo") is not None),
            "chosen_more_shuffles": more_shuffles, "chosen_fewer_shuffles": fewer_shuffles,
            "chosen_more_sort_merge_joins": more_smj, "chosen_fewer_sort_merge_joins": fewer_smj,
            "identical_physical_plans": sum(1 for e in both if not e["differences"])}


def findings(suites: dict) -> list[str]:
    """The report's findings in plain words, each from the numbers above it."""
    lines = []
    for name, s in suites.items():
        c = s["chosen"]
        title = "TPC-H" if name == "tpch" else "TPC-DS"
        per = ", ".join(f"{p} {common.fmt(v['geomean_chosen_vs_fastest'])}" for p, v in c["by_producer"].items())
        kinds = ", ".join(f"{k} {n}" for k, n in c["fastest_kinds"].items())
        lines.append(f"**{title}: the chosen plan runs {common.fmt(c['geomean_chosen_vs_fastest'])}x the fastest "
                     f"variant we measured (geomean of {c['plans']} plans; {per}).** It is the fastest itself in "
                     f"{c['chosen_is_fastest']} of {c['plans']}; the fastest is: {kinds}. Fastest over Spark CBO "
                     f"{common.fmt(c['room_fastest_vs_spark_cbo'])} against chosen over Spark CBO "
                     f"{common.fmt(c['geomean_chosen_vs_spark_cbo'])}.")
        k = c["confirmed"]
        if k["plans"]:
            lines.append(
                f"**{title}: part of the gap is noise picked as the slowest.** The {k['plans']} plans `make bench` "
                f"timed again (chosen / Spark CBO over 1.1 in the main runs) read {common.fmt(k['geomean_main_chosen_vs_spark_cbo'])} "
                f"in the main runs and {common.fmt(k['geomean_confirmed_chosen_vs_spark_cbo'])} in 9 more alternating "
                "runs (geomean). The fastest of 4 to 8 noisy medians is biased low the same way.")
        r = s["ranking"]
        kinds = "; ".join(f"{k}: {v.get('right', 0)} right, {v.get('wrong', 0)} wrong, {v.get('tied', 0)} tied"
                          for k, v in r["by_kind"].items())
        line = (f"**{title}: the model orders {r['pairs_right']} of {r['pairs_right'] + r['pairs_wrong']} pairs "
                f"right** (times apart by more than {r['noise']:.0%}; {kinds}). ")
        if r["pairs_wrong"]:
            line += (f"Of the {r['pairs_wrong']} wrong, {r['wrong_priced_within_noise']} are priced within "
                     f"{r['noise']:.0%} of each other (the model all but calls them equal); the others it prices "
                     "apart and in the wrong order. ")
        same_tied = r["by_kind"].get("same producer", {}).get("tied", 0)
        if same_tied:
            line += (f"{same_tied} pairs of a producer's original and optimized plan the model prices equal "
                     "(the optimizer left the plan as it was, or changed what the model does not price) still "
                     "differ by more than the noise threshold: part of what reads as a wrong choice is noise. ")
        rules = r["rules_fired_in_wrongly_cheaper_optimized"]
        if rules:
            line += ("Rules fired in the optimized plans the model prices cheaper than a plan that runs faster: "
                     + ", ".join(f"{k} {v}" for k, v in list(rules.items())[:6]) + ".")
        lines.append(line)
        f = s.get("explain_findings")
        if f and f["explained"]:
            kinds = ", ".join(f"{k} {n}" for k, n in f["difference_kinds"].items())
            lines.append(
                f"**{title}: Spark's physical plans of the {f['explained']} worst pairs** differ in: {kinds}. "
                + (f"{f['identical_physical_plans']} pairs have the same physical plan: their time difference is "
                   "the runs' noise, not the plan. " if f["identical_physical_plans"] else "")
                + f"The chosen plan has more shuffle exchanges in {f['chosen_more_shuffles']}, "
                f"fewer in {f['chosen_fewer_shuffles']}; more sort-merge joins in "
                f"{f['chosen_more_sort_merge_joins']}, fewer in {f['chosen_fewer_sort_merge_joins']}. "
                f"Of the {f['confirmed']} with confirmation runs in `make bench`, {f['confirmed_within_noise']} "
                f"read chosen / Spark CBO <= {CONFIRMED_NOISE:g} there: the gap of the main runs did not hold up. "
                "By main difference: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in f["reasons"].items()) + ".")
    return lines


# ------------------------------------------------------------------------------------------ report


def _other_sql(report: dict) -> set[tuple[str, int]]:
    """The ``(producer, query)`` plans of the report made from another text than the benchmark's query."""
    from benchmarks import tpch

    keys = {(p, e["query"]): None for e in report["queries"] for p in e.get("plans", {})}
    return set(tpch._own_sql(keys, tpch.suite_texts(tpch.TPCH)))


def build_report(reports: dict[str, dict], *, noise: float = NOISE, above: float = EXPLAIN_ABOVE,
                 limit: int = EXPLAIN_MAX, explain: bool = True, spark: Any = None,
                 paths: dict[str, str] | None = None, reprice_dir: str | None = None) -> dict:
    started = time.time()
    suites: dict[str, dict] = {}
    repriced: dict[str, dict] = {}
    if reprice_dir:
        spark = common.get_session(spark)
        for name in list(reports):
            reports[name], repriced[name] = reprice(name, reports[name], Path(reprice_dir), spark)
    for name, report in reports.items():
        other_sql = _other_sql(report) if name == "tpch" else set()
        rows = chosen_rows(report, other_sql)
        suites[name] = {
            "source": (paths or {}).get(name), "source_commit": report["config"]["machine"].get("commit"),
            "source_date": report["config"]["machine"].get("date"),
            "scale_factor": report["config"]["scale_factor"],
            "chosen": chosen_summary(report, rows, above), "ranking": ranking(report, noise, other_sql), "rows": rows,
            "other_sql": sorted(other_sql), "repriced": repriced.get(name),
            "explain_targets": [(t["query"], t["producer"]) for t in explain_targets(rows, above, limit)],
        }
    if explain:
        spark = common.get_session(spark)
        for name, report in reports.items():
            targets = explain_targets(suites[name]["rows"], above, limit)
            if targets:
                suites[name]["explain"] = explain_suite(name, report, targets, spark)
                suites[name]["explain_findings"] = explain_findings(suites[name]["explain"]["plans"])
    return {"config": {"noise": noise, "explain_above": above, "explain_max": limit, "explain": explain,
                       "command": COMMAND + ("" if explain else " --no-explain"), "machine": common.machine(),
                       "wall_seconds": round(time.time() - started, 1)},
            "findings": findings(suites), "suites": suites}


def markdown(report: dict) -> str:
    cfg = report["config"]
    m = cfg["machine"]
    lines = [
        "# Why the chosen plan is not the fastest one we know",
        "",
        f"`{cfg['command']}`, {m.get('date')}, commit {m.get('commit', '?')}, {cfg['wall_seconds']:g} s. "
        "Read from `make bench`'s reports: per query and producer, the chosen plan (`<producer>/optimized`) "
        "beside the variant with the lowest median time (Spark SQL default or CBO, any producer's original "
        f"or optimized plan). Model ranking: pairs of priced variants of one query whose medians differ by "
        f"more than {cfg['noise']:.0%}. Physical plans: Spark's `explain(mode=\"formatted\")` of both "
        f"variants for plans with chosen / fastest > {cfg['explain_above']:g} (the worst {cfg['explain_max']} "
        "per suite), built again at the report's scale with today's optimizer; with AQE on, the plan before "
        "execution (AQE may still turn a sort-merge join into a broadcast at run time).",
        "",
        "## Findings",
        "",
    ]
    lines += [f"- {f}" for f in report["findings"]]
    lines += ["", "What the differences come from, read from the optimizer's estimates of these plans, and the fix "
              f"candidates they point to: [{DOC_SECTION[0]}]({DOC_SECTION[1]})."]
    for name, s in report["suites"].items():
        title = "TPC-H" if name == "tpch" else "TPC-DS"
        c = s["chosen"]
        lines += ["", f"## {title} SF {s['scale_factor']:g} (`{s['source']}`, commit {s['source_commit']}, "
                      f"{s['source_date']})", ""]
        lines.append(common.markdown_table(
            ["producer", "plans", "geomean chosen / fastest", "geomean chosen / Spark CBO"],
            [[p, v["plans"], common.fmt(v["geomean_chosen_vs_fastest"]), common.fmt(v["geomean_chosen_vs_spark_cbo"])]
             for p, v in c["by_producer"].items()]
            + [["all", c["plans"], common.fmt(c["geomean_chosen_vs_fastest"]),
                common.fmt(c["geomean_chosen_vs_spark_cbo"])]]))
        lines += ["", f"Room (per query fastest / Spark CBO, geomean): {common.fmt(c['room_fastest_vs_spark_cbo'])}. "
                      "Fastest variant: " + ", ".join(f"`{k}` {n}" for k, n in c["fastest_variants"].items()) + ".",
                  "", "### Per plan (worst first)", ""]
        rows = sorted(s["rows"], key=lambda r: -r["chosen_vs_fastest"])
        lines.append(common.markdown_table(
            ["query", "producer", "chosen s", "fastest", "fastest s", "chosen / fastest", "chosen / CBO",
             "confirmed chosen / CBO"],
            [[f"Q{r['query']}", r["producer"] + (" (other SQL)" if r.get("other_sql") else ""),
              common.fmt(r["chosen_s"]), f"`{r['fastest']}`", common.fmt(r["fastest_s"]),
              common.fmt(r["chosen_vs_fastest"]), common.fmt(r["chosen_vs_spark_cbo"]),
              common.fmt(r.get("confirmed_chosen_vs_spark_cbo"))]
             for r in rows if r["chosen_vs_fastest"] > 1.0]))
        n_equal = sum(1 for r in rows if r["chosen_vs_fastest"] == 1.0)
        lines += ["", f"({n_equal} plans where the chosen is the fastest are not listed. Confirmed: the ratio of "
                      "the medians of `make bench`'s 9 more alternating runs against Spark CBO, for plans over "
                      "1.1 in the main runs."
                  + (" Other SQL: " + ", ".join(f"{p} Q{q}" for p, q in s["other_sql"]) + " are plans of the "
                     "corpus' own text (other substitution parameters), compared only with their own "
                     "producer's other plan." if s.get("other_sql") else "") + ")", ""]
        r = s["ranking"]
        lines += [f"### Does the model rank them right? {r['pairs_right']} right, {r['pairs_wrong']} wrong, "
                  f"{r['pairs_tied']} priced equal ({r['pairs_within_noise']} pairs within {r['noise']:.0%})", ""]
        if s.get("repriced"):
            lines += [f"Prices: today's cost model (`--reprice`), {s['repriced']['priced']} plans priced again "
                      f"({s['repriced']['plans_read']} read from the plans directory), not the report's.", ""]
        lines.append(common.markdown_table(
            ["pairs", "right", "wrong", "priced equal"],
            [[k, v.get("right", 0), v.get("wrong", 0), v.get("tied", 0)] for k, v in r["by_kind"].items()]))
        if r["wrong"]:
            lines += ["", "Ranked wrong (the faster plan is the costlier by the model):", ""]
            lines.append(common.markdown_table(
                ["query", "faster", "slower", "slower / faster time", "slower / faster cost", "rules in the slower"],
                [[f"Q{p['query']}", f"`{p['faster']}`", f"`{p['slower']}`", common.fmt(p["time_ratio"]),
                  common.fmt(p["cost_ratio"]),
                  ", ".join(f"{k} {v}" for k, v in p["rules_fired_in_slower"].items()) or "–"]
                 for p in r["wrong"]]))
        if "explain" in s:
            e = s["explain"]
            lines += ["", f"### Spark's physical plans (SF {e['scale_factor']:g}; "
                          + ", ".join(f"{k} {v:g}" for k, v in e["seconds"].items()) + ")", ""]
            for item in e["plans"]:
                confirmed = item.get("confirmed_chosen_vs_spark_cbo")
                lines.append(f"**Q{item['query']} {item['producer']}**: chosen `{item['chosen']}` "
                             f"{common.fmt(item['chosen_s'])} s, fastest `{item['fastest']}` "
                             f"{common.fmt(item['fastest_s'])} s ({common.fmt(item['chosen_vs_fastest'])}x"
                             + (f"; confirmed chosen / CBO {common.fmt(confirmed)}" if confirmed else "")
                             + "); rules fired in the chosen: "
                             + (", ".join(f"{k} {v}" for k, v in item["rules_fired"].items()) or "none") + ".")
                for role in ("chosen", "fastest"):
                    if f"{role}_error" in item:
                        lines.append(f"- {role}: not explained: {item[f'{role}_error']}")
                        continue
                    p = item[f"{role}_plan"]
                    cost = ""
                    if item.get(f"{role}_estimated_cost") is not None:
                        cost = f"; estimated cost {common.fmt(item[f'{role}_estimated_cost'])}"
                        if item.get(f"{role}_plan_changed_since_report"):
                            cost += (" (the report's plan cost "
                                     f"{common.fmt(item[f'{role}_estimated_cost_in_report'])}: the optimizer "
                                     "writes another plan today)")
                    ex = p["exchanges"]
                    lines.append(f"- {role}: {p['join_tree']}; joins {', '.join(p['build_sides']) or 'none'}; "
                                 f"exchanges {ex['Exchange']} shuffle, {ex['BroadcastExchange']} broadcast, "
                                 f"{ex['ReusedExchange']} reused{cost}")
                lines.append(f"- main difference: {item['reason']}")
                if item.get("differences"):
                    lines.append("- differs: " + "; ".join(item["differences"]))
                elif "differences" in item:
                    lines.append("- the same physical plan: the time difference is noise")
                lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tpch", default=str(SUITE_REPORTS["tpch"]), help="TPC-H report of benchmarks/tpch.py "
                   "('' to skip)")
    p.add_argument("--tpcds", default=str(SUITE_REPORTS["tpcds"]), help="TPC-DS report ('' to skip)")
    p.add_argument("--noise", type=float, default=NOISE, help=f"time difference within noise (default {NOISE})")
    p.add_argument("--explain-above", type=float, default=EXPLAIN_ABOVE,
                   help=f"explain plans with chosen / fastest above this (default {EXPLAIN_ABOVE})")
    p.add_argument("--explain-max", type=int, default=EXPLAIN_MAX,
                   help=f"at most this many explained plans per suite (default {EXPLAIN_MAX})")
    p.add_argument("--no-explain", action="store_true", help="read the reports only (no Spark)")
    p.add_argument("--reprice", metavar="PLANS_DIR", help="rank by today's cost model, the plans read from (or "
                   "written to) PLANS_DIR (see the module doc)")
    p.add_argument("--out", default=str(common.REPORT_DIR), help="report directory (default docs/benchmarks)")
    p.add_argument("--name", default="chosen_vs_fastest", help="report file stem")
    return p.parse_args(argv)


def report_problem(report: Any, suite: str) -> str | None:
    """What makes ``report`` unusable as ``benchmarks/tpch.py``'s report of ``suite`` (None: usable).

    >>> report_problem({"config": {"suite": "tpch", "scale_factor": 1}, "queries": [{"query": 1}]}, "tpch")
    'queries[0] has no times_s object'
    """
    if not isinstance(report, dict) or not isinstance(report.get("config"), dict):
        return "not a benchmarks/tpch.py report (no config object)"
    config = report["config"]
    if config.get("suite", "tpch") != suite:
        return f"a report of suite {config.get('suite')!r}, not {suite!r}"
    if not isinstance(config.get("scale_factor"), (int, float)) or config["scale_factor"] <= 0:
        return "config.scale_factor is not a positive number"
    if not isinstance(report.get("queries"), list):
        return "no queries list"
    for i, entry in enumerate(report["queries"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("query"), int):
            return f"queries[{i}] has no query number"
        if not isinstance(entry.get("times_s"), dict):
            return f"queries[{i}] has no times_s object"
        for key, runs in entry["times_s"].items():
            if not isinstance(runs, list) or not all(isinstance(t, (int, float)) and t > 0 for t in runs):
                return f"queries[{i}].times_s[{key!r}] is not a list of positive seconds"
        plans = entry.get("plans", {})
        if not isinstance(plans, dict) or not all(isinstance(v, dict) for v in plans.values()):
            return f"queries[{i}].plans is not an object of objects"
        for producer, info in plans.items():
            for label in ("original", "optimized"):
                cost = info.get(f"estimated_cost_{label}")
                if cost is not None and (not isinstance(cost, (int, float)) or cost < 0):
                    return f"queries[{i}].plans[{producer!r}].estimated_cost_{label} is not a cost"
    return None


def main(argv=None, spark: Any = None) -> dict:
    args = parse_args(argv)
    paths = {name: path for name, path in (("tpch", args.tpch), ("tpcds", args.tpcds)) if path}
    reports = {}
    for name, path in paths.items():
        try:
            reports[name] = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            _fail(f"cannot read the {name} report {path}: {common.one_line(exc)}")
        problem = report_problem(reports[name], name)
        if problem:
            _fail(f"{path}: {problem}")
    report = build_report(reports, noise=args.noise, above=args.explain_above, limit=args.explain_max,
                          explain=not args.no_explain, spark=spark,
                          paths={k: _relative(v) for k, v in paths.items()}, reprice_dir=args.reprice)
    report["config"]["command"] = " ".join([COMMAND, *(argv if argv is not None else sys.argv[1:])])
    common.write_report(args.out, args.name, report, markdown)
    print(f"wrote {Path(args.out) / args.name}.json and .md in {report['config']['wall_seconds']:g} s")
    return report


def _fail(message: str) -> None:
    """A bad input: one line on stderr naming it, exit status 2."""
    print(f"chosen_vs_fastest: {message}", file=sys.stderr)
    raise SystemExit(2)


def _relative(path: str) -> str:
    p = Path(path).resolve()
    return str(p.relative_to(common.ROOT)) if p.is_relative_to(common.ROOT) else str(p)


if __name__ == "__main__":
    main()
