#!/usr/bin/env python
"""Experiment: a Gluon conv main loop fed by 4-D TMA boxes of the unpadded channels-last input (vgg.3x3.256).

    python scripts/exp_gluon_box.py --check-compile            # any machine: compile for sm_90, inspect the PTX
    PYTHONPATH=backends python scripts/exp_gluon_box.py --out $OUT/gluon   # GPU: check against ATen, time vs cuDNN

Why (docs/performance.md, session 6): a stride-1 conv's A tile for tap (kh, kw) is a rectangle of pixels of the
channels-last input, [BOX_N images, BH rows, BW columns, BK channels], whose out-of-bounds part (the padding) the
TMA unit zero-fills, so it needs no padded copy and no mask. Plain Triton (3.6, 3.7) turns the reshape of such a
box to the [BM, BK] MMA operand into a shared -> register -> shared round trip; Gluon's ``memdesc`` reshape is a
view of the same shared memory, so ``wgmma`` reads both operands from shared memory (`--check-compile` checks
that: the 4-D ``cp.async.bulk.tensor`` and descriptor-only ``wgmma`` operands). The kernel is a STAGES-deep TMA
ring with one asynchronous ``wgmma`` group in flight, one output tile per program.

Not part of the backend: Gluon kernels have no interpreter, so CPU CI could not check them; a winner would move
into a template with a Triton-language twin for the interpreter tests.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

ROOT = Path(__file__).resolve().parent.parent


@gluon.jit
def _issue_loads(x_desc, w_desc, a_s, b_s, bars, i, n0, oh0, ow0, co0,
                 C_BLOCKS: gl.constexpr, KW: gl.constexpr, PH: gl.constexpr, PW: gl.constexpr,
                 BK: gl.constexpr, STAGES: gl.constexpr, NBYTES: gl.constexpr):  # fmt: skip
    """TMA copies of K step i (tap i // C_BLOCKS, channel block i % C_BLOCKS) into ring slot i % STAGES."""
    s = i % STAGES
    tap = i // C_BLOCKS
    bar = bars.index(s)
    mbarrier.expect(bar, NBYTES)
    coord = [n0, oh0 + tap // KW - PH, ow0 + tap % KW - PW, (i % C_BLOCKS) * BK]
    tma.async_copy_global_to_shared(x_desc, coord, bar, a_s.index(s))
    tma.async_copy_global_to_shared(w_desc, [i * BK, co0], bar, b_s.index(s))


@gluon.jit
def gluon_box_conv_kernel(x_ptr, w_ptr, y_ptr, N, H, W,
                          C: gl.constexpr, K: gl.constexpr, KH: gl.constexpr, KW: gl.constexpr,
                          PH: gl.constexpr, PW: gl.constexpr,
                          BOX_N: gl.constexpr, BH: gl.constexpr, BW: gl.constexpr,
                          BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr, WARPS: gl.constexpr):  # fmt: skip
    """y[n, h, w, :] = sum over taps and channels; x [N, H, W, C] and y [N, H, W, K] channels-last ("same" conv,
    stride 1), w the implicit GEMM's prepared weight [KH*KW*C, K]."""
    BM: gl.constexpr = BOX_N * BH * BW
    C_BLOCKS: gl.constexpr = C // BK
    STEPS: gl.constexpr = KH * KW * C_BLOCKS
    NBYTES: gl.constexpr = (BM * BK + BK * BN) * 2
    a_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=4)
    b_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    x_desc = tma.make_tensor_descriptor(
        x_ptr, [N, H, W, C], [H * W * C, W * C, C, 1], [BOX_N, BH, BW, BK], a_layout
    )
    w_desc = tma.make_tensor_descriptor(w_ptr, [KH * KW * C, K], [K, 1], [BK, BN], b_layout)
    a_s = gl.allocate_shared_memory(gl.float16, [STAGES, BOX_N, BH, BW, BK], a_layout)
    b_s = gl.allocate_shared_memory(gl.float16, [STAGES, BK, BN], b_layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for slot in gl.static_range(STAGES):
        mbarrier.init(bars.index(slot), count=1)

    tiles_h = (H + BH - 1) // BH
    tiles_w = (W + BW - 1) // BW
    pid = gl.program_id(0)
    n0 = pid // (tiles_h * tiles_w) * BOX_N
    oh0 = pid // tiles_w % tiles_h * BH
    ow0 = pid % tiles_w * BW
    co0 = gl.program_id(1) * BN

    mma: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, BN, 16]
    )
    acc = gl.zeros([BM, BN], gl.float32, mma)
    for i in gl.static_range(STAGES - 1):  # prologue: fill all but one slot
        _issue_loads(
            x_desc, w_desc, a_s, b_s, bars, i, n0, oh0, ow0, co0, C_BLOCKS, KW, PH, PW, BK, STAGES, NBYTES
        )
    for i in range(STEPS):
        s = i % STAGES
        mbarrier.wait(bars.index(s), (i // STAGES) & 1)
        a = a_s.index(s).reshape([BM, BK])
        acc = warpgroup_mma(a, b_s.index(s), acc, is_async=True)
        # One group in flight: step i-1's MMA is done, so its slot ((i-1) % STAGES) may be refilled.
        acc = warpgroup_mma_wait(1, deps=[acc])
        nxt = i + STAGES - 1
        if nxt < STEPS:
            _issue_loads(
                x_desc,
                w_desc,
                a_s,
                b_s,
                bars,
                nxt,
                n0,
                oh0,
                ow0,
                co0,
                C_BLOCKS,
                KW,
                PH,
                PW,
                BK,
                STAGES,
                NBYTES,
            )
    acc = warpgroup_mma_wait(0, deps=[acc])
    for slot in gl.static_range(STAGES):
        mbarrier.invalidate(bars.index(slot))

    out_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [WARPS, 1], [1, 0])
    out = gl.convert_layout(acc.to(gl.float16), out_layout)
    r = gl.arange(0, BM, layout=gl.SliceLayout(1, out_layout))
    co = co0 + gl.arange(0, BN, layout=gl.SliceLayout(0, out_layout))
    n = n0 + r // (BH * BW)
    oh = oh0 + r // BW % BH
    ow = ow0 + r % BW
    ok = (n < N) & (oh < H) & (ow < W)
    gl.store(
        y_ptr + (((n * H + oh) * W + ow) * K)[:, None] + co[None, :],
        out,
        mask=ok[:, None] & (co < K)[None, :],
    )


# (BOX_N, BH, BW, BN, BK, STAGES, warps): 8 x 8 pixel boxes tile 56-wide maps exactly.
CONFIGS = (
    (2, 8, 8, 128, 64, 4, 8),
    (2, 8, 8, 256, 64, 3, 8),
    (1, 8, 8, 128, 64, 4, 4),
    (2, 8, 8, 128, 64, 3, 8),
    (4, 8, 8, 128, 64, 3, 8),
)


def constexprs(c: int, k: int, cfg: tuple[int, ...]) -> dict[str, int]:
    box_n, bh, bw, bn, bk, stages, warps = cfg
    return dict(
        C=c, K=k, KH=3, KW=3, PH=1, PW=1, BOX_N=box_n, BH=bh, BW=bw, BN=bn, BK=bk, STAGES=stages, WARPS=warps
    )


def check_compile() -> int:
    """Compile every config for sm_90 here and report whether wgmma reads A from shared memory."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    ok = True
    for cfg in CONFIGS:
        sig = {"x_ptr": "*fp16", "w_ptr": "*fp16", "y_ptr": "*fp16", "N": "i32", "H": "i32", "W": "i32"}
        ce = constexprs(256, 256, cfg)
        sig.update({name: "constexpr" for name in ce})
        src = GluonASTSource(
            fn=gluon_box_conv_kernel,
            signature=sig,
            constexprs={(list(sig).index(name),): v for name, v in ce.items()},
            attrs={},
        )
        try:
            compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": cfg[-1]})
        except Exception as e:  # report and go on: one config's failure says nothing of the others
            ok = False
            print(f"{cfg}: compile failed: {type(e).__name__}: {str(e)[-600:]}")
            continue
        ptx = compiled.asm["ptx"]
        operands = re.findall(r"wgmma\.mma_async[^\n]*\}, (%\w+), (%\w+),", ptx)
        smem_a = bool(operands) and all(a.startswith("%rd") for a, _ in operands)
        box = "cp.async.bulk.tensor.4d" in ptx
        ok &= smem_a and box
        print(
            f"{cfg}: shared {compiled.metadata.shared} B, 4-D TMA box {box}, "
            f"wgmma A from shared memory {smem_a} ({len(operands)} wgmma)"
        )
    return 0 if ok else 1


def run_gpu(out: Path) -> int:
    """vgg.3x3.256 fp16 from the public suite: every config checked element by element against ATen (the
    project's tolerance, NaN-poisoned output), then timed next to cuDNN."""
    import torch

    sys.path.insert(0, str(ROOT / "scripts"))
    import numerics_cases as nc
    from bench_conv import DEFAULT_SUITE, load_suite, time_gpu_us
    from cuda_triton.conv.templates.base import _ensure_scratch_allocator

    out.mkdir(parents=True, exist_ok=True)
    torch.backends.cudnn.benchmark = True
    _ensure_scratch_allocator()  # Triton's global scratch for the device-side TMA descriptors
    (vgg,) = [c for c in load_suite(DEFAULT_SUITE) if c.name == "vgg.3x3.256"]
    case = nc.case_from_suite(vgg, "float16")
    x, wt, _ = nc.make_tensors(case, "cuda")
    ref = nc.reference(case, x, wt, None)
    n, c, h, w = x.shape
    k = wt.shape[0]
    w_mat = wt.permute(2, 3, 1, 0).reshape(9 * c, k).contiguous()  # [taps * C_in, C_out]
    y = torch.empty(n, h, w, k, device="cuda", dtype=x.dtype)
    cudnn_us = time_gpu_us(lambda: torch.nn.functional.conv2d(x, wt, padding=1))[0]
    results: list[dict] = [{"variant": "cudnn", "us": cudnn_us}]
    print(f"cudnn {cudnn_us:.1f} us", flush=True)
    for cfg in CONFIGS:
        box_n, bh, bw, bn, *_ = cfg
        grid = (triton.cdiv(n, box_n) * triton.cdiv(h, bh) * triton.cdiv(w, bw), triton.cdiv(k, bn))

        def launch(cfg=cfg, grid=grid) -> None:
            gluon_box_conv_kernel[grid](x, w_mat, y, n, h, w, **constexprs(c, k, cfg), num_warps=cfg[-1])

        try:
            y.fill_(float("nan"))
            launch()
            check = nc.compare(case, y.permute(0, 3, 1, 2), ref, x, wt)
            us = time_gpu_us(launch)[0]
        except Exception as e:  # a config that does not compile or launch on this Triton
            results.append({"config": cfg, "error": f"{type(e).__name__}: {e}"[:400]})
            print(f"{cfg}: ERROR {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        results.append({"config": cfg, "us": us, **check})
        print(f"{cfg}: {us:.1f} us ({cudnn_us / us:.2f}x cuDNN), check {check}", flush=True)
    (out / "gluon_box.json").write_text(json.dumps(results, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check-compile", action="store_true", help="compile for sm_90 only (no GPU needed)")
    ap.add_argument("--out", type=Path, help="GPU run: results directory")
    args = ap.parse_args()
    if args.check_compile:
        return check_compile()
    if args.out is None:
        ap.error("--out is required for a GPU run")
    return run_gpu(args.out)


if __name__ == "__main__":
    raise SystemExit(main())
