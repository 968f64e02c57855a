#!/usr/bin/env python
"""Time .pte exports of zoo models with a cold and a warm Triton compile cache (CPU only, no GPU).

    python scripts/time_exports.py --models resnet50 resnet18 --out exports/timing

For each model: a cold export (a fresh, empty ``TRITON_CACHE_DIR``), then a warm one (same cache, new process),
each a separate ``scripts/export_pte.py`` process. Writes ``<out>/timing.json`` and ``<out>/timing.md`` with the
export time (torch.export + lowering + to_executorch + write, as export_pte.py measures it), the process wall time
(including Python and library start-up), kernels compiled and partition counts. The machine's load average is
recorded too: other work on the machine inflates every number.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_export(model: str, out_dir: Path, cache: Path, extra: list[str]) -> dict:
    report = out_dir / f"{model}.report.json"
    env = dict(os.environ, TRITON_CACHE_DIR=str(cache), CUDA_TRITON_PROGRESS="0")
    cmd = [sys.executable, str(ROOT / "scripts" / "export_pte.py"), "--model", model, "--out",
           str(out_dir / f"{model}.pte"), "--no-reference", "--report-json", str(report), *extra]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"export of {model} failed:\n{proc.stdout}\n{proc.stderr}")
    data = json.loads(report.read_text())
    data["process_wall_s"] = wall
    data["load_average"] = os.getloadavg()
    data["stdout"] = proc.stdout
    return data


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["resnet50"])
    ap.add_argument("--out", type=Path, default=Path("exports/timing"))
    ap.add_argument("--api", default="transform_and_lower", choices=["transform_and_lower", "to_backend"])
    ap.add_argument("--dtype", default="fp32")
    args, extra = ap.parse_known_args()
    args.out.mkdir(parents=True, exist_ok=True)
    extra = ["--api", args.api, "--dtype", args.dtype, *extra]
    rows = []
    for model in args.models:
        with tempfile.TemporaryDirectory(prefix="triton_cache_") as cache:
            cold = run_export(model, args.out, Path(cache), extra)
            warm = run_export(model, args.out, Path(cache), extra)
        rows.append({"model": model, "cold": cold, "warm": warm})
        c, w = cold, warm
        print(
            f"{model}: cold {c['timings_s']['total']:.1f} s (process {c['process_wall_s']:.1f} s), warm "
            f"{w['timings_s']['total']:.1f} s (process {w['process_wall_s']:.1f} s); {c['delegated']}/{c['convs']} "
            f"convs in {c['partitions']} partitions, {c['stats']['kernels_unique']} kernels; load {c['load_average'][0]:.1f}",
            flush=True,
        )
        (args.out / "timing.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = [
        f"API {args.api}, dtype {args.dtype}, {os.cpu_count()} CPUs. Times in seconds: export = torch.export + "
        "lowering + to_executorch + write; process = the whole export_pte.py process; CPU = its user+system "
        "seconds including the compile workers (on an otherwise idle 2-core machine, wall >= CPU / 2).",
        "",
        "| model | convs delegated | partitions | distinct kernels | cold export | cold process | cold CPU | warm export | warm process | warm CPU | compile wait (cold) | load avg |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        c, w = r["cold"], r["warm"]
        lines.append(
            f"| {r['model']} | {c['delegated']}/{c['convs']} | {c['partitions']} | {c['stats']['kernels_unique']} | "
            f"{c['timings_s']['total']:.1f} | {c['process_wall_s']:.1f} | {c['cpu_s']:.1f} | "
            f"{w['timings_s']['total']:.1f} | {w['process_wall_s']:.1f} | {w['cpu_s']:.1f} | "
            f"{c['stats']['compile_seconds']:.1f} | "
            f"{c['load_average'][0]:.1f} |"
        )
    (args.out / "timing.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
