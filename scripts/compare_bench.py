#!/usr/bin/env python
"""Compare two runs of scripts/bench_conv.py: what changed beyond the run-to-run noise.

    python scripts/compare_bench.py docs/bench/h200-2026-12-03-0933-unseen.json /tmp/new/unseen/bench.json

Cases are matched by label (case:dtype). For each matched case it prints cuDNN's time in both runs, ours in both
runs and the speed-up over cuDNN in both, and marks whether our schedule changed. The noise estimate comes from the
runs themselves: the spread of cuDNN's own time ratio (new / old) and of ours where the schedule did not change
(5th-95th percentiles). A case is flagged when its speed-up moved by more than ``--threshold`` (default: the
larger of 15% and the 95th-percentile noise) and its schedule changed (a real regression or gain to look at) or
did not (noise, or a change of kernel code). Exit status 0; the report is for reading.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from typing import Any


def load_cases(path: Path) -> dict[str, dict[str, Any]]:
    """bench.json -> {label: case record} (cases without a time of ours or cuDNN are left out)."""
    data = json.loads(path.read_text())
    return {
        c["label"]: c for c in data["cases"] if c.get("ours_us") and c.get("cudnn_us") and c["ours_us"] > 0
    }


def schedule_of(case: dict[str, Any]) -> tuple[str, str]:
    return case.get("template", ""), json.dumps(case.get("schedule", {}), sort_keys=True)


def quantiles(values: list[float], points: tuple[float, ...] = (0.05, 0.5, 0.95)) -> list[float]:
    """Nearest-rank quantiles of a non-empty list."""
    ordered = sorted(values)
    return [ordered[min(len(ordered) - 1, int(p * len(ordered)))] for p in points]


def compare(old: dict[str, dict], new: dict[str, dict], threshold: float | None) -> dict[str, Any]:
    """Matched cases, the noise estimate and the flagged cases (see module docstring)."""
    labels = sorted(set(old) & set(new))
    if not labels:
        raise ValueError("the two runs have no case in common")
    cudnn_ratio = [new[k]["cudnn_us"] / old[k]["cudnn_us"] for k in labels]
    same = [k for k in labels if schedule_of(old[k]) == schedule_of(new[k])]
    ours_ratio = [new[k]["ours_us"] / old[k]["ours_us"] for k in same]
    spread = [abs(math.log(r)) for r in cudnn_ratio + ours_ratio]
    noise = math.exp(quantiles(spread, (0.95,))[0])
    limit = threshold if threshold is not None else max(1.15, noise)
    rows = []
    for k in labels:
        before = old[k]["cudnn_us"] / old[k]["ours_us"]
        after = new[k]["cudnn_us"] / new[k]["ours_us"]
        rows.append(
            {
                "label": k,
                "speedup_old": before,
                "speedup_new": after,
                "schedule_changed": schedule_of(old[k]) != schedule_of(new[k]),
                "flagged": max(after / before, before / after) > limit,
            }
        )
    gmean = lambda xs: math.exp(statistics.fmean(math.log(x) for x in xs))  # noqa: E731
    return {
        "cases": len(labels),
        "same_schedule": len(same),
        "cudnn_ratio_q": quantiles(cudnn_ratio),
        "ours_same_schedule_ratio_q": quantiles(ours_ratio) if ours_ratio else [],
        "limit": limit,
        "gmean_old": gmean([r["speedup_old"] for r in rows]),
        "gmean_new": gmean([r["speedup_new"] for r in rows]),
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", type=Path, help="bench.json of the earlier run")
    ap.add_argument("new", type=Path, help="bench.json of the later run")
    ap.add_argument("--threshold", type=float, default=None, help="flag speed-up changes beyond this factor")
    args = ap.parse_args(argv)
    report = compare(load_cases(args.old), load_cases(args.new), args.threshold)
    fmt = lambda q: " / ".join(f"{v:.2f}" for v in q)  # noqa: E731
    print(f"{report['cases']} cases in both runs, {report['same_schedule']} on the same schedule")
    print(f"cuDNN new/old time, 5th/50th/95th percentile: {fmt(report['cudnn_ratio_q'])}")
    if report["ours_same_schedule_ratio_q"]:
        print(f"ours new/old time, same schedule:            {fmt(report['ours_same_schedule_ratio_q'])}")
    print(f"speed-up over cuDNN, geometric mean: {report['gmean_old']:.3f}x -> {report['gmean_new']:.3f}x")
    flagged = [r for r in report["rows"] if r["flagged"]]
    print(f"{len(flagged)} cases moved by more than {report['limit']:.2f}x:")
    for r in sorted(flagged, key=lambda r: r["speedup_new"] / r["speedup_old"]):
        why = "schedule changed" if r["schedule_changed"] else "same schedule"
        print(f"  {r['label']:34s} {r['speedup_old']:5.2f}x -> {r['speedup_new']:5.2f}x  ({why})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
