"""bench_conv.against_table: this run's times over the tuner's, on the cases that ran the table's schedule."""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import bench_conv  # noqa: E402


def _row(
    label: str, ours: float, cudnn: float, table_us: float, table_cudnn: float, same: bool = True
) -> dict:
    sched = {"BLOCK_M": 64}
    return {
        "label": label,
        "ours_us": ours,
        "cudnn_us": cudnn,
        "template": "implicit_gemm",
        "schedule": sched if same else {"BLOCK_M": 128},
        "table": {"template": "implicit_gemm", "schedule": sched, "us": table_us, "cudnn_us": table_cudnn},
    }


def test_against_table_uses_only_the_tables_schedule() -> None:
    rows = [
        _row("a:float16", 10.0, 8.0, 10.0, 10.0),
        _row("b:float16", 20.0, 9.0, 10.0, 10.0),  # ours 2x slower than the tuner saw: this run's noise
        _row("c:float16", 99.0, 1.0, 10.0, 10.0, same=False),  # another schedule ran: not comparable
        {"label": "d:float16", "ours_us": 5.0, "cudnn_us": 5.0, "table": None},
    ]
    got = bench_conv.against_table(rows)
    assert got is not None and got["n"] == 2
    assert math.isclose(got["ours_gmean"], math.sqrt(2.0))
    assert math.isclose(got["cudnn_gmean"], math.sqrt(0.8 * 0.9))
    assert (got["ours_worst"], got["ours_worst_case"]) == (2.0, "b:float16")


def test_against_table_is_none_without_table_entries() -> None:
    assert bench_conv.against_table([{"label": "x", "ours_us": 1.0, "cudnn_us": 1.0}]) is None
