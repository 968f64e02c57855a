"""Tuning spaces kept as data (kernel/spaces.py): every table of the package's spaces.json files is read by its
module, and the loader refuses a table out of step with the columns its code unpacks."""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path

import pytest
from cuda_triton.kernel.spaces import TILE_FIELDS, load_rows

PACKAGE = Path(importlib.import_module("cuda_triton").__file__).parent


def _tables_read() -> set[tuple[str, str]]:
    """(table file, table name) of every ``load_rows(__file__, NAME, ...)`` call in the package's source."""
    read = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "load_rows":
                args = [a.value for a in node.args if isinstance(a, ast.Constant)]
                file = args[1] if len(args) > 1 else "spaces.json"
                read.add((str(path.with_name(file).relative_to(PACKAGE)), args[0]))
    return read


def test_every_table_is_read():
    """No table file lies unread beside its module, and every table in one is read by some module."""
    files = [p for p in PACKAGE.rglob("*.json") if "tuning" not in p.relative_to(PACKAGE).parts]
    stored = {(str(p.relative_to(PACKAGE)), name) for p in files for name in json.loads(p.read_text())}
    assert stored == _tables_read()


def test_tables_load():
    """Importing the modules loads their tables (the loader checks each one's columns and rows)."""
    from cuda_triton.conv.templates import gemm, implicit_gemm_tma  # noqa: F401
    from cuda_triton.models import layer_tables
    from cuda_triton.ops.gemm import tma  # noqa: F401

    assert layer_tables.MOBILENETV2_STAGES[0] == (1, 16, 1, 1)


def test_loader_checks_columns(tmp_path):
    table = {"T": {"fields": list(TILE_FIELDS), "rows": [[64, 64, 32, 4, 3]]}}
    (tmp_path / "spaces.json").write_text(json.dumps(table))
    beside = str(tmp_path / "module.py")
    assert load_rows(beside, "T", TILE_FIELDS) == ((64, 64, 32, 4, 3),)
    with pytest.raises(ValueError, match="columns"):
        load_rows(beside, "T", ("BLOCK_M", "BLOCK_N"))
    with pytest.raises(KeyError):
        load_rows(beside, "U", TILE_FIELDS)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "spaces.json").write_text(
        json.dumps({"T": {"fields": ["A", "B"], "rows": [[1, 2], [3]]}})
    )
    with pytest.raises(ValueError, match="row"):
        load_rows(str(tmp_path / "bad" / "module.py"), "T", ("A", "B"))
