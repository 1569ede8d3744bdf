"""The hostile fuzz profile: plans written to break the tool, not to test the rewrites.

Every input goes through a CLI command (``convert``, ``explain``, ``explain --format json`` or
``optimize``; a sample also through ``run`` on Spark) and must give a right answer or exit 2 with one
line on stderr: no traceback, no "internal error", no crash, no hang past a minute. Inputs, drawn from
a seeded generator so that a failure can be replayed (``--seed``, ``--only N``):

* ``deep``: nested filters (binary and JSON), nested ORs, nested JSON arrays, 50 to 20,000 deep;
* ``literal``: huge strings, integers and decimals at and past their limits, floats at the extremes,
  large virtual tables;
* ``names``: names with ``${env:HOME}``, back-quotes, quotes, NUL, newlines, other scripts, 10,000
  characters; as column, root and table names (``run`` checks the answer comes back as written);
* ``bytes``: random bytes, and valid plans with bytes flipped, cut or inserted;
* ``json``: a valid plan with a random field set to a value of the wrong kind or size;
* ``hints``: TPC-H Q3 with row counts and record sizes from -1 to 1e308, infinities and NaN;
* ``dag``: doubling DAGs of references 5 to 30 levels deep, references out of range and cycles;
* ``files``: local files outside the tables (``/etc/passwd``, ``..``, ``uri_folder: /``).
* ``escapes``: locations inside ``--tables`` by their glob base or their links that Spark resolves
  outside: a wildcard, a link, a brace holding a ``/`` or an escaped ``\\..`` followed by ``..``, in
  each field (``uri_file``, ``uri_path``, ``uri_path_glob``, ``uri_folder``), plain or ``file://``,
  Parquet, ORC or text; ``run --tables`` on Spark (as many as ``--spark``) must refuse them with one
  line, the outside file's rows never in the output;
* ``outputs``: ``optimize -o`` onto a FIFO (written in place), a device node (exit 2, the node kept),
  the null device, a link to the process's stdout (a fresh interpreter, as many as ``--subprocess``);
* ``userfiles``: a valid plan with a malformed ``--capabilities`` or ``--stats`` file (wrong types,
  unknown fields and names, nesting 100,000 deep, bad UTF-8, 5,000-digit numbers): exit 2 with one line
  naming the file.
* ``casts``: a table column declared wider (the values come back) or narrower than the file's type
  (``decimal(15,2)`` as ``decimal(19,0)``, ``i64`` as ``i32``): exit 2 naming it, never a cast that
  changes values (``run --tables`` on Spark, as many as ``--spark``);
* ``quiet``: reads ``run`` refuses before Spark starts (outside ``--tables``, missing files and
  tables): one line on stderr and no JVM (a fresh interpreter, as many as ``--subprocess``).
* ``work``: wide join graphs (15 to 60 tables, random edges or one key), and an ``or`` of up to 20,000
  arguments, virtual tables of up to 150,000 rows, unions of up to 10,000 reads, a union of 400
  references to one read of 100,000 columns (or 2,000 to one of 20,000), 40,002 expression
  nodes, a plan one byte past 16 MiB, JSON or binary: past a limit of ``optimizer.load.limits`` exit 2
  naming it, at or under it an answer.

The CLI runs in-process (fast); ``--subprocess N`` inputs also run in a fresh interpreter, where a
crash (a signal) or a hang would show. ``make fuzz-hostile`` runs 2,000 inputs.

::

    python -m testing.hostile --inputs 2000 --spark 40 --subprocess 60
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from optimizer.errors import OptimizerError, PlanError

_REQ = {"nullability": "NULLABILITY_REQUIRED"}
_NULLABLE = {"nullability": "NULLABILITY_NULLABLE"}
_GT = "extension:io.substrait:functions_comparison"
_BOOL = "extension:io.substrait:functions_boolean"
_TIME_LIMIT = 60  # seconds per input

ODD_NAMES = [
    "${env:HOME}", "${system:java.home}", "${sparkconf:spark.master}", "${hivevar:x}", "$", "${", "}",
    "`", "``", "a`b", "'", "\"", "\\", "a\\'b", "\x00", "a\x00b", "\n", "a\nb", "\t", " ", "", "*", "a.b",
    "_c0", "_b0", "_r0", "select", "FROM", "--", "/*", "*/", "/*+ BROADCAST(x) */", "ünïcödé", "名字",
    "\U0001F600", "\u202e", "\ufeff", "x" * 10_000, "%s", "{a}", "{}", "..", "/etc/passwd", "file:///etc/shadow",
]


def _sel(field: int) -> dict:
    return {"selection": {"directReference": {"structField": {"field": field}}, "rootReference": {}}}


def _filter_plan(names=("a", "b"), table=("t",), root_names=None) -> dict:
    """A filter ``b > 3`` over a named table (the fuzzer's base plan)."""
    return {
        "extensionUrns": [{"extensionUrnAnchor": 1, "urn": _GT}, {"extensionUrnAnchor": 2, "urn": _BOOL}],
        "extensions": [
            {"extensionFunction": {"extensionUrnReference": 1, "functionAnchor": 1, "name": "gt:i64_i64"}},
            {"extensionFunction": {"extensionUrnReference": 2, "functionAnchor": 2, "name": "or:bool"}},
        ],
        "relations": [{"root": {"input": {"filter": {
            "input": {"read": {"namedTable": {"names": list(table)},
                               "baseSchema": {"names": list(names),
                                              "struct": {"types": [{"i64": _NULLABLE}] * len(names)}}}},
            "condition": _gt(1, 3)}}, "names": list(root_names or names)}}],
    }


def _gt(field: int, value: int) -> dict:
    return {"scalarFunction": {"functionReference": 1, "outputType": {"bool": _NULLABLE},
                               "arguments": [{"value": _sel(field)}, {"value": {"literal": {"i64": str(value)}}}]}}


def _vt_plan(values: list, type_: dict, names: list[str], root_names: list[str] | None = None) -> dict:
    """A virtual table of one column of ``values`` (literal dicts) under ``names``."""
    read = {"read": {"baseSchema": {"names": names, "struct": {"types": [type_]}},
                     "virtualTable": {"values": [{"fields": [v]} for v in values]}}}
    return {"relations": [{"root": {"input": read, "names": root_names or names}}]}


def _binary(doc: dict) -> bytes:
    from optimizer.plan_io import dump_plan, load_plan

    return dump_plan(load_plan(json.dumps(doc)), "binpb")


# ------------------------------------------------------------------------------------------ inputs


@dataclass
class Input:
    kind: str
    data: bytes
    suffix: str  # .json or .binpb
    #: For ``run``: the rows (one column) the plan must give, when the generator knows them.
    expected: list | None = None


def nested_filters(n: int) -> bytes:
    """A binary plan of ``n`` nested ``FilterRel``s (``WHERE true``) over an empty virtual table."""
    from substrait.proto import Plan

    plan = Plan()
    rel = plan.relations.add().root.input
    for _ in range(n):
        rel.filter.condition.literal.boolean = True
        rel = rel.filter.input
    rel.read.virtual_table.SetInParent()
    return plan.SerializeToString()


def _deep(rng: random.Random) -> Input:
    n = rng.choice([50, 99, 101, 300, 499, 501, 1000, 2000, 10_000, 20_000])
    what = rng.choice(["filters-binary", "filters-json", "or", "arrays", "objects"])
    if what == "filters-binary" or what == "filters-json":
        if what == "filters-binary":
            return Input("deep", nested_filters(n), ".binpb")
        nested = '{"filter": {"condition": {"literal": {"boolean": true}}, "input": ' * n
        text = '{"relations": [{"root": {"input": ' + nested + '{"read": {"virtualTable": {}}}' + "}}" * n + "}}]}"
        return Input("deep", text.encode(), ".json")
    if what == "or":
        doc = _filter_plan()
        cond = _gt(1, 3)
        for _ in range(min(n, 3000)):
            cond = {"scalarFunction": {"functionReference": 2, "outputType": {"bool": _NULLABLE},
                                       "arguments": [{"value": cond}, {"value": _gt(0, rng.randint(0, 9))}]}}
        doc["relations"][0]["root"]["input"]["filter"]["condition"] = cond
        try:
            text = json.dumps(doc)
        except RecursionError:
            text = json.dumps(_filter_plan())
        return Input("deep", text.encode(), ".json")
    if what == "arrays":
        return Input("deep", b'{"relations": ' + b"[" * n + b"]" * n + b"}", ".json")
    return Input("deep", b'{"relations": [{"root": ' + b'{"x": ' * n + b"1" + b"}" * n + b"}]}", ".json")


def _literal(rng: random.Random) -> Input:
    what = rng.choice(["string", "i64", "i32", "decimal", "fp64", "rows", "fixedchar", "bad-i64"])
    if what == "string":
        size = rng.choice([0, 1, 1000, 100_000, 1_000_000])
        value = "".join(rng.choice("ab$'\\`{}\n\x00é名") for _ in range(min(size, 50))) * max(1, size // 50)
        doc = _vt_plan([{"string": value}], {"string": _REQ}, ["s"])
        return Input("literal", json.dumps(doc).encode(), ".json", expected=[value])
    if what in ("i64", "bad-i64"):
        value = rng.choice([2**63 - 1, -(2**63), 0, -1, 2**31, -(2**31) - 1] if what == "i64"
                           else [2**63, -(2**63) - 1, 10**30, 10**4000])
        doc = _vt_plan([{"i64": str(value)}], {"i64": _REQ}, ["v"])
        return Input("literal", json.dumps(doc).encode(), ".json", expected=[value] if what == "i64" else None)
    if what == "i32":
        value = rng.choice([2**31 - 1, -(2**31), 2**31, 2**40])
        doc = _vt_plan([{"i32": value}], {"i32": _REQ}, ["v"])
        return Input("literal", json.dumps(doc).encode(), ".json",
                     expected=[value] if -(2**31) <= value < 2**31 else None)
    if what == "decimal":
        precision = rng.choice([1, 18, 38, 39, 1000])
        scale = rng.choice([0, 2, precision, precision + 1])
        raw = rng.randbytes(rng.choice([16, 0, 3, 17]))
        import base64

        doc = _vt_plan([{"decimal": {"value": base64.b64encode(raw).decode(), "precision": precision, "scale": scale}}],
                       {"decimal": {"precision": precision, "scale": scale, **_REQ}}, ["d"])
        return Input("literal", json.dumps(doc).encode(), ".json")
    if what == "fp64":
        value = rng.choice([1.7976931348623157e308, -1.7976931348623157e308, 5e-324, "Infinity", "-Infinity", "NaN", 0.0])
        doc = _vt_plan([{"fp64": value}], {"fp64": _REQ}, ["f"])
        return Input("literal", json.dumps(doc).encode(), ".json")
    if what == "rows":
        n = rng.choice([1000, 20_000])
        doc = _vt_plan([{"i64": str(i)} for i in range(n)], {"i64": _REQ}, ["v"])
        return Input("literal", json.dumps(doc).encode(), ".json", expected=list(range(n)))
    length = rng.choice([1, 100, 100_000])
    doc = _vt_plan([{"fixedChar": "x" * length}], {"fixedChar": {"length": length, **_REQ}}, ["c"])
    return Input("literal", json.dumps(doc).encode(), ".json", expected=["x" * length])


def _name(rng: random.Random) -> str:
    if rng.random() < 0.7:
        return rng.choice(ODD_NAMES)
    return "".join(chr(rng.choice([rng.randint(1, 0x7F), rng.randint(0x80, 0x10FFFF)])) for _ in range(rng.randint(1, 12)))


def _names(rng: random.Random) -> Input:
    what = rng.choice(["vt", "vt-binary", "filter", "table"])
    if what.startswith("vt"):
        value = _name(rng)
        doc = _vt_plan([{"string": value}], {"string": _REQ}, [_name(rng)], [_name(rng)])
        surrogate = any(0xD800 <= ord(c) <= 0xDFFF for c in json.dumps(doc, ensure_ascii=False))
        if what == "vt-binary" and not surrogate:
            try:
                return Input("names", _binary(doc), ".binpb", expected=[value])
            except PlanError:  # our own loader refused it: send the JSON, it must say why
                pass
        return Input("names", json.dumps(doc).encode(), ".json", expected=[value])
    if what == "filter":
        doc = _filter_plan(names=(_name(rng), _name(rng)), root_names=(_name(rng), _name(rng)))
    else:
        doc = _filter_plan(table=[_name(rng) for _ in range(rng.randint(1, 3))])
    return Input("names", json.dumps(doc).encode(), ".json")


def _bytes(rng: random.Random, base: bytes) -> Input:
    what = rng.choice(["random", "flip", "cut", "insert"])
    if what == "random":
        data = rng.randbytes(rng.choice([1, 10, 100, 10_000]))
    elif what == "flip":
        data = bytearray(base)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data = bytes(data)
    elif what == "cut":
        data = base[: rng.randrange(1, len(base))]
    else:
        at = rng.randrange(len(base))
        data = base[:at] + rng.randbytes(rng.randint(1, 20)) + base[at:]
    if not data.strip():
        data = b"\x00" + data
    return Input("bytes", data, ".binpb")


_WEIRD_VALUES: list = [None, True, -1, 0, 2**31, 2**63, 10**30, -(10**30), 1e308, -1e308, "", "x" * 10_000,
                       "${env:HOME}", [], [[]], {}, {"a": 1}, [1, 2, 3], "NaN", "Infinity", 3.5, "\x00"]


def _json(rng: random.Random) -> Input:
    doc = copy.deepcopy(_filter_plan())  # its dicts (``_NULLABLE``...) are shared with the other families' plans
    paths: list[tuple[list, object]] = []
    stack: list[tuple[object, list]] = [(doc, [])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                paths.append((path + [k], v))
                stack.append((v, path + [k]))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                paths.append((path + [i], v))
                stack.append((v, path + [i]))
    for _ in range(rng.randint(1, 3)):
        path, _old = rng.choice(paths)
        target = doc
        try:
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = rng.choice(_WEIRD_VALUES)
        except (KeyError, IndexError, TypeError):
            continue
    return Input("json", json.dumps(doc).encode(), ".json")


def _hints(rng: random.Random) -> Input:
    from workloads.corpus import corpus_root

    q3 = corpus_root() / "substrait_consumer/snapshots/producer/integration/tpch/q03-isthmus_plan.json"
    doc = json.loads(q3.read_text())
    values = [1e308, 1.7976931348623157e308, 1e200, 1e18, 1e19, -1.0, 0.0, 5e-324, 1.0, 2**63]
    binary_values = [float("inf"), float("-inf"), float("nan")]
    stack: list = [doc]
    reads = []
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            for key in ("read", "join", "filter", "project", "aggregate", "sort", "fetch"):
                if isinstance(x.get(key), dict):
                    reads.append(x[key])
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    use_binary = rng.random() < 0.4
    special = []
    for body in reads:
        if rng.random() < 0.7:
            rows, size = rng.choice(values), rng.choice(values)
            if use_binary and rng.random() < 0.5:
                special.append((len(special), rng.choice(binary_values)))
                rows = 12345.0  # replaced in the binary below
            body.setdefault("common", {})["hint"] = {"stats": {"rowCount": rows, "recordSize": size}}
    if not use_binary:
        return Input("hints", json.dumps(doc).encode(), ".json")
    from optimizer.plan_io import dump_plan, load_plan

    plan = load_plan(json.dumps(doc))
    todo = list(special)
    pending: list = list(plan.relations)
    while pending and todo:
        message = pending.pop()
        if message.DESCRIPTOR.full_name == "substrait.RelCommon.Hint.Stats" and message.row_count == 12345.0:
            message.row_count = todo.pop()[1]
        for fd, value in message.ListFields():
            if fd.message_type is not None:
                pending.extend(v for v in (value if fd.is_repeated else [value]) if hasattr(v, "DESCRIPTOR"))
    return Input("hints", dump_plan(plan, "binpb"), ".binpb")


def _dag(rng: random.Random) -> Input:
    schema = {"names": ["a"], "struct": {"types": [{"i64": _REQ}]}}
    what = rng.choice(["doubling", "doubling", "out-of-range", "cycle"])
    rels: list = [{"rel": {"read": {"baseSchema": schema, "virtualTable": {"values": [{"fields": [{"i64": "1"}]}]}}}}]
    levels = rng.randint(5, 30)
    for i in range(1, levels + 1):
        refs = [{"reference": {"subtreeOrdinal": i - 1}}] * 2
        rels.append({"rel": {"set": {"op": "SET_OP_UNION_ALL", "inputs": refs}}})
    top = levels
    if what == "out-of-range":
        top = rng.choice([levels + 5, -1, 2**31 - 1])
    elif what == "cycle":
        rels[0] = {"rel": {"set": {"op": "SET_OP_UNION_ALL", "inputs": [{"reference": {"subtreeOrdinal": levels}}] * 2}}}
    rels.append({"root": {"input": {"reference": {"subtreeOrdinal": top}}, "names": ["a"]}})
    expected = [1] * 2**levels if what == "doubling" and levels <= 12 else None
    return Input("dag", json.dumps({"relations": rels}).encode(), ".json", expected=expected)


def _files(rng: random.Random) -> Input:
    item = rng.choice([{"uriFile": "/etc/passwd", "text": {"fieldDelimiter": ":"}},
                       {"uriFile": "file:///etc/shadow", "parquet": {}},
                       {"uriFile": "tables/../secret.parquet", "parquet": {}},
                       {"uriFolder": "/", "parquet": {}},
                       {"uriPathGlob": "/etc/*", "orc": {}},
                       {"uriFile": "s3a://bucket/x.parquet", "parquet": {}},
                       {"uriFile": "/dev/zero", "arrow": {}}])
    read = {"read": {"baseSchema": {"names": ["a"], "struct": {"types": [{"string": _NULLABLE}]}},
                     "localFiles": {"items": [item]}}}
    return Input("files", json.dumps({"relations": [{"root": {"input": read, "names": ["a"]}}]}).encode(), ".json")


@dataclass
class TableInput(Input):
    """An input with the files it reads: ``tables`` (name -> bytes) are written to the ``--tables``
    folder it runs with."""

    tables: dict[str, bytes] | None = None


# Data type, values, declared type, and whether the declared type holds every value of the data's type.
def _nullable() -> dict:
    """A nullability dict of its own (a plan a family mutates must not share one with another's)."""
    return {"nullability": "NULLABILITY_NULLABLE"}


def _cast_cases() -> list[tuple[object, list, dict, bool]]:
    import decimal

    import pyarrow as pa

    dec = decimal.Decimal
    return [
        (pa.int32(), [2**31 - 1, -5, None], {"i64": _nullable()}, True),
        (pa.int16(), [-(2**15), 7], {"fp32": _nullable()}, True),
        (pa.int32(), [2**31 - 1, 0], {"decimal": {"precision": 10, "scale": 0, **_nullable()}}, True),
        (pa.decimal128(15, 2), [dec("0.06"), dec("-9999999999999.99")], {"decimal": {"precision": 19, "scale": 2, **_nullable()}}, True),
        (pa.decimal128(15, 2), [dec("0.06"), dec("123.45")], {"decimal": {"precision": 16, "scale": 3, **_nullable()}}, True),
        (pa.float32(), [1.5, -0.25], {"fp64": _nullable()}, True),
        (pa.int64(), [2**40, 1], {"i32": _nullable()}, False),
        (pa.int64(), [1, 2], {"i16": _nullable()}, False),  # the values fit; the declared type cannot hold the column's
        (pa.int32(), [2**31 - 1], {"decimal": {"precision": 9, "scale": 0, **_nullable()}}, False),
        (pa.decimal128(15, 2), [dec("0.06"), dec("0.07")], {"decimal": {"precision": 19, "scale": 0, **_nullable()}}, False),
        (pa.decimal128(15, 2), [dec("0.06")], {"decimal": {"precision": 15, "scale": 3, **_nullable()}}, False),
        (pa.decimal128(15, 2), [dec("0.06")], {"fp64": _nullable()}, False),
        (pa.decimal128(38, 0), [dec(10**30)], {"i64": _nullable()}, False),
        (pa.float64(), [1.5, 1e300], {"fp32": _nullable()}, False),
        (pa.float64(), [1.5], {"i64": _nullable()}, False),
        (pa.list_(pa.int64()), [[2**40]], {"list": {"type": {"i32": _nullable()}, **_nullable()}}, False),
    ]


def _casts(rng: random.Random) -> Input:
    """A named table ``t`` whose column ``a`` the plan declares with another type of its family: wider
    (the values come back as they are) or narrower (exit 2: no silent cast that changes values)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    type_, values, declared, lossless = rng.choice(_cast_cases())
    read = {"read": {"baseSchema": {"names": ["a"], "struct": {"types": [declared]}}, "namedTable": {"names": ["t"]}}}
    sink = io.BytesIO()
    pq.write_table(pa.table({"a": pa.array(values, type=type_)}), sink)
    plan = json.dumps({"relations": [{"root": {"input": read, "names": ["a"]}}]}).encode()
    return TableInput("casts", plan, ".json", expected=values if lossless else None, tables={"t": sink.getvalue()})


def _quiet(rng: random.Random) -> Input:
    """A plan ``run`` must refuse before Spark starts (a file outside ``--tables``, a missing file or
    table): one line on stderr and no JVM (paths are relative to the run's folder, ``tables/`` its
    ``--tables``)."""
    schema = {"names": ["a"], "struct": {"types": [{"string": _nullable()}]}}
    item = rng.choice([{"uriFile": "secret.parquet", "parquet": {}},
                       {"uriFile": "tables/../secret.parquet", "parquet": {}},
                       {"uriFile": "./tables/./../secret.parquet", "orc": {}},
                       {"uriFile": "/etc/passwd", "text": {"fieldDelimiter": ":"}},
                       {"uriFile": "file:///etc/hostname", "parquet": {}},
                       {"uriFolder": "/", "parquet": {}},
                       {"uriFile": "tables/missing.parquet", "parquet": {}},
                       {"uriFolder": "tables/no-such-folder", "parquet": {}},
                       None])
    read = {"baseSchema": schema, "localFiles": {"items": [item]}} if item is not None else {
        "baseSchema": schema, "namedTable": {"names": [rng.choice(["nosuch", "secret", "../secret", "t2"])]}}
    plan = json.dumps({"relations": [{"root": {"input": {"read": read}, "names": ["a"]}}]}).encode()
    return TableInput("quiet", plan, ".json")


# -------------------------------------------- locations that escape, outputs onto streams, user files
#
# (issue 42, items 1, 2, 3, 5: docs/security.md)

#: The outside file's rows: the signal that a location escaped ``--tables``.
SECRET_ROWS = 4321


@dataclass
class SecurityInput(Input):
    """An input checked beyond the plan commands: ``setup`` says what (``location`` of an escape,
    ``target`` of an output, ``option`` and ``content`` of a user file)."""

    setup: dict | None = None


def _local_files_plan(item: dict, type_: dict | None = None) -> bytes:
    read = {"read": {"baseSchema": {"names": ["a"], "struct": {"types": [type_ or {"i64": _NULLABLE}]}},
                     "localFiles": {"items": [item]}}}
    return json.dumps({"relations": [{"root": {"input": read, "names": ["a"]}}]}).encode()


_ESCAPE_FORMATS = {"parquet": ("secret.parquet", {"parquet": {}}), "orc": ("secret.orc", {"orc": {}}),
                   "text": ("secret.csv", {"text": {"fieldDelimiter": ",", "maxLineSize": "1000"}})}


def _escapes(rng: random.Random) -> Input:
    """A location under ``tables/`` by its text before a wildcard, a link or a brace, that Spark resolves
    to ``secret.*`` beside it (relative to the run's folder; ``tables/latest`` links to ``tables/v/1``)."""
    import urllib.parse

    fmt = rng.choice(sorted(_ESCAPE_FORMATS))
    name, options = _ESCAPE_FORMATS[fmt]
    field = rng.choice(["uriFile", "uriPath", "uriPathGlob", "uriFolder"])
    target = f"{fmt}dir" if field == "uriFolder" else name
    location = "tables/" + rng.choice(["?/../../", "*/../../", "latest/../../", "s[u]b/../../", "{x,../sub/..}/",
                                       "sub/\\../\\../", "latest/./../../", "v/1/../../../"]) + target
    if rng.random() < 0.5:  # a file:// URI of the same location (absolute at run time: see run_escape_on_spark)
        location = "file://{root}/" + urllib.parse.quote(location)
    item = {field: location, **options}
    return SecurityInput("escapes", _local_files_plan(item), ".json", setup={"fmt": fmt, "item": item})


def _outputs(rng: random.Random) -> Input:
    """A small valid plan, and an ``-o`` target that is not a regular file."""
    plan = json.dumps(_filter_plan()).encode()
    target = rng.choice(["fifo", "zero-device", "null-device", "dev-null", "stdout-link", "dev-stdout"])
    return SecurityInput("outputs", plan, ".json", setup={"target": target})


_CAPABILITY_MUTATIONS: list[object] = [
    5, "x", None, True, [], {}, [5], ["full"], {"a": 1}, -1, 1e308, "fuul", [None], "\x00", "x" * 10_000,
]


def _userfiles(rng: random.Random) -> Input:
    """A valid plan and a ``--capabilities`` or ``--stats`` file broken in one field (or as a whole)."""
    plan = json.dumps(_filter_plan()).encode()
    bad = rng.choice(_CAPABILITY_MUTATIONS)
    whole = rng.random() < 0.25
    if rng.random() < 0.5:
        option = "--capabilities"
        doc: object = {"name": "p", "default": "none", "read_types": ["named_table"], "constant_folding": True,
                       "rules": [{"function": ["lt", "gt"], "args": ["integer", "integer"], "support": "full",
                                  "shape": "column_op_constant"}]}
        paths = [("name",), ("default",), ("read_types",), ("read_types", 0), ("constant_folding",), ("rules",),
                 ("rules", 0), ("rules", 0, "function"), ("rules", 0, "function", 1), ("rules", 0, "args"),
                 ("rules", 0, "args", 0), ("rules", 0, "support"), ("rules", 0, "shape"), ("functions",),
                 ("rules", 0, "suport")]
    else:
        option = "--stats"
        doc = {"version": 1, "tables": {"t": {"row_count": 10, "size_bytes": 100, "columns": {"b": {
            "ndv": 5, "min": 1, "max": 9, "null_count": 0, "data_type": "bigint",
            "histogram": {"height": 2, "bins": [[1, 5, 3], [5, 9, 2]]}}}}}}
        paths = [("version",), ("tables",), ("tables", "t"), ("tables", "t", "row_count"), ("tables", "t", "name"),
                 ("tables", "t", "columns"), ("tables", "t", "columns", "b"), ("tables", "t", "columns", "b", "ndv"),
                 ("tables", "t", "columns", "b", "min"), ("tables", "t", "columns", "b", "histogram"),
                 ("tables", "t", "columns", "b", "histogram", "bins"),
                 ("tables", "t", "columns", "b", "histogram", "bins", 1), ("tables", "t", "columns", "b", "nvd")]
    if whole:
        content = rng.choice([b"[" * 100_000 + b"]" * 100_000, b'{"name": "\xff"}',
                              b"{" + b"9" * 5000 + b"}", b'{"rules": ' + b"[" * 5000 + b"]" * 5000 + b"}",
                              b"\xef\xbb\xbf{}", b"", json.dumps(bad).encode()])
    else:
        at = rng.choice(paths)
        holder = doc
        for key in at[:-1]:
            holder = holder[key]  # type: ignore[index]
        holder[at[-1]] = bad  # type: ignore[index]
        content = json.dumps(doc).encode()
    return SecurityInput("userfiles", plan, ".json", setup={"option": option, "content": content})


def _escape_layout(workdir: Path, index: int) -> Path:
    """``workdir/esc<index>/`` laid out by :func:`write_escape_layout`."""
    root = workdir / f"esc{index}"
    write_escape_layout(root, SECRET_ROWS)
    return root


def write_escape_layout(root: Path, rows: int) -> Path:
    """``root/tables`` (``t.parquet``, folders ``sub`` and ``v/1``, the link ``latest -> v/1``) and, beside
    it, a secret of ``rows`` rows in each format, as a file and as the only file of a folder
    ``<format>dir``. Returns the tables' folder."""
    import pyarrow as pa
    import pyarrow.orc as orc
    import pyarrow.parquet as pq

    tables = root / "tables"
    (tables / "v" / "1").mkdir(parents=True)
    (tables / "sub").mkdir()
    (tables / "latest").symlink_to("v/1")
    pq.write_table(pa.table({"a": [1, 2, 3]}), tables / "t.parquet")
    secret = pa.table({"a": pa.array(range(rows), pa.int64())})
    for fmt, (name, _) in _ESCAPE_FORMATS.items():
        (root / f"{fmt}dir").mkdir()
        for target in (root / name, root / f"{fmt}dir" / name):
            if fmt == "parquet":
                pq.write_table(secret, target)
            elif fmt == "orc":
                orc.write_table(secret, target)
            else:
                target.write_text("".join(f"{i}\n" for i in range(rows)))
    return tables


def _main_captured(argv: list[str]) -> tuple[int, str, str]:
    """The CLI run in-process on ``argv``: its exit code, and what it wrote to stdout and to stderr."""
    from optimizer.cli import main as cli_main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(argv)
    return code, out.getvalue(), err.getvalue()


def run_escape_on_spark(index: int, item: SecurityInput, workdir: Path) -> Outcome:
    """``run --tables tables`` in-process, from the escape's folder: exit 2 with one line naming the
    location, and the outside file's rows nowhere."""
    import os

    root = _escape_layout(workdir, index)
    path = root / "p.json"
    path.write_bytes(item.data.replace(b"{root}", str(root).encode()))
    start = time.perf_counter()
    cwd = os.getcwd()
    os.chdir(root)  # the plan's plain locations are relative to it, as a user's would be
    try:
        code, out, err = _main_captured(["run", str(path), "--tables", "tables", "--show", "3"])
    finally:
        os.chdir(cwd)
    lines = [line for line in err.strip().splitlines() if not line.startswith("substrait-opt: warning:")]
    if str(SECRET_ROWS) in out + err:
        verdict = f"FAIL: read the file outside --tables: {out.strip()[:200]}"
    elif code != 2 or len(lines) != 1 or "outside the table roots" not in lines[0]:
        verdict = f"FAIL: exit {code} with {len(lines)} stderr lines: {' | '.join(lines)[:300]}"
    else:
        verdict = "exit 2"
    return Outcome(index, item.kind, "run --tables", code, verdict, time.perf_counter() - start, err[-500:])


def run_output_subprocess(index: int, item: SecurityInput, workdir: Path) -> Outcome:
    """``optimize -o TARGET`` in a fresh interpreter: a FIFO, the null device and stdout are written in
    place (exit 0, the target of its kind still); any other device is exit 2 with one line, the node kept."""
    import os
    import stat as st

    kind = (item.setup or {})["target"]
    path = workdir / f"out{index}.json"
    path.write_bytes(item.data)
    target = workdir / f"target{index}"
    reader = None
    expect_code, is_kind = 0, st.S_ISCHR
    if kind == "fifo":
        os.mkfifo(target)
        reader = os.open(target, os.O_RDONLY | os.O_NONBLOCK)  # a reader: the writer's open does not wait
        is_kind = st.S_ISFIFO
    elif kind in ("zero-device", "null-device"):
        if os.geteuid() != 0:  # only root makes device nodes: the null device stands in
            kind, target = "dev-null", Path(os.devnull)
        else:
            os.mknod(target, st.S_IFCHR | 0o666, os.stat("/dev/zero" if kind == "zero-device" else os.devnull).st_rdev)
            expect_code = 2 if kind == "zero-device" else 0
    if kind == "dev-null":
        target = Path(os.devnull)
    elif kind in ("stdout-link", "dev-stdout"):
        if kind == "stdout-link":
            target.symlink_to("/proc/self/fd/1")
        else:
            target = Path("/dev/stdout")
        is_kind = st.S_ISLNK
    argv = [sys.executable, "-m", "optimizer", "optimize", str(path), "-o", str(target), "--format", "json"]
    start = time.perf_counter()
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=_TIME_LIMIT)
    except subprocess.TimeoutExpired:
        return Outcome(index, item.kind, f"subprocess -o {kind}", -1, f"FAIL: no answer in {_TIME_LIMIT} s",
                       time.perf_counter() - start)
    finally:
        got = os.read(reader, 1 << 16) if reader is not None else b""
        if reader is not None:
            os.close(reader)
    err = proc.stderr.decode("utf-8", "replace")
    lines = err.strip().splitlines()
    mode = os.lstat(target).st_mode
    if not is_kind(mode):
        verdict = f"FAIL: -o replaced the {kind} (now mode {oct(mode)})"
    elif proc.returncode != expect_code or (expect_code and len(lines) != 1):
        verdict = f"FAIL: exit {proc.returncode} (expected {expect_code}) with {len(lines)} stderr lines: " + \
            " | ".join(lines)[:300]
    elif kind == "fifo" and b'"relations"' not in got:
        verdict = "FAIL: the FIFO's reader got no plan"
    elif kind in ("stdout-link", "dev-stdout") and b'"relations"' not in proc.stdout:
        verdict = "FAIL: -o onto stdout wrote no plan to stdout"
    else:
        verdict = "answer" if expect_code == 0 else "exit 2"
    return Outcome(index, item.kind, f"subprocess -o {kind}", proc.returncode, verdict, time.perf_counter() - start,
                   err[-500:])


def run_userfile(index: int, item: SecurityInput, workdir: Path) -> Outcome:
    """``optimize PLAN --capabilities F`` (or ``--stats F``) in-process: an answer when the broken field
    happens to be valid, else exit 2 with one line naming the file (never the plan)."""
    setup = item.setup or {}
    path = workdir / f"uf{index}.json"
    path.write_bytes(item.data)
    user_file = workdir / f"uf{index}-file.json"
    user_file.write_bytes(setup["content"])
    output = workdir / f"uf{index}-out.json"
    start = time.perf_counter()
    try:
        code, out, err = _main_captured(["optimize", str(path), setup["option"], str(user_file), "-o", str(output)])
    except BaseException as exc:  # anything escaping main() is a failure to report
        return Outcome(index, item.kind, f"optimize {setup['option']}", -1,
                       f"FAIL: {type(exc).__name__} escaped main(): {exc}", time.perf_counter() - start)
    verdict = _judge(code, out, err, output if code == 0 else None, ["optimize"])
    lines = [line for line in err.strip().splitlines() if not line.startswith("substrait-opt: warning:")]
    if code == 2 and str(user_file) not in lines[0]:
        verdict = f"FAIL: exit 2 without naming the file: {lines[0][:300]}"
    elif code == 3:
        verdict = f"FAIL: exit 3 for a malformed {setup['option']} file: {' | '.join(lines)[:300]}"
    return Outcome(index, item.kind, f"optimize {setup['option']}", code, verdict, time.perf_counter() - start,
                   err[-500:])


def security_checks(index: int, item: Input, workdir: Path, budget: Counter) -> list[Outcome]:
    """The checks of ``escapes`` (``run --tables`` on Spark, while ``budget["spark"]`` lasts), ``outputs``
    (a subprocess, while ``budget["subprocess"]`` lasts) and ``userfiles`` (in-process, every one)."""
    if not isinstance(item, SecurityInput):
        return []
    if item.kind == "userfiles":
        return [run_userfile(index, item, workdir)]
    if item.kind == "escapes" and budget["spark"] > 0:
        budget["spark"] -= 1
        return [run_escape_on_spark(index, item, workdir)]
    if item.kind == "outputs" and budget["subprocess"] > 0:
        budget["subprocess"] -= 1
        return [run_output_subprocess(index, item, workdir)]
    return []


def _work_plan(rel: dict, names: list[str]) -> dict:
    """A plan of ``rel`` declaring ``equal``, ``or`` and ``and`` (anchors 1, 2, 3)."""
    return {"extensionUrns": [{"extensionUrnAnchor": 1, "urn": _GT}, {"extensionUrnAnchor": 2, "urn": _BOOL}],
            "extensions": [{"extensionFunction": {"extensionUrnReference": 1, "functionAnchor": 1, "name": "equal:any_any"}},
                           {"extensionFunction": {"extensionUrnReference": 2, "functionAnchor": 2, "name": "or:bool"}},
                           {"extensionFunction": {"extensionUrnReference": 2, "functionAnchor": 3, "name": "and:bool"}}],
            "relations": [{"root": {"input": rel, "names": names}}]}


def _work_read(name: str, rows: int | None = None) -> dict:
    read: dict = {"namedTable": {"names": [name]}, "baseSchema": {"names": ["k"], "struct": {"types": [{"i64": _REQ}]}}}
    if rows is not None:
        read["common"] = {"hint": {"stats": {"rowCount": rows, "recordSize": 8}}}
    return {"read": read}


def _work_eq(a: dict, b: dict) -> dict:
    return {"scalarFunction": {"functionReference": 1, "outputType": {"bool": _REQ},
                               "arguments": [{"value": a}, {"value": b}]}}


def _work_join(rng: random.Random, n: int, one_key: bool) -> dict:
    """``n`` hinted tables ``t_i(k)`` as a balanced tree of cross products under one inner join holding
    a chain of equalities (``one_key``: ``t_i.k = t_{i+1}.k``, one class of equal columns) or random
    edges between the tables (a graph as dense as ``3n`` edges)."""
    reads = [_work_read(f"t{i}", rng.choice([1, 100, 10**4, 10**6, 10**8])) for i in range(n)]

    def tree(lo: int, hi: int) -> dict:
        if hi - lo == 1:
            return reads[lo]
        mid = (lo + hi) // 2
        return {"cross": {"left": tree(lo, mid), "right": tree(mid, hi)}}

    edges = [(i, i + 1) for i in range(n - 1)]
    if not one_key:
        edges += [tuple(sorted(rng.sample(range(n), 2))) for _ in range(2 * n)]
    preds = [{"value": _work_eq(_sel(a), _sel(b))} for a, b in edges]
    top = tree(0, n)["cross"]
    condition = {"scalarFunction": {"functionReference": 3, "outputType": {"bool": _REQ}, "arguments": preds}}
    return _work_plan({"join": {"type": "JOIN_TYPE_INNER", "left": top["left"], "right": top["right"],
                                "expression": condition}}, [f"c{i}" for i in range(n)])


def _work(rng: random.Random) -> Input:
    """Plans that ask for a lot of work: wide join graphs (ordered greedily within a time budget), and
    calls, virtual tables, unions, expression counts and sizes at and past :class:`optimizer.load.limits.Limits`
    (past a limit: exit 2 naming it, before the work; at it: an answer)."""
    from optimizer.load.limits import DEFAULT

    what = rng.choice(["join", "one-key", "or", "values", "union", "wide", "expressions", "bytes"])
    if what == "bytes" and rng.random() < 0.75:  # 16 MiB each: a few in a run are enough
        what = "or"
    if what in ("join", "one-key"):
        doc = _work_join(rng, rng.choice([15, 30, 60]), what == "one-key")
    elif what == "or":
        n = rng.choice([100, 2000, DEFAULT.call_arguments + 1, 20_000])
        condition = {"scalarFunction": {"functionReference": 2, "outputType": {"bool": _REQ}, "arguments": [
            {"value": _work_eq(_sel(0), {"literal": {"i64": str(i)}})} for i in range(n)]}}
        doc = _work_plan({"filter": {"input": _work_read("t"), "condition": condition}}, ["k"])
    elif what in ("values", "expressions"):
        rows = rng.choice([1000, DEFAULT.virtual_table_rows + 1, 150_000]) if what == "values" else \
            DEFAULT.expression_nodes // 2 + 1  # two literals a row: one node more than the limit
        width = 1 if what == "values" else 2
        table = {"expressions": [{"fields": [{"literal": {"i64": str(i)}}] * width} for i in range(rows)]}
        schema = {"names": [f"k{j}" for j in range(width)], "struct": {"types": [{"i64": _REQ}] * width}}
        doc = _work_plan({"read": {"baseSchema": schema, "virtualTable": table}}, schema["names"])
    elif what == "union":
        inputs = rng.choice([100, 1000, DEFAULT.relations])  # the last: one relation (the union) past the limit
        doc = _work_plan({"set": {"op": "SET_OP_UNION_ALL", "inputs": [_work_read("t") for _ in range(inputs)]}}, ["k"])
    elif what == "wide":  # one wide read, its columns compared once per union input: 131 s before
        columns, inputs = rng.choice([(100_000, 400), (20_000, 2000)])
        schema = {"names": [""] * columns, "struct": {"types": [{"i64": _NULLABLE}] * columns}}
        doc = {"relations": [{"rel": {"read": {"baseSchema": schema, "namedTable": {"names": ["t"]}}}},
                             {"root": {"names": [""] * columns, "input": {"set": {
                                 "op": "SET_OP_UNION_ALL", "inputs": [{"reference": {"subtreeOrdinal": 0}}] * inputs}}}}]}
    else:  # one byte past the size limit, in a table name
        filler = DEFAULT.input_bytes + 2 - len(json.dumps(_work_plan(_work_read("t"), ["k"])))
        doc = _work_plan(_work_read("t"), ["k"])
        doc["relations"][0]["root"]["input"]["read"]["namedTable"]["names"] = ["x" * filler]
        return Input("work", json.dumps(doc).encode(), ".json")
    text = json.dumps(doc).encode()
    if len(text) > 1_000_000 or rng.random() < 0.5:  # binary: the wire format's counts (a small plan's)
        return Input("work", text, ".json")
    from optimizer.load.limits import Limits
    from optimizer.plan_io import dump_plan, load_plan

    unlimited = Limits(input_bytes=10**10, relations=10**9, expression_nodes=10**9, call_arguments=10**9,
                       virtual_table_rows=10**9)
    return Input("work", dump_plan(load_plan(text, limits=unlimited), "binpb"), ".binpb")


def generate(seed: int, count: int) -> list[Input]:
    """``count`` hostile inputs from ``seed`` (the same seed gives the same inputs)."""
    rng = random.Random(seed)
    base = _binary(_filter_plan())
    makers: list[tuple[str, Callable[[], Input]]] = [
        ("deep", lambda: _deep(rng)), ("literal", lambda: _literal(rng)), ("names", lambda: _names(rng)),
        ("bytes", lambda: _bytes(rng, base)), ("json", lambda: _json(rng)), ("hints", lambda: _hints(rng)),
        ("dag", lambda: _dag(rng)), ("files", lambda: _files(rng)),
        ("escapes", lambda: _escapes(rng)), ("outputs", lambda: _outputs(rng)),
        ("userfiles", lambda: _userfiles(rng)),
        ("casts", lambda: _casts(rng)), ("quiet", lambda: _quiet(rng)),
        ("work", lambda: _work(rng)),
    ]
    return [makers[i % len(makers)][1]() for i in range(count)]


# --------------------------------------------------------------------------------------------- checks

COMMANDS = (["convert"], ["explain"], ["explain", "--format", "json"], ["optimize"])


@dataclass
class Outcome:
    index: int
    kind: str
    command: str
    code: int
    verdict: str  # "answer", "exit 2" / "exit 3" (with one line), or a failure: "FAIL: ..."
    seconds: float
    stderr: str = ""


class _Hang(BaseException):
    pass


def _on_alarm(signum, frame):
    raise _Hang


def _judge(code: int, out: str, err: str, output: Path | None, command: list[str],
           check_answer: Callable[[], str | None] | None = None) -> str:
    lines = [line for line in err.strip().splitlines() if not line.startswith("substrait-opt: warning:")]
    if "Traceback" in err or "internal error" in err:
        return f"FAIL: {lines[-1] if lines else 'traceback'}"
    if code == 0:
        try:
            if output is not None:
                from optimizer.plan_io import load_plan

                load_plan(str(output))
            elif command[-1] == "json":
                def refuse(constant):
                    raise ValueError(f"not JSON: {constant}")

                json.loads(out, parse_constant=refuse)
            elif not out.strip() and command[0] != "run":
                return "FAIL: exit 0 without output"
        except (OptimizerError, ValueError, RecursionError) as exc:  # the output is what is being judged
            return f"FAIL: the output does not load: {type(exc).__name__}: {str(exc)[:200]}"
        if check_answer is not None:
            wrong = check_answer()
            if wrong:
                return f"FAIL: wrong answer: {wrong}"
        return "answer"
    if code in (2, 3) and len(lines) == 1:
        return f"exit {code}"
    return f"FAIL: exit {code} with {len(lines)} stderr lines: {' | '.join(lines)[:300]}"


def run_in_process(index: int, item: Input, command: list[str], workdir: Path) -> Outcome:
    path = workdir / f"in{index}{item.suffix}"
    path.write_bytes(item.data)
    output = workdir / f"out{index}.json" if command[0] in ("convert", "optimize") else None
    argv = [*command, str(path)] + (["-o", str(output)] if output is not None else [])
    start = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(_TIME_LIMIT)
    try:
        code, out, err = _main_captured(argv)
    except _Hang:
        return Outcome(index, item.kind, " ".join(command), -1, f"FAIL: no answer in {_TIME_LIMIT} s",
                       time.perf_counter() - start)
    except BaseException as exc:  # anything escaping main() is a failure to report
        return Outcome(index, item.kind, " ".join(command), -1, f"FAIL: {type(exc).__name__} escaped main(): {exc}",
                       time.perf_counter() - start)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    seconds = time.perf_counter() - start
    verdict = _judge(code, out, err, output, command)
    for p in (path, output):
        if p is not None and p.exists():
            p.unlink()
    return Outcome(index, item.kind, " ".join(command), code, verdict, seconds, err[-500:])


def run_subprocess(index: int, item: Input, command: list[str], workdir: Path) -> Outcome:
    path = workdir / f"sub{index}{item.suffix}"
    path.write_bytes(item.data)
    output = workdir / f"subout{index}.json" if command[0] in ("convert", "optimize") else None
    argv = [sys.executable, "-m", "optimizer", *command, str(path)] + (["-o", str(output)] if output else [])
    start = time.perf_counter()
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=_TIME_LIMIT)
    except subprocess.TimeoutExpired:
        return Outcome(index, item.kind, "subprocess " + " ".join(command), -1, f"FAIL: no answer in {_TIME_LIMIT} s",
                       time.perf_counter() - start)
    seconds = time.perf_counter() - start
    err = proc.stderr.decode("utf-8", "replace")
    if proc.returncode < 0:
        verdict = f"FAIL: killed by signal {-proc.returncode}"
    else:
        verdict = _judge(proc.returncode, proc.stdout.decode("utf-8", "replace"), err, output, command)
    return Outcome(index, item.kind, "subprocess " + " ".join(command), proc.returncode, verdict, seconds, err[-500:])


def run_on_spark(index: int, item: Input, workdir: Path) -> Outcome:
    """``run`` in-process (one SparkSession): the answer must be the rows the generator expects."""
    from optimizer.plan_io import load_plan
    from optimizer.spark import SparkBackend
    from optimizer.spark.session import get_spark

    path = workdir / f"run{index}{item.suffix}"
    path.write_bytes(item.data)
    out_dir = workdir / f"run{index}"
    start = time.perf_counter()
    code, out, err = _main_captured(["run", str(path), "--out", str(out_dir), "--show", "0"])

    def check() -> str | None:
        if item.expected is None:
            return None
        import pyarrow.parquet as pq

        table = pq.read_table(next(out_dir.glob("*.parquet")))
        got = table.column(0).to_pylist()
        if sorted(map(repr, got)) != sorted(map(repr, item.expected)):
            return f"{str(got)[:120]} != {str(item.expected)[:120]}"
        # The root names come back as written too.
        want = list(load_plan(str(path)).relations[-1].root.names)
        have = SparkBackend(get_spark()).to_dataframe(load_plan(str(path))).columns
        return None if have == want else f"names {have!r} != {want!r}"

    verdict = _judge(code, out, err, None, ["run"], check)
    return Outcome(index, item.kind, "run", code, verdict, time.perf_counter() - start, err[-500:])


def _table_folder(index: int, item: TableInput, workdir: Path) -> Path:
    """``workdir/tables<index>/`` with the input's tables, and ``secret.parquet`` beside it (outside)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = workdir / f"tables{index}"
    tables.mkdir(exist_ok=True)
    for name, data in (item.tables or {}).items():
        (tables / f"{name}.parquet").write_bytes(data)
    if not (workdir / "secret.parquet").exists():
        pq.write_table(pa.table({"a": ["secret"]}), workdir / "secret.parquet")
    return tables


def run_casts_on_spark(index: int, item: TableInput, workdir: Path) -> Outcome:
    """``run --tables`` in-process: a declared type that holds every value gives the values back; one
    that cannot is exit 2 with one line naming the column and both types (never an answer)."""
    tables = _table_folder(index, item, workdir)
    path = workdir / f"casts{index}.json"
    path.write_bytes(item.data)
    out_dir = workdir / f"casts{index}"
    start = time.perf_counter()
    code, out, err = _main_captured(["run", str(path), "--tables", str(tables), "--out", str(out_dir), "--show", "0"])
    lines = err.strip().splitlines()
    if item.expected is None:
        verdict = ("exit 2" if code == 2 and len(lines) == 1 and "in the data but" in lines[0] else
                   f"FAIL: a lossy cast was not refused: exit {code}, {' | '.join(lines)[:300]}")
    else:
        def check() -> str | None:
            import pyarrow.parquet as pq

            got = pq.read_table(next(out_dir.glob("*.parquet"))).column(0).to_pylist()
            return None if got == item.expected else f"{str(got)[:120]} != {str(item.expected)[:120]}"

        verdict = _judge(code, out, err, None, ["run"], check)
    return Outcome(index, item.kind, "run --tables", code, verdict, time.perf_counter() - start, err[-500:])


def run_quiet_subprocess(index: int, item: TableInput, workdir: Path) -> Outcome:
    """``run --tables`` in a fresh interpreter: exit 2, exactly one line on stderr, and Spark never started
    (its JVM would have written the log file ``SUBSTRAIT_OPT_SPARK_LOG`` names)."""
    import os

    tables = _table_folder(index, item, workdir)
    path = workdir / f"quiet{index}.json"
    path.write_bytes(item.data)
    log = workdir / f"spark{index}.log"
    env = {**os.environ, "SUBSTRAIT_OPT_SPARK_LOG": str(log)}
    argv = [sys.executable, "-m", "optimizer", "run", str(path), "--tables", tables.name]
    start = time.perf_counter()
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=_TIME_LIMIT, env=env, cwd=workdir)
    except subprocess.TimeoutExpired:
        return Outcome(index, item.kind, "subprocess run", -1, f"FAIL: no answer in {_TIME_LIMIT} s",
                       time.perf_counter() - start)
    err = proc.stderr.decode("utf-8", "replace")
    lines = err.strip().splitlines()
    if log.exists():
        verdict = f"FAIL: Spark started for a plan refused without it: {' | '.join(lines)[:300]}"
    elif proc.returncode != 2 or len(lines) != 1:
        verdict = f"FAIL: exit {proc.returncode} with {len(lines)} stderr lines: {' | '.join(lines)[:300]}"
    else:
        verdict = "exit 2"
    return Outcome(index, item.kind, "subprocess run", proc.returncode, verdict, time.perf_counter() - start, err[-500:])


def table_checks(index: int, item: Input, workdir: Path, budget: Counter) -> list[Outcome]:
    """The ``run --tables`` checks of ``casts`` (on Spark) and ``quiet`` (a subprocess) inputs, while
    ``budget["spark"]`` / ``budget["subprocess"]`` last."""
    if isinstance(item, TableInput) and item.kind == "casts" and budget["spark"] > 0:
        budget["spark"] -= 1
        return [run_casts_on_spark(index, item, workdir)]
    if isinstance(item, TableInput) and item.kind == "quiet" and budget["subprocess"] > 0:
        budget["subprocess"] -= 1
        return [run_quiet_subprocess(index, item, workdir)]
    return []


def fuzz(inputs: int = 2000, seed: int = 14, spark: int = 0, subprocesses: int = 0, only: int | None = None,
         log=print) -> list[Outcome]:
    """Generate and check ``inputs`` hostile inputs; ``spark``/``subprocesses``: how many of them also go
    through ``run`` on Spark / a fresh interpreter (spread evenly over the inputs)."""
    items = generate(seed, inputs)
    outcomes: list[Outcome] = []
    spark_every = max(1, inputs // spark) if spark else 0
    sub_every = max(1, inputs // subprocesses) if subprocesses else 0
    own = Counter(spark=spark, subprocess=subprocesses)  # budget of the escapes/outputs checks
    budget = Counter(spark=spark, subprocess=subprocesses)  # casts on Spark, quiet in subprocesses (table_checks)
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        workdir = Path(tmp)
        for i, item in enumerate(items):
            if only is not None and i != only:
                continue
            command = list(COMMANDS[(i // 8) % len(COMMANDS)])
            outcomes.append(run_in_process(i, item, command, workdir))
            outcomes.extend(security_checks(i, item, workdir, own))
            if sub_every and i % sub_every == 0:
                outcomes.append(run_subprocess(i, item, command, workdir))
            if spark_every and i % spark_every == spark_every // 2 and item.kind in ("names", "literal", "dag", "files"):
                outcomes.append(run_on_spark(i, item, workdir))
            outcomes.extend(table_checks(i, item, workdir, budget))
            if (i + 1) % 250 == 0:
                failed = sum(o.verdict.startswith("FAIL") for o in outcomes)
                log(f"hostile: {i + 1}/{len(items)} inputs, {failed} failures")
    return outcomes


def summary(outcomes: list[Outcome], seconds: float) -> str:
    by = Counter((o.kind, o.verdict if not o.verdict.startswith("FAIL") else "FAIL") for o in outcomes)
    kinds = sorted({o.kind for o in outcomes})
    lines = [f"{'kind':<8} {'answer':>7} {'exit 2':>7} {'exit 3':>7} {'FAIL':>5}"]
    for k in kinds:
        lines.append(f"{k:<8} {by[(k, 'answer')]:>7} {by[(k, 'exit 2')]:>7} {by[(k, 'exit 3')]:>7} {by[(k, 'FAIL')]:>5}")
    modes = Counter(o.command.split()[0] for o in outcomes)
    slowest = max(outcomes, key=lambda o: o.seconds) if outcomes else None
    lines.append(f"{len(outcomes)} checks ({', '.join(f'{n} {m}' for m, n in sorted(modes.items()))}) in {seconds:.0f} s"
                 + (f"; slowest {slowest.seconds:.1f} s (input {slowest.index}, {slowest.kind}, {slowest.command})"
                    if slowest else ""))
    for o in outcomes:
        if o.verdict.startswith("FAIL"):
            lines.append(f"input {o.index} ({o.kind}, {o.command}): {o.verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m testing.hostile", description=__doc__.split("\n\n")[0])
    p.add_argument("--inputs", type=int, default=2000, help="hostile inputs to generate (default 2000)")
    p.add_argument("--seed", type=int, default=14)
    p.add_argument("--spark", type=int, default=0, metavar="N", help="also run N of them on Spark (run)")
    p.add_argument("--subprocess", type=int, default=0, metavar="N", help="also run N of them in a fresh interpreter")
    p.add_argument("--only", type=int, default=None, metavar="I", help="only input number I (to replay a failure)")
    args = p.parse_args(argv)
    import logging

    logging.getLogger("py4j").setLevel(logging.ERROR)
    start = time.perf_counter()
    outcomes = fuzz(args.inputs, args.seed, args.spark, args.subprocess, args.only,
                    log=lambda m: print(m, file=sys.stderr))
    print(summary(outcomes, time.perf_counter() - start))
    return 1 if any(o.verdict.startswith("FAIL") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
