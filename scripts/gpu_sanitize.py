#!/usr/bin/env python
"""compute-sanitizer on the runner over the exported programs: memcheck, racecheck, synccheck, initcheck, 0 errors.

Every (program, tool) pair runs ``compute-sanitizer --tool <tool> cuda_triton_runner ... --num_executions 2``
(memcheck with ``--leak-check full``; API errors are reported by every tool, so a failing driver call counts as an
error too). A pair passes when the sanitizer's ``ERROR SUMMARY`` says 0 errors and the runner exited 0.

    # here (CPU): python scripts/gpu_validate.py prepare --set core
    # there (GPU; carry .carry/gpu_validate):
    PYTHONPATH=backends python scripts/gpu_sanitize.py --out $OUT [--tools memcheck,racecheck] [--only NAME ...]

Writes ``$OUT/gpu_sanitize.json`` and ``.md`` (errors per program and tool, the first reports of each failing
pair; the full logs under ``$OUT/sanitize_logs/``), prints a summary, exits 0 when every pair that ran passed and
none was skipped for lack of time.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
# memcheck, synccheck and initcheck end with "ERROR SUMMARY: N errors"; racecheck with
# "RACECHECK SUMMARY: H hazards displayed (N errors, W warnings)".
SUMMARY = re.compile(
    r"(?:ERROR SUMMARY: (\d+) error|RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) error)"
)


def find_sanitizer() -> str | None:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    candidates = sorted(glob.glob("/usr/local/cuda*/bin/compute-sanitizer")) + sorted(
        glob.glob("/usr/local/cuda*/compute-sanitizer/compute-sanitizer")
    )
    return candidates[-1] if candidates else None


def sanitizer_errors(output: str) -> int | None:
    """The error count of compute-sanitizer's summary line, None when it printed none."""
    m = [a or b for a, b in SUMMARY.findall(output)]
    return int(m[-1]) if m else None


def tool_flags(tool: str) -> list[str]:
    flags = ["--tool", tool, "--print-limit", "50"]
    if tool == "memcheck":
        flags += ["--leak-check", "full"]
    return flags


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--only", nargs="*", help="only these manifest entries")
    ap.add_argument("--workers", type=int, default=4, help="sanitizer processes at a time")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per (program, tool)")
    ap.add_argument(
        "--budget-s", type=float, default=540.0, help="no new pair starts after this many seconds"
    )
    ap.add_argument(
        "--runner", help="an already built cuda_triton_runner (default: build it like gpu_validate)"
    )
    args = ap.parse_args(argv)

    sys.path.insert(0, str(ROOT / "scripts"))
    import gpu_faults
    import gpu_validate

    out = Path(args.out)
    logs = out / "sanitize_logs"
    logs.mkdir(parents=True, exist_ok=True)
    sanitizer = find_sanitizer()
    if sanitizer is None:
        print("compute-sanitizer not found (PATH, /usr/local/cuda*/bin)", file=sys.stderr)
        return 2
    if not gpu_validate.MANIFEST.exists():
        print(
            f"{gpu_validate.MANIFEST} not found: run `python scripts/gpu_validate.py prepare` first",
            file=sys.stderr,
        )
        return 2
    manifest = json.loads(gpu_validate.MANIFEST.read_text())
    programs = gpu_faults.programs_from_manifest(gpu_validate.EXPORTS, manifest, args.only)
    tools = [t for t in args.tools.split(",") if t]
    runner = Path(args.runner) if args.runner else gpu_validate.build_runner([])
    start = time.monotonic()

    def one(pair: tuple[Any, str]) -> dict[str, Any]:
        program, tool = pair
        if time.monotonic() - start > args.budget_s:
            return {"program": program.name, "tool": tool, "skipped": "time budget"}
        cmd = [sanitizer, *tool_flags(tool), str(runner), "--model_path", str(program.pte), "--num_executions", "2",
               "--warmup", "0", "--inputs", ",".join(map(str, program.inputs))]  # fmt: skip
        for f in program.data_files:
            cmd += ["--data_path", str(f)]
        t0 = time.monotonic()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=args.timeout)
            rc, text = r.returncode, r.stdout + r.stderr
        except subprocess.TimeoutExpired as e:
            rc = None
            text = (e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else "") + "\n[timeout]"
        (logs / f"{program.name}.{tool}.log").write_text(text)
        errors = sanitizer_errors(text)
        reports = [
            ln for ln in text.splitlines() if ln.startswith("========= ") and "ERROR SUMMARY" not in ln
        ]
        ok = rc == 0 and errors == 0
        return {"program": program.name, "tool": tool, "rc": rc, "errors": errors, "ok": ok,
                "seconds": round(time.monotonic() - t0, 1), "first_reports": [] if ok else reports[:20]}  # fmt: skip

    pairs = [(p, t) for p in programs for t in tools]
    with ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
        results = list(pool.map(one, pairs))
    ran = [r for r in results if "skipped" not in r]
    skipped = [r for r in results if "skipped" in r]
    ok = bool(ran) and all(r["ok"] for r in ran) and not skipped
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    summary = {"date": date, "gpu": gpu_faults.gpu_name(), "sanitizer": sanitizer, "tools": tools,
               "results": results, "ok": ok,
               "command": "PYTHONPATH=backends python scripts/gpu_sanitize.py " + " ".join(argv or sys.argv[1:])}  # fmt: skip
    (out / "gpu_sanitize.json").write_text(json.dumps(summary, indent=1) + "\n")
    lines = [f"## compute-sanitizer ({date}, {summary['gpu']})", "", f"Command: `{summary['command']}`", "",
             "| program | " + " | ".join(tools) + " |", "|---|" + "---|" * len(tools)]  # fmt: skip
    for p in programs:
        cells = []
        for t in tools:
            r = next(x for x in results if x["program"] == p.name and x["tool"] == t)
            if "skipped" in r:
                cells.append("skipped")
            else:
                cells.append(
                    f"{'PASS' if r['ok'] else 'FAIL'} ({r['errors']} errors, rc {r['rc']}, {r['seconds']} s)"
                )
        lines.append(f"| {p.name} | " + " | ".join(cells) + " |")
    total = sum(r["errors"] or 0 for r in ran)
    lines += [
        "",
        f"{len(ran)} runs, {total} errors in all, {len(skipped)} skipped -> {'PASS' if ok else 'FAIL'}",
        "",
    ]
    for r in ran:
        if not r["ok"]:
            lines.append(f"### {r['program']} / {r['tool']}")
            lines += ["```", *r["first_reports"], "```", ""]
    (out / "gpu_sanitize.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
