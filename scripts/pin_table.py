#!/usr/bin/env python
"""Write a tuning table that pins every convolution of a .pte a template can run to that template.

    PYTHONPATH=backends python scripts/pin_table.py exports/unet_fp16.pte --template implicit_gemm_box \
        --out build/pin_box.json
    python scripts/export_pte.py --model unet --dtype fp16 --tuning-table build/pin_box.json ...

For validating a template end to end (export, C++ runtime, GPU) on a real model before a tuning run has chosen
it anywhere: the table holds, for each delegated convolution of the program that ``--template`` supports, that
template's heuristic schedule (or ``--schedule-index`` into its tuning space). Times are placeholders (the table's
meta says so); such a table is for tests, never for shipping.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))

from cuda_triton.tools.emulate_blob import derive_launches  # noqa: E402


def pte_conv_ops(path: Path) -> list[tuple[int, int, Any]]:
    """(delegate index, op index, ConvProblem) of every convolution record of every CudaTritonBackend delegate
    blob in the .pte, in program order (the runtime's profiling events number delegates and ops the same way)."""
    from cuda_triton.serialization.blob import ConvRecord, deserialize
    from executorch.exir._serialize._program import deserialize_pte_binary

    prog = deserialize_pte_binary(path.read_bytes()).program
    found = []
    for n, delegate in enumerate(prog.backend_delegate_data):
        blob = deserialize(delegate.data)
        for i, op in enumerate(blob.ops):
            if isinstance(op, ConvRecord):
                found.append((n, i, derive_launches(blob, op, allow_tf32=True)[0]))
    return found


def pte_problems(path: Path) -> list:
    """The ConvProblem of every convolution of every CudaTritonBackend delegate blob in the .pte."""
    return [problem for _, _, problem in pte_conv_ops(path)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pte", type=Path)
    ap.add_argument("--template", required=True)
    ap.add_argument(
        "--schedule-index", type=int, default=None, help="this schedule of the space, not the heuristic's"
    )
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    from cuda_triton.conv.templates import get_template
    from cuda_triton.conv.tuning import TuningEntry, TuningTable

    template = get_template(args.template)
    entries: dict[tuple, TuningEntry] = {}
    problems = pte_problems(args.pte)
    for problem in problems:
        if not template.supports(problem):
            continue
        space = template.schedules(problem)
        schedule = (
            template.heuristic_schedule(problem)
            if args.schedule_index is None
            else space[min(args.schedule_index, len(space) - 1)]
        )
        e = TuningEntry.from_problem(problem, args.arch, template.name, schedule, 1.0, None, None)
        entries[e.key] = e
    meta = {
        "timing": "pinned",
        "note": f"every convolution {args.template} supports in {args.pte.name}, pinned",
    }
    TuningTable(list(entries.values()), args.arch, meta).write(args.out)
    print(f"{args.out}: {len(entries)} of {len(problems)} convolutions pinned to {args.template}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
