"""Table locations as the user gives them: plain paths, ``file://`` URIs, or any URI Spark reads
(``s3a://``, ``hdfs://``, ``abfss://``...). No Spark needed here.

>>> local_path("file:///data/tpch%20sf1"), local_path("data/tpch"), local_path("s3a://bucket/tpch")
('/data/tpch sf1', 'data/tpch', None)
>>> join_location("s3a://bucket/tpch/", "lineitem.parquet"), join_location("/data", "x")
('s3a://bucket/tpch/lineitem.parquet', '/data/x')
"""

from __future__ import annotations

import os
import urllib.parse


def scheme(location: str) -> str:
    """The URI scheme (``"s3a"``, ``"file"``...), ``""`` for a plain path."""
    return urllib.parse.urlparse(location).scheme.lower() if "://" in location else ""


def local_path(location: str) -> str | None:
    """The local path of a plain path or ``file:`` URI; ``None`` for any other scheme."""
    kind = scheme(location) if "://" in location else ("file" if location.startswith("file:") else "")
    if kind == "file":
        return urllib.parse.unquote(urllib.parse.urlparse(location).path)
    if kind:
        return None
    return location


def join_location(root: str, name: str) -> str:
    """``root`` / ``name``, for paths and URIs alike."""
    if local_path(root) is not None and "://" not in root:
        return os.path.join(root, name)
    return root.rstrip("/") + "/" + name
