"""Plans built as JSON dicts (functions declared by simple name) for the estimate and property tests."""

from __future__ import annotations

import datetime
import decimal
import json

from substrait.proto import Plan

from optimizer.plan_io import load_plan

ASC = 1  # SORT_DIRECTION_ASC_NULLS_FIRST


DESC = 4  # SORT_DIRECTION_DESC_NULLS_LAST


class B:
    """Builds plans as JSON dicts; functions are declared by simple name (as DataFusion does)."""

    def __init__(self) -> None:
        self.functions: dict[str, int] = {}

    def fn(self, name: str) -> int:
        return self.functions.setdefault(name, len(self.functions) + 1)

    @staticmethod
    def ref(i: int) -> dict:
        return {"selection": {"directReference": {"structField": {"field": i}}, "rootReference": {}}}

    @staticmethod
    def i64(v: int) -> dict:
        return {"literal": {"i64": str(v)}}

    @staticmethod
    def string(v: str) -> dict:
        return {"literal": {"string": v}}

    @staticmethod
    def date(d: datetime.date) -> dict:
        return {"literal": {"date": (d - datetime.date(1970, 1, 1)).days}}

    @staticmethod
    def dec(v: str, precision: int = 15, scale: int = 2) -> dict:
        raw = int(decimal.Decimal(v).scaleb(scale))
        import base64

        return {"literal": {"decimal": {"value": base64.b64encode(raw.to_bytes(16, "little", signed=True)).decode(),
                                        "precision": precision, "scale": scale}}}

    def call(self, name: str, *args: dict) -> dict:
        return {"scalarFunction": {"functionReference": self.fn(name),
                                   "outputType": {"bool": {"nullability": "NULLABILITY_NULLABLE"}},
                                   "arguments": [{"value": a} for a in args]}}

    @staticmethod
    def read(table: str, cols: list[tuple[str, str]], **extra) -> dict:
        types = [{t: {"nullability": "NULLABILITY_REQUIRED"}} if t != "decimal" else
                 {"decimal": {"precision": 15, "scale": 2, "nullability": "NULLABILITY_REQUIRED"}} for _, t in cols]
        return {"read": {"namedTable": {"names": [table]},
                         "baseSchema": {"names": [c for c, _ in cols], "struct": {"types": types}}, **extra}}

    @staticmethod
    def filter(inp: dict, cond: dict) -> dict:
        return {"filter": {"input": inp, "condition": cond}}

    def join(self, left: dict, right: dict, expr: dict | None, type_: str = "INNER") -> dict:
        body = {"left": left, "right": right, "type": f"JOIN_TYPE_{type_}"}
        if expr is not None:
            body["expression"] = expr
        return {"join": body}

    def aggregate(self, inp: dict, keys: list[int], measures: list[tuple[str, list[int]]] = ()) -> dict:
        return {"aggregate": {"input": inp, "groupingExpressions": [self.ref(k) for k in keys],
                              "groupings": [{"expressionReferences": list(range(len(keys)))}],
                              "measures": [{"measure": {"functionReference": self.fn(n),
                                                        "outputType": {"i64": {"nullability": "NULLABILITY_NULLABLE"}},
                                                        "arguments": [{"value": self.ref(a)} for a in args]}}
                                           for n, args in measures]}}

    def plan(self, root: dict, names: list[str] | None = None) -> Plan:
        doc = {"relations": [{"root": {"input": root, "names": names or []}}],
               "extensions": [{"extensionFunction": {"functionAnchor": a, "name": n,
                                                     "extensionUrnReference": 4294967295}}
                              for n, a in self.functions.items()]}
        plan = load_plan(json.dumps(doc))
        if names is None:  # a name for each output column, as a plan must have
            from optimizer.load.pipeline import load
            from optimizer.schema import tree_schema

            root = plan.relations[0].root
            width = len(tree_schema(root.input, load(plan).functions, plan_relations=plan.relations).types)
            root.names.extend(f"c{i}" for i in range(width))
        return plan


T_COLS = [("x", "i64"), ("y", "i64"), ("s", "string"), ("d", "date"), ("p", "decimal")]


ORDERS = [("o_id", "i64"), ("o_cust", "i64")]


CUST = [("c_id", "i64"), ("c_seg", "string")]
