"""Learned cardinalities: the rows each subtree of a plan produced when it ran, kept to correct the
estimate of the same subtree in a later plan (DB2's LEO learns the same way across queries; Spark's
adaptive execution re-plans on actual sizes within one).

A subtree is named by its **key** (:meth:`LearnedRows.relation_key`), a SHA-256 over what decides its
rows, relation by relation from its leaves up: each relation's message with its inputs cleared, its
``RelCommon`` reduced to the output mapping (hints and statistics say nothing of the rows it gives),
its functions named by name and extension instead of by the plan's anchors, and each table it reads
by its resolved location (a named table by the path ``--tables`` gives it, a local file by its
absolute path); then the keys of its inputs in order. A join is keyed by what it matches
(:func:`_join_form`), whether a ``JoinRel`` or the physical join bound for it, an exchange by its
input's key, a read's filter as a set of conjuncts, and a filter over a read as the read with the
filter in it (:func:`_into_read`). Two plans that share a subtree share its key, whoever wrote them. A subtree with a read the store cannot locate (a catalog table, a file under no
given table, a remote URI) or a subquery in an expression has no key: it is neither recorded nor
looked up.

Each entry holds the rows and the tables its subtree reads; the store holds, per table, the size and
modification time of each of its files when its entries were learned
(:func:`~cost.statistics_io.fingerprint`). A table whose files changed forgets its entries: a lookup
ignores them, and the next save drops them. Only the tables given to the store are listed and
stat'ed, never a path the file names.

The store is a JSON file in the statistics cache (``learned-rows.json`` beside Spark's statistics,
:func:`learned_path`), written atomically and merged with what another process wrote meanwhile::

    {"version": 1, "kind": "learned-rows",
     "tables": {"/data/tpch/lineitem.parquet": [["lineitem.parquet", 2033422, 1764370000000000000]]},
     "entries": {"<key>": {"rows": 59986, "tables": ["/data/tpch/lineitem.parquet"]}}}

A file that cannot be read or is malformed, as a whole or in an entry, is ignored (logged, no error):
it is advice, and the next ``--learn`` run that records writes a good one in its place.

:class:`LearnedStatistics` carries a store with the statistics: the estimator
(:class:`~cost.cardinality.CardinalityEstimator`, through :class:`~cost.metadata.MetadataQuery`) takes
a subtree's learned rows in place of its estimate, so the relations above build on them.

>>> store = LearnedRows(None, {})
>>> from optimizer.plan_io import load_plan
>>> from optimizer.dag import to_dag
>>> g = to_dag(load_plan('''{"relations": [{"root": {"input": {"read": {"virtualTable": {"values": [
...   {"fields": [{"i64": "1"}]}]}, "baseSchema": {"names": ["x"], "struct": {"types": [{"i64": {}}]}}}},
...   "names": ["x"]}}]}'''))
>>> root = g.graph["roots"][0]["node"]
>>> store.record(g, {root: 1})
1
>>> store.rows(store.subtree_keys(g)[root])
1.0
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import networkx as nx
from optimizer.cost.providers import StatisticsProvider
from optimizer.cost.statistics import TableName, TableStatistics, table_key
from optimizer.cost.statistics_io import fingerprint, is_uri, resolve_tables, write_json_atomic
from substrait.proto import Expression, Rel

from optimizer.dag import inputs
from optimizer.expr_utils import (
    call_args,
    conjuncts,
    field_index,
    join_type_name,
    reference_field,
    referenced_fields,
    remap_fields,
)
from optimizer.load.functions import FunctionTable
from optimizer.paths import local_path

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
KIND = "learned-rows"
FILE_NAME = "learned-rows.json"
#: A store file larger than this is not read (ignored, as a malformed one is).
MAX_FILE_BYTES = 64 << 20
#: Entries kept at most; the oldest go first.
MAX_ENTRIES = 200_000


def learned_path(statistics_cache: str | os.PathLike[str]) -> Path:
    """The store's file beside the statistics cache file ``statistics_cache`` (Spark's,
    :func:`optimizer.spark.statistics.default_cache_path`)."""
    return Path(statistics_cache).expanduser().parent / FILE_NAME


def _empty() -> dict[str, Any]:
    return {"version": FORMAT_VERSION, "kind": KIND, "tables": {}, "entries": {}}


def _valid_files(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(f, list) and len(f) == 3 and isinstance(f[0], str)
        and all(isinstance(x, int) and not isinstance(x, bool) for x in f[1:]) for f in value)


def _valid_entry(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    rows, tables = value.get("rows"), value.get("tables")
    return (isinstance(rows, int | float) and not isinstance(rows, bool) and math.isfinite(rows) and rows >= 0
            and isinstance(tables, list) and all(isinstance(t, str) for t in tables))


def read_document(path: Path) -> dict[str, Any]:
    """The store document at ``path``, its malformed parts left out: empty when the file is missing,
    unreadable, too large or not a store (logged, never raised)."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            log.warning("learned rows: ignoring %s: larger than %d bytes", path, MAX_FILE_BYTES)
            return _empty()
        document = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        return _empty()
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError
        log.warning("learned rows: ignoring unreadable %s: %s", path, " ".join(str(e).split())[:120])
        return _empty()
    if (not isinstance(document, dict) or document.get("version") != FORMAT_VERSION
            or document.get("kind") != KIND or not isinstance(document.get("tables"), dict)
            or not isinstance(document.get("entries"), dict)):
        log.warning("learned rows: ignoring %s: not a learned-rows file of version %d", path, FORMAT_VERSION)
        return _empty()
    tables = {p: f for p, f in document["tables"].items() if _valid_files(f)}
    entries = {k: {"rows": float(e["rows"]), "tables": list(e["tables"])}
               for k, e in document["entries"].items() if _valid_entry(e) and all(t in tables for t in e["tables"])}
    return {"version": FORMAT_VERSION, "kind": KIND, "tables": tables, "entries": entries}


