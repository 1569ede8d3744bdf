"""Untrusted plans, second round (issue 42, items 1, 2, 3, 5): locations judged as Spark resolves them,
``-o`` onto FIFOs and devices, validated capabilities and statistics files.

See docs/security.md. The signal of a file read outside ``--tables`` is its 12,345 rows.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import urllib.parse

import pytest

from optimizer.cli import main
from testing.hostile import write_escape_layout

_REQ = {"nullability": "NULLABILITY_REQUIRED"}
_SECRET_ROWS = 12345
_FORMATS = {
    "parquet": ("secret.parquet", {"parquet": {}}),
    "orc": ("secret.orc", {"orc": {}}),
    "text": ("secret.csv", {"text": {"fieldDelimiter": ",", "maxLineSize": "1000", "quote": "\"",
                                     "escape": "\\"}}),
}


def _files_plan(item: dict) -> str:
    read = {"read": {"baseSchema": {"names": ["a"], "struct": {"types": [{"i64": _REQ}]}},
                     "localFiles": {"items": [item]}}}
    return json.dumps({"relations": [{"root": {"input": read, "names": ["a"]}}]})


def _escapes(tables, fmt: str) -> list[dict]:
    """Locations inside ``tables`` by their glob base or their links that Spark resolves to the secret
    beside it: a wildcard then ``..`` (items 1) and a link then ``..`` (item 3), in every field and in
    plain and ``file://`` spelling."""
    name = _FORMATS[fmt][0]
    t = str(tables)
    texts = {
        "uriFile": [f"{t}/?/../../{name}", f"{t}/latest/../../{name}", f"{t}/{{x,../sub/..}}/{name}"],
        "uriPath": [f"{t}/*/../../{name}", f"{t}/latest/../../{name}"],
        "uriPathGlob": [f"{t}/*/../../{name}", f"{t}/latest/../../{name}", f"{t}/s[u]b/../../{name}"],
        "uriFolder": [f"{t}/?/../../{fmt}dir", f"{t}/latest/../../{fmt}dir"],
    }
    out = []
    for field, locations in texts.items():
        for location in locations:
            for spelled in (location, "file://" + urllib.parse.quote(location)):
                out.append({field: spelled, **_FORMATS[fmt][1]})
    return out


@pytest.mark.spark
@pytest.mark.parametrize("fmt", sorted(_FORMATS))
def test_item1_3_wildcard_or_link_then_dotdot_stays_inside(spark, tmp_path, capsys, fmt):
    tables = write_escape_layout(tmp_path, _SECRET_ROWS)
    plan = tmp_path / "p.json"
    for item in _escapes(tables, fmt):
        location = urllib.parse.unquote(next(iter(item.values())).removeprefix("file://"))
        plan.write_text(_files_plan(item))
        capsys.readouterr()
        code = main(["run", str(plan), "--tables", str(tables)])
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert str(_SECRET_ROWS) not in out + err, item  # the outside file was not read
        assert code == 2 and len(lines) == 1 and "is outside the table roots" in lines[0], (item, err)
        assert location in lines[0], lines
        # The statistics never open it either (explain would print its row count).
        if fmt == "parquet":
            assert main(["explain", str(plan), "--tables", str(tables), "--format", "json"]) == 0
            assert str(_SECRET_ROWS) not in capsys.readouterr().out, item


@pytest.mark.spark
def test_item1_dotdot_that_stays_inside_is_read(spark, tmp_path, capsys):
    """``..`` is resolved, not refused: a wildcard or a link then ``..`` that lands inside reads its file."""
    tables = write_escape_layout(tmp_path, _SECRET_ROWS)
    plan = tmp_path / "p.json"
    for location in (f"{tables}/?/../t.parquet", f"file://{tables}/latest/../../tables/t.parquet"):
        plan.write_text(_files_plan({"uriFile": location, "parquet": {}}))
        capsys.readouterr()
        assert main(["run", str(plan), "--tables", str(tables)]) == 0, location
        assert "3 rows" in capsys.readouterr().out


