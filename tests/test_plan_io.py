"""Plan loading: every corpus plan loads, and the meaning of every upgraded field survives."""

from __future__ import annotations

import copy
import glob
import json
from pathlib import Path

import protobuf_wire as wire
import pytest
from google.protobuf import json_format
from substrait.proto import Expression, Plan

from optimizer.errors import PlanError
from optimizer.load.upgrade import upgrade_json
from optimizer.plan_io import dump_plan, load_plan, save_plan
from workloads.corpus import corpus_root

CORPUS = corpus_root()
PLAN_FILES = sorted(glob.glob(str(CORPUS / "substrait_consumer" / "snapshots" / "producer" / "**" / "*_plan.json"), recursive=True))


def test_corpus_is_there():
    assert len(PLAN_FILES) >= 600, f"corpus not found at {CORPUS}"


def _walk(obj, key, out, parent_key=None):
    """Every value stored under ``key`` in a JSON document, in document order."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == key:
                out.append(v)
            _walk(v, key, out, k)
    elif isinstance(obj, list):
        for v in obj:
            _walk(v, key, out, parent_key)
    return out


def _expr(doc: dict) -> Expression:
    """An old-encoding expression as it must read after the upgrade."""
    upgraded = upgrade_json(copy.deepcopy(doc), Expression.DESCRIPTOR)
    return json_format.ParseDict(upgraded, Expression())


def _messages(plan: Plan, full_name: str) -> list:
    """Every sub-message of a given type in ``plan``, in document (field) order, like _walk's order."""
    out = []

    def visit(msg):
        if msg.DESCRIPTOR.full_name == full_name:
            out.append(msg)
        # Document order of the JSON writer: fields in descriptor (declaration) order.
        for field in msg.DESCRIPTOR.fields:
            if field.type != field.TYPE_MESSAGE or field.message_type.GetOptions().map_entry:
                continue
            if field.label == field.LABEL_REPEATED:
                for item in getattr(msg, field.name):
                    visit(item)
            elif msg.HasField(field.name):
                visit(getattr(msg, field.name))

    visit(plan)
    return out


def _fetches_in_json(doc) -> list[dict]:
    return [f for f in _walk(doc, "fetch", []) if isinstance(f, dict)]


@pytest.mark.parametrize("path", PLAN_FILES, ids=lambda p: p.split("producer/")[-1])
def test_corpus_plan_loads_and_keeps_its_meaning(path):
    raw = json.loads(Path(path).read_text())
    plan = load_plan(path)
    # Limits and offsets: every old FetchRel count/offset is a literal of the same value.
    old_fetches = _fetches_in_json(raw)
    new_fetches = _messages(plan, "substrait.FetchRel")
    assert len(old_fetches) == len(new_fetches)
    for old, new in zip(old_fetches, new_fetches, strict=True):
        if "count" in old and int(old["count"]) != -1:
            assert new.count_expr.literal.i64 == int(old["count"])
        elif "count" in old:
            assert not new.HasField("count_expr")
        if "offset" in old:
            assert new.offset_expr.literal.i64 == int(old["offset"])
    # Group keys: each grouping set names the same expressions as before, in the same order.
    old_aggs = [a for a in _walk(raw, "aggregate", []) if isinstance(a, dict)]
    new_aggs = _messages(plan, "substrait.AggregateRel")
    assert len(old_aggs) == len(new_aggs)
    for old, new in zip(old_aggs, new_aggs, strict=True):
        assert len(old.get("groupings", [])) == len(new.groupings)
        for og, ng in zip(old.get("groupings", []), new.groupings, strict=True):
            if "groupingExpressions" in og:
                got = [new.grouping_expressions[i] for i in ng.expression_references]
                assert got == [_expr(e) for e in og["groupingExpressions"]]
        assert len(old.get("measures", [])) == len(new.measures)
    # VALUES rows: same rows, same literals.
    old_tables = [v for v in _walk(raw, "virtualTable", []) if isinstance(v, dict)]
    new_tables = _messages(plan, "substrait.ReadRel.VirtualTable")
    assert len(old_tables) == len(new_tables)
    for old, new in zip(old_tables, new_tables, strict=True):
        rows = old.get("values", old.get("expressions", []))
        assert len(rows) == len(new.expressions)
        for orow, nrow in zip(rows, new.expressions, strict=True):
            assert len(orow.get("fields", [])) == len(nrow.fields)
    # Function arguments: every call keeps its argument count.
    for key, full in (("scalarFunction", "substrait.Expression.ScalarFunction"), ("measure", "substrait.AggregateFunction")):
        old_calls = [c for c in _walk(raw, key, []) if isinstance(c, dict)]
        new_calls = _messages(plan, full)
        counts_old = sorted(len(c.get("args", c.get("arguments", []))) for c in old_calls)
        counts_new = sorted(len(c.arguments) for c in new_calls)
        assert counts_old == counts_new
    # Semi and anti joins are still semi and anti joins.
    old_types = [t for t in _walk(raw, "type", []) if isinstance(t, str) and t.startswith("JOIN_TYPE_")]
    renamed = {"JOIN_TYPE_SEMI": "JOIN_TYPE_LEFT_SEMI", "JOIN_TYPE_ANTI": "JOIN_TYPE_LEFT_ANTI"}
    new_types = [Plan.DESCRIPTOR.file.pool.FindEnumTypeByName("substrait.JoinRel.JoinType").values_by_number[j.type].name
                 for j in _messages(plan, "substrait.JoinRel")]
    assert sorted(renamed.get(t, t) for t in old_types) == sorted(new_types)
    # Every function the plan calls is declared and resolves to a name.
    from optimizer.load.functions import function_table

    table = function_table(plan)
    for call in _messages(plan, "substrait.Expression.ScalarFunction") + _messages(plan, "substrait.AggregateFunction"):
        assert table.get(call.function_reference).name