class LearnedRows:
    """The learned rows of subtrees (see the module docstring), for the tables ``tables`` (a mapping
    name -> location, or a directory, as :func:`~cost.statistics_io.resolve_tables` reads them),
    kept in the file ``path`` (None: in memory only). The file is read once, here; :meth:`record`
    adds entries in memory and :meth:`save` writes them."""

    def __init__(self, path: str | os.PathLike[str] | None,
                 tables: Mapping[str, str | os.PathLike[str]] | str | os.PathLike[str] | None) -> None:
        self.path = Path(path).expanduser() if path is not None else None
        resolved = resolve_tables(tables) if tables is not None else {}
        #: table key -> absolute local path (remote tables cannot be fingerprinted: not learned)
        self._tables = {table_key(name): p for name, p in resolved.items() if not is_uri(p)}
        self._roots = sorted(set(self._tables.values()))
        self.document = read_document(self.path) if self.path is not None else _empty()
        #: the entries and tables recorded since the file was read (what :meth:`save` merges in)
        self._recorded: dict[str, dict[str, Any]] = {}
        self._files: dict[str, list[list[Any]] | None] = {}
        #: lookups answered from the store
        self.hits = 0

    # -- keys -------------------------------------------------------------------------------------

    def _files_of(self, table: str) -> list[list[Any]] | None:
        """The current fingerprint of ``table`` (one of the given tables), listed once per store."""
        if table not in self._files:
            try:
                self._files[table] = fingerprint(table)
            except OSError as e:  # a file gone while listed: the table is not known now
                log.warning("learned rows: cannot list %s: %s", table, e)
                self._files[table] = None
        return self._files[table]

    def _table_of_file(self, location: str) -> tuple[str, str] | None:
        """``(absolute path, table root)`` of a local file location under one of the given tables."""
        local = local_path(location)
        if local is None:
            return None
        path = os.path.abspath(os.path.expanduser(local))
        for root in self._roots:
            if path == root or path.startswith(root.rstrip(os.sep) + os.sep):
                return path, root
        return None

    def relation_key(self, rel: Rel, child_keys: Iterable[tuple[str, frozenset[str]]],
                     functions: FunctionTable, left_width: int | None = None,
                     child_rels: list[Rel] | None = None) -> tuple[str, frozenset[str]] | None:
        """``(key, tables read)`` of the subtree whose top relation is ``rel`` (inputs cleared, as a
        DAG node holds it) over inputs whose subtrees have ``child_keys``; None when it has no key.
        ``left_width``: the columns of a join's left input, when known: a join is then keyed by what it
        matches (:func:`_join_form`), so a logical join and the physical join bound for it share a key;
        an exchange has its input's key (it moves rows, it neither adds nor drops one). ``child_rels``:
        the inputs' relations, when known: a filter over a read is then keyed as the read with the
        filter's conjuncts among its own (what ``filter_into_read`` writes)."""
        kind = rel.WhichOneof("rel_type")
        if kind is None:
            return None
        child_keys = list(child_keys)
        if kind == "exchange" and len(child_keys) == 1:
            return child_keys[0]
        if kind in _JOINS and left_width is not None and len(child_keys) == 2:
            form = _join_form(getattr(rel, kind), left_width, functions)
            if form is not None:
                digest = hashlib.sha256(b"join")
                digest.update(json.dumps(form).encode())
                for key, _ in child_keys:
                    digest.update(key.encode())
                return digest.hexdigest(), child_keys[0][1] | child_keys[1][1]
        if kind == "read":
            return self._read_key(rel, functions, [])
        if kind == "filter" and child_rels is not None and len(child_rels) == 1:
            merged = _into_read(rel.filter, child_rels[0], functions)
            if merged is not None:
                return self._read_key(child_rels[0], functions, merged)
        out = Rel()
        out.CopyFrom(rel)
        body = getattr(out, kind)
        tables: set[str] = set()
        for _, read in child_keys:
            tables |= read
        _strip(body)
        names = _canonical_functions(body, functions)
        if names is None:
            return None
        digest = hashlib.sha256(kind.encode())
        digest.update(out.SerializeToString(deterministic=True))
        digest.update(json.dumps(names).encode())
        for key, _ in child_keys:
            digest.update(key.encode())
        return digest.hexdigest(), frozenset(tables)

    def _read_key(self, rel: Rel, functions: FunctionTable,
                  more: list[Expression]) -> tuple[str, frozenset[str]] | None:
        """The key of the read ``rel`` with the conjuncts ``more`` (over its base schema) added to its
        ``filter``: its table by location, and its filter as a set of conjuncts (the order they are
        written in, or a conjunct written twice, does not change the rows; a read with a
        ``best_effort_filter``, which a reader may skip, keeps its filters as written)."""
        out = Rel()
        out.CopyFrom(rel)
        body = out.read
        _strip(body)
        tables: set[str] = set()
        which = body.WhichOneof("read_type")
        if which == "named_table":
            table = self._tables.get(table_key(list(body.named_table.names)))
            if table is None:
                return None
            body.ClearField("named_table")
            body.local_files.items.add().uri_path = table  # the table by its location
            tables.add(table)
        elif which == "local_files":
            body.local_files.ClearField("advanced_extension")
            for item in body.local_files.items:
                path_type = item.WhichOneof("path_type")
                found = self._table_of_file(getattr(item, path_type)) if path_type is not None else None
                if found is None:
                    return None
                setattr(item, path_type, found[0])
                tables.add(found[1])
        elif which != "virtual_table":
            return None
        atoms: list[str] | None = None
        if not body.HasField("best_effort_filter"):
            parts = [*(conjuncts(body.filter, functions) if body.HasField("filter") else []), *more]
            found_atoms = [_expression_atom(part, functions) for part in parts]
            if any(a is None for a in found_atoms):
                return None
            atoms = sorted({json.dumps(a) for a in found_atoms})
            body.ClearField("filter")
        elif more:
            return None
        names = _canonical_functions(body, functions)
        if names is None:
            return None
        digest = hashlib.sha256(b"read")
        digest.update(out.SerializeToString(deterministic=True))
        digest.update(json.dumps([names, atoms]).encode())
        return digest.hexdigest(), frozenset(tables)

    def subtree_keys(self, g: nx.DiGraph) -> dict[int, tuple[str, frozenset[str]] | None]:
        """The key of every relation of the DAG ``g`` (children first; None: no key). A join's left
        input's width is read from its schema (``schema`` of the DAG's nodes, where annotated)."""
        functions = g.graph["functions"]
        keys: dict[int, tuple[str, frozenset[str]] | None] = {}
        for root in g.graph["roots"]:
            for node in nx.dfs_postorder_nodes(g, root["node"]):
                if node in keys:
                    continue
                children = inputs(g, node)
                below = [keys[c] for c in children]
                schema = g.nodes[children[0]].get("schema") if children else None
                keys[node] = (None if any(k is None for k in below)
                              else self.relation_key(g.nodes[node]["rel"], below, functions,
                                                     len(schema.types) if schema is not None else None,
                                                     [g.nodes[c]["rel"] for c in children]))
        return keys

    # -- lookups and records ----------------------------------------------------------------------

    def rows(self, key: tuple[str, frozenset[str]] | None) -> float | None:
        """The learned rows of the subtree of ``key``, if learned while its tables were as they are."""
        if key is None:
            return None
        entry = self._recorded.get(key[0])
        if entry is None:  # learned before: only while each table it reads is as it was then
            entry = self.document["entries"].get(key[0])
            learned_on = self.document["tables"]
            if entry is None or any(t not in self._roots or learned_on.get(t) != self._files_of(t)
                                    for t in entry["tables"]):
                return None
        self.hits += 1
        return float(entry["rows"])

    def record(self, g: nx.DiGraph, actual: Mapping[int, int | float | None]) -> int:
        """Learn the ``actual`` rows of relations of ``g`` (node -> rows; None: not known); returns how
        many had a key (those are recorded)."""
        keys = self.subtree_keys(g)
        count = 0
        for node, rows in actual.items():
            key = keys.get(node)
            if key is None or rows is None or any(self._files_of(t) is None for t in key[1]):
                continue
            self._recorded.pop(key[0], None)
            self._recorded[key[0]] = {"rows": float(rows), "tables": sorted(key[1])}
            count += 1
        return count

    def save(self) -> None:
        """Write what :meth:`record` learned into the file, merged with what it holds now (read again:
        another process may have written meanwhile). A table whose files changed since the file's
        entries for it were learned loses those entries."""
        if self.path is None or not self._recorded:
            return
        document = read_document(self.path)
        tables, entries = document["tables"], document["entries"]
        # Every given table whose files changed since its entries were learned forgets them.
        changed = {t for t in tables if t in self._roots and tables[t] != self._files_of(t)}
        for table in {t for e in self._recorded.values() for t in e["tables"]}:
            if tables.get(table) != self._files_of(table):
                changed.add(table)
        for key in [k for k, e in entries.items() if changed.intersection(e["tables"])]:
            del entries[key]
        for table in changed:
            tables[table] = self._files_of(table)
        for key, entry in self._recorded.items():
            entries.pop(key, None)
            entries[key] = entry
        for key in list(entries)[: max(len(entries) - MAX_ENTRIES, 0)]:
            del entries[key]
        live = {t for e in entries.values() for t in e["tables"]}
        document["tables"] = {t: f for t, f in tables.items() if t in live}
        write_json_atomic(self.path, document)
        self.document = document
        self._recorded = {}


