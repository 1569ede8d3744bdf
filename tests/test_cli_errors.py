"""Bad input never gives a traceback: exit 2 and one line on stderr naming the problem and where it is."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from optimizer.cli import main
from workloads.corpus import corpus_root

CORPUS = corpus_root()
Q3 = CORPUS / "substrait_consumer/snapshots/producer/integration/tpch/q03-isthmus_plan.json"

GOOD = {
    "extensionUrns": [{"extensionUrnAnchor": 1, "urn": "extension:io.substrait:functions_comparison"}],
    "extensions": [{"extensionFunction": {"extensionUrnReference": 1, "functionAnchor": 1, "name": "gt:i64_i64"}}],
    "relations": [{"root": {"input": {"filter": {
        "input": {"read": {"namedTable": {"names": ["t"]},
                           "baseSchema": {"names": ["a", "b"], "struct": {"types": [{"i64": {"nullability": "NULLABILITY_NULLABLE"}}, {"i64": {"nullability": "NULLABILITY_NULLABLE"}}]}}}},
        "condition": {"scalarFunction": {"functionReference": 1, "outputType": {"bool": {"nullability": "NULLABILITY_NULLABLE"}},
                                         "arguments": [{"value": {"selection": {"directReference": {"structField": {"field": 1}}, "rootReference": {}}}},
                                                       {"value": {"literal": {"i64": "3"}}}]}}}}, "names": ["a", "b"]}}],
}


def _variant(mutate) -> str:
    doc = json.loads(json.dumps(GOOD))
    mutate(doc)
    return json.dumps(doc)


def _filter(doc):
    return doc["relations"][0]["root"]["input"]["filter"]


def _set(path, value):
    def mutate(doc):
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return mutate


def _del(path):
    def mutate(doc):
        target = doc
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return mutate


ROOT = ["relations", 0, "root"]
FILTER = [*ROOT, "input", "filter"]
COND = [*FILTER, "condition", "scalarFunction"]

BAD_INPUTS: dict[str, tuple[bytes | str, str]] = {
    "empty file": (b"", "empty"),
    "only whitespace": (b"  \n\t ", "empty"),
    "invalid JSON": ('{"relations": [', "invalid JSON"),
    "JSON array": ("[1, 2]", "JSON object"),
    "JSON that is not a plan": ('{"hello": "world"}', "unknown field 'hello'"),
    "unknown field deep inside": (_variant(_set([*FILTER, "bogus"], 1)), "relations[0].root.input.filter"),
    "wrong value type": (_variant(_set([*COND, "functionReference"], "abc")), "not a valid Substrait plan"),
    "integer out of range, named with its indices": (
        _variant(_set([*COND, "arguments", 0, "value", "selection", "directReference", "structField", "field"],
                      2**31)),
        "relations[0].root.input.filter.condition.scalar_function.arguments[0].value.selection.direct_reference"
        ".struct_field.field: not a valid Substrait plan: Value out of range: 2147483648"),
    "unknown enum value": ('{"relations": [{"root": {"input": {"set": {"op": "SET_OP_BOGUS", "inputs": []}}}}]}', "SET_OP_BOGUS"),
    "no relations": ('{"version": {"minorNumber": 53}}', "no relations"),
    "root with no input": ('{"relations": [{"root": {"names": ["a"]}}]}', "no input"),
    "empty relation": ('{"relations": [{"root": {"input": {}}}]}', "no type"),
    "relation with no input": (_variant(_del([*FILTER, "input"])), "relations[0].root.input.filter"),
    "field index out of range": (_variant(_set([*COND, "arguments", 0, "value", "selection", "directReference", "structField", "field"], 7)),
                                 "field 7"),
    "unknown function anchor": (_variant(_set([*COND, "functionReference"], 9)), "anchor 9"),
    "reference to a missing subtree": ('{"relations": [{"root": {"input": {"reference": {"subtreeOrdinal": 3}}}}]}', "subtree 3"),
    "cycle of references": ('{"relations": [{"rel": {"filter": {"input": {"reference": {"subtreeOrdinal": 1}}}}},'
                            ' {"rel": {"filter": {"input": {"reference": {"subtreeOrdinal": 0}}}}},'
                            ' {"root": {"input": {"reference": {"subtreeOrdinal": 0}}}}]}', "cycle"),
    "extension URI reference undeclared": ('{"extensions": [{"extensionFunction": {"extensionUriReference": 5, "functionAnchor": 1, "name": "x"}}],'
                                           ' "relations": [{"root": {"input": {"reference": {"subtreeOrdinal": 0}}}}]}', "extension_uri_reference 5"),
    "undeclared URN anchor": (_variant(_set(["extensions", 0, "extensionFunction", "extensionUrnReference"], 42)), "URN anchor 42"),
    "non-boolean filter condition": (_variant(_set([*FILTER, "condition"], {"literal": {"i64": "1"}})), "condition"),
    "random binary": (bytes(range(200, 256)) * 3, "protobuf"),
    "not UTF-8 JSON": (b'{"relations": "\xff\xfe"}', "UTF-8"),
    # Python's int() refuses past 4300 digits with a ValueError, which was an internal error (exit 3)
    "a number of 4301 digits": ('{"x": ' + "1" * 4301 + "}", "a JSON number of 4301 digits"),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
@pytest.mark.parametrize("command", ["convert", "explain"])
def test_bad_input_exit_2_one_line(name, command, tmp_path, capsys):
    data, expected = BAD_INPUTS[name]
    path = tmp_path / "plan.in"
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    code = main([command, str(path)])
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert code == 2, f"{name}: exit {code}, stderr {err!r}"
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    assert expected.lower() in err.lower(), f"{name}: {err!r} does not mention {expected!r}"


def test_truncated_protobuf(tmp_path, capsys):
    from optimizer.plan_io import dump_plan, load_plan

    data = dump_plan(load_plan(Q3), "binpb")
    path = tmp_path / "q3.binpb"
    path.write_bytes(data[: len(data) // 2])
    assert main(["convert", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and ("protobuf" in err or "unknown field" in err or "truncated" in err)


def test_missing_file_and_usage(tmp_path, capsys):
    assert main(["convert", str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["convert"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert main(["frobnicate"]) == 2
    assert main(["convert", str(Q3), "--format", "yaml"]) == 2


def test_convert_round_trip_via_cli(tmp_path, capsys):
    out = tmp_path / "q3.binpb"
    assert main(["convert", str(Q3), "-o", str(out)]) == 0
    assert main(["convert", str(out), "--format", "json", "-o", str(tmp_path / "q3.json")]) == 0
    from optimizer.plan_io import load_plan

    assert load_plan(tmp_path / "q3.json") == load_plan(Q3)


def test_explain_shows_a_tree(capsys):
    assert main(["explain", str(Q3)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Root(names=[")
    assert "|-+ Fetch(" in out and "Read(CUSTOMER" in out.upper().replace("READ(CUSTOMER", "Read(CUSTOMER")


def test_real_entry_point_stdin_and_exit_codes():
    """The installed console script: '-' is stdin, errors are one line, help works."""
    exe = [sys.executable, "-m", "optimizer"]
    ok = subprocess.run([*exe, "convert", "-", "--format", "binpb"], input=Q3.read_bytes(), capture_output=True)
    assert ok.returncode == 0 and ok.stdout[:1] != b"{"
    back = subprocess.run([*exe, "explain", "-"], input=ok.stdout, capture_output=True)
    assert back.returncode == 0 and b"Root(" in back.stdout
    bad = subprocess.run([*exe, "explain", "-"], input=b"{not json", capture_output=True)
    assert bad.returncode == 2 and len(bad.stderr.decode().strip().splitlines()) == 1
    for cmd in (["--help"], ["convert", "--help"], ["explain", "--help"]):
        assert subprocess.run([*exe, *cmd], capture_output=True).returncode == 0


def test_dates_past_pythons_range_are_shown_not_crashed_on():
    """Substrait's dates and timestamps reach past the year 9999 (Spark computes them); Python's do not.
    explain writes such a literal as its count, run's table as Arrow prints the value."""
    import datetime

    import pyarrow as pa
    from substrait.proto import Expression

    from optimizer.cli.run import format_rows
    from optimizer.explain.expr_format import format_literal

    assert format_literal(Expression.Literal(date=3_000_000)) == "date(3000000 days)"
    assert format_literal(Expression.Literal(date=-719_163)) == "date(-719163 days)"
    stamp = Expression.Literal(precision_timestamp=Expression.Literal.PrecisionTimestamp(precision=0, value=2**62))
    assert format_literal(stamp).startswith("timestamp(4611686018427387904 / 10^0 s)")
    assert format_literal(Expression.Literal(date=0)) == "date '1970-01-01'"
    table = pa.table({"a": [1, 2], "d": pa.array([3_000_000, 0], pa.date32())})
    text = format_rows(table)
    assert "10183-09-21" in text and "1970-01-01" in text
    assert datetime.date(1970, 1, 1).isoformat() in format_rows(table.slice(1))
    from optimizer.cli.run import _json_rows  # --format json too (it was "internal error: OverflowError")

    assert json.loads(_json_rows(table)) == [{"a": 1, "d": "10183-09-21"}, {"a": 2, "d": "1970-01-01"}]


