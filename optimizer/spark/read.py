"""``ReadRel`` -> Spark: named tables and local files via :class:`~optimizer.spark.tables.TableResolver`,
virtual tables as ``inline(array(struct(...)))`` over one row; then the read's filters and projection
mask."""

from __future__ import annotations

from dataclasses import replace

from substrait.proto import Type

from optimizer.errors import PlanError, UnsupportedError
from optimizer.expr_utils import has_subquery, has_unresolvable_refs, referenced_fields
from optimizer.spark.expressions import Scope, named_struct_to_spark
from optimizer.spark.rel_compiler import Relation, _RelCompiler
from optimizer.spark.sql import Frame
from optimizer.spark.sql_columns import functions as F


class _ReadCompiler(_RelCompiler):
    """Read relations."""

    def _rel_read(self, body, bpath: str, outer: Scope | None) -> Relation:
        which = body.WhichOneof("read_type")
        types: list[Type] | None = list(body.base_schema.struct.types)
        width = len(types)
        if not types:  # names but no types (older DataFusion): the named columns, types unknown
            width, types = len(body.base_schema.names), None
            if which == "virtual_table" and not width and body.virtual_table.expressions:
                # no base schema at all (older DuckDB): as many columns as the rows have values
                width = len(body.virtual_table.expressions[0].fields)
        names = [self.fresh() for _ in range(width)]
        if which == "named_table":
            # One select conforms the table, names its columns and applies the projection mask, widened
            # by the columns the filters read (each Frame costs Spark an analysis).
            keep = None
            filters = [body.filter] if body.HasField("filter") else []
            if body.HasField("best_effort_filter") and not self.backend.ignore_best_effort_filter:
                filters.append(body.best_effort_filter)
            if body.HasField("projection") and body.projection.HasField("select"):
                fields = [item.field for item in body.projection.select.struct_items]
                if (
                    not any(item.HasField("child") for item in body.projection.select.struct_items)
                    and len(set(fields)) == len(fields)
                    and all(0 <= f < width for f in fields)
                ):
                    keep = fields
            if keep is not None and filters:
                # The filters read a few more columns than the mask keeps: conform only those (a wide
                # table's every column cast and named is most of compiling a read). Not when a filter
                # holds a subquery, whose outer references are not among its own fields.
                if any(has_subquery(f) or has_unresolvable_refs(f) for f in filters):
                    keep = None
                else:
                    read = set().union(*(referenced_fields(f) for f in filters))
                    keep = sorted(set(keep) | read) if all(0 <= f < width for f in read) else None
            df = self.backend.tables.named_table(body, self.ctx, bpath, names, keep)
            if keep is not None and not filters:
                return Relation(df, [names[f] for f in keep], [types[f] for f in keep] if types else None)
            return self._read_filters(Relation(df, names, types), body, bpath, outer)
        if which == "local_files":
            df = self.backend.tables.local_files(body, self.ctx, bpath, names)
        elif which == "virtual_table":
            df = self._virtual_table(body, bpath, outer, names)
        elif which is None:
            raise PlanError("read has no source (named_table, local_files, virtual_table...)", bpath)
        else:
            raise UnsupportedError(f"unsupported read type '{which}'", f"{bpath}.{which}")
        return self._read_filters(Relation(df, names, types), body, bpath, outer)

    def _read_filters(self, r: Relation, body, bpath: str, outer: Scope | None) -> Relation:
        """A read's filter, best-effort filter and projection mask over its named columns ``r``."""
        if body.HasField("filter"):
            scope = self.scope(r, outer)
            r = replace(r, df=r.df.filter(self.expr(body.filter, scope, f"{bpath}.filter")))
        if body.HasField("best_effort_filter") and not self.backend.ignore_best_effort_filter:
            scope = self.scope(r, outer)
            r = replace(r, df=r.df.filter(self.expr(body.best_effort_filter, scope, f"{bpath}.best_effort_filter")))
        if body.HasField("projection") and body.projection.HasField("select"):
            ppath = f"{bpath}.projection.select"
            positions = []
            for i, item in enumerate(body.projection.select.struct_items):
                if item.HasField("child"):
                    raise UnsupportedError(
                        "projection masks into nested fields are not supported", f"{ppath}.struct_items[{i}].child"
                    )
                positions.append(item.field)
            r = self.select_positions(r, positions, f"{ppath}.struct_items", "projected field")
        return r

    def _virtual_table(self, body, bpath: str, outer: Scope | None, names: list[str]) -> Frame:
        """The rows as ``inline(array(struct(...)))`` over one row, columns called ``names``."""
        vpath = f"{bpath}.virtual_table"
        rows = list(body.virtual_table.expressions)
        if not body.base_schema.struct.types:  # no schema (older DuckDB): the rows' own types
            if not rows:
                raise PlanError("virtual table has neither a schema nor rows", vpath)
            n = len(rows[0].fields)
            schema = None
        else:
            schema = named_struct_to_spark(body.base_schema, f"{bpath}.base_schema")
            n = len(schema.fields)
        one = Frame.one_row(self.ctx)
        if not rows:
            nulls = [F.lit(None).cast(f.dataType).alias(c) for f, c in zip(schema.fields, names, strict=True)]
            return one.select(*nulls).filter(F.lit(False))
        if n == 0:
            return Frame.rows(self.ctx, len(rows)).select()
        scope = Scope(one, [], [], outer)
        structs = []
        for r, row in enumerate(rows):
            if len(row.fields) != n:
                raise PlanError(f"row has {len(row.fields)} values, the schema {n} columns", f"{vpath}.expressions[{r}]")
            values = []
            for j, v in enumerate(row.fields):
                value = self.expr(v, scope, f"{vpath}.expressions[{r}].fields[{j}]")
                if schema is not None:
                    value = value.cast(schema.fields[j].dataType)
                values.append(value.alias(names[j]))
            structs.append(F.struct(*values))
        return one.select(F.inline(F.array(*structs)))