_JOINS = ("join", "hash_join", "merge_join", "nested_loop_join")
#: The comparisons a join key makes, by ``ComparisonJoinKey.SimpleComparisonType`` and by function name.
_KEY_COMPARISONS = {1: "equal", 2: "is_not_distinct_from"}


def _join_form(body: Any, left_width: int, functions: FunctionTable) -> dict[str, Any] | None:
    """What a join matches, whichever relation writes it: its type, the set of its match conditions (a
    key or an ``equal``/``is_not_distinct_from`` conjunct of one column of each input as ``[name, left
    column, right column]`` over the concatenated columns; any other conjunct by its canonical bytes),
    its post-join filter's likewise, and its output mapping. A ``JoinRel``'s ``expression``, a hash or
    merge join's ``keys`` (columns relative to each input) and ``residual_expression``, a nested-loop
    join's ``expression``: the same join, one form. None when a part has no such form (a key by a
    custom function, a subquery)."""
    kind = body.DESCRIPTOR.name
    type_name = join_type_name(body)
    if type_name is None:
        return None
    on: list[Any] = []
    if kind in ("HashJoinRel", "MergeJoinRel"):
        for key in body.keys:
            name = _KEY_COMPARISONS.get(key.comparison.simple) if key.comparison.HasField("simple") else None
            left, right = reference_field(key.left), reference_field(key.right)
            if name is None or left is None or right is None:
                return None
            on.append([name, left, left_width + right])
        condition = body.residual_expression if body.HasField("residual_expression") else None
    else:
        condition = body.expression if body.HasField("expression") else None
    post = body.post_join_filter if "post_join_filter" in body.DESCRIPTOR.fields_by_name \
        and body.HasField("post_join_filter") else None
    on_atoms = _atoms(condition, left_width, functions) if condition is not None else []
    post_atoms = _atoms(post, left_width, functions) if post is not None else []
    if on_atoms is None or post_atoms is None:
        return None
    emit = (list(body.common.emit.output_mapping)
            if body.HasField("common") and body.common.WhichOneof("emit_kind") == "emit" else None)
    return {"type": type_name, "on": sorted(json.dumps(a) for a in [*on, *on_atoms]),
            "post": sorted(json.dumps(a) for a in post_atoms), "emit": emit}


