#!/usr/bin/env python
"""Per-op breakdown of a runner run from its ETDump, read with ExecuTorch's Inspector.

    # on the GPU machine
    build/cuda_triton_runner --model_path model.pte --num_executions 20 --etdump_path run.etdp
    # here (executorch installed)
    python scripts/etdump_ops.py run.etdp [--json out.json]
    # each convolution's in-model time against cuDNN's for the same problem (bench_conv.py --suite json:...)
    python scripts/etdump_ops.py run.etdp --pte model.pte --cudnn OUT/bench.json

With an event tracer attached, every CudaTritonBackend delegate times its work with CUDA events and logs it as
ExecuTorch delegate profiling events: one per delegate (``CudaTritonBackend#<n>``, its whole GPU work, staging
copies included) and one per op (``CudaTritonBackend#<n>/op<i> <template>``, with the schedule as the event's
metadata). This prints, per delegate, its GPU time and each op's (median over the executions, and its share of the
delegate), the ops' time summed by record kind and template (where the time goes by op family), then the host-side
events ExecuTorch records (``Method::execute``, each ``DELEGATE_CALL``, the operators
run on the CPU), so GPU time and host overhead can be read side by side. Times are in microseconds.

With ``--pte`` (the program the run executed) and ``--cudnn`` (`bench_conv.py` runs over the program's
convolutions, ``--suite json:`` of `pte_problems.py`), each convolution op's time in the run is set beside cuDNN's
time for the same problem: the exported kernels (compiled by the export machine's Triton, fused epilogue and the
op's CUDA events included) against cuDNN, where `bench_conv.py`'s own "ours" column times the GPU machine's JIT
build of the same schedule, which can differ (docs/performance.md, "Batch-1 layers"). A profiled run launches op
by op with events between them, so an op's time also holds any wait for the host to enqueue the next launch:
for kernels of a few microseconds it is an upper bound.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

DELEGATE_PREFIX = "CudaTritonBackend#"


@dataclass
class Timed:
    name: str
    runs: int
    median_us: float
    mean_us: float
    metadata: str = ""


@dataclass
class DelegateProfile:
    delegate: Timed
    ops: list[Timed] = field(default_factory=list)


def _timed(name: str, raw_ms: list[float], metadata: str = "") -> Timed:
    us = [v * 1e3 for v in raw_ms]
    return Timed(name, len(us), statistics.median(us), statistics.fmean(us), metadata)


def _metadata(event: Any) -> str:
    items = getattr(event, "delegate_debug_metadatas", None) or []
    first = items[0] if items else b""
    return first.decode(errors="replace") if isinstance(first, bytes) else str(first)


def breakdown(etdump_path: str) -> tuple[list[DelegateProfile], list[Timed]]:
    """(the delegates with their ops, the other timed events) of the run's executions."""
    from executorch.devtools import Inspector

    inspector = Inspector(etdump_path=etdump_path)
    delegates: dict[str, DelegateProfile] = {}
    host: list[Timed] = []
    for block in inspector.event_blocks:
        if block.name != "Execute":
            continue
        for event in block.events:
            raw = list(event.perf_data.raw) if event.perf_data is not None else []
            if not raw:
                continue
            name = str(event.name)
            if name.startswith(DELEGATE_PREFIX):
                delegate = name.split("/", 1)[0]
                profile = delegates.setdefault(delegate, DelegateProfile(_timed(delegate, [0.0])))
                if "/" in name:
                    profile.ops.append(_timed(name.split("/", 1)[1], raw, _metadata(event)))
                else:
                    profile.delegate = _timed(delegate, raw)
            else:
                host.append(_timed(name, raw))
    return list(delegates.values()), host


def by_kind(delegates: list[DelegateProfile]) -> list[tuple[str, int, float]]:
    """(record kind and template, op count, summed median us) over every delegate's ops, most time first: where a
    program's GPU time goes by op family (an op's metadata starts with its record kind and template)."""
    totals: dict[str, list[float]] = {}
    for d in delegates:
        for op in d.ops:
            kind = " ".join(op.metadata.split()[:2]) or "?"
            entry = totals.setdefault(kind, [0, 0.0])
            entry[0] += 1
            entry[1] += op.median_us
    return sorted(((k, int(n), us) for k, (n, us) in totals.items()), key=lambda t: -t[2])


def conv_signatures(pte_path: str) -> dict[tuple[str, str], str]:
    """(delegate event name, op event prefix ``op<i>``) -> ``signature:dtype`` of each convolution record of the
    program's CudaTritonBackend delegates, numbered in program order as the runtime names them."""
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from pin_table import pte_conv_ops

    return {
        (f"{DELEGATE_PREFIX}{n}", f"op{i}"): f"{problem.signature()}:{problem.dtype}"
        for n, i, problem in pte_conv_ops(Path(pte_path))
    }


