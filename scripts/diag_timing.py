"""Why do some small convs of ours read slower in bench_conv.py than in tune.py? (GPU; a diagnostic, not a test)

    PYTHONPATH=backends python scripts/diag_timing.py --out OUT [--cases r18.l1.3x3.b1:float32,...]

bench_conv.py times the op (``torch.ops.triton.convolution``) in a CUDA graph of up to 500 calls on one set of
operands (L2 warm), interleaved with cuDNN; tune.py launches the schedule's kernels directly on rotating copies
of the operands (L2 cold). On 2026-12-03 r18.l1.3x3.b1 fp32 read 10.3 us in the first and 8.5 us in the second,
while cuDNN went the other way (7.6 warm, 8.7 cold). For each case this times, side by side in one process
(`bench_conv.time_side_by_side`, interleaved rounds):

  op         the op, as bench_conv.py (each call allocates its output from the graph's pool)
  op_out1    the op's kernels launched directly into one preallocated output (same operands, L2 warm)
  rot        the op's kernels on rotating operand copies (tune.py's regime, L2 cold)
  cudnn      ATen/cuDNN as bench_conv.py, and cudnn_rot on the rotating copies

and records the graph's call count per contender. Writes OUT/diag_timing.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_conv  # noqa: E402
import numerics_cases as nc  # noqa: E402

DEFAULT_CASES = (
    "r18.l1.3x3.b1:float32,r18.l1.3x3.b1:float16,r18.l2.3x3s2.b32:float32,regnet.g8.3x3:float32,"
    "effnet.dw5x5:float16,unet3d.up2:float32,vgg.3x3.256:float16"
)


def direct_runner(x, w, b, case: nc.Case, rotations: int):
    """run(i): the op's chosen launches on operand set i % rotations (set 0 is x, w, b)."""
    from cuda_triton.conv.dispatch import tuning_lookup
    from cuda_triton.conv.op import output_layout
    from cuda_triton.conv.problem import ConvProblem
    from cuda_triton.conv.templates import select_candidate

    p = nc.params_of(case)
    problem = ConvProblem.from_tensors(x, w, b, p)
    cand = select_candidate(problem, tuning_lookup)
    sizes, strides = output_layout(x, w, p)
    sets = []
    for i in range(rotations):
        xi = x if i == 0 else x.clone()
        wi = w if i == 0 else w.clone()
        out = torch.empty_strided(sizes, strides, dtype=x.dtype, device=x.device)
        sets.append(
            {
                "input": xi,
                "weight": cand.template.prepare_weight(wi, problem, cand.schedule),
                "bias": b,
                "output": out,
                **cand.allocate_scratch(problem, x.device),
            }
        )
    launches = cand.template.launches(problem, cand.schedule)
    state = {"i": 0}

    def run() -> None:
        tensors = sets[state["i"] % rotations]
        state["i"] += 1
        for launch in launches:
            launch.run(tensors)

    return run, cand, sets


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cases", default=DEFAULT_CASES, help="label:dtype, comma-separated")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import cuda_triton.conv  # noqa: F401  (registers the op)

    torch.backends.cudnn.benchmark = True
    suite = {c.name: c for c in bench_conv.load_suite(bench_conv.DEFAULT_SUITE)}
    rows = []
    for item in args.cases.split(","):
        try:
            rows.append(diag_case(item, suite, args.reps))
        except Exception as e:  # a diagnostic: report and go on
            print(f"{item}: {type(e).__name__}: {e}", flush=True)
    (args.out / "diag_timing.json").write_text(json.dumps(rows, indent=1))


def diag_case(item: str, suite: dict, reps: int) -> dict:
    l2 = 50 * 2**20
    name, dtype = item.split(":")
    case = nc.case_from_suite(suite[name], dtype)
    x, w, b = nc.make_tensors(case, "cuda")
    per_set = x.numel() * x.element_size() * 3 + w.numel() * w.element_size()
    rot = max(2, min(64, math.ceil(2 * l2 / per_set)))
    op = bench_conv.ours_call(case, x, w, b)
    cudnn = bench_conv.cudnn_call(case, x, w, b)
    warm_run, cand, _ = direct_runner(x, w, b, case, 1)
    rot_run, _, sets = direct_runner(x, w, b, case, rot)
    rot_inputs = [s["input"] for s in sets]
    rot_weights = [w] + [w.clone() for _ in range(rot - 1)]
    p = nc.params_of(case)
    from cuda_triton.conv.op import reference_convolution

    state = {"i": 0}

    def cudnn_rot() -> None:
        i = state["i"] % rot
        state["i"] += 1
        reference_convolution(rot_inputs[i], rot_weights[i], b, p)

    fns = {"op": op, "op_out1": warm_run, "rot": rot_run, "cudnn": cudnn, "cudnn_rot": cudnn_rot}
    res = bench_conv.time_side_by_side(fns, reps)
    row = {
        "case": item,
        "template": cand.template.name,
        "schedule": cand.schedule.as_dict(),
        "rotations": rot,
        **{k: round(v[0], 3) for k, v in res.items()},
        "mode": {k: v[1] for k, v in res.items()},
        "graph_calls": {k: v[2] for k, v in res.items()},
    }
    print(
        f"{item:28} {cand.template.name:18} "
        + " ".join(f"{k}={row[k]:7.2f}" for k in fns)
        + f"  rot={rot} calls={row['graph_calls']}",
        flush=True,
    )
    return row


if __name__ == "__main__":
    main()
