#!/usr/bin/env python
"""Load/destroy cycles of programs on a GPU: device and host memory must stay flat.

For each program, ``cuda_triton_runner --load_cycles N`` loads the .pte, initialises its method (every delegate:
kernels, weights, intermediates, staging, CUDA graph), executes it once and destroys it, N times in one process,
printing the device memory in use (cuMemGetInfo) and the process's resident host memory along the way. PASS when,
from the sample at a tenth of the cycles (allocator caches warmed up) to the last, device memory grew by at most
``--device-slack-mib`` and host memory by at most ``--host-slack-mib``. Programs run one after the other: device
memory is the whole GPU's.

    # here (CPU): python scripts/gpu_validate.py prepare --set core
    # there (GPU; carry .carry/gpu_validate):
    PYTHONPATH=backends python scripts/gpu_memory_cycles.py --out $OUT [--cycles 1000] [--only demo_fp32 ...]

Writes ``$OUT/gpu_memory_cycles.json`` and ``.md`` (the samples of every program) and prints a summary; exits 0 on
PASS.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = re.compile(r"load cycle (\d+): device used (\d+) bytes, host rss (\d+) bytes")
DEFAULT_PROGRAMS = ("demo_fp32", "demo_fp32_device", "mobilenetv2_fp16")
MIB = 1 << 20


def parse_samples(stdout: str) -> list[tuple[int, int, int]]:
    """(cycle, device bytes in use, host resident bytes) of every sample the runner printed."""
    return [(int(m.group(1)), int(m.group(2)), int(m.group(3))) for m in SAMPLE.finditer(stdout)]


def judge(
    samples: list[tuple[int, int, int]], cycles: int, device_slack: int, host_slack: int
) -> dict[str, Any]:
    """Growth from the first sample at or after a tenth of the cycles to the last one, against the slacks."""
    if not samples or samples[-1][0] != cycles:
        return {"ok": False, "error": f"the runner did not finish {cycles} cycles"}
    base = next(s for s in samples if s[0] >= max(1, cycles // 10))
    last = samples[-1]
    device_growth, host_growth = last[1] - base[1], last[2] - base[2]
    span = max(1, last[0] - base[0])
    return {"ok": device_growth <= device_slack and host_growth <= host_slack, "from_cycle": base[0],
            "device_growth_bytes": device_growth, "host_growth_bytes": host_growth,
            "device_bytes_per_cycle": device_growth / span, "host_bytes_per_cycle": host_growth / span}  # fmt: skip


def run_program(
    runner: Path, cmd_tail: list[str], cycles: int, timeout: float
) -> tuple[int | None, str, str]:
    cmd = [str(runner), *cmd_tail, "--num_executions", "1", "--warmup", "0", "--load_cycles", str(cycles)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout)
        return r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return None, out, "timeout"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cycles", type=int, default=1000)
    ap.add_argument(
        "--only", nargs="*", help=f"manifest entries (default: those of {DEFAULT_PROGRAMS} present)"
    )
    ap.add_argument("--device-slack-mib", type=float, default=2.0)
    ap.add_argument("--host-slack-mib", type=float, default=16.0)
    ap.add_argument("--timeout", type=float, default=280.0, help="seconds per program")
    ap.add_argument(
        "--runner", help="an already built cuda_triton_runner (default: build it like gpu_validate)"
    )
    args = ap.parse_args(argv)

    sys.path.insert(0, str(ROOT / "scripts"))
    import gpu_faults
    import gpu_validate

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not gpu_validate.MANIFEST.exists():
        print(
            f"{gpu_validate.MANIFEST} not found: run `python scripts/gpu_validate.py prepare` first",
            file=sys.stderr,
        )
        return 2
    manifest = json.loads(gpu_validate.MANIFEST.read_text())
    names = [e["name"] for e in manifest["entries"]]
    only = args.only or [n for n in DEFAULT_PROGRAMS if n in names] or names[:1]
    programs = gpu_faults.programs_from_manifest(gpu_validate.EXPORTS, manifest, only)
    runner = Path(args.runner) if args.runner else gpu_validate.build_runner([])
    results = []
    for p in programs:
        tail = ["--model_path", str(p.pte), "--inputs", ",".join(map(str, p.inputs))]
        for f in p.data_files:
            tail += ["--data_path", str(f)]
        rc, stdout, stderr = run_program(runner, tail, args.cycles, args.timeout)
        samples = parse_samples(stdout)
        verdict = judge(
            samples, args.cycles, int(args.device_slack_mib * MIB), int(args.host_slack_mib * MIB)
        )
        if rc != 0:
            verdict = {"ok": False, "error": f"runner exit {rc}: {stderr[-600:]}"}
        results.append({"program": p.name, "rc": rc, "samples": samples, **verdict})
        growth = (f"device {verdict['device_growth_bytes'] / MIB:+.2f} MiB, host {verdict['host_growth_bytes'] / MIB:+.2f}"
                  f" MiB from cycle {verdict['from_cycle']}" if "from_cycle" in verdict else verdict.get("error", ""))  # fmt: skip
        print(
            f"[cycles] {'PASS' if verdict['ok'] else 'FAIL'} {p.name}: {args.cycles} cycles, {growth}",
            flush=True,
        )
    ok = bool(results) and all(r["ok"] for r in results)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    summary = {"date": date, "gpu": gpu_faults.gpu_name(), "cycles": args.cycles, "results": results, "ok": ok,
               "command": "PYTHONPATH=backends python scripts/gpu_memory_cycles.py " + " ".join(argv or sys.argv[1:])}  # fmt: skip
    (out / "gpu_memory_cycles.json").write_text(json.dumps(summary, indent=1) + "\n")
    lines = [f"## Load/destroy cycles ({date}, {summary['gpu']})", "", f"Command: `{summary['command']}`", "",
             "| program | cycles | device growth MiB | host growth MiB | from cycle | result |", "|---|---|---|---|---|---|"]  # fmt: skip
    for r in results:
        if "from_cycle" in r:
            lines.append(f"| {r['program']} | {args.cycles} | {r['device_growth_bytes'] / MIB:+.3f} | "
                         f"{r['host_growth_bytes'] / MIB:+.3f} | {r['from_cycle']} | {'PASS' if r['ok'] else 'FAIL'} |")  # fmt: skip
        else:
            lines.append(f"| {r['program']} | {args.cycles} | - | - | - | FAIL: {r.get('error', '')[:200]} |")
    lines += ["", f"All OK: {ok}", ""]
    (out / "gpu_memory_cycles.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
