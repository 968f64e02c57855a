#!/usr/bin/env python
"""Per-op breakdown of a runner run from its ETDump, read with ExecuTorch's Inspector.

    # on the GPU machine
    build/cuda_triton_runner --model_path model.pte --num_executions 20 --etdump_path run.etdp
    # here (executorch installed)
    python scripts/etdump_ops.py run.etdp [--json out.json]

With an event tracer attached, every CudaTritonBackend delegate times its work with CUDA events and logs it as
ExecuTorch delegate profiling events: one per delegate (``CudaTritonBackend#<n>``, its whole GPU work, staging
copies included) and one per op (``CudaTritonBackend#<n>/op<i> <template>``, with the schedule as the event's
metadata). This prints, per delegate, its GPU time and each op's (median over the executions, and its share of the
delegate), the ops' time summed by record kind and template (where the time goes by op family), then the host-side
events ExecuTorch records (``Method::execute``, each ``DELEGATE_CALL``, the operators
run on the CPU), so GPU time and host overhead can be read side by side. Times are in microseconds.
"""

from __future__ import annotations

import argparse
import json
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
    args = ap.parse_args(argv)
    delegates, host = breakdown(args.etdump)
    if not delegates:
        print(
            f"{args.etdump}: no CudaTritonBackend events (was the runner given --etdump_path?)",
            file=sys.stderr,
        )
        return 1
    print(render(delegates, host), end="")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "delegates": [asdict(d) for d in delegates],
                    "by_kind": [{"kind": k, "ops": n, "us": us} for k, n, us in by_kind(delegates)],
                    "host": [asdict(h) for h in host],
                },
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
