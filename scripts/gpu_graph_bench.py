#!/usr/bin/env python
"""CUDA graph replay against direct launches, on a GPU: same outputs, and how much faster.

For every program of the manifest, the runner runs it in each execution mode:

* ``direct``: every kernel launched one by one (``--no_cuda_graph``);
* ``graph_update``: the launch sequence replayed from a CUDA graph, device-resident inputs/outputs read and written
  in place, kernel arguments rewritten when their addresses change (``--cuda_graph_io update``, the default);
* ``graph_staging`` (device-planned programs only; host-planned ones stage through fixed buffers in every mode):
  the graph works on fixed buffers of its own, inputs/outputs copied in and out around each replay.

Each mode's outputs are compared with the direct launches' (bit for bit, and max |diff| / max |direct|) and with the
CPU reference (the thresholds of scripts/gpu_validate.py); its end-to-end latency (median) and the host time of one
delegate call (the runner's ``execute host time``: no GPU wait inside for a device-planned program) are recorded. An
ETDump with every op's GPU time is written per program (``$OUT/etdump/<name>.etdp``; read it here with
``python scripts/etdump_ops.py``).

    # here (CPU): python scripts/gpu_validate.py prepare --set core
    # there (GPU; carry .carry/gpu_validate):
    PYTHONPATH=backends python scripts/gpu_graph_bench.py --out $OUT [--num-executions 200] [--only NAME ...]

Writes ``$OUT/gpu_graph_bench.json`` and ``.md``; exits 0 when every graph mode replayed a graph for every delegate
and matched the direct launches and the reference.
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
LATENCY = re.compile(r"median ([\d.]+) ms")
HOST_TIME = re.compile(r"execute host time: median ([\d.]+) us, min ([\d.]+) us")
SUMMARY = re.compile(r"(\d+) delegates: (\d+) replay a CUDA graph(?: \((\w+)\))?, (\d+) launch directly")
MODES = {
    "direct": ["--no_cuda_graph"],
    "graph_update": ["--cuda_graph_io", "update"],
    "graph_staging": ["--cuda_graph_io", "staging"],
}


def parse_run(stdout: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if m := LATENCY.search(stdout):
        out["median_ms"] = float(m.group(1))
    if m := HOST_TIME.search(stdout):
        out["host_us_median"], out["host_us_min"] = float(m.group(1)), float(m.group(2))
    if m := SUMMARY.search(stdout):
        out["delegates"], out["graphs"], out["direct"] = int(m.group(1)), int(m.group(2)), int(m.group(4))
    return out


def compare_outputs(a: bytes, b: bytes, io: dict[str, Any]) -> dict[str, Any]:
    """Bitwise equality and the worst max |a - b| / max |b| over the outputs."""
    import torch

    if len(a) != len(b):
        return {"equal": False, "rel_to_max": float("inf")}
    worst = 0.0
    dtypes = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    for o in io["reference"]["outputs"]:
        sl = slice(o["offset_bytes"], o["offset_bytes"] + o["nbytes"])
        x = torch.frombuffer(bytearray(a[sl]), dtype=dtypes[o["dtype"]]).float()
        y = torch.frombuffer(bytearray(b[sl]), dtype=dtypes[o["dtype"]]).float()
        if x.numel():
            worst = max(worst, (x - y).abs().max().item() / max(y.abs().max().item(), 1e-12))
    return {"equal": a == b, "rel_to_max": worst}


def _row(record: dict[str, Any], mode: str, m: dict[str, Any]) -> str:
    vs = m.get("vs_direct")
    speedup = f"{m['speedup']:.2f}" if m.get("speedup") else "-"
    equal = str(vs["equal"]) if vs else "-"
    diff = f"{vs['rel_to_max']:.1e}" if vs else "-"
    ref = f"{m['reference_rel_to_max']:.1e}" if m.get("reference_rel_to_max") is not None else "-"
    cells = [record["program"], mode, str(m.get("median_ms", "-")), speedup, str(m.get("host_us_median", "-")),
             f"{m.get('graphs', '-')}/{m.get('delegates', '-')}", equal, diff, ref,
             "PASS" if record["ok"] else "FAIL"]  # fmt: skip
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--num-executions", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--only", nargs="*", help="only these manifest entries")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per runner call")
    ap.add_argument(
        "--runner", help="an already built cuda_triton_runner (default: build it like gpu_validate)"
    )
    args = ap.parse_args(argv)

    sys.path.insert(0, str(ROOT / "scripts"))
    import gpu_faults
    import gpu_validate

    out = Path(args.out)
    (out / "etdump").mkdir(parents=True, exist_ok=True)
    if not gpu_validate.MANIFEST.exists():
        print(
            f"{gpu_validate.MANIFEST} not found: run `python scripts/gpu_validate.py prepare` first",
            file=sys.stderr,
        )
        return 2
    manifest = json.loads(gpu_validate.MANIFEST.read_text())
    entries = {e["name"]: e for e in manifest["entries"]}
    programs = gpu_faults.programs_from_manifest(gpu_validate.EXPORTS, manifest, args.only)
    runner = Path(args.runner) if args.runner else gpu_validate.build_runner([])
    results = []
    for p in programs:
        io = json.loads((gpu_validate.EXPORTS / entries[p.name]["io"]).read_text())
        device_planned = bool({"--device-memory", "--device-io"} & set(entries[p.name].get("flags", [])))
        base = ["--model_path", str(p.pte), "--inputs", ",".join(map(str, p.inputs))]
        for f in p.data_files:
            base += ["--data_path", str(f)]
        record: dict[str, Any] = {"program": p.name, "device_planned": device_planned, "modes": {}}
        outputs: dict[str, bytes] = {}
        for mode, flags in MODES.items():
            if mode == "graph_staging" and not device_planned:
                continue
            out_file = out / f"{p.name}.{mode}.bin"
            cmd = [str(runner), *base, *flags, "--num_executions", str(args.num_executions), "--warmup",
                   str(args.warmup), "--output_file", str(out_file)]  # fmt: skip
            try:
                r = subprocess.run(
                    cmd, capture_output=True, text=True, errors="replace", timeout=args.timeout
                )
                rc, stdout, stderr = r.returncode, r.stdout, r.stderr
            except subprocess.TimeoutExpired:
                rc, stdout, stderr = None, "", "timeout"
            run = {"rc": rc, **parse_run(stdout)}
            if rc != 0:
                run["stderr_tail"] = stderr[-800:]
            else:
                outputs[mode] = out_file.read_bytes()
                ref = gpu_validate.compare_bytes(outputs[mode], io)
                run["reference_ok"], run["reference_rel_to_max"] = ref["ok"], ref.get("rel_to_max")
            run["fallbacks"] = stderr.count("could not be captured") + stderr.count(
                "cannot take new tensor addresses"
            )
            record["modes"][mode] = run
        # One profiled run (graphs replay only without the per-op events; these are direct launches, timed).
        etdump = out / "etdump" / f"{p.name}.etdp"
        subprocess.run([str(runner), *base, "--num_executions", "20", "--warmup", "2", "--etdump_path", str(etdump)],
                       capture_output=True, timeout=args.timeout)  # fmt: skip
        record["etdump"] = str(etdump.relative_to(out)) if etdump.exists() else None
        ok = all(m["rc"] == 0 and m.get("reference_ok") for m in record["modes"].values())
        direct = record["modes"].get("direct", {})
        for mode, run in record["modes"].items():
            if mode == "direct" or run["rc"] != 0 or "direct" not in outputs:
                continue
            run["vs_direct"] = compare_outputs(outputs[mode], outputs["direct"], io)
            run["speedup"] = (
                direct["median_ms"] / run["median_ms"]
                if run.get("median_ms") and direct.get("median_ms")
                else None
            )
            ok = ok and run.get("graphs") == run.get("delegates") and run["fallbacks"] == 0
            ok = ok and run["vs_direct"]["rel_to_max"] < gpu_validate.THRESHOLD[io["dtype"]]
        record["ok"] = bool(ok)
        results.append(record)
        cells = ", ".join(f"{m} {r.get('median_ms', '-')} ms (host {r.get('host_us_median', '-')} us/call)"
                          for m, r in record["modes"].items())  # fmt: skip
        print(f"[graphs] {'PASS' if record['ok'] else 'FAIL'} {p.name}: {cells}", flush=True)

    all_ok = bool(results) and all(r["ok"] for r in results)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    summary = {"date": date, "gpu": gpu_faults.gpu_name(), "num_executions": args.num_executions, "ok": all_ok,
               "results": results,
               "command": "PYTHONPATH=backends python scripts/gpu_graph_bench.py " + " ".join(argv or sys.argv[1:])}  # fmt: skip
    (out / "gpu_graph_bench.json").write_text(json.dumps(summary, indent=1) + "\n")
    lines = [f"## CUDA graph replay vs direct launches ({date}, {summary['gpu']})", "",
             f"Command: `{summary['command']}`; median of {args.num_executions} executions after {args.warmup} warmup "
             "(end to end, CPU ops and host copies included); host us/call = median host time of one delegate "
             "execute (device-planned: no GPU wait inside).", "",
             "| program | mode | median ms | speedup vs direct | host us/call | graphs/delegates | = direct | "
             "rel diff vs direct | ref err/max | result |", "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in results:
        for mode, m in r["modes"].items():
            lines.append(_row(r, mode, m))
    lines += ["", f"All OK: {all_ok}", ""]
    (out / "gpu_graph_bench.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
