r"""The user's Spark session settings that change what the backend's SQL means, and the plans refused under
them (a plan is never answered otherwise than in the tool's own sessions).

**The time zone.**

Substrait's timestamps mean one thing whatever engine runs them: ``precision_timestamp`` is a date and
a time of day in no zone, ``precision_timestamp_tz`` an instant whose parts (hour, day, the date it falls
on, its text) are those in UTC unless a function is given a zone. Spark computes both in the session's
time zone (``spark.sql.session.timeZone``): casting an instant to a date or to text, ``EXTRACT``,
``date_trunc``, formatting, adding a day or a month, and, for a date-time in no zone, the seconds since
the epoch and truncation across a daylight-saving gap. The tool's sessions are UTC, where Spark's answers
are Substrait's. In a user's session of another zone (``Asia/Kolkata``, ``+02:00``, ``America/New_York``)
they are not: ``CAST(ts_tz AS DATE)`` of 2023-12-31 23:59 UTC is 2024-01-01 in Kolkata. So the backend
refuses a plan that holds a timestamp (a type or a literal) in a session whose zone is not UTC, naming
the zone, the relation and the setting that makes it run; a plan without one runs in any zone.

**Escaped string literals** (``spark.sql.parser.escapedStringLiterals=true``): Spark then reads a string
literal as written, backslashes included, where the backend's text escapes (``\\`` for a backslash,
``\u0024`` for ``$``, ``\0`` for the LIKE escape): ``'^\\w\u0024'`` would be another pattern. A text with a
backslash is refused in such a session.

**Legacy statistical aggregates** (``spark.sql.legacy.statisticalAggregate=true``): the sample standard
deviation, variance, covariance and correlation of one row are NaN, where Substrait (and Spark by default)
say NULL. A text calling one is refused in such a session.

>>> utc_zone("UTC"), utc_zone("Etc/UTC"), utc_zone("+00:00"), utc_zone("GMT"), utc_zone("Europe/London")
(True, True, True, True, False)
>>> utc_zone("+02:00"), utc_zone("Asia/Kolkata")
(False, False)
"""

from __future__ import annotations

import re

from google.protobuf.message import Message
from substrait.proto import Expression, Rel, Type

from optimizer.errors import UnsupportedError
from optimizer.expr_utils import rels_with_paths

__all__ = ["first_timestamp", "refuse_session_text", "refuse_zoned_timestamps", "utc_zone"]

#: Zone names whose offset is zero all year.
_UTC_NAMES = frozenset({"UTC", "UCT", "UT", "GMT", "Z", "ZULU", "UNIVERSAL", "GREENWICH"})
_TIMESTAMP_KINDS = frozenset({"timestamp", "timestamp_tz", "precision_timestamp", "precision_timestamp_tz"})


def utc_zone(zone: str) -> bool:
    """Whether ``zone`` (a Spark session time zone) is UTC: offset zero all year."""
    text = zone.strip().upper()
    if text.startswith("ETC/"):
        text = text[4:]
    if text in _UTC_NAMES:
        return True
    return bool(re.fullmatch(r"(?:UTC|GMT|UT)?[+-]0{1,2}(?::?00)?|(?:UTC|GMT)0", text))


def _read_columns(rel: Rel) -> list[Message]:
    """The types of the columns a read keeps (its projection's fields; all without one): a column it
    drops reaches no expression."""
    types = list(rel.read.base_schema.struct.types)
    if not rel.read.HasField("projection"):
        return types
    kept = [item.field for item in rel.read.projection.select.struct_items]
    return [types[i] for i in kept if 0 <= i < len(types)]