def against_cudnn(
    delegates: list[DelegateProfile], signatures: dict[tuple[str, str], str], bench_paths: list[str]
) -> list[dict[str, Any]]:
    """One row per convolution op whose problem a bench run timed: its time in this run, cuDNN's and the eager
    op's (the GPU machine's JIT) from the bench run."""
    timed: dict[str, dict[str, Any]] = {}
    for path in bench_paths:
        with open(path) as f:
            for case in json.load(f)["cases"]:
                if case.get("cudnn_us"):
                    timed[f"{case['case']['name']}:{case['case']['dtype']}"] = case
    rows = []
    for d in delegates:
        for op in d.ops:
            sig = signatures.get((d.delegate.name, op.name.split()[0]))
            case = timed.get(sig) if sig else None
            if case is None:
                continue
            rows.append(
                {
                    "op": op.name,
                    "problem": sig,
                    "template": " ".join(op.metadata.split()[1:3]),
                    "in_model_us": op.median_us,
                    "cudnn_us": case["cudnn_us"],
                    "eager_op_us": case.get("ours_us"),
                    "speedup": case["cudnn_us"] / op.median_us,
                }  # fmt: skip
            )
    return rows


def render_against_cudnn(rows: list[dict[str, Any]]) -> str:
    lines = [
        "",
        "Convolutions against cuDNN (in-model time here; cuDNN and the eager op from the bench run):",
    ]
    for r in rows:
        eager = "-" if r["eager_op_us"] is None else f"{r['eager_op_us']:.1f}"
        lines.append(
            f"  {r['in_model_us']:8.1f} us  cuDNN {r['cudnn_us']:7.1f}  {r['speedup']:5.2f}x  (eager op {eager})  "
            f"{r['op'].split()[0]} {r['problem']} {r['template']}"
        )
    if rows:
        gmean = math.exp(statistics.fmean(math.log(r["speedup"]) for r in rows))
        worst = min(rows, key=lambda r: r["speedup"])
        lines.append(
            f"  geomean {gmean:.2f}x over {len(rows)} convolutions, worst {worst['speedup']:.2f}x "
            f"({worst['problem']}); {sum(r['speedup'] < 1.0 for r in rows)} below 1.0x"
        )
    return "\n".join(lines) + "\n"


def render(delegates: list[DelegateProfile], host: list[Timed]) -> str:
    lines = []
    total = sum(d.delegate.median_us for d in delegates)
    lines.append(
        f"GPU time of the CudaTritonBackend delegates (median over executions): {total:.1f} us in all"
    )
    for d in delegates:
        lines.append("")
        lines.append(f"{d.delegate.name}: {d.delegate.median_us:.1f} us ({d.delegate.runs} runs)")
        for op in d.ops:
            share = 100.0 * op.median_us / d.delegate.median_us if d.delegate.median_us > 0 else 0.0
            lines.append(f"  {op.median_us:10.1f} us {share:5.1f}%  {op.name}  {op.metadata}")
    kinds = by_kind(delegates)
    op_total = sum(us for _, _, us in kinds)
    lines.append("")
    lines.append("By op kind and template (summed medians):")
    for kind, count, us in kinds:
        share = 100.0 * us / op_total if op_total > 0 else 0.0
        lines.append(f"  {us:10.1f} us {share:5.1f}%  {count:4d} ops  {kind}")
    if host:
        lines.append("")
        lines.append("Host-side events (ExecuTorch's own, median):")
        for h in host:
            lines.append(f"  {h.median_us:10.1f} us  {h.name} ({h.runs} runs)")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("etdump", help="the runner's --etdump_path file")
    ap.add_argument("--json", help="also write the breakdown here")
    ap.add_argument("--pte", help="the program the run executed (to name each convolution's problem)")
    ap.add_argument(
        "--cudnn", nargs="*", default=[], help="bench_conv.py bench.json runs over its convolutions"
    )
    args = ap.parse_args(argv)
    if args.cudnn and not args.pte:
        ap.error("--cudnn needs --pte (the program, to know which problem each op runs)")
    delegates, host = breakdown(args.etdump)
    if not delegates:
        print(
            f"{args.etdump}: no CudaTritonBackend events (was the runner given --etdump_path?)",
            file=sys.stderr,
        )
        return 1
    print(render(delegates, host), end="")
    convs = against_cudnn(delegates, conv_signatures(args.pte), args.cudnn) if args.cudnn else []
    if args.cudnn:
        print(render_against_cudnn(convs), end="")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "delegates": [asdict(d) for d in delegates],
                    "by_kind": [{"kind": k, "ops": n, "us": us} for k, n, us in by_kind(delegates)],
                    "host": [asdict(h) for h in host],
                    "against_cudnn": convs,
                },
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
