#!/usr/bin/env python3
"""Time every schedule of the GEMM op family against cuBLAS on the linear layers of torchvision models (GPU).

    PYTHONPATH=backends python scripts/tune_gemm.py --out OUT [--models convnext_tiny,efficientnet_b0] \\
        [--batches 1,32] [--dtypes float16] [--workers 15] [--tma with|without|only] [--plain]
    PYTHONPATH=backends python scripts/tune_gemm.py --out OUT --dry-run     # anywhere: the layers and schedules

The layers come from the models themselves: a forward pass on the meta device records every ``nn.Linear``'s
input and, where the next module called is an activation the GEMM epilogue fuses (GELU, ReLU, SiLU, Hardswish),
that activation. Each distinct (batch, M, K, N, activation) is one case: ``addmm(bias, x, weight.t())`` and its
activation in the epilogue, as the delegate runs an ``nn.Linear``.

For every case and dtype, each schedule of `ops.gemm.schedules` for the GPU's arch (the heuristic's pick first; on
sm_90 and later also the TMA variant's, keys with ``TMA1``, where TMA can read the operands) runs on an output
poisoned with NaN and is checked against an fp32 reference, then all of them and cuBLAS (``torch.addmm`` and the
activation, eager: two kernels) are timed side by side from CUDA graphs (`tools.timing.time_side_by_side`, warm
L2). Kernels are JIT-compiled by ``--workers`` processes first. The roofline floor is the larger of the bytes
moved at the GPU's memory bandwidth and the flops at its dense 16-bit tensor rate (nominal figures by GPU name).

``--plain`` adds each layer that has an activation once more without it: the epilogue's cost beside it.
``--tma`` picks the space: ``with`` (default) every schedule, ``without`` the pointer kernel's only, ``only`` the
TMA variant's and the heuristic's pick (the baseline it would replace). ``--dry-run`` lists the space for
``--arch`` (default 90).

Writes OUT/tune_gemm.json (every timing) and OUT/tune_gemm.md (one row per case: heuristic, best schedule, the
best of the pointer kernel and of the TMA variant, cuBLAS, floor). Exit status 1 when a schedule computes a wrong
result.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from cuda_triton.conv.epilogue import ConvEpilogue
from cuda_triton.conv.tf32 import round_to_tf32
from cuda_triton.kernel.launch import Schedule, allocate_scratch, running_arch
from cuda_triton.ops.elementwise.math import OPS
from cuda_triton.ops.elementwise.program import instruction
from cuda_triton.ops.gemm import GemmSpec, heuristic_schedule, is_tma, launches, schedules, scratch
from cuda_triton.ops.tensor_meta import TensorMeta

# The activations an nn.Linear's epilogue takes, by module class name.
ACTIVATIONS = {"GELU": "gelu", "ReLU": "relu", "SiLU": "silu", "Hardswish": "hardswish"}
# The row of the heuristic's fp32 schedule rounding w in the kernel, beside its export's pre-rounded w.
KERNEL_ROUNDS_W = "heuristic, w rounded in the kernel"
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
# Nominal (memory bytes/s, dense 16-bit tensor flop/s) by a substring of the GPU's name.
ROOFLINES = {"H200": (4.8e12, 989e12), "H100": (3.35e12, 989e12), "A100": (2.0e12, 312e12)}


@dataclass(frozen=True)
class Case:
    model: str
    batch: int
    m: int
    k: int
    n: int
    activation: str  # "" for none

    @property
    def name(self) -> str:
        act = f"+{self.activation}" if self.activation else ""
        return f"{self.model}.b{self.batch}.m{self.m}k{self.k}n{self.n}{act}"


def linear_layers(model: str, batch: int) -> list[Case]:
    """The distinct nn.Linear layers of torchvision's ``model`` at ``batch``, with the activation that follows."""
    from cuda_triton.models.torchvision_models import import_torchvision
    from torch import nn

    with torch.device("meta"):
        net = getattr(import_torchvision().models, model)(weights=None).eval()
    calls: list[tuple[nn.Module, tuple[int, ...]]] = []
    hooks = [
        mod.register_forward_hook(lambda m, inp, out: calls.append((m, tuple(inp[0].shape))))
        for mod in net.modules()
        if not list(mod.children())
    ]
    with torch.no_grad():
        net(torch.empty(batch, 3, 224, 224, device="meta"))
    for h in hooks:
        h.remove()
    cases: dict[Case, None] = {}
    for i, (mod, shape) in enumerate(calls):
        if not isinstance(mod, nn.Linear):
            continue
        nxt = type(calls[i + 1][0]).__name__ if i + 1 < len(calls) else ""
        m = 1
        for s in shape[:-1]:
            m *= s
        cases[Case(model, batch, m, mod.in_features, mod.out_features, ACTIVATIONS.get(nxt, ""))] = None
    return list(cases)