def test_output_that_cannot_be_written_is_one_line(tmp_path):
    """A full device, a closed stdout, an empty -o or --out name: one line naming it, never an internal
    error (exit 3 for the failed write, 2 for the names)."""
    import os

    from testing.builder import Builder, read

    exe = [sys.executable, "-m", "optimizer"]
    plan = tmp_path / "p.binpb"
    plan.write_bytes(Builder().plan(read("t", [("a", "i64")]), ["a"]).SerializeToString())
    cases = [([*exe, "convert", str(plan), "-o", ""], 2, "the output file name is empty"),
             ([*exe, "run", str(plan), "--engine", "duckdb", "--tables", str(tmp_path), "--out", ""], 2,
              "--out is empty")]
    for command, code, words in cases:
        done = subprocess.run(command, capture_output=True, text=True)
        assert done.returncode == code and words in done.stderr, (command, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    if os.path.exists("/dev/full"):  # stdout on a full device
        with open("/dev/full", "w") as full:
            done = subprocess.run([*exe, "convert", str(plan)], stdout=full, stderr=subprocess.PIPE, text=True)
        assert done.returncode == 3, done.stderr
        assert done.stderr.strip() == "substrait-opt: error: the output: cannot write: No space left on device"
    shut = subprocess.run(["bash", "-c", f"{sys.executable} -m optimizer explain {plan} >&-"], capture_output=True,
                          text=True)
    assert shut.returncode == 2 and shut.stderr.strip() == "substrait-opt: error: standard output is closed", shut.stderr


def test_run_and_diff_refuse_a_plan_of_several_roots(tmp_path, capsys):
    """run and diff answer one root; a plan of two was answered by its first alone, without a word."""
    import json

    from optimizer.cli import main

    root = {"root": {"names": ["a"], "input": {"read": {
        "baseSchema": {"names": ["a"], "struct": {"types": [{"i64": {"nullability": "NULLABILITY_REQUIRED"}}]}},
        "virtualTable": {"expressions": [{"fields": [{"literal": {"i64": "1"}}]}]}}}}}
    path = tmp_path / "two.json"
    path.write_text(json.dumps({"version": {"minorNumber": 75}, "relations": [root, root]}))
    for argv in (["diff", str(path), "--out", str(tmp_path / "d")], ["run", str(path), "--engine", "duckdb"]):
        assert main(argv) == 3
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "the plan has 2 roots (relations[0], relations[1])" in err[0], err


def test_no_command_is_one_line_exit_2(capsys):
    from optimizer.cli import main

    assert main([]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["substrait-opt: error: a command is required: plan, convert, explain, optimize, run or diff "
                   "(substrait-opt --help)"]


def test_explain_prints_each_shared_relation_once(tmp_path, capsys):
    """A chain of relations each reading the last through a ReferenceRel (legal, and what a plan of many
    CTEs is): each is printed once, under its Relation[i], and named where read; the tree of the chain was
    printed again under every entry (n^2 / 2 lines: 19 s and then Python's recursion limit at 1,000)."""
    n = 1000
    read = {"read": {"baseSchema": {"names": ["a"], "struct": {"types": [{"i64": {"nullability": "NULLABILITY_NULLABLE"}}],
                                                          "nullability": "NULLABILITY_REQUIRED"}},
                     "virtualTable": {"expressions": [{"fields": [{"literal": {"i64": "1"}}]}]}}}
    true = {"literal": {"boolean": True}}
    relations = [{"rel": read}]
    relations += [{"rel": {"filter": {"input": {"reference": {"subtreeOrdinal": i - 1}}, "condition": true}}}
                  for i in range(1, n)]
    relations.append({"root": {"input": {"reference": {"subtreeOrdinal": n - 1}}, "names": ["a"]}})
    path = tmp_path / "chain.json"
    path.write_text(json.dumps({"version": {"minorNumber": 54}, "relations": relations}))
    assert main(["explain", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 * n + 1
    assert lines[:5] == ["Relation[0]", "|-+ #1 Read(values=1 rows) -> [a: i64?]",
                         "Relation[1]", "|-+ #2 Filter(true) -> [a: i64?]", "  |-> shared #1 (above)"]
    assert lines[-2:] == ["Root(names=[a])", f"|-> shared #{n} (above)"]
