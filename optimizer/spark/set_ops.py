"""``SetRel`` -> Spark: all 8 operations with exact multiset semantics, any number of inputs."""

from __future__ import annotations

from substrait.proto import SetRel

from optimizer.errors import PlanError, UnsupportedError
from optimizer.spark.expressions import Scope
from optimizer.spark.rel_compiler import Relation, _and, _c, _RelCompiler
from optimizer.spark.sql import Frame


class _SetCompiler(_RelCompiler):
    """Set relations."""

    def _rel_set(self, body, bpath: str, outer: Scope | None) -> Relation:
        if len(body.inputs) < 2:
            raise PlanError(f"a set relation needs at least two inputs, not {len(body.inputs)}", f"{bpath}.inputs")
        inputs = [self.rel(x, f"{bpath}.inputs[{i}]", outer) for i, x in enumerate(body.inputs)]
        n = len(inputs[0].columns)
        for i, r in enumerate(inputs[1:], start=1):
            if len(r.columns) != n:
                raise PlanError(f"set input {i} has {len(r.columns)} columns, input 0 has {n}", f"{bpath}.inputs[{i}]")
        p = inputs[0]
        secondaries = [r.df for r in inputs[1:]]
        op = body.op

        def union_all(frames: list[Frame]) -> Frame:
            # pairwise, as a balanced tree: the SQL text nests log2(n) deep, not n (a union of 80 inputs
            # nested past Python's recursion limit in the SQL printer). UNION ALL is associative, and
            # each union keeps its left input's names, so the first input's names come out.
            while len(frames) > 1:
                frames = [frames[i].union(frames[i + 1]) if i + 1 < len(frames) else frames[i]
                          for i in range(0, len(frames), 2)]
            return frames[0]

        if op == SetRel.SET_OP_UNION_ALL:
            df = union_all([p.df, *secondaries])
        elif op == SetRel.SET_OP_UNION_DISTINCT:
            df = union_all([p.df, *secondaries]).distinct()
        elif op == SetRel.SET_OP_MINUS_PRIMARY:  # EXCEPT DISTINCT: distinct p rows in no secondary
            df = p.df.subtract(union_all(secondaries))
        elif op == SetRel.SET_OP_MINUS_PRIMARY_ALL:  # EXCEPT ALL: max(0, m - sum(n_i)) copies
            df = p.df.exceptAll(union_all(secondaries))
        elif op == SetRel.SET_OP_MINUS_MULTISET:  # every p row (duplicates kept) not in all secondaries
            common = secondaries[0]
            for s in secondaries[1:]:
                common = common.intersect(s)
            names = [self.fresh() for _ in p.columns]
            common = common.select(*[_c(a).alias(b) for a, b in zip(inputs[1].columns, names, strict=True)])
            cond = _and([_c(a).eqNullSafe(_c(b)) for a, b in zip(p.columns, names, strict=True)])
            df = p.df.join(common, cond, "left_anti") if n else p.df.limit(0)
        elif op == SetRel.SET_OP_INTERSECTION_PRIMARY:  # distinct p rows present in any secondary
            df = p.df.intersect(union_all(secondaries))
        elif op == SetRel.SET_OP_INTERSECTION_MULTISET:  # INTERSECT DISTINCT: in every secondary
            df = p.df
            for s in secondaries:
                df = df.intersect(s)
        elif op == SetRel.SET_OP_INTERSECTION_MULTISET_ALL:  # INTERSECT ALL: min(m, n_1, ...) copies
            df = p.df
            for s in secondaries:
                df = df.intersectAll(s)
        elif op == SetRel.SET_OP_UNSPECIFIED:
            raise PlanError("set operation is unspecified", f"{bpath}.op")
        else:
            raise UnsupportedError(f"set operation {op} is not supported", f"{bpath}.op")
        # Spark's set operations are positional and keep the primary input's names.
        return Relation(df, list(p.columns), None)
