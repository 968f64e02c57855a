#!/usr/bin/env python3
"""Check and time the pooling, data-movement and GEMM kernels (cuda_triton.ops) on a GPU against ATen.

    PYTHONPATH=backends python scripts/gpu_check_pool_move_gemm.py --out OUT            # on the GPU machine
    PYTHONPATH=backends python scripts/gpu_check_pool_move_gemm.py --out OUT --dry-run  # CPU: build every case

For each case (torchvision-sized layers: ResNet's stem max pool, DenseNet's avg pool, global and uneven adaptive
pools, a 3-D max pool, channels-last <-> contiguous copies with and without a dtype change, a channel slice, cat
and split of channel blocks, a pad, nearest and bilinear upsampling, classifier heads at batch 1 and 32, a bmm,
TF32 and exact fp32 GEMMs):

1. the kernels run through Triton's JIT on CUDA tensors whose outputs are poisoned with NaN first; every element
   is compared with ATen on CUDA (16-bit and TF32 references computed in fp32/fp64 from the same inputs, TF32
   operands rounded to nearest first as the kernels do): copies must match exactly, pools and upsampling within
   one 16-bit rounding, GEMMs within a K-scaled tolerance (``ok``);
2. both are timed side by side as CUDA-graph replays (cuda_triton.tools.timing; GPU time, launch overhead
   excluded on both sides).

Writes OUT/gpu_check_pool_move_gemm.json and prints a table. Needs torch and triton only (no executorch).
Exit status 1 when any case fails.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "backends"))

from cuda_triton.kernel.launch import allocate_scratch  # noqa: E402
from cuda_triton.ops import data_movement as dm  # noqa: E402
from cuda_triton.ops import gemm, pooling  # noqa: E402
from cuda_triton.ops.tensor_meta import TensorMeta  # noqa: E402
from cuda_triton.tools.timing import time_side_by_side  # noqa: E402

CL = torch.channels_last


def _poisoned(meta: TensorMeta, device: str) -> torch.Tensor:
    t = torch.empty_strided(meta.sizes, meta.strides, dtype=getattr(torch, meta.dtype), device=device)
    return t.fill_(float("nan"))


class Case:
    """A named check: ``build(device)`` gives (spec, input tensors by role, the reference as a function, whether
    the comparison has a tolerance)."""

    def __init__(self, name: str, build: Callable[[str], tuple]) -> None:
        self.name = name
        self.build = build


def _pool_cases() -> list[Case]:
    def pool(name, sizes, dtype, layout, make):
        def build(device):
            x = torch.randn(sizes, device=device).to(dtype)
            x = x.contiguous(memory_format=layout) if layout is not None else x
            spec = make(TensorMeta.of(x))
            return spec, {"in0": x}, lambda: pooling.reference_pool(spec, x), spec.kind != pooling.MAX_POOL

        return Case(name, build)

    return [
        pool("maxpool 3x3/2 resnet stem fp16 CL", (32, 64, 112, 112), torch.float16, CL,
             lambda m: pooling.PoolSpec.max_pool(m, 2, [3], [2], [1])),
        pool("maxpool 3x3/2 ceil bf16 NCHW", (8, 192, 56, 56), torch.bfloat16, None,
             lambda m: pooling.PoolSpec.max_pool(m, 2, [3], [2], [0], [1], True)),
        pool("avgpool 2x2/2 densenet fp16 CL", (32, 256, 56, 56), torch.float16, CL,
             lambda m: pooling.PoolSpec.avg_pool(m, 2, [2], [2])),
        pool("avgpool 3x3/1 pad excl fp32 CL", (8, 192, 28, 28), torch.float32, CL,
             lambda m: pooling.PoolSpec.avg_pool(m, 2, [3], [1], [1], False, False)),
        pool("adaptive 7x7->1 fp16 CL", (32, 2048, 7, 7), torch.float16, CL,
             lambda m: pooling.PoolSpec.adaptive_avg_pool(m, [1, 1])),
        pool("adaptive 13x13->6x6 fp32 NCHW", (8, 256, 13, 13), torch.float32, None,
             lambda m: pooling.PoolSpec.adaptive_avg_pool(m, [6, 6])),
        pool("maxpool3d 3/2 bf16", (4, 64, 16, 56, 56), torch.bfloat16, torch.channels_last_3d,
             lambda m: pooling.PoolSpec.max_pool(m, 3, [3], [2], [1])),
    ]  # fmt: skip


def _move_cases() -> list[Case]:
    def move(name, inputs, make, aten, exact=True):
        def build(device):
            xs = [f(device) for f in inputs]
            spec = make([TensorMeta.of(x) for x in xs])
            return spec, {f"in{k}": x for k, x in enumerate(xs)}, lambda: aten(*xs), not exact

        return Case(name, build)

    def t(sizes, dtype=torch.float16, layout=None):
        def make(device):
            x = torch.randn(sizes, device=device).to(dtype)
            return x.contiguous(memory_format=layout) if layout is not None else x

        return make

    def relayout(fmt, dtype=None):
        return lambda x: x.to(dtype or x.dtype).contiguous(memory_format=fmt)

    return [
        move("NCHW->NHWC fp16", [t((32, 64, 56, 56))],
             lambda m: dm.StridedCopySpec.dim_order_copy(m[0], [0, 2, 3, 1]), relayout(CL)),
        move("NHWC->NCHW fp32->fp16", [t((32, 64, 56, 56), torch.float32, CL)],
             lambda m: dm.StridedCopySpec.dim_order_copy(m[0], [0, 1, 2, 3], "float16", "_to_dim_order_copy"),
             relayout(torch.contiguous_format, torch.float16)),
        move("clone CL bf16", [t((32, 128, 28, 28), torch.bfloat16, CL)],
             lambda m: dm.StridedCopySpec.dim_order_copy(m[0]), lambda x: x.clone()),
        move("slice channels CL fp16", [t((32, 256, 28, 28), layout=CL)],
             lambda m: dm.StridedCopySpec.slice(m[0], 1, 64, 192), lambda x: x[:, 64:192].contiguous()),
        move("cat 4 CL fp16", [t((32, 64, 28, 28), layout=CL)] * 2 + [t((32, 128, 28, 28), layout=CL)] * 2,
             lambda m: dm.CatSpec.of(m, 1), lambda *xs: torch.cat(xs, 1)),
        move("pad 1 CL fp16", [t((32, 64, 56, 56), layout=CL)],
             lambda m: dm.PadSpec.of(m[0], [1, 1, 1, 1]), lambda x: torch.constant_pad_nd(x, [1, 1, 1, 1])),
        move("nearest x2 CL fp16", [t((8, 256, 32, 32), layout=CL)],
             lambda m: dm.UpsampleSpec.of("nearest", m[0], None, [2.0, 2.0]),
             lambda x: torch.ops.aten.upsample_nearest2d.vec(x, None, [2.0, 2.0])),
        move("bilinear 28->224 CL fp16", [t((8, 21, 28, 28), layout=CL)],
             lambda m: dm.UpsampleSpec.of("bilinear", m[0], [224, 224], None, False),
             lambda x: torch.ops.aten.upsample_bilinear2d.vec(x.float(), [224, 224], False, None).half(), False),
        move("bilinear align 28->224 fp32", [t((8, 21, 28, 28), torch.float32)],
             lambda m: dm.UpsampleSpec.of("bilinear", m[0], [224, 224], None, True),
             lambda x: torch.ops.aten.upsample_bilinear2d.vec(x, [224, 224], True, None), False),
    ]  # fmt: skip


def _gemm_cases() -> list[Case]:
    def linear(name, m, n, k, dtype, tf32=False):
        def build(device):
            x = torch.randn(m, k, device=device).to(dtype)
            w = torch.randn(n, k, device=device).to(dtype) / k**0.5
            b = torch.randn(n, device=device).to(dtype)
            spec = gemm.GemmSpec.addmm(
                TensorMeta.of(b), TensorMeta.of(x), TensorMeta.of(w.t()), allow_tf32=tf32
            )
            tensors = {"in0": b, "in1": x, "in2": w.t()}
            return spec, tensors, lambda: gemm.reference_gemm(spec, tensors, tf32=tf32), True

        return Case(name, build)

    def bmm(name, b, m, n, k, dtype):
        def build(device):
            x = torch.randn(b, m, k, device=device).to(dtype)
            w = torch.randn(b, n, k, device=device).to(dtype).transpose(1, 2)
            spec = gemm.GemmSpec.bmm(TensorMeta.of(x), TensorMeta.of(w))
            tensors = {"in0": x, "in1": w}
            return spec, tensors, lambda: gemm.reference_gemm(spec, tensors), True

        return Case(name, build)

    return [
        linear("classifier 1x1280->1000 fp16", 1, 1000, 1280, torch.float16),
        linear("classifier 32x2048->1000 fp16", 32, 1000, 2048, torch.float16),
        linear("classifier 1x2048->1000 bf16", 1, 1000, 2048, torch.bfloat16),
        linear("linear 4096x768->3072 fp16", 4096, 3072, 768, torch.float16),
        linear("linear 4096x768->3072 tf32", 4096, 3072, 768, torch.float32, tf32=True),
        linear("linear 1x512->1000 fp32 exact", 1, 1000, 512, torch.float32),
        bmm("bmm 96x197x197x64 fp16", 96, 197, 197, 64, torch.float16),
    ]


def _tolerance(spec, approx: bool) -> dict[str, float]:
    dtype = getattr(spec, "dtype", None) or spec.outputs()[0].dtype
    if not approx:
        return {"rtol": 0.0, "atol": 0.0}
    if isinstance(spec, gemm.GemmSpec):
        return {"rtol": 1e-2 if dtype != "float32" else 1e-4, "atol": 1e-2 if dtype != "float32" else 1e-4}
    return {"float32": {"rtol": 1e-5, "atol": 1e-5}, "float16": {"rtol": 1e-3, "atol": 1e-3}}.get(
        dtype, {"rtol": 8e-3, "atol": 8e-3}
    )


def _family(spec):
    if isinstance(spec, pooling.PoolSpec):
        return pooling
    if isinstance(spec, gemm.GemmSpec):
        return gemm
    return dm


def _outputs(spec) -> list[TensorMeta]:
    return [spec.output()] if hasattr(spec, "output") else spec.outputs()


def run_case(case: Case, device: str, dry_run: bool) -> dict:
    record: dict = {"name": case.name}
    try:
        spec, tensors, aten, approx = case.build(device)
        assert spec.supports(), spec.supports().reason
        family = _family(spec)
        schedule = family.heuristic_schedule(spec)
        launches = family.launches(spec, schedule)
        record["kernels"] = [la.name for la in launches]
        record["schedule"] = schedule.key()
        if dry_run:
            record["ok"] = True
            return record
        outs = [_poisoned(m, device) for m in _outputs(spec)]
        all_tensors = dict(tensors)
        all_tensors.update({("out" if k == 0 else f"out{k}"): y for k, y in enumerate(outs)})
        if family is gemm:
            all_tensors.update(allocate_scratch(gemm.scratch(spec, schedule), device, poison=True))

        def ours() -> None:
            for launch in launches:
                launch.run(all_tensors)

        ours()
        torch.cuda.synchronize()
        expected = aten()
        expected = expected if isinstance(expected, (list, tuple)) else [expected]
        for y, e in zip(outs, expected, strict=True):
            torch.testing.assert_close(y.float(), e.float().to(device), **_tolerance(spec, approx))
            if not approx:
                assert y.stride() == e.stride(), (y.stride(), e.stride())
        record["ok"] = True
        # CUDA-graph replays side by side (the tuner's and benchmarks' harness): launch overhead counts on
        # neither side, which would otherwise be most of a few-microsecond kernel's time.
        contenders = {"ours": ours}
        eager = _eager(spec, tensors)
        if eager is not None:
            contenders["aten"] = eager
        for name, (us, _) in time_side_by_side(contenders).items():
            record[f"{name}_ms"] = us / 1e3
    except Exception as e:  # every failure is recorded and counted
        record["ok"] = False
        record["error"] = f"{type(e).__name__}: {e}"
        record["trace"] = traceback.format_exc()[-2000:]
    return record


def _eager(spec, tensors: dict[str, torch.Tensor]) -> Callable[[], object] | None:
    """ATen's own op on the GPU for the timing column (what PyTorch eager runs)."""
    x = tensors.get("in0")
    if isinstance(spec, pooling.PoolSpec):
        return lambda: _eager_pool(spec, x)
    if isinstance(spec, gemm.GemmSpec):
        a = tensors[spec.a.role]
        w = tensors[spec.w.role]
        if spec.bias is not None:
            return lambda: torch.addmm(tensors[spec.bias.role], a, w)
        return lambda: torch.bmm(a, w) if a.dim() == 3 else torch.mm(a, w)
    if isinstance(spec, dm.CatSpec):
        xs = [tensors[f"in{k}"] for k in range(len(spec.inputs))]
        return lambda: torch.cat(xs, spec.dim)
    if isinstance(spec, dm.PadSpec):
        return lambda: torch.constant_pad_nd(x, list(spec.pad), spec.value)
    if isinstance(spec, dm.UpsampleSpec):
        return lambda: dm.reference_upsample(spec, x)
    if isinstance(spec, dm.StridedCopySpec):
        out = spec.outputs()[0]
        y = torch.empty_strided(out.sizes, out.strides, dtype=getattr(torch, out.dtype), device=x.device)
        view = x.as_strided(spec.view_sizes, spec.view_strides, spec.view_offset)
        return lambda: y.copy_(view)
    return None


