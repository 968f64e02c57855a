"""scripts/compare_bench.py: matching two bench_conv.py runs, the noise estimate and the flagged cases."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("compare_bench", ROOT / "scripts" / "compare_bench.py")
assert _spec is not None and _spec.loader is not None
compare_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_bench)


def _run(path: Path, cases: list[tuple[str, float, float, dict]]) -> Path:
    """A minimal bench.json: (label, cuDNN us, ours us, schedule) per case."""
    data = {
        "cases": [
            {"label": label, "cudnn_us": c, "ours_us": o, "template": "implicit_gemm", "schedule": s}
            for label, c, o, s in cases
        ]
    }
    path.write_text(json.dumps(data))
    return path


def test_identical_runs_flag_nothing(tmp_path: Path) -> None:
    cases = [(f"c{i}:float16", 10.0 + i, 8.0 + i, {"BLOCK_M": 64}) for i in range(20)]
    old = compare_bench.load_cases(_run(tmp_path / "a.json", cases))
    report = compare_bench.compare(old, old, None)
    assert report["cases"] == report["same_schedule"] == 20
    assert report["cudnn_ratio_q"] == [1.0, 1.0, 1.0] and report["limit"] == pytest.approx(1.15)
    assert not any(r["flagged"] for r in report["rows"])
    assert report["gmean_old"] == pytest.approx(report["gmean_new"])


def test_a_real_change_is_flagged_with_its_cause(tmp_path: Path) -> None:
    base = [(f"c{i}:float16", 10.0, 8.0, {"BLOCK_M": 64}) for i in range(20)]
    changed = list(base)
    changed[3] = ("c3:float16", 10.0, 20.0, {"BLOCK_M": 128})  # 1.25x -> 0.5x, new schedule
    changed[5] = ("c5:float16", 10.0, 4.0, {"BLOCK_M": 64})  # 1.25x -> 2.5x, same schedule
    report = compare_bench.compare(
        compare_bench.load_cases(_run(tmp_path / "a.json", base)),
        compare_bench.load_cases(_run(tmp_path / "b.json", changed)),
        threshold=1.5,
    )
    flagged = {r["label"]: r for r in report["rows"] if r["flagged"]}
    assert set(flagged) == {"c3:float16", "c5:float16"}
    assert flagged["c3:float16"]["schedule_changed"] and not flagged["c5:float16"]["schedule_changed"]
    assert flagged["c3:float16"]["speedup_new"] == pytest.approx(0.5)


def test_runs_without_common_cases_are_refused(tmp_path: Path) -> None:
    a = compare_bench.load_cases(_run(tmp_path / "a.json", [("x:float16", 1.0, 1.0, {})]))
    b = compare_bench.load_cases(_run(tmp_path / "b.json", [("y:float16", 1.0, 1.0, {})]))
    with pytest.raises(ValueError, match="no case in common"):
        compare_bench.compare(a, b, None)


def test_stored_unseen_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """Two stored runs of the unseen suite (docs/bench/): every case matched, a report printed."""
    old = ROOT / "docs" / "bench" / "h200-2026-12-03-0111-unseen.json"
    new = ROOT / "docs" / "bench" / "h200-2026-12-03-0933-unseen.json"
    assert compare_bench.main([str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("111 cases in both runs") and "speed-up over cuDNN, geometric mean" in out
