"""What a target does with a ``ReadRel``'s filters and column mask.

* ``ReadRel.filter`` must be applied (the spec: the consumer applies it; a producer puts there only
  what the consumer applies). A target that only prunes with it (DataFusion 55: it answers TPC-H Q6
  with 107054818.38 instead of 1193053.23 when the filter is only there) gets the same conjuncts in a
  ``FilterRel`` above the read, unless the filter above already has each of them (DataFusion's own
  plans write both); the read keeps it to prune. A target that rejects it (Acero) gets it moved into
  that ``FilterRel``.
* ``ReadRel.best_effort_filter`` is removed for a target that rejects it: a consumer may skip it, so
  a plan never depends on it.
* a column mask (``ReadRel.projection``, top-level fields only) becomes a ``ProjectRel`` above the read
  for a target that does not read masks (Acero): the same columns in the same order.
* the local files of a read are named in the form the target opens: DuckDB opens paths and finds no
  file at a ``file://`` URI; Acero opens URIs and refuses a path ('URI has empty scheme').

The filter's columns are the read's ``base_schema`` fields; the ``FilterRel`` reads the read's output
(the mask, then its emit), so a conjunct on a column the read does not output widens the mask by
that column, and the ``FilterRel``'s emit gives the parent the columns it read before.
"""

from __future__ import annotations

import posixpath
import urllib.parse
from pathlib import PurePosixPath

from substrait.proto import Expression, Plan, Rel

from optimizer.errors import UnsupportedError
from optimizer.expr_utils import conjuncts, field, key, referenced_fields, rels_with_paths, remap_fields
from optimizer.load.functions import FunctionTable
from optimizer.paths import local_path
from optimizer.targets import Target