@pytest.mark.spark
def test_item3_links_inside_read_folders_and_escaped_dotdot_are_refused(spark, tmp_path, capsys):
    """A folder the plan reads, or a glob's match, that holds a link to outside the roots is outside
    (Spark lists a folder through its links); ``\\..`` is ``..`` to Hadoop's glob (it unescapes a
    literal segment, then resolves it)."""
    tables = write_escape_layout(tmp_path, _SECRET_ROWS)
    (tables / "sub" / "evil.parquet").symlink_to(tmp_path / "secret.parquet")
    (tables / "w").mkdir()
    (tables / "w" / "evil").symlink_to(tmp_path / "parquetdir")
    t = str(tables)
    plan = tmp_path / "p.json"
    for item in ({"uriFolder": f"{t}/sub"}, {"uriPathGlob": f"{t}/s*/*.parquet"}, {"uriPathGlob": f"{t}/w/*"},
                 {"uriPath": f"{t}/sub/\\../\\../secret.parquet"},
                 {"uriFile": f"{t}/s?b/\\.\\./\\.\\./secret.parquet"}):
        for spelled in (item, {k: "file://" + urllib.parse.quote(v) for k, v in item.items()}):
            plan.write_text(_files_plan({**spelled, "parquet": {}}))
            capsys.readouterr()
            code = main(["run", str(plan), "--tables", t])
            out, err = capsys.readouterr()
            assert str(_SECRET_ROWS) not in out + err, spelled
            assert code == 2 and len(err.strip().splitlines()) == 1 and "is outside the table roots" in err, err
            assert main(["explain", str(plan), "--tables", t, "--format", "json"]) == 0
            assert str(_SECRET_ROWS) not in capsys.readouterr().out, spelled


def test_item1_3_remote_uris_are_judged_as_text():
    from optimizer.paths import FileAccess

    remote = FileAccess.under(["s3a://b/t"])
    assert not remote.allows("s3a://b/t/*/../../secret.parquet")
    assert not remote.allows("s3a://b/t/{x,../..}/secret.parquet")
    assert not remote.allows("s3a://b/t/x/\\../\\../secret.parquet")
    # Hadoop's Path has no query or fragment: the text after '?' or '#' is path, and its '..' counts
    assert not remote.allows("s3a://b/t/?/../../secret.parquet")
    assert not remote.allows("s3a://b/t/#/../../secret.parquet")
    assert not remote.allows("s3a://b/t/%2e%2e/secret.parquet")
    # a plain path is decoded by some engines' URL parsers too
    local = FileAccess.under(["/srv/t"])
    assert not local.allows("/srv/t/%2e%2e/secret.parquet") and local.allows("/srv/t/a%20b.parquet")
    assert remote.allows("s3a://b/t/*/x.parquet") and remote.allows("s3a://b/t/{x,y}/z.parquet")
    # braces that multiply past the limit are refused, not expanded
    assert remote.refusal("s3a://b/t/" + "{a,b}" * 12) is not None


# -- 2. -o onto a FIFO or a device ------------------------------------------------------------------


def _optimize(plan, out, stdout=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optimizer", "optimize", str(plan), "-o", str(out), "--format", "json"],
                          capture_output=stdout is None, stdout=stdout, timeout=120)


def _tiny_plan(tmp_path):
    plan = tmp_path / "p.json"
    read = {"read": {"baseSchema": {"names": ["a"], "struct": {"types": [{"i64": _REQ}]}},
                     "virtualTable": {"values": [{"fields": [{"i64": "1"}]}]}}}
    plan.write_text(json.dumps({"relations": [{"root": {"input": read, "names": ["a"]}}]}))
    return plan


