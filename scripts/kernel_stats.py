#!/usr/bin/env python
"""What the export compiles for a convolution: registers, spills and the PTX's shape, per launch (no GPU).

    PYTHONPATH=backends python scripts/kernel_stats.py json:build/problems.json          # pte_problems output
    PYTHONPATH=backends python scripts/kernel_stats.py json:p.json --all-schedules --template depthwise
    PYTHONPATH=backends python scripts/kernel_stats.py json:p.json --json old.json       # at one commit
    PYTHONPATH=backends python scripts/kernel_stats.py diff old.json new.json            # same code?

Each problem's launches (the shipped tuning table's or heuristic's schedule, or with ``--all-schedules`` every
schedule of the supporting templates) are compiled as the export compiles them (`kernel.aot.compile_launch`, the
Triton of this machine), then ``ptxas -v`` reports registers, spill bytes and stack frame, and the PTX is counted
for the instructions that tell a layout problem (``shfl``, ``bar.sync``) or a memory one (global and shared
loads and stores). The SHA-256 of the PTX without its debug lines says whether two trees compile a launch to the same code: ``diff`` lists the
launches whose PTX or counts differ. A slow kernel with spills or thousands of shuffles has a code-generation
problem, not a schedule problem.

The GPU machine runs its own Triton's JIT in the eager op and the tuner; its code for the same schedule can
differ (docs/performance.md, "Batch-1 layers"), so a kernel's time there is not always the exported kernel's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))

COUNTED = {
    "shfl": r"\bshfl\.",
    "bar_sync": r"\bbar\.sync\b|\bbarrier\.sync\b",
    "ld_global": r"\bld\.global\.",
    "st_global": r"\bst\.global\.",
    "ld_shared": r"\bld\.shared\.|\bldmatrix\.",
    "st_shared": r"\bst\.shared\.",
    "mma": r"\bmma\.|\bwgmma\.",
}


def ptxas_usage(ptx: str, arch: int) -> dict[str, int]:
    """Registers, spill stores/loads and stack frame bytes that ``ptxas -v`` reports for ``ptx``."""
    from triton.backends.nvidia.compiler import get_ptxas

    suffix = "a" if arch == 90 else ""
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(ptx)
    cmd = [get_ptxas(arch).path, "-v", f"-arch=sm_{arch}{suffix}", f.name, "-o", "/dev/null"]
    log = subprocess.run(cmd, capture_output=True, text=True, timeout=300).stderr
    Path(f.name).unlink()

    def grab(pattern: str) -> int:
        m = re.search(pattern, log)
        return int(m.group(1)) if m else -1

    return {
        "registers": grab(r"Used (\d+) registers"),
        "spill_stores": grab(r"(\d+) bytes spill stores"),
        "spill_loads": grab(r"(\d+) bytes spill loads"),
        "stack": grab(r"(\d+) bytes stack frame"),
    }


def code_of(ptx: str) -> str:
    """The PTX without its debug information (source file and line of each instruction, the debug sections), so
    that moving a kernel's source lines does not count as a code change."""
    kept = []
    in_debug = False
    for line in ptx.splitlines():
        stripped = line.strip()
        if stripped.startswith(".section") and ".debug" in stripped:
            in_debug = True
        if in_debug:
            in_debug = stripped != "}"
            continue
        if not stripped.startswith((".loc", ".file", "//")):
            kept.append(line)
    return "\n".join(kept)


def launch_stats(launch, arch: int) -> dict[str, Any]:
    from cuda_triton.kernel.aot import compile_launch

    kernel = compile_launch(launch, arch)
    counts = {name: len(re.findall(pattern, kernel.ptx)) for name, pattern in COUNTED.items()}
    return {
        "kernel": kernel.name,
        "warps": kernel.num_warps,
        "shared": kernel.shared,
        **ptxas_usage(kernel.ptx, arch),
        **counts,
        "ptx_sha256": hashlib.sha256(code_of(kernel.ptx).encode()).hexdigest()[:16],
    }


def problems_from(sources: list[str]) -> list:
    """The distinct problems of ``sources`` in the tuner's syntax (`tools.tuning_problems.collect_problems`:
    json:PATH, public, model:NAME, ...; signatures in fp16, both layouts, batch 1)."""
    from cuda_triton.tools.tuning_problems import collect_problems

    try:
        found = collect_problems(",".join(sources), ["fp16"], ["fp16"], [1], ["channels_last", "contiguous"])
    except FileNotFoundError as e:
        raise SystemExit(f"kernel_stats: {e.filename}: no such file") from e
    return list(dict.fromkeys(problem for _, problem in found))


def candidates(problem, all_schedules: bool, only: str | None) -> list:
    from cuda_triton.conv.templates import Candidate, registered_templates, select_candidate
    from cuda_triton.conv.tuning import lookup

    if not all_schedules:
        chosen = select_candidate(problem, lookup)
        return [chosen] if only is None or chosen.template.name == only else []
    out = []
    for template in registered_templates():
        if (only is None or template.name == only) and template.supports(problem):
            out += [Candidate(template, schedule) for schedule in template.schedules(problem)]
    return out


def stats(args: argparse.Namespace) -> int:
    rows = []
    problems = problems_from(args.problems)
    for i, problem in enumerate(problems):
        for cand in candidates(problem, args.all_schedules, args.template):
            for launch in cand.template.launches(problem, cand.schedule):
                row = {
                    "problem": problem.signature() + ":" + problem.dtype,
                    "template": cand.template.name,
                    "schedule": cand.schedule.key(),
                    **launch_stats(launch, args.arch),
                }
                rows.append(row)
                print(
                    f"[{i + 1}/{len(problems)}] {row['problem']} {row['template']} {row['schedule']} "
                    f"{row['kernel']}: {row['registers']} regs, spills {row['spill_stores']}/{row['spill_loads']} B,"
                    f" shfl {row['shfl']}, bar {row['bar_sync']}, ld.global {row['ld_global']}, "
                    f"st.global {row['st_global']}",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(json.dumps({"arch": args.arch, "rows": rows}, indent=1) + "\n")
    return 0


def diff(args: argparse.Namespace) -> int:
    def keyed(path: str) -> dict[tuple, dict]:
        rows = json.loads(Path(path).read_text())["rows"]
        return {(r["problem"], r["template"], r["schedule"], r["kernel"]): r for r in rows}

    old, new = keyed(args.old), keyed(args.new)
    changed = 0
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a is None or b is None:
            print(f"{'only in ' + (args.new if a is None else args.old)}: {' '.join(key)}")
            changed += 1
            continue
        moved = {k: (a[k], b[k]) for k in a if k != "ptx_sha256" and a[k] != b.get(k)}
        if moved or a["ptx_sha256"] != b["ptx_sha256"]:
            changed += 1
            detail = ", ".join(f"{k} {x} -> {y}" for k, (x, y) in moved.items()) or "same counts"
            print(f"PTX differs: {' '.join(key)}: {detail}")
    print(f"{changed} of {len(set(old) | set(new))} launches differ")
    return 1 if changed else 0


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "diff":
        ap = argparse.ArgumentParser(prog="kernel_stats.py diff")
        ap.add_argument("old")
        ap.add_argument("new")
        return diff(ap.parse_args(sys.argv[2:]))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "problems", nargs="+", help="problem sources as tune.py takes them (json:PATH of pte_problems.py)"
    )
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--all-schedules", action="store_true", help="every schedule of the supporting templates")
    ap.add_argument("--template", default=None, help="only this template")
    ap.add_argument("--json", default=None, help="also write the rows here (for `diff`)")
    return stats(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
