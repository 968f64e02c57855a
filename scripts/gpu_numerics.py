"""GPU numerics of the convolution templates against ATen (run on the GPU machine).

    PYTHONPATH=backends python scripts/gpu_numerics.py --out OUT [--count 240] [--seed 0]

Checks, each with a fresh random input/weight/bias, the output pre-filled with NaN (in the layout rule's
strides), every element compared with an fp32 ATen reference (TF32 off) under a dtype- and reduction-scaled
tolerance (cuda_triton/tools/conv_cases.py):
  1. ``--count`` random shapes drawn round-robin from ``conv_cases.CASE_GENERATORS`` (each family's
     template is forced when it supports the case, else the op's own choice runs);
  2. the public suite x fp16/bf16/fp32 with the op's own choice, plus the op itself (output strides must match
     the layout rule);
  3. every schedule of every template on ``--schedule-cases`` random cases of its family (force_conv_candidate);
  4. every split-K and channels-last-copy schedule of the GEMM templates on ``--split-copy-cases`` random
     few-tile, long-K cases (``conv_cases.gen_few_tiles_long_k``), and every tail-split schedule on as many
     cases of whole waves plus a few rows (``conv_cases.gen_tail_waves``);
  5. every F16_MMA schedule (implicit GEMM, transposed) on ``--f16-cases`` fp32 cases scaled far outside fp16's
     range; 6. every W_FOLD schedule of the transposed template on ``--fold-cases`` convs with kernel == stride
     along W; 7. every TF32 schedule of the box template (fp32 boxes, A rounded to TF32) on ``--f16-cases``.
Writes OUT/numerics.json and OUT/numerics.txt; exits non-zero on any failure.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import random
import sys
import time
import traceback
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))
from cuda_triton.tools import conv_cases as nc  # noqa: E402
from cuda_triton.tools.bench_report import is_target  # noqa: E402
from cuda_triton.tools.suites import PUBLIC_SUITE, load_suite  # noqa: E402
from cuda_triton.tools.warmup import CaseWarmup, job_label, warm_cases  # noqa: E402


def one(
    case: nc.Case, template: str | None, schedule: Any, seed: int, op_too: bool = False, device: str = "cuda"
) -> dict[str, Any]:
    from cuda_triton.conv.templates import NoTemplateError, get_template

    rec: dict[str, Any] = {"label": nc.case_label(case), "case": case}
    try:
        x, w, b = nc.make_tensors(case, device, seed)
        ref = nc.reference(case, x, w, b)
        try:
            out, name, sched = nc.run_poisoned(case, x, w, b, template, schedule)
        except NoTemplateError as e:
            rec.update(status="unsupported", reason=str(e)[:300])
            return rec
        if device == "cuda":
            torch.cuda.synchronize()
        half = get_template(name).half_sum_length(nc.problem_of(case, x, w, b), sched)
        rec.update(template=name, schedule=sched.as_dict(), **nc.compare(case, out, ref, x, w, half_sum=half))
        rec["status"] = "ok" if rec["ok"] else "FAIL"
        if op_too:
            y = torch.ops.triton.convolution(x, w, b, *nc.params_of(case).as_op_args())
            if y.stride() != out.stride() or y.shape != out.shape:
                rec.update(status="FAIL", layout=f"op strides {y.stride()} != {out.stride()}")
    except Exception as e:
        rec.update(
            status="ERROR", error=f"{type(e).__name__}: {e}"[:500], trace=traceback.format_exc()[-1500:]
        )
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--count", type=int, default=240)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--schedule-cases", type=int, default=2)
    ap.add_argument(
        "--split-copy-cases",
        type=int,
        default=12,
        help="few-tile, long-K cases whose split/copy schedules all run",
    )
    ap.add_argument(
        "--f16-cases",
        type=int,
        default=6,
        help="fp32 cases (inputs scaled far outside fp16's range) whose F16_MMA (and box TF32) schedules all run",
    )
    ap.add_argument(
        "--fold-cases",
        type=int,
        default=3,
        help="transposed convs with kernel == stride along W whose W_FOLD schedules all run",
    )
    ap.add_argument("--suite", type=Path, default=PUBLIC_SUITE)
    ap.add_argument("--workers", type=int, default=14)
    ap.add_argument(
        "--device", default="cuda", help="cpu: a dry run under TRITON_INTERPRET=1 (tiny counts only)"
    )
    ap.add_argument("--compile-timeout", type=float, default=150.0)
    ap.add_argument("--no-warm", action="store_true")
    ap.add_argument("--families", default="", help="comma-separated families to check (default: all)")
    ap.add_argument("--suite-cases", choices=("all", "target", "none"), default="all")
    ap.add_argument("--time-limit", type=float, default=1e9, help="stop checking new cases after this many s")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    import cuda_triton.conv  # noqa: F401
    from cuda_triton.conv import ConvProblem
    from cuda_triton.conv.templates import get_template

    rng = random.Random(args.seed)
    families = [f for f in nc.CASE_GENERATORS if not args.families or f in args.families.split(",")]
    # 1. random shapes
    plan: list[tuple[str, nc.Case, str | None, Any, bool]] = []
    for i in range(args.count):
        fam = families[i % len(families)]
        case = nc.CASE_GENERATORS[fam](rng)
        x, w, b = nc.make_tensors(case, "meta")
        problem = ConvProblem.from_tensors(x, w, b, nc.params_of(case))
        forced = fam if _has_template(fam) and get_template(fam).supports(problem) else None
        plan.append(("random:" + fam, case, forced, None, False))
    # 2. the public suite
    for dtype in nc.DTYPES if args.suite.name and args.suite_cases != "none" else ():
        for c in load_suite(args.suite):
            if args.suite_cases == "target" and not is_target(nc.case_from_suite(c, dtype)):
                continue
            plan.append(("suite", nc.case_from_suite(c, dtype, bias=rng.random() < 0.5), None, None, True))

    def every_schedule(group: str, fam: str, gen: Any, cases: int, keep: Any = lambda s: True) -> None:
        """Plan the schedules ``keep`` selects, of template ``fam``, on ``cases`` small cases it supports."""
        t = get_template(fam)
        found = 0
        while found < cases:
            case = gen(rng)
            x, w, b = nc.make_tensors(case, "meta")
            problem = ConvProblem.from_tensors(x, w, b, nc.params_of(case))
            if not t.supports(problem) or problem.batch * math.prod(problem.out_spatial) > 100000:
                continue
            found += 1
            plan.extend((f"{group}:{fam}", case, fam, s, False) for s in t.schedules(problem) if keep(s))

    # 3. every schedule on a few cases per family
    for fam in families:
        if _has_template(fam):
            every_schedule("schedules", fam, nc.CASE_GENERATORS[fam], args.schedule_cases)

    # 4. every split-K and channels-last-copy schedule of the GEMM templates on few-tile, long-K cases
    if not args.families or {"gemm", "implicit_gemm"} & set(args.families.split(",")):
        for _ in range(args.split_copy_cases):
            case = nc.gen_few_tiles_long_k(rng)
            x, w, b = nc.make_tensors(case, "meta")
            problem = ConvProblem.from_tensors(x, w, b, nc.params_of(case))
            for name in ("implicit_gemm", "gemm"):
                t = get_template(name)
                if not t.supports(problem):
                    continue
                for s in t.schedules(problem):
                    if {"SPLIT_K", "CL_COPY"} & set(dict(s.params)):
                        plan.append(("split_copy:" + name, case, name, s, False))
        # every tail-split schedule on cases whose tiles fill whole waves plus a few rows
        t = get_template("implicit_gemm")
        for _ in range(args.split_copy_cases):
            case = nc.gen_tail_waves(rng)
            x, w, b = nc.make_tensors(case, "meta")
            problem = ConvProblem.from_tensors(x, w, b, nc.params_of(case))
            for s in t.schedules(problem):
                if "TAIL_SPLIT" in dict(s.params):
                    plan.append(("tail_split:implicit_gemm", case, "implicit_gemm", s, False))

    # 5. every F16_MMA schedule (fp32 on fp16 tensor cores, _f16_mma.py) on fp32 cases far outside fp16's range
    for fam in ("implicit_gemm", "transposed"):
        if not args.families or fam in args.families.split(","):
            every_schedule(
                "f16_mma",
                fam,
                functools.partial(nc.gen_f16_mma, family=fam),
                args.f16_cases,
                lambda s: bool(dict(s.params).get("F16_MMA")),
            )
    # 6. every W_FOLD schedule of the transposed template (all W phases in one program) on convs it takes
    if not args.families or "transposed" in args.families.split(","):
        every_schedule(
            "w_fold",
            "transposed",
            nc.gen_transposed_fold,
            args.fold_cases,
            lambda s: bool(dict(s.params).get("W_FOLD")),
        )
    # 7. every TF32 schedule of the box template (fp32 boxes, A rounded to TF32) on fp32 cases, same ranges
    if not args.families or "implicit_gemm_box" in args.families.split(","):
        every_schedule(
            "tf32",
            "implicit_gemm_box",
            functools.partial(nc.gen_f16_mma, family="implicit_gemm_box"),
            args.f16_cases,
            lambda s: "F16_MMA" not in dict(s.params),
        )

    t0 = time.time()
    status: dict[str, str] | None = None
    if not args.no_warm and args.device == "cuda":
        jobs = [
            CaseWarmup("ours", c, tname, s.as_dict() if s is not None else None) for _, c, tname, s, _ in plan
        ]
        status = warm_cases(jobs, args.workers, args.compile_timeout)
        print(f"warmed {len(status)}/{len(jobs)} kernels in {time.time() - t0:.0f} s", flush=True)

    records = []
    for i, (group, case, tname, sched, op_too) in enumerate(plan):
        label = job_label("ours", case, tname, sched.as_dict() if sched is not None else None)
        if time.time() - t0 > args.time_limit:
            records.append({"group": group, "label": nc.case_label(case), "case": case, "status": "skipped"})
            continue
        if status is not None and label not in status:  # not compiled within --compile-timeout: skip
            records.append({"group": group, "label": nc.case_label(case), "case": case, "status": "skipped"})
            continue
        rec = one(case, tname, sched, seed=args.seed * 100003 + i, op_too=op_too, device=args.device)
        rec["group"] = group
        records.append(rec)
        if rec["status"] not in ("ok", "unsupported"):
            print(
                f"{rec['status']}: {group} {rec['label']} {rec.get('error', '')} ratio {rec.get('max_ratio')}"
            )
    summary: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in records:
        summary[r["group"]][r["status"]] += 1
        if r.get("template"):
            summary["template:" + r["template"]][r["status"]] += 1
    lines = [
        f"{g:28} " + " ".join(f"{k}={v}" for k, v in sorted(d.items())) for g, d in sorted(summary.items())
    ]
    worst = max((r.get("max_ratio", 0.0) for r in records if r["status"] == "ok"), default=0.0)
    lines.append(
        f"cases {len(records)}, worst passing error / tolerance {worst:.3f}, {time.time() - t0:.0f} s"
    )
    failures = [r for r in records if r["status"] in ("FAIL", "ERROR")]
    lines.append(f"failures: {len(failures)}")
    text = "\n".join(lines)
    print(text)
    (args.out / "numerics.txt").write_text(text + "\n")
    (args.out / "numerics.json").write_text(
        json.dumps({"summary": summary, "records": records}, indent=1, default=str)
    )
    sys.exit(1 if failures else 0)


def _has_template(name: str) -> bool:
    from cuda_triton.conv.templates import get_template

    try:
        get_template(name)
        return True
    except KeyError:
        return False


if __name__ == "__main__":
    main()