def test_old_uris_become_standard_urns():
    plan = load_plan(CORPUS / "substrait_consumer/snapshots/producer/integration/tpch/q01-isthmus_plan.json")
    assert {u.urn for u in plan.extension_urns} == {
        "extension:io.substrait:functions_aggregate_generic",
        "extension:io.substrait:functions_arithmetic_decimal",
        "extension:io.substrait:functions_datetime",
    }
    from optimizer.load.functions import function_table

    names = {f.declared_name: f.urn for f in function_table(plan)}
    assert names["sum:dec"] == "extension:io.substrait:functions_arithmetic_decimal"
    assert names["count:"] == "extension:io.substrait:functions_aggregate_generic"


def _old_binary_plan() -> bytes:
    """A binary plan in the old encoding, written field by field as an old producer would."""
    i64 = wire.field(7, wire.field(2, 1))  # Type.i64 {nullability: REQUIRED}
    base = wire.field(1, b"a") + wire.field(1, b"b") + wire.field(2, wire.field(1, i64) + wire.field(1, i64))  # NamedStruct
    literal = lambda v: wire.field(7, v)  # noqa: E731  Literal.i64
    row = lambda a, b: wire.field(1, literal(a)) + wire.field(1, literal(b))  # noqa: E731  old Struct {fields: Literal...}
    read = wire.field(2, base) + wire.field(5, wire.field(1, row(1, 10)) + wire.field(1, row(2, 20)) + wire.field(1, row(2, 30)))
    # Expression.selection(2) = FieldReference{direct_reference(1) = ReferenceSegment{struct_field(2){field(1)}}, root_reference(4)}
    field_ref = lambda i: wire.field(2, wire.field(1, wire.field(2, wire.field(1, i))) + wire.field(4, b""))  # noqa: E731
    # old Grouping: grouping_expressions = 1; measure: AggregateFunction with old args = 2
    grouping = wire.field(1, field_ref(0))
    measure = wire.field(1, wire.field(1, 1) + wire.field(2, field_ref(1)) + wire.field(5, i64))
    aggregate = wire.field(2, wire.field(1, read)) + wire.field(3, grouping) + wire.field(4, measure)
    fetch = wire.field(2, wire.field(4, aggregate)) + wire.field(3, 1) + wire.field(4, 5)  # old offset 1, count 5
    root = wire.field(1, wire.field(3, fetch)) + wire.field(2, b"a") + wire.field(2, b"s")
    uri = wire.field(1, wire.field(1, 7) + wire.field(2, b"https://github.com/substrait-io/substrait/blob/main/extensions/functions_arithmetic.yaml"))
    ext = wire.field(2, wire.field(3, wire.field(1, 7) + wire.field(2, 1) + wire.field(3, b"sum:i64")))
    return uri + ext + wire.field(3, wire.field(2, root))


