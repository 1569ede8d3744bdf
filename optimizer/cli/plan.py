"""``substrait-opt plan``: SQL in, a Substrait plan out, written by a real producer (DataFusion or DuckDB)."""

from __future__ import annotations

import argparse
import sys

from optimizer.errors import PlanError, read_user_file


def _read_sql(source: str) -> tuple[str, str]:
    """The SQL text of a file (``-``: stdin) and a name for messages."""
    if source == "-":
        data, name = sys.stdin.buffer.read(), "<stdin>"
    else:
        data, name = read_user_file(source, "a SQL file"), source
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise PlanError("the SQL is not UTF-8 text", name) from None
    if not text.strip():
        raise PlanError("empty input: no SQL", name)
    return text, name


def cmd_plan(args: argparse.Namespace) -> int:
    from optimizer.cli.args import output_format
    from optimizer.load.producers import ProducerError, produce, tables_in_directory
    from optimizer.plan_io import check_output, load_plan, save_plan

    check_output(args.output)
    fmt = output_format(args.output, args.format)  # the name and --format agree; no binary to a terminal
    tables = tables_in_directory(args.tables)
    sql, name = _read_sql(args.input)
    try:
        data = produce(sql, args.producer, tables)
    except ProducerError as exc:
        raise PlanError(exc.message, name) from None
    plan = load_plan(data)
    save_plan(plan, args.output, format=fmt)
    return 0


def register(sub, name: str, help_text: str) -> None:
    from optimizer.load.producers import PRODUCERS

    p = sub.add_parser(
        name, help=help_text,
        description="Make a Substrait plan of one SQL query with a real producer (DataFusion or DuckDB, "
                    "installed as the extra of the same name). The tables of --tables give the schemas; "
                    "the plan reads them by name, so it runs on any copy of the data. The plan written is "
                    "the tool's reading of the producer's (the encoding of the Substrait version the tool "
                    "writes, the producer's conventions made explicit): every command reads it back as it is.")
    p.add_argument("input", help="SQL file (one query), or '-' for stdin")
    p.add_argument("--tables", required=True,
                   help="directory of the Parquet tables the SQL names (DIR/<name>.parquet or DIR/<name>/)")
    p.add_argument("--producer", choices=list(PRODUCERS), default=PRODUCERS[0],
                   help="who writes the plan (default datafusion); DuckDB 1.1.3 refuses correlated subqueries, "
                        "and SQL it writes as another query (NOT LIKE, FILTER, SIMILAR TO, UNION, INTERSECT ALL) is "
                        "refused: see "
                        "docs/tutorial.md")
    p.add_argument("-o", "--output", default="-", help="output file, '-' for stdout (default)")
    p.add_argument("--format", choices=["json", "binpb"], default=None,
                   help="output format (default: from the file name, .json -> json, else binpb; json on stdout)")
    p.set_defaults(func=cmd_plan)