def test_item2_output_onto_a_fifo_or_device_is_not_replaced(tmp_path):
    plan = _tiny_plan(tmp_path)
    # A FIFO is written in place, as a stream: a reader gets the plan, the FIFO stays a FIFO.
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader: the writer's open does not wait
    try:
        proc = _optimize(plan, fifo)
        got = os.read(reader, 1 << 16)  # a small plan: within the pipe's buffer
    finally:
        os.close(reader)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert json.loads(got)["relations"], got
    if os.geteuid() == 0:
        # A device node (here a copy of /dev/zero's numbers, made in tmp_path): exit 2, one line, kept.
        zero = tmp_path / "zero"
        os.mknod(zero, stat.S_IFCHR | 0o666, os.stat("/dev/zero").st_rdev)
        proc = _optimize(plan, zero)
        err = proc.stderr.decode().strip().splitlines()
        assert proc.returncode == 2 and len(err) == 1 and "character device" in err[0] and str(zero) in err[0], err
        assert stat.S_ISCHR(os.lstat(zero).st_mode)
        null = tmp_path / "null"
        os.mknod(null, stat.S_IFCHR | 0o666, os.stat(os.devnull).st_rdev)
        assert _optimize(plan, null).returncode == 0 and stat.S_ISCHR(os.lstat(null).st_mode)
    # The real /dev/null: discarded in place (checked after the copies above, which the code before
    # this fix replaced, so that code never reaches this line).
    proc = _optimize(plan, os.devnull)
    assert proc.returncode == 0 and stat.S_ISCHR(os.stat(os.devnull).st_mode), proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary left


def test_item2_output_onto_dev_stdout_writes_the_stream(tmp_path):
    plan = _tiny_plan(tmp_path)
    link = tmp_path / "stdout"  # what /dev/stdout is: a link to the process's fd 1
    link.symlink_to("/proc/self/fd/1")
    for dest in (link, "/dev/stdout"):  # the copy first: the code before this fix replaced it
        out = tmp_path / "captured.json"
        with open(out, "wb") as f:
            proc = _optimize(plan, dest, stdout=f)
        assert proc.returncode == 0 and json.loads(out.read_bytes())["relations"], dest
        assert os.path.islink(dest), dest


# -- 5. Capabilities and statistics files are validated ---------------------------------------------


