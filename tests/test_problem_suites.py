"""A problems file (scripts/pte_problems.py) as a benchmark suite: `tools.suites.load_cases("json:PATH")`."""

from __future__ import annotations

import json

import pytest
import torch
from cuda_triton.conv import ConvParams, ConvProblem
from cuda_triton.conv.tuning_keys import problem_spec
from cuda_triton.tools import conv_cases as nc
from cuda_triton.tools.suites import PUBLIC_SUITE, load_cases

pytestmark = pytest.mark.timeout(120)


def _problems() -> list[ConvProblem]:
    stem = ConvProblem.from_tensors(
        torch.randn(1, 3, 32, 32),
        torch.randn(16, 3, 3, 3),
        torch.randn(16),
        ConvParams((2, 2), (1, 1), (1, 1), (1, 1), False, (0, 0), 1),
    )
    depthwise = ConvProblem.from_tensors(
        torch.randn(2, 24, 14, 14).to(memory_format=torch.channels_last),
        torch.randn(24, 1, 5, 5),
        None,
        ConvParams((1, 1), (2, 2), (2, 2), (1, 1), False, (0, 0), 24),
    )
    up = ConvProblem.from_tensors(
        torch.randn(1, 8, 9, 9).to(memory_format=torch.channels_last),
        torch.randn(8, 4, 2, 2),
        None,
        ConvParams((2, 2), (0, 0), (0, 0), (1, 1), True, (1, 1), 2),
    )
    return [stem, depthwise, up]


def test_problem_file_round_trips_through_suite_cases(tmp_path) -> None:
    """Each case rebuilds the problem it came from: same signature (its name) and input layout."""
    problems = _problems()
    path = tmp_path / "problems.json"
    path.write_text(json.dumps([problem_spec(p) for p in problems]))
    cases = load_cases(f"json:{path}")
    assert [c.name for c in cases] == [p.signature() for p in problems]
    assert [c.channels_last for c in cases] == [False, True, True]
    for c, p in zip(cases, problems, strict=True):
        case = nc.case_from_suite(c, "float32", bias=p.has_bias)
        x, w, b = nc.make_tensors(case, "cpu")
        rebuilt = ConvProblem.from_tensors(x, w, b, nc.params_of(case))
        assert rebuilt.signature() == c.name
        assert rebuilt.input_stride == p.input_stride


def test_suite_files_still_load() -> None:
    assert load_cases(str(PUBLIC_SUITE))


@pytest.mark.timeout(120)
def test_many_cases_plot_ranked_speedups(tmp_path, monkeypatch) -> None:
    """Over `_MAX_BARS` cases (a whole program's convolutions) the plot ranks each family's speed-ups instead of
    drawing a bar per case."""
    pytest.importorskip("matplotlib")
    from cuda_triton.tools import bench_report

    ranked = []
    monkeypatch.setattr(
        bench_report, "_plot_ranked", lambda rows, path, plt, ticker: ranked.append(len(rows))
    )
    rows = [
        {"case": {"name": f"c{i}", "dtype": "float16", "groups": 1, "C": 8, "transposed": False},
         "cudnn_us": 10.0, "ours_us": 5.0 + i}
        for i in range(bench_report._MAX_BARS + 1)
    ]  # fmt: skip
    bench_report.plot(rows, tmp_path / "many.png")
    assert ranked == [len(rows)]
    monkeypatch.undo()
    bench_report.plot(rows, tmp_path / "many.png")
    assert (tmp_path / "many.png").stat().st_size > 0
    bench_report.plot(rows[:3], tmp_path / "few.png")  # a bar per case
    assert (tmp_path / "few.png").stat().st_size > 0
