"""Tuning spaces (and other tables of whole numbers) kept as data, in a JSON file beside the module that uses them.

A file maps each table's name to its column names and its rows, one row a line::

    {"CL_SPACE": {"fields": ["BLOCK_H", "BLOCK_W", "BLOCK_C", "num_warps"], "rows": [[4, 4, 64, 4], ...]}}

`load_rows` returns one table as a tuple of int tuples after checking that its columns are the ones the caller
unpacks, so a table edited out of step with its code fails at import rather than in the middle of a tuning run.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

Rows = tuple[tuple[int, ...], ...]

# The columns of a GEMM-shaped tile space, the most common kind.
TILE_FIELDS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages")


@functools.cache
def _tables(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def load_rows(beside: str, name: str, fields: Sequence[str], file: str = "spaces.json") -> Rows:
    """Table ``name`` of ``file`` in the folder of the module file ``beside`` (pass ``__file__``); its columns
    must be ``fields``."""
    path = Path(beside).with_name(file)
    table = _tables(path).get(name)
    if table is None:
        raise KeyError(f"{path}: no table {name!r}")
    if list(table["fields"]) != list(fields):
        raise ValueError(
            f"{path}: table {name!r} has columns {table['fields']}, its code expects {list(fields)}"
        )
    rows = tuple(tuple(row) for row in table["rows"])
    for row in rows:
        if len(row) != len(fields) or not all(type(v) is int for v in row):
            raise ValueError(
                f"{path}: table {name!r} has a row {list(row)} that is not {len(fields)} integers"
            )
    return rows
