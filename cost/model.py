"""The cost model: CPU, I/O, network and memory of each relation, from the cardinality estimates.

:class:`CostModel` ``(config)`` (``config`` an :class:`optimizer.driver.OptimizerConfig`, or ``None``)
prices one relation with :meth:`~CostModel.node_cost` ``(g, node, estimator) -> Cost`` and a whole
subtree with :meth:`~CostModel.total` ``(g, node, estimator) -> float``, where a subtree shared by
several parents is counted once.

Units: every component of :class:`Cost` is in *nanoseconds of one core* (an estimate of the time the
work takes); :attr:`Cost.total` is their weighted sum (weights 1 by default). The constants, and why
each has its value, are in :class:`CostConstants` and ``docs/cost-model.md``.

How relations are priced (``n``: input rows, ``b``: input bytes, ``k``: output rows):

* read: bytes of the columns read (projection and filter columns) at :attr:`~CostConstants.io_byte`,
  plus decoding each value read and handling each output row; a pushed ``filter`` skips no row groups (conservative: TPC-H data is not
  clustered on most filter columns; :attr:`~CostConstants.row_group_skip` turns it on).
* filter, project: per row, plus per conjunct / non-trivial expression.
* hash join: build rows hashed and their bytes held in memory, probe rows looked up, output rows;
  network: a broadcast build side (an ``ExchangeRel(broadcast)`` input) is priced by the exchange,
  else a side not already hash-partitioned on its keys is shuffled (both sides, typically).
* logical join: priced as Spark would run it: a broadcast hash join when the smaller side is under
  ``config.broadcast_threshold_bytes`` (broadcast = bytes x executors), else a shuffled hash join.
* merge join: one pass over each input, plus a sort (``n log n``) of each input not already ordered
  on the keys (:mod:`cost.properties`), plus the shuffles.
* nested loop join, cross: ``|L| x |R|`` comparisons; the right side is broadcast. A whole plan
  (:meth:`~CostModel.price`) prices a region of inner joins written with a cross product in the order
  Spark's ``ReorderJoin`` joins it (:func:`cost.spark_joins.spark_join_region`).
* sort: ``n log2 n`` comparisons, memory for the rows, a range shuffle; top-N: ``n log2 k`` and only
  ``k`` rows held; fetch: the rows it reads.
* aggregate: hashing every input row (per measure too), holding the groups, shuffling the partial
  aggregates (at most ``groups x executors`` rows).
* window (ConsistentPartitionWindowRel): a sort by partition and order keys unless the input is
  already ordered so (two windows with the same keys share one sort), a shuffle unless partitioned.
* exchange: its input's bytes over the network (broadcast: collected on the driver, then sent to each
  executor: bytes x (executors + 1)).
* set: union all per row; the others hash every row like an aggregate.

Memory above :attr:`~CostConstants.memory_threshold_bytes` per executor spills: every byte beyond is
written and read again (:attr:`~CostConstants.spill_byte`).

>>> c = Cost(cpu=10.0, io=5.0)
>>> c.total, (c + Cost(network=1.0)).total
(15.0, 16.0)
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
from optimizer.cost import properties
from optimizer.cost.cardinality import CardinalityEstimator
from optimizer.cost.estimates import RelEstimate, equi_pairs, evolve
from optimizer.cost.metadata import ORDERING
from optimizer.cost.spark_joins import (
    BROADCAST_BUILD,
    LEFT,
    PRESERVED_BUILD_PENALTY,
    RIGHT,
    JoinRegion,
    builds_preserved,
    choose_build,
    joins_without_condition,
    spark_join_region,
)
from optimizer.cost.spark_size import join_size

from optimizer.dag import inputs, uses
from optimizer.errors import UnsupportedError
from optimizer.expr_utils import (
    conjuncts,
    field_index,
    has_subquery,
    join_type_name,
    referenced_fields,
    remap_fields,
    sub_messages,
)


def _spark_equi_keys(body: Any, n_left: int | None, functions: Any) -> bool:
    """Whether a join condition has an equality Spark hashes on (``ExtractEquiJoinKeys``): an expression
    of left columns only against one of right columns only, ``d_week_seq1 = d_week_seq2 - 53`` too."""
    if n_left is None or not body.HasField("expression"):
        return False

    def side(e: Any) -> int | None:  # a column standing for the one side the expression reads
        refs = referenced_fields(e)
        one_side = refs and not has_subquery(e) and (max(refs) < n_left or min(refs) >= n_left)
        return min(refs) if one_side else None

    return bool(equi_pairs(body.expression, n_left, functions, column=side)[0])


@dataclass(frozen=True)
class CostConstants:
    """Constants of the cost model, in nanoseconds of one core (see ``docs/cost-model.md``)."""

    #: Handling one row in an operator (Spark's whole-stage generated code: ~20-50M rows/s per core).
    cpu_row: float = 30.0
    #: Decoding one value of a column read from Parquet (vectorised reader: ~100-200M values/s per core).
    cpu_value: float = 5.0
    #: Evaluating one predicate conjunct or one computed expression on one row.
    cpu_expr: float = 10.0
    #: Touching one byte (copying, serialising, hashing a key's bytes).
    cpu_byte: float = 0.5
    #: Inserting one row into a hash table (hash, probe for a slot, copy): ~2x a row's handling.
    cpu_hash_build: float = 60.0
    #: Looking one row up in a hash table.
    cpu_hash_probe: float = 40.0
    #: One comparison of a sort (n log2 n of them).
    cpu_compare: float = 15.0
    #: Reading and decoding one byte of a local Parquet file (~500 MB/s per core with decompression).
    io_byte: float = 2.0
    #: Moving one byte through a shuffle: serialise, write to local disk, fetch, deserialise (~5x a read).
    network_byte: float = 10.0
    #: A shuffle's fixed cost: a stage boundary (map tasks write their files, a new stage's tasks are
    #: scheduled and fetch them); measured with benchmarks/stage_costs.py (docs/cost-model.md).
    shuffle_stage: float = 8e6
    #: A broadcast's fixed cost: a job of its own collects the rows on the driver, which builds the
    #: relation and sends it out; measured the same way (14-21 ms per added broadcast join).
    broadcast_job: float = 1.2e7
    #: Holding one byte in memory for the life of an operator (small: memory is cheap until it spills).
    memory_byte: float = 0.05
    #: Memory per executor above which an operator spills (Spark's execution memory with 6g drivers and
    #: 2 executors is ~1.5 GB each; we start penalising at 1 GiB).
    memory_threshold_bytes: float = 1024.0 ** 3
    #: Spilling one byte: written to disk and read back (~2 local reads + serialisation).
    spill_byte: float = 8.0
    #: Fraction of rows a pushed filter lets Parquet skip by row-group min/max (0: conservative).
    row_group_skip: float = 0.0
    #: Executors (cores) sharing the work; a broadcast copies the data to each. 2 on this 2-core machine.
    executors: int = 2
    #: Weights of the components in :attr:`Cost.total`.
    weight_cpu: float = 1.0
    weight_io: float = 1.0
    weight_network: float = 1.0
    weight_memory: float = 1.0


DEFAULT_CONSTANTS = CostConstants()


#: The largest cost: sums and products of huge estimates saturate here instead of reaching infinity
#: (an infinite or NaN cost compares false with everything, so no plan would ever be chosen).
MAX_COST = 1e300


def saturate_cost(value: float) -> float:
    """``value`` capped at :data:`MAX_COST`; NaN (from inf - inf or 0 * inf) is the cap too."""
    return MAX_COST if not value <= MAX_COST else max(value, 0.0)


@dataclass
class Cost:
    """The cost of some work: ``cpu``, ``io``, ``network``, ``memory`` (ns of one core each)."""

    cpu: float = 0.0
    io: float = 0.0
    network: float = 0.0
    memory: float = 0.0
    constants: CostConstants = field(default=DEFAULT_CONSTANTS, repr=False, compare=False)

    @property
    def total(self) -> float:
        k = self.constants
        return saturate_cost(k.weight_cpu * self.cpu + k.weight_io * self.io + k.weight_network * self.network
                             + k.weight_memory * self.memory)

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.cpu + other.cpu, self.io + other.io, self.network + other.network,
                    self.memory + other.memory, self.constants)

    def __str__(self) -> str:
        return (f"Cost(total={self.total:.3g}, cpu={self.cpu:.3g}, io={self.io:.3g}, "
                f"network={self.network:.3g}, memory={self.memory:.3g})")


_BUILD_RIGHT = {"UNSPECIFIED", "RIGHT"}


class CostModel:
    """Prices relations (see the module docstring). ``config``: an ``OptimizerConfig`` (its
    ``broadcast_threshold_bytes``, and ``executors`` if it has one); ``constants`` override the defaults."""

    def __init__(self, config: Any = None, constants: CostConstants | None = None) -> None:
        self.config = config
        k = constants or getattr(config, "cost_constants", None) or DEFAULT_CONSTANTS
        executors = getattr(config, "executors", None)
        if executors:
            from dataclasses import replace

            k = replace(k, executors=int(executors))
        self.k = k
        self.broadcast_threshold = float(getattr(config, "broadcast_threshold_bytes", 10 * 1024 * 1024))
        #: per estimator (held weakly: scratch plans' estimators come and go), ``2 * node + bindable`` ->
        #: (rel, estimate, cost, *input estimates): see node_cost (one tuple an entry: the plans of wide
        #: join graphs hold thousands, which the garbage collector walks)
        self._memo: weakref.WeakKeyDictionary[CardinalityEstimator, dict[int, tuple]] = (
            weakref.WeakKeyDictionary())

    # -- public ---------------------------------------------------------------------------------------

    def adopt(self, estimator: CardinalityEstimator, fork: CardinalityEstimator) -> None:
        """Give ``fork`` (:meth:`CardinalityEstimator.fork` of ``estimator``) the costs known for
        ``estimator`` of the relations its DAG has: each holds while the relation and the estimates it
        was priced with are the same objects, as they are in the fork."""
        memo = self._memo.get(estimator)
        if memo is not None:
            self._memo[fork] = {key: seen for key, seen in memo.items() if key >> 1 in fork.g}

    def total(self, g: nx.DiGraph, node: int, estimator: CardinalityEstimator) -> float:
        """Cumulative cost of the subtree at ``node``; a node read by several parents counts once."""
        nodes = {node} | nx.descendants(g, node)
        return sum(self.node_cost(g, n, estimator).total for n in nodes)

    def total_cost(self, g: nx.DiGraph, node: int, estimator: CardinalityEstimator) -> Cost:
        """:meth:`total` as a :class:`Cost` with its components."""
        out = Cost(constants=self.k)
        for n in {node} | nx.descendants(g, node):
            out = out + self.node_cost(g, n, estimator)
        return out

    def price(self, g: nx.DiGraph, nodes: set[int], estimator: CardinalityEstimator, bindable: bool = False) -> float:
        """The cost of the relations ``nodes`` (a whole plan's), each by :meth:`node_cost`, except a region
        of inner joins written with a cross product that Spark joins in another order
        (:func:`cost.spark_joins.spark_join_region`): its joins are priced in Spark's order
        (:meth:`spark_order_cost`). Only a whole plan is priced so: whether Spark reorders a join depends
        on the joins and filters above it."""
        total = 0.0
        regions: list[JoinRegion] = []
        # A region holds a cross product or a join without a condition: without one, none is looked for.
        for n in nodes if any(joins_without_condition(g, n) for n in nodes) else ():
            if g.nodes[n]["kind"] in ("join", "cross", "filter"):
                region = spark_join_region(g, n, estimator.functions)
                if region is not None and nodes.issuperset(region.nodes):
                    regions.append(region)
        replaced = {n for region in regions for n in region.nodes}
        for n in nodes - replaced:
            total += self.node_cost(g, n, estimator, bindable=bindable).total
            readers = uses(g, n)
            if readers > 1:
                total += self.computed_once(estimator.estimate(n), readers).total
        for region in regions:
            total += self.spark_order_cost(g, region, estimator, bindable).total
        return saturate_cost(total)

    def spark_order_cost(self, g: nx.DiGraph, region: JoinRegion, estimator: CardinalityEstimator,
                         bindable: bool = False) -> Cost:
        """The joins of ``region`` as Spark runs them: each conjunct that reads one input filters that input,
        the inputs are joined left-deep in ``region.order``, each join on the conditions between its two
        sides (priced as a logical join: :meth:`logical_join`, by Spark's sizes; ``bindable``: the cheaper
        of that and the join :mod:`rules.implement_joins` can bind), and the conjuncts that cannot move
        filter the result."""
        k = self.k
        out = Cost(constants=k)
        widths = [len(g.nodes[leaf]["schema"].types) for leaf in region.leaves]
        starts = [sum(widths[:i]) for i in range(len(widths))]
        ests: list[RelEstimate] = []
        for i, leaf in enumerate(region.leaves):
            est = estimator.estimate(leaf)
            local = [c for c, m in region.conditions if m == 1 << i]
            if local:
                out = out + self._cost(cpu=est.rows * (k.cpu_row + len(local) * k.cpu_expr))
                for c in local:
                    est = estimator.apply_filter(remap_fields(c, lambda f, s=starts[i]: f - s), est)
            ests.append(est)
        first = region.order[0]
        current, size = ests[first], ests[first].spark_bytes
        columns = list(range(starts[first], starts[first] + widths[first]))
        joined = 1 << first
        for i in region.order[1:]:
            both = joined | 1 << i
            here = [c for c, m in region.conditions if m & ~both == 0 and m & joined and m & 1 << i]
            position = {col: j for j, col in enumerate(columns + list(range(starts[i], starts[i] + widths[i])))}
            keys: list[tuple[int, int]] = []
            residual: list = []
            for c in here:
                kk, rr = estimator.join_keys(remap_fields(c, position), len(columns))
                keys += kk
                residual += rr
            right = ests[i]
            joined_est = estimator.join("INNER", current, right, keys, residual)
            joined_est = evolve(joined_est, rows=max(joined_est.rows, 1.0), width=current.width + right.width)
            planned = (size, right.spark_bytes) if size is not None and right.spark_bytes is not None else None

            def priced(sizes, left=current, right=right, result=joined_est, keys=keys, residual=residual) -> Cost:
                return self.logical_join("INNER", left, right, result, has_keys=bool(keys), residual=bool(residual),
                                         has_condition=bool(keys or residual), planned=sizes)

            step = priced(planned)
            if bindable and planned is not None:
                bound = priced(None)
                if bound.total < step.total:
                    step = bound
            out = out + step
            current, joined = joined_est, both
            size = join_size("INNER", size, right.spark_bytes) if planned is not None else None
            columns += list(range(starts[i], starts[i] + widths[i]))
        rest = region.fixed + [c for c, m in region.conditions if m == 0]
        if rest:
            out = out + self._cost(cpu=current.rows * (k.cpu_row + len(rest) * k.cpu_expr))
        return out

    def node_cost(self, g: nx.DiGraph, node: int, estimator: CardinalityEstimator, *,
                  bindable: bool = False) -> Cost:
        """The cost of one relation's own work (its inputs excluded). ``bindable``: a logical join is
        priced as the cheaper of what Spark would choose and what :mod:`rules.implement_joins` can bind
        (for a join a rewrite creates, which the physical phase then offers to that rule).

        Remembered while the relation, its estimate and its inputs' estimates are the same objects: a
        cost reads nothing else but the properties of the subtree below, and any change there gives
        the relation a new estimate (the estimator forgets those of the readers of what changed)."""
        data = g.nodes[node]
        rel = data["rel"]
        kind = data["kind"]
        bindable = bindable and kind in ("join", "lateral_join")  # the only relations it prices otherwise
        out = estimator.estimate(node)
        ins = [estimator.estimate(c) for c in inputs(g, node)]
        memo = self._memo.get(estimator)
        if memo is None:
            memo = self._memo[estimator] = {}
        key = 2 * node + bindable
        seen = memo.get(key)
        if seen is not None and seen[0] is rel and seen[1] is out and len(seen) == 3 + len(ins):
            for i, est in enumerate(ins, 3):
                if seen[i] is not est:
                    break
            else:
                return seen[2]
        body = getattr(rel, kind)
        if bindable:
            cost = self._cost_join(g, node, body, out, ins, estimator, bindable=True)
        else:
            handler = getattr(self, f"_cost_{kind}", None)
            if handler is None:  # a relation kind newer than this model
                raise UnsupportedError(f"the cost model has no cost for a {kind} relation", f"node {node}")
            cost = handler(g, node, body, out, ins, estimator)
        memo[key] = (rel, out, cost, *ins)
        return cost

    # -- building blocks ----------------------------------------------------------------------------

    @staticmethod
    def _distribution(g: nx.DiGraph, node: int, estimator: CardinalityEstimator) -> properties.Distribution:
        return properties.distribution(g, node, estimator.distributions, estimator.functions)

    def _cost(self, cpu: float = 0.0, io: float = 0.0, network: float = 0.0, memory_bytes: float = 0.0) -> Cost:
        return Cost(cpu, io, network, self._memory(memory_bytes), self.k)

    def _cpu(self, rows: float) -> Cost:
        return self._cost(cpu=rows * self.k.cpu_row)

    def _memory(self, held_bytes: float, per_executor: bool = False) -> float:
        """Cost of holding bytes: cheap, plus a spill penalty for what exceeds the threshold."""
        k = self.k
        per = held_bytes if per_executor else held_bytes / max(k.executors, 1)
        spill = max(per - k.memory_threshold_bytes, 0.0) * (1 if per_executor else max(k.executors, 1))
        return held_bytes * k.memory_byte + spill * k.spill_byte

    def computed_once(self, est: RelEstimate, readers: int) -> Cost:
        """What sharing a relation's rows among ``readers`` costs (a subtree the plan reads in several
        places, which the Spark backend computes once): its rows shuffled once and read by each reader."""
        return Cost(est.rows * self.k.cpu_row * readers, 0.0, self.shuffle(est) + est.bytes * self.k.network_byte
                    * (readers - 1), 0.0, self.k)

    def shuffle(self, est: RelEstimate) -> float:
        """Network cost of repartitioning a relation: its bytes, and the stage boundary."""
        return est.bytes * self.k.network_byte + self.k.shuffle_stage

    def broadcast(self, est: RelEstimate) -> float:
        """Network cost of sending a relation to every executor: collected on the driver, then one
        copy per executor; and the job that does it."""
        return est.bytes * self.k.network_byte * (max(self.k.executors, 1) + 1) + self.k.broadcast_job

    def sort_cpu(self, rows: float, width: float, limit: float | None = None) -> float:
        """CPU of sorting ``rows`` rows (``n log2 n``), or keeping the top ``limit`` (``n log2 k``)."""
        k = self.k
        n = max(rows, 1.0)
        depth = math.log2(max(min(limit, n), 2.0)) if limit is not None else math.log2(max(n, 2.0))
        return n * depth * k.cpu_compare + n * (k.cpu_row + width * k.cpu_byte)

    def hash_cpu(self, build: RelEstimate, probe: RelEstimate, out: RelEstimate, preserved: bool = False) -> float:
        """CPU of a hash join; building the side an outer join preserves costs ``PRESERVED_BUILD_PENALTY``
        times as much per build row (:mod:`cost.spark_joins`)."""
        k = self.k
        per_build_row = (k.cpu_hash_build + build.width * k.cpu_byte) * (PRESERVED_BUILD_PENALTY if preserved else 1.0)
        return build.rows * per_build_row + probe.rows * k.cpu_hash_probe + out.rows * k.cpu_row

    # -- relations ------------------------------------------------------------------------------------

    def _cost_read(self, g, node, body, out: RelEstimate, ins, estimator) -> Cost:
        k = self.k
        which = body.WhichOneof("read_type")
        base_rows, read_width, n_cols = self._scan_size(g, node, body, out, estimator)
        if which == "virtual_table":
            return self._cost(cpu=base_rows * k.cpu_row)
        scanned = base_rows
        if body.HasField("filter") and k.row_group_skip > 0 and base_rows > 0:
            scanned = base_rows - k.row_group_skip * max(base_rows - out.rows, 0.0)
        io = scanned * read_width * k.io_byte
        cpu = scanned * n_cols * k.cpu_value + self.conjuncts_cpu(scanned, node, estimator) + out.rows * k.cpu_row
        return self._cost(cpu=cpu, io=io)

    def _scan_size(self, g, node, body, out: RelEstimate, estimator) -> tuple[float, float, int]:
        """(rows of the table before filters, bytes per row of the columns read, columns read)."""
        from optimizer.cost.estimates import type_width

        stats_rows = None
        table = None
        if body.WhichOneof("read_type") == "named_table" and estimator.statistics is not None:
            table = estimator.statistics.table(list(body.named_table.names))
            stats_rows = table.row_count if table is not None else None
        if body.WhichOneof("read_type") == "virtual_table":
            stats_rows = float(len(body.virtual_table.expressions))
        base_rows = stats_rows if stats_rows is not None else out.rows
        if stats_rows is None and out.source == "hint":
            base_rows = out.rows
        types = list(body.base_schema.struct.types)
        used: set[int] = set(range(len(types)))
        if body.HasField("projection"):
            used = {i.field for i in body.projection.select.struct_items}
        needed = estimator.needed(node)
        if needed is not None:  # Spark reads only the columns something above reads
            mask = sorted(used) if not body.HasField("projection") else [
                i.field for i in body.projection.select.struct_items]
            used = {mask[i] for i in needed if i < len(mask)}
        if used != set(range(len(types))):
            from optimizer.expr_utils import referenced_fields

            for name in ("filter", "best_effort_filter"):
                if body.HasField(name):
                    used |= referenced_fields(getattr(body, name))
        width = 0.0
        names = list(body.base_schema.names)
        for i in used:
            if i >= len(types):
                continue
            cs = table.column(names[i]) if table is not None and i < len(names) else None
            width += cs.avg_len if cs is not None and cs.avg_len is not None else type_width(types[i])
        return base_rows, max(width, 1.0), len(used)

    def _cost_filter(self, g, node, body, out, ins, estimator) -> Cost:
        n = ins[0].rows if ins else out.rows
        filtering = self.conjuncts_cpu(n, node, estimator) if ins else 0.0
        return self._cost(cpu=n * self.k.cpu_row + filtering)

    def conjuncts_cpu(self, rows: float, node: int, estimator: CardinalityEstimator) -> float:
        """Evaluating the conjuncts of a filter (or of a read's filters), in their order, on ``rows``
        rows. Spark's generated code short-circuits ``AND`` left to right (and combines a filter with
        the one below it, or with the scan's pushed filter, into one): each conjunct is evaluated on
        the rows the ones before it let through (the estimator's selectivities, in this order:
        :meth:`~cost.cardinality.CardinalityEstimator.filter_steps`), at its :func:`conjunct_weight`.
        So the order is priced: a cheap, selective conjunct first costs less (:mod:`rules.order_conjuncts`)."""
        parts, sels, types = estimator.filter_steps(node)
        if not parts or rows <= 0:
            return 0.0
        reaching, total = 1.0, 0.0
        for part, sel in zip(parts, sels, strict=True):
            total += reaching * conjunct_weight(part, types, estimator.functions)
            reaching *= sel
        return self.k.cpu_expr * rows * total

    def _cost_project(self, g, node, body, out, ins, estimator) -> Cost:
        n = ins[0].rows if ins else out.rows
        computed = sum(1 for e in body.expressions if field_index(e) is None)
        cost = self._cost(cpu=n * (self.k.cpu_row + computed * self.k.cpu_expr))
        groups = window_groups(body.expressions)
        if groups and ins:
            cost = cost + self._project_windows(g, node, groups, ins[0], estimator)
        return cost

    def _project_windows(self, g, node, groups: list[WindowGroup], src: RelEstimate, estimator) -> Cost:
        """Window functions in a projection, as Spark runs them: one ``Window`` operator per distinct
        (partitioning, order), each over its input sorted by partition and order keys (the order in
        which Spark stacks the groups is not specified, so no sort is assumed shared) and partitioned
        by the partition keys (one shuffle per distinct partitioning; everything to one partition when
        a group has none), unless the input is already so partitioned."""
        k = self.k
        d = self._distribution(g, inputs(g, node)[0], estimator)
        cpu = memory = network = 0.0
        for group in groups:
            cpu += src.rows * (k.cpu_row + group.functions * k.cpu_expr) + self.sort_cpu(src.rows, src.width)
            memory += self._memory(src.bytes)
        partitionings = {group.key: group.partitions for group in groups}
        for partitions in partitionings.values():
            parts = [field_index(e) for e in partitions]
            if d.kind == "single":
                continue
            if parts and None not in parts and properties.hash_partitioned_on(d, parts):
                continue
            network += self.shuffle(src)
        return Cost(cpu, 0.0, network, memory, k)

    def _cost_fetch(self, g, node, body, out, ins, estimator) -> Cost:
        # Reads offset + count rows, then stops; a global limit gathers them on one executor.
        read = out.rows
        if ins:
            from optimizer.cost.estimates import literal_of

            offset = literal_of(body.offset_expr) if body.HasField("offset_expr") else 0.0
            read = min(ins[0].rows, out.rows + (offset if isinstance(offset, float) else 0.0))
        return self._cost(cpu=read * self.k.cpu_row, network=out.bytes * self.k.network_byte)

    def _cost_sort(self, g, node, body, out, ins, estimator) -> Cost:
        src = ins[0] if ins else out
        return self._cost(cpu=self.sort_cpu(src.rows, src.width), network=self.shuffle(src),
                          memory_bytes=src.bytes)

    def _cost_top_n(self, g, node, body, out, ins, estimator) -> Cost:
        src = ins[0] if ins else out
        from optimizer.cost.cardinality import top_n_bounds

        offset, count = top_n_bounds(body)
        keep = max(count + offset, 1.0) if count is not None else src.rows
        per_exec = out.bytes * max(self.k.executors, 1)
        return self._cost(cpu=self.sort_cpu(src.rows, src.width, limit=keep),
                          network=per_exec * self.k.network_byte,
                          memory_bytes=min(keep, src.rows) * src.width * max(self.k.executors, 1))

    def _cost_aggregate(self, g, node, body, out, ins, estimator) -> Cost:
        k = self.k
        src = ins[0] if ins else out
        sets = max(len(body.groupings), 1)
        measures = len(body.measures)
        cpu = src.rows * sets * (k.cpu_hash_build + measures * k.cpu_expr) + out.rows * k.cpu_row
        grouped = any(len(gr.expression_references) for gr in body.groupings)
        network = 0.0
        d = self._distribution(g, inputs(g, node)[0], estimator) if ins else properties.ANY
        if grouped:
            keys = [field_index(e) for e in body.grouping_expressions]
            if not (properties.hash_partitioned_on(d, [c for c in keys if c is not None]) or d.kind == "single"):
                partial_rows = min(src.rows, out.rows * max(k.executors, 1))
                network = partial_rows * out.width * k.network_byte + k.shuffle_stage
        elif d.kind != "single":  # the partial results gathered into one partition: a stage too
            network = k.shuffle_stage
        return self._cost(cpu=cpu, network=network, memory_bytes=out.bytes)

    def _post_join_filter(self, g, node, body, out: RelEstimate, estimator) -> tuple[RelEstimate, Cost]:
        """A join's ``post_join_filter``: ``(the join's rows before it, the cost of evaluating it on
        each of them)``, as a ``FilterRel`` above the join would cost; ``(out, nothing)`` without one."""
        if "post_join_filter" not in body.DESCRIPTOR.fields_by_name or not body.HasField("post_join_filter"):
            return out, Cost(constants=self.k)
        pre = estimator.before_post_join_filter(node)
        n_conj = len(conjuncts(body.post_join_filter, estimator.functions))
        return pre, self._cost(cpu=pre.rows * (self.k.cpu_row + n_conj * self.k.cpu_expr))

    def _join_network(self, g, node, left: RelEstimate, right: RelEstimate, estimator) -> float:
        """Shuffles an equi-join needs: a side not hash-partitioned on its keys moves, unless the other
        side is broadcast."""
        children = inputs(g, node)
        if len(children) < 2:
            return 0.0
        dl = self._distribution(g, children[0], estimator)
        dr = self._distribution(g, children[1], estimator)
        if dl.kind == "broadcast" or dr.kind == "broadcast":
            return 0.0
        keys = properties.join_keys(g, node, estimator.functions)
        network = 0.0
        if not (dl.kind == "single" and dr.kind == "single"):
            if not properties.hash_partitioned_on(dl, [lk for lk, _ in keys]):
                network += self.shuffle(left)
            if not properties.hash_partitioned_on(dr, [r for _, r in keys]):
                network += self.shuffle(right)
        return network

    def _cost_hash_join(self, g, node, body, out, ins, estimator) -> Cost:
        left, right = ins[0], ins[1]
        build_name = type(body).BuildInput.Name(body.build_input).removeprefix("BUILD_INPUT_")
        build, probe = (right, left) if build_name in _BUILD_RIGHT else (left, right)
        out, post = self._post_join_filter(g, node, body, out, estimator)
        children = inputs(g, node)
        build_node = children[1] if build is right else children[0]
        broadcast = self._distribution(g, build_node, estimator).kind == "broadcast"
        residual = 1 if body.HasField("residual_expression") else 0
        preserved = builds_preserved(join_type_name(body), RIGHT if build_name in _BUILD_RIGHT else LEFT)
        cpu = self.hash_cpu(build, probe, out, preserved) + residual * out.rows * self.k.cpu_expr
        network = self._join_network(g, node, left, right, estimator)
        memory = self._memory(build.bytes, per_executor=broadcast) * (max(self.k.executors, 1) if broadcast else 1)
        return Cost(cpu, 0.0, network, memory, self.k) + post

    def _cost_merge_join(self, g, node, body, out, ins, estimator) -> Cost:
        k = self.k
        left, right = ins[0], ins[1]
        children = inputs(g, node)
        keys = properties.join_keys(g, node, estimator.functions)
        out, post = self._post_join_filter(g, node, body, out, estimator)
        cpu = (left.rows + right.rows) * k.cpu_row + out.rows * k.cpu_row
        memory = 0.0
        for child, est, cols in ((children[0], left, [lk for lk, _ in keys]), (children[1], right, [r for _, r in keys])):
            have = properties.ordering(g, child, memo=estimator.metadata.entries(ORDERING))
            if not _ordered_on(have, cols):
                cpu += self.sort_cpu(est.rows, est.width)
                memory += self._memory(est.bytes)
        return Cost(cpu, 0.0, self._join_network(g, node, left, right, estimator), memory, k) + post

    def _cost_join(self, g, node, body, out, ins, estimator, bindable: bool = False) -> Cost:
        """A logical join priced as what Spark will run, by the same choice as the physical rule
        (:func:`cost.spark_joins.choose_build`): a broadcast hash join (a broadcast exchange of the
        build side under a hash join) when a side Spark may broadcast is under the threshold, else a
        shuffled hash join building the side it would; nested loops without an equi-key."""
        left, right = ins[0], ins[1]
        keys = properties.join_keys(g, node, estimator.functions)
        out, post = self._post_join_filter(g, node, body, out, estimator)
        # Conjuncts beyond the equi-keys are the residual a hash join evaluates on each match.
        residual = body.HasField("expression") and len(conjuncts(body.expression, estimator.functions)) > len(keys)
        hinted = self._broadcast_input(g, node, estimator)
        type_name = join_type_name(body)
        if (hinted is not None and hinted in BROADCAST_BUILD.get(type_name or "", ())
                and _spark_equi_keys(body, properties.output_width(g, inputs(g, node)[0]), estimator.functions)):
            # Spark honours a broadcast hint on a side it can build: a broadcast hash join, whatever
            # its own sizes say (the exchange below is priced by itself)
            build, probe = (left, right) if hinted == LEFT else (right, left)
            cpu = (self.hash_cpu(build, probe, out, builds_preserved(type_name, hinted))
                   + (out.rows * self.k.cpu_expr if residual else 0.0))
            held = self._memory(build.bytes, per_executor=True) * max(self.k.executors, 1)
            return Cost(cpu, 0.0, 0.0, held, self.k) + post
        planned = None
        if left.spark_bytes is not None and right.spark_bytes is not None:
            planned = (left.spark_bytes, right.spark_bytes)

        def price(sizes: tuple[float, float] | None) -> Cost:
            return self.logical_join(join_type_name(body), left, right, out, has_keys=bool(keys),
                                     residual=residual, has_condition=body.HasField("expression"),
                                     network=lambda: self._join_network(g, node, left, right, estimator), planned=sizes)

        spark_choice = price(planned)
        if bindable and planned is not None:
            bound = price(None)
            if bound.total < spark_choice.total:
                spark_choice = bound
        return spark_choice + post

    def logical_join(self, type_name: str | None, left: RelEstimate, right: RelEstimate, out: RelEstimate, *,
                     has_keys: bool, residual: bool, has_condition: bool, network=None,
                     planned: tuple[float, float] | None = None) -> Cost:
        """A logical join of ``left`` and ``right`` giving ``out``, as Spark runs it (see
        :meth:`_cost_join`). ``network``: a callable giving the shuffles of a shuffled join (default:
        both sides shuffled). ``planned``: the sizes Spark decides a broadcast by
        (:mod:`cost.spark_size`); without them, the estimated sizes (the join
        :mod:`rules.implement_joins` can bind: :mod:`rules.join_order` prices its candidate trees so)."""
        k = self.k
        if type_name is None:
            choice = None
        elif planned is None:
            choice = choose_build(type_name, left.bytes, right.bytes, self.broadcast_threshold)
        else:
            choice = choose_build(type_name, planned[0], planned[1], self.broadcast_threshold)
            if choice is not None and not choice[1]:  # shuffled: Spark builds by its own sizes too
                choice = choose_build(type_name, left.bytes, right.bytes, 0.0)
        if not has_keys:
            side = choice[0] if choice is not None and choice[1] else None
            nested = self._nested_loop(type_name, left, right, out, has_condition=has_condition, broadcast=side)
            if side is None:
                return nested
            return self._broadcast_exchange(left if side == LEFT else right) + nested
        if choice is None:
            return self._nested_loop(type_name, left, right, out, has_condition=has_condition, broadcast=None)
        side, broadcast = choice
        build, probe = (left, right) if side == LEFT else (right, left)
        cpu = (self.hash_cpu(build, probe, out, builds_preserved(type_name, side))
               + (out.rows * k.cpu_expr if residual else 0.0))
        if broadcast:
            exchange = self._broadcast_exchange(build)
            held = self._memory(build.bytes, per_executor=True) * max(k.executors, 1)
            return exchange + Cost(cpu, 0.0, 0.0, held, k)
        shuffles = network() if network is not None else self.shuffle(left) + self.shuffle(right)
        return Cost(cpu, 0.0, shuffles, self._memory(build.bytes), k)

    _cost_lateral_join = _cost_join

    def _nested_loop(self, type_name: str | None, left: RelEstimate, right: RelEstimate, out: RelEstimate,
                     has_condition: bool, broadcast: str | None) -> Cost:
        """A join comparing every pair of rows, as the backend runs it: with a broadcast input (its
        exchange priced apart) a broadcast nested-loop join; else an inner join is Spark's
        ``CartesianProduct``, which reads the right input once for each partition of the left one
        (priced as a broadcast of it, plus moving the left input), and any other type broadcasts the
        right input."""
        k = self.k
        pairs = left.rows * right.rows
        cpu = pairs * (k.cpu_expr if has_condition else 0.0) + pairs * k.cpu_byte + out.rows * k.cpu_row
        if broadcast is not None:
            built = left if broadcast == LEFT else right
            return Cost(cpu, 0.0, 0.0, self._memory(built.bytes, per_executor=True) * max(k.executors, 1), k)
        if type_name == "INNER":
            return Cost(cpu, 0.0, self.broadcast(right) + self.shuffle(left), self._memory(right.bytes), k)
        network = self.broadcast(right)
        memory = self._memory(right.bytes, per_executor=True) * max(k.executors, 1)
        return Cost(cpu, 0.0, network, memory, k)

    def _broadcast_input(self, g, node, estimator) -> str | None:
        """The side of a join whose input is broadcast (an ``ExchangeRel(broadcast)``), if any."""
        for side, child in zip((LEFT, RIGHT), inputs(g, node), strict=False):
            if self._distribution(g, child, estimator).kind == "broadcast":
                return side
        return None

    def _cost_nested_loop_join(self, g, node, body, out, ins, estimator) -> Cost:
        return self._nested_loop(join_type_name(body), ins[0], ins[1], out, has_condition=body.HasField("expression"),
                                 broadcast=self._broadcast_input(g, node, estimator))

    def _cost_cross(self, g, node, body, out, ins, estimator) -> Cost:
        left, right = ins[0], ins[1]
        broadcast = self._broadcast_input(g, node, estimator)
        if broadcast is not None:
            return self._nested_loop("INNER", left, right, out, has_condition=False, broadcast=broadcast)
        planned = None  # left to Spark: it broadcasts a side under the threshold by its own sizes
        if left.spark_bytes is not None and right.spark_bytes is not None:
            planned = (left.spark_bytes, right.spark_bytes)
        return self.logical_join("INNER", left, right, out, has_keys=False, residual=False, has_condition=False,
                                 planned=planned)

    def _cost_window(self, g, node, body, out, ins, estimator) -> Cost:
        k = self.k
        src = ins[0] if ins else out
        child = inputs(g, node)[0]
        cpu = src.rows * (k.cpu_row + len(body.window_functions) * k.cpu_expr)
        network = 0.0
        memory = 0.0
        need = properties.window_requirement(g, node)
        have = properties.ordering(g, child, memo=estimator.metadata.entries(ORDERING))
        if need is None or not properties.satisfies(have, need):
            cpu += self.sort_cpu(src.rows, src.width)
            memory += self._memory(src.bytes)
        parts = [field_index(e) for e in body.partition_expressions]
        d = self._distribution(g, child, estimator)
        if parts and not (None not in parts and properties.hash_partitioned_on(d, parts)) and d.kind != "single":
            if need is None or not properties.satisfies(have, need):
                network = self.shuffle(src)
        elif not parts and d.kind != "single":
            network = self.shuffle(src)  # everything gathered into one partition
        return Cost(cpu, 0.0, network, memory, k)

    def _cost_exchange(self, g, node, body, out, ins, estimator) -> Cost:
        src = ins[0] if ins else out
        which = body.WhichOneof("exchange_kind")
        if which == "broadcast":
            return self._broadcast_exchange(src)
        return Cost(src.rows * (self.k.cpu_row + self.k.cpu_expr), 0.0, self.shuffle(src), 0.0, self.k)

    def _broadcast_exchange(self, src: RelEstimate) -> Cost:
        """Collecting ``src`` on the driver and sending a copy to every executor, which holds it."""
        return Cost(src.rows * self.k.cpu_row, 0.0, self.broadcast(src),
                    self._memory(src.bytes, per_executor=True) * max(self.k.executors, 1), self.k)

    def _cost_set(self, g, node, body, out, ins, estimator) -> Cost:
        from substrait.proto import SetRel

        k = self.k
        n = sum(i.rows for i in ins)
        if body.op == SetRel.SET_OP_UNION_ALL:
            return self._cost(cpu=n * k.cpu_row)
        nbytes = sum(i.bytes for i in ins)
        return self._cost(cpu=n * k.cpu_hash_build + out.rows * k.cpu_row, network=nbytes * k.network_byte,
                          memory_bytes=out.bytes)

    def _cost_expand(self, g, node, body, out, ins, estimator) -> Cost:
        return self._cost(cpu=out.rows * (self.k.cpu_row + len(body.fields) * self.k.cpu_expr))

    def _cost_extension_single(self, g, node, body, out, ins, estimator) -> Cost:
        return self._cpu((ins[0].rows if ins else 0.0) + out.rows)

    def _cost_rows(self, g, node, body, out, ins, estimator) -> Cost:
        """A relation whose work is unknown to the model: a row of CPU per row in and out."""
        return self._cpu(sum(i.rows for i in ins) + out.rows)

    _cost_extension_multi = _cost_rows
    _cost_extension_leaf = _cost_rows
    _cost_write = _cost_rows
    _cost_update = _cost_rows
    _cost_ddl = _cost_rows


#: Evaluation cost of a conjunct per column value it compares, relative to an integer's, by type kind:
#: Spark reads a decimal column value as a ``Decimal`` object and compares strings byte by byte
#: (TPC-H Q6 at SF 1: the same filter with its date range first, not its two decimal conjuncts, runs
#: 0.47 s instead of 0.57 s).
VALUE_WEIGHT: dict[str, float] = {"decimal": 3.0, "string": 4.0, "varchar": 4.0, "fixed_char": 4.0,
                                  "binary": 4.0, "fixed_binary": 4.0}
_NULL_TESTS = frozenset({"is_null", "is_not_null"})


def conjunct_weight(e: Any, types: list[Any] | None, functions: Any) -> float:
    """The relative cost of evaluating conjunct ``e`` on one row over columns of ``types``: that of the
    costliest type it reads (``VALUE_WEIGHT``; 1 for the others and for a null test, which reads only the
    null bit), so a conjunct on integers and dates costs what the model charged every conjunct before.

    >>> from substrait.proto import Expression, Type
    >>> ref = Expression(selection=Expression.FieldReference(direct_reference=Expression.ReferenceSegment(
    ...     struct_field=Expression.ReferenceSegment.StructField(field=1))))
    >>> conjunct_weight(ref, [Type(i64=Type.I64()), Type(decimal=Type.Decimal(precision=15, scale=2))], {})
    3.0
    """
    from optimizer.expr_utils import referenced_fields
    from optimizer.schema.types import type_kind

    test = e
    while test.WhichOneof("rex_type") == "scalar_function" and test.scalar_function.function_reference in functions:
        name = functions.get(test.scalar_function.function_reference).name
        if name in _NULL_TESTS:
            return 1.0
        if name != "not" or len(test.scalar_function.arguments) != 1:
            break
        test = test.scalar_function.arguments[0].value
    weight = 1.0
    for i in referenced_fields(e):
        kind = type_kind(types[i]) if types is not None and 0 <= i < len(types) else None
        weight = max(weight, VALUE_WEIGHT.get(kind or "", 1.0))
    return weight


_WINDOW = "substrait.Expression"


def window_groups(expressions) -> list[WindowGroup]:
    """The window functions in ``expressions`` (outside subqueries; identical ones once), grouped by
    (partition expressions as a set, sorts), as Spark groups them into ``Window`` operators."""
    found: dict[bytes, Any] = {}
    stack = list(expressions)
    while stack:
        msg = stack.pop()
        if msg.DESCRIPTOR.full_name == _WINDOW and msg.WhichOneof("rex_type") == "window_function":
            found.setdefault(msg.window_function.SerializeToString(deterministic=True), msg.window_function)
            continue
        stack.extend(sub_messages(msg, enter_subqueries=False))
    groups: dict[tuple, WindowGroup] = {}
    for wf in found.values():
        pkey = tuple(sorted(p.SerializeToString(deterministic=True) for p in wf.partitions))
        skey = tuple(s.SerializeToString(deterministic=True) for s in wf.sorts)
        group = groups.setdefault((pkey, skey), WindowGroup(pkey, list(wf.partitions)))
        group.functions += 1
    return list(groups.values())


@dataclass
class WindowGroup:
    """Window functions sharing a partitioning (``key``: the partition expressions as a set) and an order."""

    key: tuple
    partitions: list
    functions: int = 0


def _ordered_on(have: properties.Ordering, columns: list[int]) -> bool:
    """Is the ordering's leading block exactly ``columns`` (any order of them, one direction each)?"""
    if not columns or len(have) < len(columns):
        return False
    return {c for c, _ in have[: len(columns)]} == set(columns)


__all__ = ["DEFAULT_CONSTANTS", "Cost", "CostConstants", "CostModel"]