def test_binary_old_fields_are_upgraded_not_dropped():
    plan = load_plan(_old_binary_plan())
    assert [u.urn for u in plan.extension_urns] == ["extension:io.substrait:functions_arithmetic"]
    fn = plan.extensions[0].extension_function
    assert fn.extension_urn_reference == plan.extension_urns[0].extension_urn_anchor and fn.name == "sum:i64"
    fetch = plan.relations[0].root.input.fetch
    assert fetch.offset_expr.literal.i64 == 1 and fetch.count_expr.literal.i64 == 5
    agg = fetch.input.aggregate
    assert len(agg.grouping_expressions) == 1 and list(agg.groupings[0].expression_references) == [0]
    assert agg.grouping_expressions[0].selection.direct_reference.struct_field.field == 0
    assert agg.measures[0].measure.arguments[0].value.selection.direct_reference.struct_field.field == 1
    rows = agg.input.read.virtual_table.expressions
    assert [[f.literal.i64 for f in r.fields] for r in rows] == [[1, 10], [2, 20], [2, 30]]
    # And it is now a current plan: binary written back has no unknown fields and reads the same.
    assert Plan.FromString(plan.SerializeToString()) == plan


@pytest.mark.parametrize("uri", [b"\x08" + bytes([0xFF] * 10 + [0x01]) + wire.field(2, b"https://example.com/f.yaml"),
                                 b"\x08\xff"], ids=["eleven_bytes", "cut_off"])
def test_a_malformed_varint_in_an_old_field_is_a_plan_error(uri):
    """A varint in an old field's bytes that is longer than protobuf's ten bytes, or cut off, is the error
    a malformed varint in a known field gives (an 11-byte anchor was read as a number of 71 bits: exit 3,
    internal error)."""
    with pytest.raises(PlanError, match=r"not a Substrait plan: truncated or malformed protobuf \(bad varint\)"):
        load_plan(wire.field(1, uri) + _old_binary_plan())


def test_binary_and_json_of_a_plan_are_the_same_plan():
    path = CORPUS / "substrait_consumer/snapshots/producer/integration/tpch/q09-isthmus_plan.json"
    plan = load_plan(path)
    assert load_plan(dump_plan(plan, "binpb")) == plan
    assert load_plan(dump_plan(plan, "json")) == plan


def test_sources(tmp_path):
    path = CORPUS / "substrait_consumer/snapshots/producer/integration/tpch/q03-isthmus_plan.json"
    plan = load_plan(path)
    assert load_plan(str(path)) == plan
    assert load_plan(path.read_bytes()) == plan
    assert load_plan(path.read_text()) == plan
    with open(path, "rb") as f:
        assert load_plan(f) == plan
    save_plan(plan, tmp_path / "q.binpb")
    assert load_plan(tmp_path / "q.binpb") == plan
    save_plan(plan, tmp_path / "q.json")
    assert (tmp_path / "q.json").read_text().lstrip().startswith("{")
    save_plan(plan, tmp_path / "q.txt", format="text")
    assert "Read(LINEITEM" in (tmp_path / "q.txt").read_text() or "Read(" in (tmp_path / "q.txt").read_text()


def test_grouping_written_in_both_encodings_is_read_once_and_checked():
    """DataFusion writes a grouping's keys in the old and the new encoding at once."""
    from optimizer.errors import PlanError

    ref = {"selection": {"directReference": {"structField": {"field": 0}}, "rootReference": {}}}
    other = {"selection": {"directReference": {"structField": {"field": 1}}, "rootReference": {}}}
    read = {"read": {"namedTable": {"names": ["t"]},
                     "baseSchema": {"names": ["a", "b"], "struct": {"types": [{"i64": {}}, {"i64": {}}]}}}}

    def plan(old):
        return json.dumps({"relations": [{"root": {"input": {"aggregate": {
            "input": read, "groupingExpressions": [ref],
            "groupings": [{"expressionReferences": [0], "groupingExpressions": [old]}]}}, "names": ["a"]}}]})

    agg = load_plan(plan(ref)).relations[0].root.input.aggregate
    assert list(agg.groupings[0].expression_references) == [0] and len(agg.grouping_expressions) == 1
    with pytest.raises(PlanError, match="disagree"):
        load_plan(plan(other))