def _atoms(e: Expression, left_width: int, functions: FunctionTable) -> list[Any] | None:
    """The conjuncts of a join condition in :func:`_join_form`'s terms (None: one has none)."""
    out: list[Any] = []
    for part in conjuncts(e, functions):
        args = call_args(part)
        reference = part.scalar_function.function_reference if part.WhichOneof("rex_type") == "scalar_function" \
            else None
        name = functions.get(reference).name if reference is not None and reference in functions else None
        if name in ("equal", "is_not_distinct_from") and args is not None and len(args) == 2:
            columns = sorted(field_index(a) if field_index(a) is not None else -1 for a in args)
            if columns[0] >= 0 and columns[0] < left_width <= columns[1]:
                out.append([name, *columns])
                continue
        atom = _expression_atom(part, functions)
        if atom is None:
            return None
        out.append(atom)
    return out


def _expression_atom(e: Expression, functions: FunctionTable) -> list[Any] | None:
    """``[digest of the expression, its functions]`` with its anchors replaced (:func:`_canonical_functions`);
    None if it holds a subquery."""
    copy = Expression()
    copy.CopyFrom(e)
    names = _canonical_functions(copy, functions)
    if names is None:
        return None
    return [hashlib.sha256(copy.SerializeToString(deterministic=True)).hexdigest(), names]