def _eager_pool(spec, x):
    k, s, p, d = list(spec.kernel), list(spec.stride), list(spec.padding), list(spec.dilation)
    if spec.kind == pooling.MAX_POOL:
        op = (
            torch.ops.aten.max_pool2d_with_indices
            if spec.spatial == 2
            else torch.ops.aten.max_pool3d_with_indices
        )
        return op(x, k, s, p, d, spec.ceil_mode)
    if spec.kind == pooling.AVG_POOL:
        return torch.ops.aten.avg_pool2d(
            x, k, s, p, spec.ceil_mode, spec.count_include_pad, spec.divisor_override
        )
    op = torch.ops.aten._adaptive_avg_pool2d if spec.spatial == 2 else torch.ops.aten._adaptive_avg_pool3d
    return op(x, k)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    ap.add_argument("--dry-run", action="store_true", help="CPU: build the cases and their launches only")
    args = ap.parse_args(argv)
    device = "cpu" if args.dry_run else "cuda"
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    cases = _pool_cases() + _move_cases() + _gemm_cases()
    records = [run_case(c, device, args.dry_run) for c in cases]
    args.out.mkdir(parents=True, exist_ok=True)
    info = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if not args.dry_run else "cpu (dry run)",
        "host": platform.node(),
    }
    (args.out / "gpu_check_pool_move_gemm.json").write_text(
        json.dumps({"info": info, "cases": records}, indent=1)
    )
    print(f"{'case':44} {'ok':>4} {'ours ms':>9} {'aten ms':>9}  kernels")
    for r in records:
        ours = f"{r['ours_ms']:.4f}" if "ours_ms" in r else "-"
        aten = f"{r['aten_ms']:.4f}" if "aten_ms" in r else "-"
        print(f"{r['name']:44} {str(r['ok']):>4} {ours:>9} {aten:>9}  {','.join(r.get('kernels', []))}")
        if not r["ok"]:
            print("    " + r["error"])
    return 0 if all(r["ok"] for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
