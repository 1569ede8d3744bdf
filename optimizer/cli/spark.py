"""The CLI's Spark options, shared by every command that may start Spark.

``--master URL`` / ``--remote sc://HOST:PORT`` (each applied only when given), repeatable
``--conf KEY=VALUE``, ``--catalog DB`` (tables of a catalog database) and ``--analyze-tables``;
``run --ui`` keeps Spark's UI on and prints its URL on stderr. See
:func:`optimizer.spark.session.get_spark` for which settings win.
"""

from __future__ import annotations

import argparse
import os
import sys
import urllib.parse

from optimizer.errors import PlanError


def conf_pair(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` -> ``(KEY, VALUE)``; argparse turns the ``ArgumentTypeError`` into exit 2."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or key != key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def add_spark_args(p: argparse.ArgumentParser, *, ui: bool = False, statistics: bool = True) -> None:
    """The Spark session options and ``--catalog`` (``--analyze-tables`` when the command reads
    ``statistics``; ``--ui`` when ``ui``)."""
    g = p.add_argument_group("Spark")
    g.add_argument("--master", default=None,
                   help="Spark master URL, e.g. spark://HOST:7077 or local[4] (default: the user's Spark "
                        "settings, local[*] when they set none)")
    g.add_argument("--remote", default=None, metavar="sc://HOST:PORT",
                   help="connect to a Spark Connect server instead of starting Spark")
    g.add_argument("--conf", action="append", type=conf_pair, default=[], metavar="KEY=VALUE",
                   help="a Spark setting (repeatable); wins over spark-defaults.conf and the tool's defaults")
    g.add_argument("--catalog", default=None, metavar="DB",
                   help="tables are tables of this database of the Spark catalog (a plan's 'lineitem' "
                        "is DB.lineitem; 'db.lineitem' as named); statistics from the catalog")
    if statistics:
        g.add_argument("--analyze-tables", action="store_true",
                       help="with --catalog: run ANALYZE TABLE ... COMPUTE STATISTICS FOR ALL COLUMNS on the "
                            "tables the plan reads (this writes statistics into the catalog)")
    if ui:
        g.add_argument("--ui", action="store_true",
                       help="keep Spark's web UI on (spark.ui.enabled=true) and print its URL on stderr")


def add_cast_argument(p: argparse.ArgumentParser) -> None:
    """``--allow-lossy-casts`` for a command that runs plans on Spark."""
    p.add_argument("--allow-lossy-casts", action="store_true",
                   help="cast a table's column to the plan's declared type even when that type cannot hold "
                        "all its values (decimal(15,2) declared decimal(19,0) rounds 0.06 to 0; default: "
                        "exit 2 naming the table, column and both types)")


def spark_conf(args: argparse.Namespace) -> dict[str, str]:
    conf = dict(getattr(args, "conf", None) or [])
    if getattr(args, "ui", False):
        conf["spark.ui.enabled"] = "true"
    return conf


def _check_session_args(args: argparse.Namespace) -> None:
    if getattr(args, "master", None) and getattr(args, "remote", None):
        raise PlanError("--master and --remote exclude each other: give one")
    remote = getattr(args, "remote", None)
    if remote and not remote.startswith("sc://"):
        raise PlanError(f"--remote must be a Spark Connect URL sc://HOST:PORT, got {remote!r}")
    if remote:
        from optimizer.spark.session import connect_address

        connect_address(remote)  # a malformed port is a usage error, before any session starts


def spark_from_args(args: argparse.Namespace):
    """The session the options ask for (started now); with ``--ui``, its URL on stderr."""
    from optimizer.spark.session import get_spark, ui_url

    _check_session_args(args)
    spark = get_spark(getattr(args, "master", None), conf=spark_conf(args), remote=getattr(args, "remote", None))
    if getattr(args, "ui", False):
        url = ui_url(spark)
        print(f"Spark UI: {url}" if url else "Spark UI: not available (spark.ui.enabled is false in the "
              "session's settings)", file=sys.stderr, flush=True)
    return spark


def lazy_spark_from_args(args: argparse.Namespace):
    """A :class:`~optimizer.spark.session.LazySpark` with the options (started on first use)."""
    from optimizer.spark.session import LazySpark

    _check_session_args(args)
    return LazySpark(getattr(args, "master", None), conf=spark_conf(args), remote=getattr(args, "remote", None))


def check_tables_arg(tables: str | None) -> None:
    """``--tables``: a local directory or ``file://`` URI must be an existing directory; any other URI
    (``s3a://``, ``hdfs://``...) is Spark's to read, and is checked table by table when read."""
    if not tables:
        return
    scheme = urllib.parse.urlparse(tables).scheme if "://" in tables else ""
    if scheme in ("", "file"):
        from optimizer.paths import local_path

        if not os.path.isdir(local_path(tables)):
            raise PlanError("not a directory", tables)


def starts_empty_catalog(args: argparse.Namespace) -> bool:
    """Whether the command's session is one the tool is still to start, classic, with Spark's in-memory
    catalog and no other catalog configured: a table that is not under ``--tables`` is then nowhere."""
    if getattr(args, "remote", None) or getattr(args, "catalog", None) or "PYSPARK_GATEWAY_PORT" in os.environ:
        return False
    from pyspark.sql import SparkSession

    from optimizer.spark.session import user_spark_settings

    if SparkSession.getActiveSession() is not None:
        return False
    settings = {**user_spark_settings(), **spark_conf(args)}
    if settings.get("spark.sql.catalogImplementation", "in-memory").strip() != "in-memory":
        return False
    return not any(key.startswith("spark.sql.catalog.") or key == "spark.sql.defaultCatalog" for key in settings)


def check_reads_before_spark(plan, args: argparse.Namespace, empty_catalog: bool | None = None) -> None:
    """The checks of the plan's reads that need no Spark (files under ``--tables``, files that exist,
    tables that exist when the catalog will be empty; see :func:`optimizer.spark.tables.check_reads`),
    so that a plan they refuse is refused before Spark starts."""
    from optimizer.paths import file_access
    from optimizer.spark.tables import check_reads

    if empty_catalog is None:
        empty_catalog = starts_empty_catalog(args)
    check_reads(plan, getattr(args, "tables", None) or None, file_access(args), empty_catalog=empty_catalog)


def backend_from_args(args: argparse.Namespace, spark=None):
    """A :class:`~optimizer.spark.SparkBackend` on ``spark`` (default :func:`spark_from_args`) reading
    ``--tables`` and ``--catalog``."""
    check_tables_arg(getattr(args, "tables", None))
    from optimizer.paths import file_access
    from optimizer.spark import SparkBackend
    from optimizer.spark.tables import TableResolver

    spark = spark if spark is not None else spark_from_args(args)
    files = file_access(args)
    resolver = TableResolver(spark, getattr(args, "tables", None) or None, database=getattr(args, "catalog", None),
                             files=files, allow_lossy_casts=getattr(args, "allow_lossy_casts", False))
    return SparkBackend(spark, tables=resolver, files=files)