def make_spec(case: Case, dtype: str) -> GemmSpec:
    dt = DTYPES[dtype]
    bias = TensorMeta.of(torch.empty(case.n, dtype=dt, device="meta"))
    a = TensorMeta.of(torch.empty(case.m, case.k, dtype=dt, device="meta"))
    w = TensorMeta.of(torch.empty(case.n, case.k, dtype=dt, device="meta").t())
    spec = GemmSpec.addmm(bias, a, w, allow_tf32=True)
    if dtype == "float32":  # the delegate stores a linear's fp32 weight rounded to TF32 (preprocess/gemm.py)
        spec = spec.with_rounded_w()
    if case.activation:
        spec = spec.with_epilogue(ConvEpilogue((instruction(case.activation, 0),), ()))
    return spec


def tuning_space(spec: GemmSpec, arch: int | None, tma: str) -> list[Schedule]:
    """The schedules timed for ``spec`` on ``arch``: all (``tma`` "with"), the pointer kernel's ("without"), or
    the TMA variant's after the heuristic's pick ("only")."""
    space = schedules(spec, arch)
    if tma == "without":
        return [s for s in space if not is_tma(s)]
    if tma == "only":
        return [heuristic_schedule(spec)] + [s for s in space if is_tma(s)]
    return space


def bound_roles(spec: GemmSpec, schedule: Schedule) -> set[str]:
    """The roles `measure` binds to a tensor: addmm's bias, a and w, the output, the schedule's scratch."""
    return {"in0", "in1", "in2", "out", *(s.role for s in scratch(spec, schedule))}


@dataclass(frozen=True)
class GemmWarmup:
    """JIT-compile the launches of ``schedules`` for one case (no GPU memory touched), in a worker process."""

    case: Case
    dtype: str
    schedules: tuple[dict[str, int], ...]

    def compile(self) -> tuple[int, list[str]]:
        from cuda_triton.tools.warmup import warmup_args

        spec = make_spec(self.case, self.dtype)
        errors: list[str] = []
        for sd in self.schedules:
            try:
                schedule = Schedule.from_dict(sd)
                for launch in launches(spec, schedule):
                    args = warmup_args(launch, bound_roles(spec, schedule), DTYPES[self.dtype])
                    target = launch.for_arch(running_arch())
                    target.fn.warmup(
                        *args, grid=target.grid, **target.compile_options(), **dict(target.constexprs)
                    )
            except Exception as e:
                errors.append(f"{Schedule.from_dict(sd).key()}: {type(e).__name__}: {str(e)[:200]}")
        return len(self.schedules), errors


def precompile(jobs: list[GemmWarmup], workers: int) -> None:
    """Compile every job in ``workers`` processes (the tuner's `Precompiler`); without workers, nothing happens
    here and each kernel compiles on its first run."""
    from cuda_triton.tools.warmup import Precompiler

    pre = Precompiler(workers)
    try:
        pre.submit("gemm", jobs)
        pre.wait("gemm", None)
    finally:
        pre.shutdown()


def activation(case: Case):
    """The ATen definition of the case's activation (the elementwise family's, `ops.elementwise.math.OPS`), or None."""
    return OPS[case.activation].reference if case.activation else None