def _deep_filter_chain(depth: int) -> dict:
    """A plan of ``depth`` FilterRels over a virtual table: nested far deeper than protobuf's default 100."""
    rel: dict = {"read": {"baseSchema": {"names": ["a"], "struct": {"types": [{"i64": {"nullability": "NULLABILITY_REQUIRED"}}],
                                                                      "nullability": "NULLABILITY_REQUIRED"}},
                          "virtualTable": {"expressions": [{"fields": [{"literal": {"i64": "1"}}]}]}}}
    for _ in range(depth):
        rel = {"filter": {"input": rel, "condition": {"literal": {"boolean": True}}}}
    return {"version": {"minorNumber": 75}, "relations": [{"root": {"input": rel, "names": ["a"]}}]}


def test_plans_nested_deeper_than_protobufs_default_limit_load_copy_and_optimize():
    from optimizer.dag import from_dag, to_dag
    from optimizer.driver import optimize

    plan = load_plan(json.dumps(_deep_filter_chain(150)))
    binary = dump_plan(plan, "binpb")
    assert load_plan(binary) == plan
    assert from_dag(to_dag(plan)) == plan
    optimized = optimize(plan)
    assert load_plan(dump_plan(optimized, "binpb")) == optimized


def test_fp32_extremes_survive_json():
    """protobuf writes FLT_MAX as 3.4028235e+38 and then refuses to read it back; we read it as FLT_MAX."""
    flt_max = 3.4028234663852886e38
    doc = _deep_filter_chain(1)
    doc["relations"][0]["root"]["input"]["filter"]["condition"] = {"literal": {"fp32": 3.4028235e38}}
    plan = load_plan(json.dumps(doc))
    assert plan.relations[0].root.input.filter.condition.literal.fp32 == flt_max
    for value in (flt_max, -flt_max):
        plan.relations[0].root.input.filter.condition.literal.fp32 = value
        assert load_plan(dump_plan(plan, "json")) == plan
    doc["relations"][0]["root"]["input"]["filter"]["condition"] = {"literal": {"fp32": 1e39}}
    with pytest.raises(PlanError, match="Float value too large"):
        load_plan(json.dumps(doc))


def test_a_plan_too_deep_for_json_is_named_and_binary_still_writes(tmp_path):
    """protobuf's JSON writer recurses several frames per message: 300 nested filters (600 messages) do
    not fit Python's recursion limit, and the error says so and where to go (binary)."""
    from substrait.proto import Rel

    from optimizer.errors import PlanError
    from optimizer.load.protobuf_depth import deep_messages
    from optimizer.plan_io import dump_plan

    with deep_messages():
        rel = Rel()
        rel.read.base_schema.names.append("a")
        rel.read.base_schema.struct.types.add().i64.nullability = 1
        rel.read.virtual_table.SetInParent()
        for _ in range(300):
            outer = Rel()
            outer.filter.input.CopyFrom(rel)
            outer.filter.condition.CopyFrom(Expression(literal=Expression.Literal(boolean=True)))
            rel = outer
        plan = Plan()
        plan.relations.add().root.input.CopyFrom(rel)
        plan.relations[0].root.names.append("a")
        with pytest.raises(PlanError, match="too deeply to write as JSON .*: write it as binpb"):
            dump_plan(plan, "json")
        assert Plan.FromString(dump_plan(plan, "binpb")) == plan


def test_json_written_is_json_the_tool_reads_back():
    """Indented JSON of a wide plan is three times its binary size: past the input limit, the JSON is
    written without the indentation (a union of 400 references to a 100,000-column read, 5.8 MB, came out
    as 17 MB, which load refused). A plan whose JSON is past the limit even so is written: it is read back
    under a raised limit, as the plan it came from was."""
    from optimizer.load.limits import Limits, applied

    columns = 200
    schema = {"names": [f"c{i}" for i in range(columns)], "struct": {"types": [{"i64": {}}] * columns}}
    plan = load_plan(json.dumps({"relations": [{"root": {"names": schema["names"], "input": {
        "read": {"baseSchema": schema, "namedTable": {"names": ["t"]}}}}}]}))
    pretty, compact = dump_plan(plan, "json"), json.dumps(json_format.MessageToDict(plan), separators=(",", ":"))
    assert len(pretty) > 2 * len(compact)
    with applied(Limits(input_bytes=len(compact) + 100)):
        written = dump_plan(plan, "json")
        assert written.count(b"\n") == 1 and load_plan(written) == plan
    with applied(Limits(input_bytes=len(compact) - 100)):
        assert load_plan(dump_plan(plan, "json"), limits=Limits(input_bytes=len(compact) + 100)) == plan