def _holds_timestamp(rel: Rel) -> bool:
    """Whether ``rel``'s own fields (not its input relations, nor a subquery's) hold a timestamp type or
    literal; of a read's schema, the columns it keeps."""
    stack: list[Message] = [rel]
    if rel.WhichOneof("rel_type") == "read":  # the kept columns' types, and the rest but the schema
        stack = [*_read_columns(rel),
                 *(v for f, v in rel.read.ListFields() if f.type == f.TYPE_MESSAGE and f.name != "base_schema")]
    while stack:
        m = stack.pop()
        if m is not rel and isinstance(m, Rel):
            continue
        if isinstance(m, Type) and m.WhichOneof("kind") in _TIMESTAMP_KINDS:
            return True
        if isinstance(m, Expression.Literal) and m.WhichOneof("literal_type") in _TIMESTAMP_KINDS:
            return True
        for f, value in m.ListFields():
            if f.type != f.TYPE_MESSAGE:
                continue
            if f.label == f.LABEL_REPEATED:
                stack.extend(value)
            else:
                stack.append(value)
    return False


def first_timestamp(plan: Message) -> str | None:
    """The path of the first relation (inputs before the relations over them) holding a timestamp type
    or literal, None if no relation does.

    >>> from testing.builder import Builder, read
    >>> plan = Builder().plan(read("t", [("a", "i64")]), ["a"])
    >>> first_timestamp(plan) is None
    True
    >>> plan.relations[0].root.input.read.base_schema.struct.types[0].precision_timestamp_tz.precision = 6
    >>> first_timestamp(plan)
    'relations[0].root.input'
    """
    for rel, path in rels_with_paths(plan):
        if _holds_timestamp(rel):
            return path
    return None


def refuse_zoned_timestamps(plan: Message, zone: str) -> None:
    """An :class:`UnsupportedError` if the session's ``zone`` is not UTC and ``plan`` holds a timestamp."""
    if utc_zone(zone):
        return
    where = first_timestamp(plan)
    if where is not None:
        raise UnsupportedError(
            f"the Spark session's time zone is {zone!r}, and Spark computes timestamps in it where Substrait "
            "computes them in UTC or in no zone (a cast to a date or text, EXTRACT, date_trunc, interval "
            "arithmetic would answer otherwise): run it in a session with spark.sql.session.timeZone=UTC "
            "(the tool's default)",
            where,
        )


#: Spark's aggregates that give NaN for one row under ``spark.sql.legacy.statisticalAggregate``.
_STATISTICAL = re.compile(r"\b(?:STDDEV|STDDEV_SAMP|STD|VARIANCE|VAR_SAMP|COVAR_SAMP|CORR|SKEWNESS|KURTOSIS)\(",
                          re.IGNORECASE)


def _true(value: object) -> bool:
    return str(value).strip().lower() == "true"


def refuse_session_text(text: str, conf) -> None:
    """An :class:`UnsupportedError` if the session's settings (``conf``: ``spark.conf``) read ``text``
    otherwise than the backend wrote it.

    >>> refuse_session_text("SELECT '^\\\\w'", {"spark.sql.parser.escapedStringLiterals": "true"})
    Traceback (most recent call last):
    ...
    optimizer.errors.UnsupportedError: the session sets spark.sql.parser.escapedStringLiterals=true, which reads the backend's escaped string literals as written (a backslash, '$', a LIKE pattern would mean another string): run the plan in a session without it
    >>> refuse_session_text("SELECT STDDEV_SAMP(x) FROM t", {})
    """
    if "\\" in text and _true(conf.get("spark.sql.parser.escapedStringLiterals", "false")):
        raise UnsupportedError(
            "the session sets spark.sql.parser.escapedStringLiterals=true, which reads the backend's escaped "
            "string literals as written (a backslash, '$', a LIKE pattern would mean another string): run the "
            "plan in a session without it")
    if _STATISTICAL.search(text) and _true(conf.get("spark.sql.legacy.statisticalAggregate", "false")):
        raise UnsupportedError(
            "the session sets spark.sql.legacy.statisticalAggregate=true, under which Spark's standard deviation, "
            "variance, covariance and correlation of one row are NaN where Substrait says NULL: run the plan in "
            "a session without it")
