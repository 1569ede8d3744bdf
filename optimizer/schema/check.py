"""check_plan: every problem found cheaply in a plan, each with its path; and the producers whose
``ProjectRel`` without ``emit`` means something else than the spec says."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from substrait.proto import Plan, PlanRel, Rel

from optimizer.errors import OptimizerError, PlanError
from optimizer.expr_utils import rels_with_paths
from optimizer.load.functions import FunctionTable
from optimizer.schema.derivation import Derivation, Problem, plan_functions
from optimizer.schema.record import Schema
from optimizer.schema.relations import tree_output, walk_plan

#: Producers whose ``ProjectRel`` without ``emit`` outputs only its expressions, where Substrait says input
#: columns + expressions: DataFusion before apache/datafusion#12495 (2024) and DuckDB's substrait extension
#: (1.1.3 included, see substrait-io/duckdb-substrait-extension#135). Compared with ``plan.version.producer``.
LEGACY_PROJECT_PRODUCERS: tuple[str, ...] = (
    "duckdb", "datafusion",
    "substrait-optimizer for duckdb",  # a plan this tool wrote for the duckdb target (optimizer.write)
)


def legacy_project_producer(plan: Plan) -> str | None:
    """The producer name when ``plan`` comes from a producer of :data:`LEGACY_PROJECT_PRODUCERS`, else None."""
    producer = plan.version.producer.strip()
    if producer.lower() not in LEGACY_PROJECT_PRODUCERS:
        return None
    # DataFusion writes explicit emits since apache/datafusion#12495 (Substrait 0.5x era); its plans
    # of today (minor 85 with DataFusion 55) mean what the spec says. DuckDB 1.1.3 writes minor 53.
    if producer.lower() == "datafusion" and plan.version.major_number == 0 and plan.version.minor_number >= 60:
        return None
    return producer


def legacy_projects(plan: Plan) -> Iterator[tuple[Rel, str]]:
    """Each ``ProjectRel`` without ``emit`` (and its path) of a plan of a legacy producer."""
    if legacy_project_producer(plan) is None:
        return
    for rel, path in rels_with_paths(plan):
        if rel.WhichOneof("rel_type") == "project" and rel.project.common.WhichOneof("emit_kind") != "emit":
            yield rel, path


def checked_tree_schema(
    rel: Rel, functions: FunctionTable | None, path: str, plan_relations: Sequence[PlanRel]
) -> tuple[Schema | None, list[Problem]]:
    """The schema of a relation tree derived as :func:`check_plan` does, and the problems found: the
    schema is None only when they leave it unknowable (a field reference out of range does not)."""
    problems: list[Problem] = []
    ctx = Derivation(functions, problems=problems, plan_relations=plan_relations, tree=tree_output)
    return tree_output(rel, ctx, path), problems


def check_plan(plan: Plan, functions: FunctionTable | None = None) -> list[Problem]:
    """Every problem found cheaply in ``plan`` (empty when none), children before parents.

    Relations whose schema cannot be known (opaque extensions) and everything above them are skipped.
    ``functions``: the plan's table where the caller has it (a loaded plan's); built from the plan if None.
    """
    problems: list[Problem] = []
    if functions is None:
        functions = plan_functions(plan, problems)
    if not plan.relations:
        problems.append(Problem("relations", "plan has no relations"))
        return problems
    producer = legacy_project_producer(plan)
    for _rel_msg, path in legacy_projects(plan):
        problems.append(
            Problem(
                f"{path}.project",
                f"ProjectRel without emit written by {producer}, which means only its expressions while "
                "Substrait means input columns + expressions (conform_legacy_projects() makes it explicit)",
            )
        )
    ctx = Derivation(functions, problems=problems, plan_relations=plan.relations, tree=tree_output)
    try:
        walk_plan(plan, ctx)
    except OptimizerError as exc:  # pragma: no cover - defensive: checking mode records instead
        problems.append(Problem(exc.path or "", exc.message))
    except (IndexError, KeyError, AttributeError, TypeError, ValueError) as exc:  # pragma: no cover
        problems.append(Problem("", f"malformed plan ({type(exc).__name__}: {exc})"))
    return problems


def raise_for_problems(plan: Plan, functions: FunctionTable | None = None) -> None:
    """Raise a one-line :class:`~optimizer.errors.PlanError` for the first problem of ``plan`` that is not a
    producer quirk, if any (``functions``: as for :func:`check_plan`)."""
    raise_first([p for p in check_plan(plan, functions) if not p.quirk])


def raise_first(problems: Sequence[Problem]) -> None:
    """Raise the first of ``problems`` as a one-line :class:`~optimizer.errors.PlanError` (saying how many
    more there are), if any."""
    if not problems:
        return
    first = problems[0]
    more = len(problems) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    raise PlanError(first.message + suffix, first.path or None)