def local_files_in_target_form(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Every local file, folder or path of a read (not a glob) written in the form ``target.local_files``
    names, in place; the number of names changed. ``paths``: a ``file:`` URI becomes its local path,
    unquoted (``file:///data/a%20b.parquet`` is ``/data/a b.parquet``); ``uris``: an absolute path becomes
    its ``file://`` URI. Both name the same file, so the read reads the same rows; a relative path, a glob,
    a URI of another scheme and a ``file:`` URI naming another host are left as written."""
    changed = 0
    for rel, _path in rels_with_paths(plan):
        if rel.WhichOneof("rel_type") != "read" or rel.read.WhichOneof("read_type") != "local_files":
            continue
        for item in rel.read.local_files.items:
            kind = item.WhichOneof("path_type")
            if kind not in ("uri_path", "uri_file", "uri_folder"):
                continue
            written = getattr(item, kind)
            local = local_path(written)
            if local is None or urllib.parse.urlsplit(written).netloc not in ("", "localhost"):
                continue  # another scheme, or a file on another host: not a local path
            if target.local_files == "paths":
                new = local
            elif local == written and posixpath.isabs(written):
                new = PurePosixPath(written).as_uri()
            else:
                continue
            if new != written:
                setattr(item, kind, new)
                changed += 1
    return changed


def adapt_reads(plan: Plan, target: Target, functions: FunctionTable) -> int:
    """Adapt every ``ReadRel`` of ``plan`` (whose function table is ``functions``) to ``target``, in place;
    the number of reads changed."""
    if target.read_filter == "applied" and target.best_effort_filter != "unsupported" and target.projection_mask:
        return 0
    changed = 0
    pairs = list(rels_with_paths(plan))  # children before parents
    by_path = dict((path, rel) for rel, path in pairs)
    suffix = ".filter.input"
    for rel, path in pairs:
        if rel.WhichOneof("rel_type") != "read":
            continue
        # A read is a leaf: putting a FilterRel over it changes no other relation's path.
        parent = by_path.get(path[: -len(suffix)]) if path.endswith(suffix) else None
        touched = False
        if rel.read.HasField("best_effort_filter") and target.best_effort_filter == "unsupported":
            rel.read.ClearField("best_effort_filter")
            touched = True
        masked = rel.read.HasField("projection") and not target.projection_mask
        if rel.read.HasField("filter") and target.read_filter != "applied":
            touched |= _filter_above(rel, parent, path, target, functions)
        if masked:
            _mask_to_project(rel, path, target)
            touched = True
        changed += touched
    return changed


def _columns(read) -> list[int]:
    """The ``base_schema`` field of each column the read outputs before its emit."""
    if not read.HasField("projection"):
        return list(range(len(read.base_schema.struct.types)))
    return [item.field for item in read.projection.select.struct_items]


def _check_mask(read, path: str, target: Target) -> None:
    for item in read.projection.select.struct_items:
        if item.HasField("child"):
            raise UnsupportedError(f"ReadRel column mask selecting part of a nested field: target "
                                   f"'{target.name}' reads whole columns only", f"{path}.read.projection")


def _emit(rel: Rel) -> list[int] | None:
    common = rel.read.common
    return list(common.emit.output_mapping) if common.WhichOneof("emit_kind") == "emit" else None


def _filter_above(rel: Rel, parent: Rel | None, path: str, target: Target, functions) -> bool:
    """``ReadRel.filter`` applied by a ``FilterRel`` above the read (see the module docstring); False
    when the filter above applies it already."""
    read = rel.read
    if read.HasField("projection"):
        _check_mask(read, path, target)
    cols = _columns(read)
    emit = _emit(rel)
    out = cols if emit is None else [cols[m] for m in emit]
    condition = read.filter
    if target.read_filter == "pruning_only" and parent is not None:
        # A filter above that holds every conjunct already applies the read's filter.
        position = {base: i for i, base in reversed(list(enumerate(out)))}
        above = {key(c) for c in conjuncts(parent.filter.condition, functions)}
        mine = conjuncts(condition, functions)
        if all(referenced_fields(c) <= position.keys() and key(remap_fields(c, position)) in above for c in mine):
            return False
    needed = sorted(referenced_fields(condition) - set(cols))
    if needed and not read.HasField("projection"):  # pragma: no cover - every field is output
        raise UnsupportedError("ReadRel.filter reads a field the read does not have", f"{path}.read.filter")
    if needed:
        read.projection.select.struct_items.extend(
            Expression.MaskExpression.StructItem(field=f) for f in needed)
        cols = cols + needed
    position = {base: i for i, base in enumerate(cols)}
    filter_condition = remap_fields(condition, position)
    if target.read_filter == "unsupported":
        read.ClearField("filter")
    original_out = emit if emit is not None else list(range(len(cols) - len(needed)))
    read.common.ClearField("emit_kind")
    new = Rel()
    new.filter.input.CopyFrom(rel)
    new.filter.condition.CopyFrom(filter_condition)
    if original_out != list(range(len(cols))):
        new.filter.common.emit.output_mapping.extend(original_out)
    hint = rel.read.common
    if hint.HasField("hint"):
        new.filter.common.hint.CopyFrom(hint.hint)
    rel.CopyFrom(new)
    return True


def _mask_to_project(rel: Rel, path: str, target: Target) -> None:
    """The read without its mask (and emit) under a ``ProjectRel`` that outputs the columns the mask (and
    emit) selected: Acero reads a project's emit as the spec says, not a read's emit."""
    if rel.WhichOneof("rel_type") == "filter":  # the FilterRel _filter_above put over the read
        rel = rel.filter.input
    read = rel.read
    _check_mask(read, path, target)
    cols = _columns(read)
    emit = _emit(rel)
    mapping = cols if emit is None else [cols[m] for m in emit]
    read.ClearField("projection")
    read.common.ClearField("emit_kind")
    n_base = len(read.base_schema.struct.types)
    project = Rel()
    project.project.input.CopyFrom(rel)
    project.project.expressions.extend(field(c) for c in mapping)
    project.project.common.emit.output_mapping.extend(range(n_base, n_base + len(mapping)))
    rel.CopyFrom(project)
