"""substrait-optimizer: a cost-based rewrite optimizer for Substrait plans, with a PySpark backend.

The Python API users script against::

    from optimizer import load_plan, save_plan, optimize
    plan = load_plan("q5.json")          # JSON or binary protobuf; older encodings upgraded
    save_plan(plan, "q5.binpb", format="binpb")
"""

from optimizer.errors import ExecutionError, OptimizerError, PlanError, UnsupportedError
from optimizer.plan_io import dump_plan, load_plan, save_plan

__all__ = [
    "ExecutionError",
    "OptimizerError",
    "PlanError",
    "UnsupportedError",
    "dump_plan",
    "load_plan",
    "save_plan",
    "optimize",
]


def __getattr__(name: str):
    # optimize pulls in the rules and the cost model: import it only when asked for.
    if name == "optimize":
        from optimizer.driver import optimize

        return optimize
    raise AttributeError(f"module 'optimizer' has no attribute {name!r}")