def reference(case: Case, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    acc = torch.addmm(tensors["in0"].float(), tensors["in1"].float(), tensors["in2"].float())
    act = activation(case)
    return act(acc) if act else acc


def cublas_fn(case: Case, tensors: dict[str, torch.Tensor]):
    act = activation(case)
    bias, a, w = tensors["in0"], tensors["in1"], tensors["in2"]

    def run() -> torch.Tensor:
        y = torch.addmm(bias, a, w)
        return act(y) if act else y

    return run


def floor_us(case: Case, dtype: str, gpu: str) -> float | None:
    rates = next((r for key, r in ROOFLINES.items() if key in gpu), None)
    if rates is None:
        return None
    size = DTYPES[dtype].itemsize
    moved = (case.m * case.k + case.k * case.n + case.m * case.n + case.n) * size
    return max(moved / rates[0], 2 * case.m * case.n * case.k / rates[1]) * 1e6


def _best(times: dict[str, float]) -> tuple[str | None, float | None]:
    best = min(times, key=times.get) if times else None
    return best, times.get(best) if best else None


def measure(case: Case, dtype: str, gpu: str, space: list[Schedule]) -> dict[str, Any]:
    from cuda_triton.tools.timing import time_side_by_side

    spec = make_spec(case, dtype)
    dt = DTYPES[dtype]
    gen = torch.Generator(device="cuda").manual_seed(0)
    tensors = {
        "in0": torch.randn(case.n, device="cuda", generator=gen).to(dt),
        "in1": torch.randn(case.m, case.k, device="cuda", generator=gen).to(dt),
        "in2": (torch.randn(case.n, case.k, device="cuda", generator=gen) / case.k**0.5).to(dt).t(),
    }
    if spec.w_rounded:
        tensors["in2"] = round_to_tf32(tensors["in2"].t()).t()
    expected = reference(case, tensors)
    tol = (2e-2 if dtype == "bfloat16" else 4e-3) * max(1.0, expected.abs().max().item())
    heuristic = heuristic_schedule(spec)
    fns: dict[str, Any] = {}
    wrong: list[str] = []

    def runner(spec: GemmSpec, sched: Schedule) -> tuple[Any, torch.Tensor]:
        """A call running ``sched``'s launches on the case's tensors, and its NaN-poisoned output."""
        out = torch.full((case.m, case.n), float("nan"), device="cuda", dtype=dt)
        bound = {**tensors, "out": out}
        bound.update(allocate_scratch(scratch(spec, sched), "cuda"))
        kernel_launches = launches(spec, sched)

        def run() -> None:
            for launch in kernel_launches:
                launch.run(bound)

        return run, out

    for sched in space:
        run, out = runner(spec, sched)
        run()
        err = (out.float() - expected).abs().max().item()
        if not err <= tol:  # NaN included
            wrong.append(f"{sched.key()}: max error {err:.3g} > {tol:.3g}")
            continue
        fns[sched.key()] = run
    if spec.w_rounded:
        # the heuristic's kernel as it runs on a weight that is no constant: rounding every tile it loads
        fns[KERNEL_ROUNDS_W] = runner(replace(spec, w_rounded=False), heuristic)[0]
    fns["cublas"] = cublas_fn(case, tensors)
    times = {name: t for name, (t, _) in time_side_by_side(fns, reps=15, target_ms=1.0, warm_ms=10).items()}
    ours = {k: v for k, v in times.items() if k not in ("cublas", KERNEL_ROUNDS_W)}
    best, best_us = _best(ours)
    tma_keys = {s.key() for s in space if is_tma(s)}
    best_pointer, best_pointer_us = _best({k: v for k, v in ours.items() if k not in tma_keys})
    best_tma, best_tma_us = _best({k: v for k, v in ours.items() if k in tma_keys})
    return {
        "case": case.name, "dtype": dtype, "m": case.m, "k": case.k, "n": case.n, "batch": case.batch,
        "activation": case.activation, "heuristic": heuristic.key(), "heuristic_us": times.get(heuristic.key()),
        "best": best, "best_us": best_us, "best_pointer": best_pointer, "best_pointer_us": best_pointer_us,
        "best_tma": best_tma, "best_tma_us": best_tma_us, "cublas_us": times["cublas"],
        "floor_us": floor_us(case, dtype, gpu),
        "times_us": times, "wrong": wrong,
    }  # fmt: skip


def table(rows: list[dict[str, Any]]) -> str:
    def us(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    lines = [
        "| case | dtype | heuristic us | best us | best schedule | best pointer us | best TMA us | cuBLAS us | "
        "floor us | heuristic / best | cuBLAS / best |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        h, b, c = r["heuristic_us"], r["best_us"], r["cublas_us"]
        lines.append(
            f"| {r['case']} | {r['dtype']} | {us(h)} | {us(b)} | `{r['best']}` | {us(r['best_pointer_us'])} | "
            f"{us(r['best_tma_us'])} | {us(c)} | {us(r['floor_us'])} | {h / b:.2f} | {c / b:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--models", default="convnext_tiny,efficientnet_b0,mobilenet_v3_large")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--dtypes", default="float16")
    ap.add_argument("--workers", type=int, default=8, help="compile worker processes (0: compile inline)")
    ap.add_argument(
        "--tma",
        choices=("with", "without", "only"),
        default="with",
        help="the TMA variant's schedules: with the others, without them, or only them and the heuristic's pick",
    )
    ap.add_argument(
        "--plain",
        action="store_true",
        help="also time each layer with an activation without it (what its epilogue costs)",
    )
    ap.add_argument("--dry-run", action="store_true", help="list the cases and their schedules only (no GPU)")
    ap.add_argument(
        "--arch", type=int, default=90, help="the arch --dry-run lists schedules for (default 90)"
    )
    args = ap.parse_args()
    dtypes = args.dtypes.split(",")
    if unknown := set(dtypes) - set(DTYPES):
        ap.error(f"unknown dtypes {sorted(unknown)}; choose from {sorted(DTYPES)}")
    cases: list[Case] = []
    for model in args.models.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            cases += linear_layers(model, batch)
    if args.plain:
        cases += [replace(c, activation="") for c in cases if c.activation]
    print(f"[tune_gemm] {len(cases)} cases x {len(dtypes)} dtypes", flush=True)
    if args.dry_run:
        for case in cases:
            for dtype in dtypes:
                spec = make_spec(case, dtype)
                space = tuning_space(spec, args.arch, args.tma)
                print(f"  {case.name} {dtype}: {len(space)} schedules ({sum(map(is_tma, space))} TMA), "
                      f"heuristic {heuristic_schedule(spec).key()}")  # fmt: skip
        return 0
    if not torch.cuda.is_available():
        print("tune_gemm: no CUDA device (use --dry-run on a machine without a GPU)", file=sys.stderr)
        return 2
    arch = running_arch()
    spaces = {(c, d): tuning_space(make_spec(c, d), arch, args.tma) for c in cases for d in dtypes}
    t0 = time.time()
    precompile(
        [GemmWarmup(c, d, tuple(s.as_dict() for s in space)) for (c, d), space in spaces.items()],
        args.workers,
    )
    print(f"[tune_gemm] compiled in {time.time() - t0:.0f} s", flush=True)
    gpu = torch.cuda.get_device_name()
    rows = []
    for i, case in enumerate(cases):
        for dtype in dtypes:
            row = measure(case, dtype, gpu, spaces[case, dtype])
            rows.append(row)
            tma_us = "-" if row["best_tma_us"] is None else f"{row['best_tma_us']:.1f} us"
            print(f"[{i + 1}/{len(cases)}] {case.name} {dtype}: heuristic {row['heuristic_us']:.1f} us, best "
                  f"{row['best_us']:.1f} us ({row['best']}), best TMA {tma_us}, "
                  f"cuBLAS {row['cublas_us']:.1f} us"
                  + (f", {len(row['wrong'])} WRONG" if row["wrong"] else ""), flush=True)  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "gpu": gpu, "torch": torch.__version__, "host": platform.node(),
        "command": "PYTHONPATH=backends python scripts/tune_gemm.py " + " ".join(sys.argv[1:]),
    }  # fmt: skip
    (args.out / "tune_gemm.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    header = f"# GEMM schedules against cuBLAS ({gpu}, {meta['date']})\n\nCommand: `{meta['command']}`\n\n"
    (args.out / "tune_gemm.md").write_text(header + table(rows))
    print(table(rows))
    return 1 if any(r["wrong"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