def _strip(body: Any) -> None:
    """Clear, in place, what in a relation's body says nothing of its rows: ``RelCommon`` but its output
    mapping (hints, statistics), the ``advanced_extension``."""
    fields = body.DESCRIPTOR.fields_by_name
    if "common" in fields and body.HasField("common"):
        if body.common.WhichOneof("emit_kind") == "emit":
            mapping = list(body.common.emit.output_mapping)
            body.ClearField("common")
            body.common.emit.output_mapping.extend(mapping)
        else:
            body.ClearField("common")
    if "advanced_extension" in fields:
        body.ClearField("advanced_extension")


def _into_read(body: Any, read: Rel, functions: FunctionTable) -> list[Expression] | None:
    """The conjuncts of the filter ``body`` over the read ``read``, over the read's base schema (mapped
    back through its projection mask), when the filter is one the read could apply as its own: neither
    has an output mapping, the read has no ``best_effort_filter``, the mask selects whole columns and the
    filter reads only those. Else None."""
    if read.WhichOneof("rel_type") != "read" or not body.HasField("condition"):
        return None
    scan = read.read
    for message in (body, scan):
        if message.HasField("common") and message.common.WhichOneof("emit_kind") == "emit":
            return None
    if scan.HasField("best_effort_filter"):
        return None
    mask: list[int] | None = None
    if scan.HasField("projection"):
        items = scan.projection.select.struct_items
        if any(item.HasField("child") for item in items):
            return None
        mask = [item.field for item in items]
    out = []
    for part in conjuncts(body.condition, functions):
        if mask is not None:
            read_columns = referenced_fields(part)
            if not all(0 <= i < len(mask) for i in read_columns):
                return None
            part = remap_fields(part, mask.__getitem__)
        out.append(part)
    return out