def test_item5_bad_capabilities_and_statistics_files_are_exit_2_naming_file_and_field(tmp_path, capsys):
    plan = _tiny_plan(tmp_path)
    caps = tmp_path / "caps.json"
    rule = {"function": "lt", "support": "full"}
    bad_caps = [
        ({"functions": 5}, "functions", "expected a list of rules"),
        ({"rules": [rule, rule, rule, {"function": "lt", "support": "fuul"}]}, "rules[3].support",
         "expected one of full, best_effort, none"),
        ({"rules": [{"function": 7, "support": "full"}]}, "rules[0].function", "expected a function name"),
        ({"rules": [{"function": ["lt", None], "support": "full"}]}, "rules[0].function[1]", "function name"),
        ({"rules": [{"function": "lt", "support": "full", "args": "i32"}]}, "rules[0].args", "list of type"),
        ({"rules": [{"function": "lt", "support": "full", "args": ["int32"]}]}, "rules[0].args[0]", "unknown type"),
        ({"rules": [{"function": "lt", "support": "full", "shape": "x"}]}, "rules[0].shape", "expected one of"),
        ({"rules": [{"function": "lt", "suport": "full"}]}, "rules[0]: suport", "unknown field"),
        ({"rules": [5]}, "rules[0]", "expected a rule object"),
        ({"default": "all"}, "default", "expected one of full, best_effort, none"),
        ({"read_types": "named_table"}, "read_types", "expected a list"),
        ({"read_types": ["tables"]}, "read_types[0]", "expected one of"),
        ({"constant_folding": "yes"}, "constant_folding", "true or false"),
        ({"name": ["x"]}, "name", "expected a string"),
        ({"rulez": []}, "rulez", "unknown field"),
        ([1, 2], "caps.json", "a capability profile is a JSON object"),
    ]
    for doc, field, words in bad_caps:
        caps.write_text(json.dumps(doc))
        capsys.readouterr()
        assert main(["optimize", str(plan), "--capabilities", str(caps)]) == 2, doc
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"capabilities file {caps}" in err[0] and field in err[0] and words in err[0], err
    # Nested 100,000 deep: the file is named, not "the plan".
    caps.write_text('{"rules": ' + "[" * 100_000 + "]" * 100_000 + "}")
    for argv in (["optimize", str(plan), "--capabilities", str(caps)],
                 ["diff", str(plan), "--capabilities", str(caps), "--out", str(tmp_path / "d")]):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"capabilities file {caps}" in err[0] and "the plan" not in err[0], err
    target = tmp_path / "target.json"  # a target profile (which embeds a capability profile) likewise
    target.write_text("[" * 100_000 + "]" * 100_000)
    assert main(["optimize", str(plan), "--target", str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(target) in err[0] and "the plan" not in err[0], err
    target.write_text(json.dumps({"name": "x", "capabilities": {"rules": [{"function": "lt", "support": 1}]}}))
    assert main(["optimize", str(plan), "--target", str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert str(target) in err and "capabilities: rules[0].support: expected one of" in err, err
    caps.write_bytes(b'{"name": "\xff"}')
    assert main(["optimize", str(plan), "--capabilities", str(caps)]) == 2
    assert "not UTF-8" in capsys.readouterr().err

    stats = tmp_path / "s.json"
    bad_stats = [
        ({"x": {"columns": {"a": {"histogram": 5}}}}, "tables.x.columns.a", "histogram must be an object"),
        ({"x": {"columns": {"a": {"histogram": {"height": 1, "bins": [[1, 2]]}}}}}, "tables.x.columns.a",
         "histogram.bins[0]"),
        ({"x": {"columns": {"a": {"histogram": {"height": 1, "bins": 5}}}}}, "tables.x.columns.a", "histogram.bins"),
        ({"x": {"name": 5}}, "tables.x.name", "expected a table name"),
        ({"x": {"columns": {"a": {"ndv": -1}}}}, "tables.x.columns.a", "non-negative"),
    ]
    for tables, field, words in bad_stats:
        stats.write_text(json.dumps({"tables": tables}))
        capsys.readouterr()
        assert main(["optimize", str(plan), "--stats", str(stats)]) == 2, tables
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"statistics file {stats}" in err[0] and field in err[0] and words in err[0], err


@pytest.mark.spark
def test_item1_a_table_name_cannot_leave_a_remote_tables_location(spark):
    """With ``--tables s3a://b/t`` a named table is asked to Spark as ``s3a://b/t/<name>.parquet``:
    the plan's name ``../secret`` (or a brace holding a ``/``) is refused before Spark is asked."""
    from optimizer.errors import PlanError
    from optimizer.paths import FileAccess
    from optimizer.spark.tables import TableResolver

    resolver = TableResolver(spark, "s3a://b/t", files=FileAccess.under(["s3a://b/t"]))
    for name in ("../secret", "{x,../../y}", "x/../../y"):
        with pytest.raises(PlanError, match="outside the table roots"):
            resolver.raw_table([name], "relations[0].read.named_table")


def test_item3_kernel_glob_through_a_link_then_dotdot_is_refused(tmp_path):
    """``t/*/../secret``: an engine that globs and then lets the kernel resolve ``..`` (DuckDB, pyarrow)
    matches ``t/evil/../secret``, which through the link ``t/evil -> a/b`` is ``a/secret``."""
    from optimizer.paths import FileAccess

    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "secret").write_text("x")
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "evil").symlink_to(tmp_path / "a" / "b")
    assert FileAccess.under([tmp_path / "t"]).refusal(f"{tmp_path}/t/*/../secret") is not None


@pytest.mark.parametrize("pattern", ["**/evil.parquet", "**/**/evil.parquet", "**", "sub/**/deep.parquet"])
def test_item1_a_recursive_glob_is_judged_at_every_depth(tmp_path, pattern):
    """DuckDB reads ``**`` as any number of folders, none included, so ``t/**/evil.parquet`` reads the link
    ``t/evil.parquet -> secret`` (its rows came back, exit 0, before: Python's glob without ``recursive``
    matched one folder level only and saw no link)."""
    from optimizer.paths import FileAccess

    (tmp_path / "secret.parquet").write_text("x")
    (tmp_path / "t" / "sub" / "a").mkdir(parents=True)
    (tmp_path / "t" / "ok.parquet").write_text("x")
    if pattern.startswith("sub/"):
        (tmp_path / "t" / "sub" / "a" / "deep.parquet").symlink_to(tmp_path / "secret.parquet")
        (tmp_path / "t" / "sub" / "deep.parquet").symlink_to(tmp_path / "secret.parquet")
    else:
        (tmp_path / "t" / "evil.parquet").symlink_to(tmp_path / "secret.parquet")
    access = FileAccess.under([tmp_path / "t"])
    assert access.refusal(f"{tmp_path}/t/{pattern}") == "it is outside the table roots"
    assert access.refusal(f"{tmp_path}/t/**/ok.parquet") is None


def test_a_fifo_is_no_table_and_no_file_to_read(tmp_path, capsys):
    """A FIFO named like a table (``t/fifo.parquet``), or a file a plan names: opening one waits for a
    writer, uninterruptibly (explain, optimize and each engine hung before; DataFusion's runner outlived
    SIGTERM). It is refused by name (exit 2) where a plan reads it, and read for no statistics."""
    import os

    from optimizer.cost.statistics_io import resolve_tables

    from optimizer.errors import PlanError
    from optimizer.paths import FileAccess, table_in_directory

    tables = tmp_path / "t"
    (tables / "folder").mkdir(parents=True)
    os.mkfifo(tables / "fifo.parquet")
    os.mkfifo(tables / "folder" / "part-0.parquet")
    with pytest.raises(PlanError, match="fifo.parquet: it is not a regular file or folder"):
        table_in_directory(tables, "fifo")
    access = FileAccess.under([tables])
    assert access.refusal(f"{tables}/fifo.parquet").startswith("it is not a regular file or folder")
    assert access.refusal(f"{tables}/folder").startswith("it is not a regular file or folder")
    assert access.refusal(f"{tables}/*.parquet").startswith("it is not a regular file or folder")
    assert "fifo" not in resolve_tables(tables)
    plan = tmp_path / "plan.json"
    plan.write_text('{"relations": [{"root": {"names": ["a"], "input": {"read": {"baseSchema": {"names": ["a"], '
                    '"struct": {"types": [{"i64": {}}]}}, "namedTable": {"names": ["fifo"]}}}}}]}')
    for engine in ("duckdb", "datafusion", "acero"):
        assert main(["run", str(plan), "--engine", engine, "--tables", str(tables)]) == 2
        assert "it is not a regular file or folder" in capsys.readouterr().err


def test_a_user_file_named_with_a_nul_byte_is_exit_2_naming_it(tmp_path, capsys):
    """A NUL in a file name the user gives is one line naming the file (open() raises ValueError for it)."""
    from optimizer.capabilities import load_capabilities
    from optimizer.errors import PlanError

    with pytest.raises(PlanError, match="NUL byte") as exc:
        load_capabilities("caps\0.json")
    assert "capabilities file caps" in str(exc.value)
    from workloads.corpus import corpus_root

    plan = corpus_root() / "substrait_consumer/snapshots/producer/integration/tpch/q06-duckdb_plan.json"
    assert main(["optimize", str(plan), "--capabilities", "caps\0.json", "-o", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "NUL byte" in err[0], err


def test_a_table_name_binds_its_own_case_first(tmp_path):
    """Names are compared case-insensitively (Isthmus writes LINEITEM), but a file of the name's own case
    wins: ``T`` is ``T.parquet`` beside ``t.parquet``, whichever the directory lists first."""
    from optimizer.paths import table_in_directory

    for name in ("t.parquet", "T.parquet", "u.parquet"):
        (tmp_path / name).write_bytes(b"PAR1")
    assert table_in_directory(tmp_path, "T").name == "T.parquet"
    assert table_in_directory(tmp_path, "t").name == "t.parquet"
    assert table_in_directory(tmp_path, "U").name == "u.parquet"
    (tmp_path / "v").mkdir()
    (tmp_path / "V").mkdir()
    assert table_in_directory(tmp_path, "V").name == "V"
