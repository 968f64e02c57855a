#!/usr/bin/env python3
"""Check and time the elementwise, reduction and normalisation kernels on a GPU against eager PyTorch.

    PYTHONPATH=backends python scripts/bench_ops.py --out OUT            # on the GPU machine
    PYTHONPATH=backends python scripts/bench_ops.py --out OUT --dry-run  # anywhere: build the cases only

For each case (torchvision-sized shapes: MobileNetV3/EfficientNet chains, squeeze-excitation, global average
pooling, batch norm, layer norm, softmax; fp16, bf16, fp32; channels-last and contiguous):

1. the spec's launches run through Triton's JIT on CUDA tensors with the output poisoned with NaN, and every
   element is compared with the CPU reference (``ok``);
2. the kernels and the eager PyTorch ops they replace are timed side by side as CUDA-graph replays (the shared
   harness of the tuner and the convolution benchmark, so launch overhead is excluded on both sides), with the
   bytes moved and the bandwidth this gives.

Writes OUT/bench_ops.json (every case) and prints a table. Needs torch and triton only (no executorch). Exit
status 1 when any case is wrong.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
from cuda_triton.kernel.launch import allocate_scratch
from cuda_triton.ops import elementwise, norm, reduction
from cuda_triton.ops.registry import kernel_family
from cuda_triton.ops.tensor_meta import TensorMeta
from cuda_triton.tools.timing import time_side_by_side

A = torch.ops.aten
TOL = {"float32": 1e-4, "float16": 2e-3, "bfloat16": 1e-2}


def _tensor(shape, dtype: str, cl: bool, device: str, positive: bool = False) -> torch.Tensor:
    t = torch.randn(shape, device=device, dtype=getattr(torch, dtype))
    if positive:
        t = t.abs() + 0.5
    if cl and len(shape) in (4, 5):
        t = t.contiguous(memory_format=torch.channels_last if len(shape) == 4 else torch.channels_last_3d)
    if cl and len(shape) == 3:  # a 1-D map stored (N, L, C), as the delegate keeps it
        t = t.transpose(1, 2).contiguous().transpose(1, 2)
    return t


def cases(
    device: str,
) -> list[tuple[str, object, object, dict[str, torch.Tensor], Callable[[], torch.Tensor]]]:
    """(name, family module, spec, tensors by role, the eager PyTorch computation it replaces)."""
    out = []
    for dtype in ("float16", "bfloat16", "float32"):
        for cl in (True, False):
            tag = f"{dtype}/{'cl' if cl else 'contig'}"
            x = _tensor((8, 96, 56, 56), dtype, cl, device)
            b = elementwise.ChainBuilder()
            v = b.input("in0", TensorMeta.of(x))
            h = b.op("clamp", b.op("add", v, 3.0), min=0.0, max=6.0)
            out.append((f"hardswish chain {tag}", elementwise, b.build(b.op("mul", b.op("div", h, 6.0), v)),
                        {"in0": x}, lambda x=x: torch.clamp(x + 3, 0, 6) / 6 * x))  # fmt: skip
            s = _tensor((8, 96, 1, 1), dtype, False, device)
            b = elementwise.ChainBuilder()
            spec = b.build(
                b.op(
                    "mul", b.input("in0", TensorMeta.of(x)), b.op("sigmoid", b.input("in1", TensorMeta.of(s)))
                )
            )
            out.append(
                (
                    f"SE gate {tag}",
                    elementwise,
                    spec,
                    {"in0": x, "in1": s},
                    lambda x=x, s=s: x * torch.sigmoid(s),
                )
            )
            r = _tensor((8, 96, 56, 56), dtype, cl, device)
            spec = elementwise.binary_spec("add", TensorMeta.of(x), TensorMeta.of(r))
            out.append(
                (f"residual add {tag}", elementwise, spec, {"in0": x, "in1": r}, lambda x=x, r=r: x + r)
            )
            g = _tensor((8, 960, 7, 7), dtype, cl, device)
            spec = reduction.reduction_spec("mean", TensorMeta.of(g), [2, 3], True)
            out.append(
                (f"global avg pool {tag}", reduction, spec, {"in0": g}, lambda g=g: g.mean((2, 3), True))
            )
            # EfficientNet-B0's first squeeze-excitation mean at batch 32: few rows over a long reduction (split)
            se = _tensor((32, 32, 112, 112), dtype, cl, device)
            spec = reduction.reduction_spec("mean", TensorMeta.of(se), [2, 3], True)
            out.append((f"SE mean 32x32x112x112 {tag}", reduction, spec, {"in0": se},
                        lambda se=se: se.mean((2, 3), True)))  # fmt: skip
            c = [_tensor((96,), dtype, False, device, positive=k == 3) for k in range(4)]
            spec = norm.batch_norm_spec(TensorMeta.of(x), *(TensorMeta.of(t) for t in c), 1e-5)
            bn = dict(zip(("weight", "bias", "mean", "var"), c, strict=True))
            out.append((f"batch norm {tag}", norm, spec, {"in0": x, **bn},
                        lambda x=x, c=c: A._native_batch_norm_legit_no_training(x, c[0], c[1], c[2], c[3], 0.1, 1e-5)[0]))  # fmt: skip
        seq = _tensor((8, 197, 768), dtype, False, device)
        w, bias = _tensor((768,), dtype, False, device), _tensor((768,), dtype, False, device)
        spec = norm.layer_norm_spec(TensorMeta.of(seq), (768,), TensorMeta.of(w), TensorMeta.of(bias), 1e-6)
        out.append((f"layer norm {dtype}", norm, spec, {"in0": seq, "weight": w, "bias": bias},
                    lambda seq=seq, w=w, bias=bias: F.layer_norm(seq, (768,), w, bias, 1e-6)))  # fmt: skip
        att = _tensor((8, 12, 197, 197), dtype, False, device)
        spec = norm.softmax_spec(TensorMeta.of(att), -1)
        out.append((f"softmax {dtype}", norm, spec, {"in0": att}, lambda att=att: torch.softmax(att, -1)))
        # (batch, channels, length, groups): an audio convnet's, and wav2vec2's first layer (one channel a group)
        for n, c, length, groups in ((4, 256, 4000, 32), (1, 512, 3199, 512)):
            for cl in (False, True):
                audio = _tensor((n, c, length), dtype, cl, device)
                gw, gb = _tensor((c,), dtype, False, device), _tensor((c,), dtype, False, device)
                spec = norm.group_norm_spec(
                    TensorMeta.of(audio), TensorMeta.of(gw), TensorMeta.of(gb), n, c, length, groups, 1e-5
                )
                tag = f"{n}x{c}x{length}/{groups} {'nlc' if cl else 'ncl'}"
                out.append((f"group norm {tag} {dtype}", norm, spec, {"in0": audio, "weight": gw, "bias": gb},
                            lambda a=audio, gw=gw, gb=gb, g=groups: F.group_norm(a, g, gw, gb, 1e-5)))  # fmt: skip
    return out


def _gpu_ms(fns: dict[str, Callable[[], object]]) -> dict[str, float]:
    """GPU milliseconds per call of each contender: CUDA-graph replays of many back-to-back calls, interleaved
    (`cuda_triton.tools.timing`), so neither side's host launch overhead counts; a kernel of a few microseconds
    launched one call at a time would time the launch, not the kernel."""
    return {name: us / 1e3 for name, (us, _) in time_side_by_side(fns).items()}


def _scratch(family, spec, schedule) -> dict[str, torch.Tensor]:
    """The scratch tensors ``spec``'s launches take with ``schedule`` (None: the family's heuristic), on the GPU."""
    kind = kernel_family(family.__name__.rsplit(".", 1)[-1])
    return allocate_scratch(kind.scratch_tensors(spec, schedule or kind.heuristic(spec)), "cuda")


def _time_schedules(spec, bound: dict[str, torch.Tensor], ref: torch.Tensor) -> list:
    """Every schedule of ``spec``'s tuning space: checked against the reference ``ref`` (output poisoned first) and
    timed; fastest first."""
    ref = ref.float()
    scale = max(ref.abs().max().item(), 1e-30)
    out = bound["out"]
    rows = []
    for schedule in norm.schedules(spec):
        launches = norm.launches(spec, schedule)
        with_scratch = {**bound, **_scratch(norm, spec, schedule)}

        def run(launches=launches, with_scratch=with_scratch) -> None:
            for launch in launches:
                launch.run(with_scratch)

        out.fill_(float("nan"))
        run()
        torch.cuda.synchronize()
        err = (out.cpu().float() - ref).abs().max().item() / scale
        ok = bool(err <= TOL[spec.out.dtype] and not out.isnan().any().item())
        rows.append(
            {"schedule": str(schedule), "ok": ok, "kernel_ms": _gpu_ms({"run": run})["run"] if ok else None}
        )
    return sorted(rows, key=lambda r: (r["kernel_ms"] is None, r["kernel_ms"] or 0.0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dry-run", action="store_true", help="build the cases and launches only (no GPU)")
    parser.add_argument("--all-schedules", metavar="TEXT", default=None,
                        help="also check and time every schedule of the tuning space of the normalisation cases "
                             "whose name contains TEXT (rows' 'schedules')")  # fmt: skip
    parser.add_argument("--cases", metavar="TEXT", default=None,
                        help="only the cases whose name contains TEXT")  # fmt: skip
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    device = "cpu" if args.dry_run else "cuda"
    rows, failures = [], 0
    for name, family, spec, tensors, eager in cases(device):
        if args.cases is not None and args.cases not in name:
            continue
        launches = family.launches(spec)
        row = {
            "case": name,
            "kernels": [launch.name for launch in launches],
            "grid": [launch.grid for launch in launches],
        }
        if not args.dry_run:
            out = torch.empty_strided(spec.out.sizes, spec.out.strides, dtype=getattr(torch, spec.out.dtype),
                                      device=device).fill_(float("nan"))  # fmt: skip
            bound = {**tensors, "out": out, **_scratch(family, spec, None)}

            def run(launches=launches, bound=bound) -> None:
                for launch in launches:
                    launch.run(bound)

            run()
            torch.cuda.synchronize()
            ref = family.reference(spec, {k: v.cpu() for k, v in tensors.items()})
            err = (out.cpu().float() - ref.float()).abs().max().item()
            scale = max(ref.float().abs().max().item(), 1e-30)
            row["ok"] = bool(err <= TOL[spec.out.dtype] * scale and not out.isnan().any().item())
            row["max_rel_err"] = err / scale
            failures += not row["ok"]
            moved = (
                sum(t.numel() * t.element_size() for t in tensors.values()) + out.numel() * out.element_size()
            )
            times = _gpu_ms({"kernel": run, "eager": eager})
            row["kernel_ms"], row["eager_ms"] = times["kernel"], times["eager"]
            row["kernel_GBps"] = moved / row["kernel_ms"] / 1e6
            row["speedup_vs_eager"] = row["eager_ms"] / row["kernel_ms"]
            if family is norm and args.all_schedules is not None and args.all_schedules in name:
                row["schedules"] = _time_schedules(spec, bound, ref)
        rows.append(row)
        print(json.dumps(row), flush=True)
    report = {
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name() if not args.dry_run else None,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "cases": rows,
    }
    (args.out / "bench_ops.json").write_text(json.dumps(report, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