def _canonical_functions(message: Any, functions: FunctionTable) -> list[list[Any]] | None:
    """Replace, in place, every ``function_reference`` in ``message`` by the index of its function in
    the list returned (``[name, extension URN]`` in order of first use): the plan's anchors are its own
    numbering, the functions are what the subtree means. None if ``message`` holds a subquery (its
    relations are not keyed)."""
    names: list[list[Any]] = []
    index: dict[int, int] = {}
    stack = [message]
    while stack:
        m = stack.pop()
        if m.DESCRIPTOR.full_name == "substrait.Expression.Subquery":
            return None
        for fd, value in m.ListFields():
            if fd.name == "function_reference" and fd.type == fd.TYPE_UINT32:
                if value not in index:
                    index[value] = len(names)
                    info = functions.get(value) if value in functions else None
                    names.append([info.declared_name, info.urn] if info is not None else [None, value])
                setattr(m, fd.name, index[value])
            elif fd.type == fd.TYPE_MESSAGE and not fd.message_type.GetOptions().map_entry:
                if fd.label == fd.LABEL_REPEATED:
                    stack.extend(value)
                else:
                    stack.append(value)
    return names


class LearnedStatistics(StatisticsProvider):
    """The statistics ``base`` with the learned rows ``learned`` (a :class:`LearnedRows`): what the
    estimator and the optimizer read when ``--learn`` is given. Every question about tables goes to
    ``base``; ``without_learned`` is ``base``, for the optimizer's run without the learned rows."""

    def __init__(self, base: StatisticsProvider | None, learned: LearnedRows) -> None:
        self.base = base
        self.learned = learned
        self.files = getattr(base, "files", None)

    @property
    def without_learned(self) -> StatisticsProvider | None:
        return self.base

    @property
    def providers(self) -> list[StatisticsProvider]:
        return list(getattr(self.base, "providers", []))

    def table(self, name: TableName) -> TableStatistics | None:
        return self.base.table(name) if self.base is not None else None

    def relation_hint(self, rel: Any) -> tuple[float, float | None] | None:
        return self.base.relation_hint(rel) if self.base is not None else None

    def names(self) -> list[str]:
        return self.base.names() if self.base is not None else []

    def clear(self) -> None:
        clear = getattr(self.base, "clear", None)
        if clear is not None:
            clear()


__all__ = ["FILE_NAME", "LearnedRows", "LearnedStatistics", "learned_path", "read_document"]
