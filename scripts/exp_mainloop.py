#!/usr/bin/env python
"""Experiment (GPU): how fast can a Triton main loop run the vgg.3x3.256 conv's GEMM, and does a persistent loop help?

    PYTHONPATH=backends python scripts/exp_mainloop.py --out $OUT/mainloop

vgg.3x3.256 (N8 C256 K256 56x56 3x3, channels-last) is the public-suite case still below 0.8x of cuDNN in 16-bit.
This script times, side by side in one run (median of CUDA-graph replays, L2 warm like bench_conv.py):
  * cuDNN on the conv, and our shipped table's schedule for it (the implicit GEMM);
  * a plain GEMM with the conv's M x N x K (25088 x 256 x 2304) as TMA tiles, non-persistent: the ceiling of a
    Triton Hopper main loop for this much work with no gather at all;
  * the same GEMM persistent (one program per SM, ``tl.range(..., flatten=True)`` so the next tile's loads are
    issued during the current tile's epilogue), with and without warp specialisation;
  * the TMA conv (padded copy) main kernel, non-persistent and persistent, on an already padded input.
Every variant's output is checked against a reference first (NaN-poisoned output). Results: ``mainloop.json`` and
a table on stdout. Kernels here are experiments; winners move into the templates.
"""

# Each closure below is called by record() before the loop moves on, so late binding cannot bite.
# ruff: noqa: B023

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "backends"))

from bench_conv import time_gpu_us  # noqa: E402
from cuda_triton.conv import ConvProblem  # noqa: E402
from cuda_triton.conv.params import ConvParams  # noqa: E402
from cuda_triton.conv.templates import get_template  # noqa: E402
from cuda_triton.conv.templates.gemm_jit import grouped_tile_ids as _swizzle  # noqa: E402
from cuda_triton.kernel.launch import Schedule  # noqa: E402
from cuda_triton.kernel.launch import ensure_scratch_allocator as _ensure_scratch_allocator  # noqa: E402

NUM_SMS = 132


@triton.jit
def gemm_tma_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):  # fmt: skip
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    pid_m, pid_n = _swizzle(tl.program_id(0), num_m, num_n, GROUP_M)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        acc = tl.dot(a_desc.load([pid_m * BM, k * BK]), b_desc.load([k * BK, pid_n * BN]), acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_ptr.dtype.element_ty))


@triton.jit
def gemm_tma_persistent_kernel(a_ptr, b_ptr, c_ptr, M, N, K, NUM_PROGS: tl.constexpr,
                               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                               FLATTEN: tl.constexpr, WS: tl.constexpr):  # fmt: skip
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    for tile in tl.range(tl.program_id(0), num_m * num_n, NUM_PROGS, flatten=FLATTEN, warp_specialize=WS):
        pid_m, pid_n = _swizzle(tile, num_m, num_n, GROUP_M)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, k_tiles):
            acc = tl.dot(a_desc.load([pid_m * BM, k * BK]), b_desc.load([k * BK, pid_n * BN]), acc)
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_ptr.dtype.element_ty))


@triton.jit
def conv_tma_padded_persistent_kernel(x_ptr, w_ptr, y_ptr, BATCH, OH, OW, HP, WP,
                                      C_IN: tl.constexpr, C_OUT: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
                                      NUM_PROGS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                                      BK: tl.constexpr, GROUP_M: tl.constexpr, FLATTEN: tl.constexpr):  # fmt: skip
    """The TMA template's padded-grid main loop (2-D, channels-last output), one program per SM looping over tiles."""
    plane = HP * WP
    span = (OH - 1) * WP + OW
    tiles_per_image = tl.cdiv(span, BM)
    num_m = BATCH * tiles_per_image
    num_n = tl.cdiv(C_OUT, BN)
    x_desc = tl.make_tensor_descriptor(
        x_ptr, shape=[BATCH * plane, C_IN], strides=[C_IN, 1], block_shape=[BM, BK]
    )
    w_desc = tl.make_tensor_descriptor(
        w_ptr, shape=[KH * KW * C_IN, C_OUT], strides=[C_OUT, 1], block_shape=[BK, BN]
    )
    C_BLOCKS: tl.constexpr = C_IN // BK
    for tile in tl.range(tl.program_id(0), num_m * num_n, NUM_PROGS, flatten=FLATTEN):
        pid_m, pid_n = _swizzle(tile, num_m, num_n, GROUP_M)
        n = pid_m // tiles_per_image
        r0 = (pid_m % tiles_per_image) * BM
        row0 = n * plane + r0
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for i in range(KH * KW * C_BLOCKS):
            tap = i // C_BLOCKS
            shift = (tap // KW) * WP + tap % KW
            a = x_desc.load([row0 + shift, (i % C_BLOCKS) * BK])
            b = w_desc.load([i * BK, pid_n * BN])
            acc = tl.dot(a, b, acc)
        r = r0 + tl.arange(0, BM)
        ow = r % WP
        oh = r // WP
        ok = (ow < OW) & (oh < OH)
        co = pid_n * BN + tl.arange(0, BN)
        ptrs = y_ptr + ((n * OH * OW + oh * OW + ow) * C_OUT)[:, None] + co[None, :]
        tl.store(ptrs, acc.to(y_ptr.dtype.element_ty), mask=ok[:, None] & (co < C_OUT)[None, :])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--budget-s", type=float, default=240.0)
    ap.add_argument(
        "--parts",
        default="implicit,gemm,padded",
        help="variants to time besides cuDNN",
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    _ensure_scratch_allocator()
    torch.backends.cudnn.benchmark = True
    t0 = time.monotonic()
    results: list[dict] = []

    def record(dtype: str, name: str, fn, check) -> None:
        if time.monotonic() - t0 > args.budget_s:
            return
        try:
            err = check()
            us, _ = time_gpu_us(fn)
        except Exception as e:  # one failed compile should not end the experiment
            results.append({"dtype": dtype, "variant": name, "error": f"{type(e).__name__}: {e}"[:300]})
            print(f"{dtype:9s} {name:58s} ERROR {type(e).__name__}: {str(e)[:120]}", flush=True)
            return
        results.append({"dtype": dtype, "variant": name, "us": us, "err": err})
        print(f"{dtype:9s} {name:58s} {us:8.2f} us  err {err:.2e}", flush=True)

    n, c, k, h, w = 8, 256, 256, 56, 56
    for dtype_name in args.dtypes.split(","):
        dt = getattr(torch, dtype_name)
        x = torch.randn(n, c, h, w, device="cuda", dtype=dt).contiguous(memory_format=torch.channels_last)
        wt = (torch.randn(k, c, 3, 3, device="cuda", dtype=dt) / 48).contiguous(
            memory_format=torch.channels_last
        )
        ref = torch.nn.functional.conv2d(x.float(), wt.float(), padding=1)
        scale = float(ref.abs().max())

        def rel(out: torch.Tensor) -> float:
            e = float((out.float() - ref).abs().max()) / scale
            if not torch.isfinite(out).all():
                return float("inf")
            return e

        conv = lambda: torch.nn.functional.conv2d(x, wt, padding=1)  # noqa: E731
        record(dtype_name, "cudnn", conv, lambda: rel(conv()))

        # our shipped schedule (the table's) and a few alternatives of the implicit GEMM template
        t = get_template("implicit_gemm")
        y = torch.empty_like(ref, dtype=dt).contiguous(memory_format=torch.channels_last)
        problem = ConvProblem.from_tensors(
            x, wt, None, ConvParams((1, 1), (1, 1), (1, 1), (1, 1), False, (0, 0), 1)
        )
        parts = set(args.parts.split(","))
        for label, sched in (
            ()
            if "implicit" not in parts
            else (
                ("implicit_gemm 128x128x64 w8 s3 (table)", dict(BLOCK_M=128, BLOCK_N=128, num_stages=3)),
                ("implicit_gemm 128x128x64 w8 s4", dict(BLOCK_M=128, BLOCK_N=128, num_stages=4)),
                ("implicit_gemm 128x256x64 w8 s3", dict(BLOCK_M=128, BLOCK_N=256, num_stages=3)),
                ("implicit_gemm 128x256x64 w8 s4", dict(BLOCK_M=128, BLOCK_N=256, num_stages=4)),
            )
        ):
            d = {"BLOCK_K": 64, "FLAT_K": 0, "GROUP_M": 8, "GROUP_TILE": 1, "ROW_TILES": 0, "num_warps": 8}
            d.update(sched)
            s = Schedule.from_dict(d)
            launches = t.launches(problem, s)
            tensors = {
                "input": x,
                "weight": t.prepare_weight(wt, problem, s),
                "bias": None,
                "output": y,
                **t.allocate_scratch(problem, s, y.device),
            }

            def run(launches=launches, tensors=tensors) -> None:
                for launch in launches:
                    launch.run(tensors)

            def check(run=run) -> float:
                y.fill_(float("nan"))
                run()
                return rel(y)

            record(dtype_name, label, run, check)

        # plain GEMM of the same size (A = a random [M, K], B = [K, N]) against torch.matmul (cuBLAS)
        m_, n_, k_ = n * h * w, k, c * 9
        a = torch.randn(m_, k_, device="cuda", dtype=dt)
        b = torch.randn(k_, n_, device="cuda", dtype=dt) / 48
        cref = a.float() @ b.float()
        cs = float(cref.abs().max())
        cm = torch.empty(m_, n_, device="cuda", dtype=dt)

        def grel(out: torch.Tensor) -> float:
            return float((out.float() - cref).abs().max()) / cs if torch.isfinite(out).all() else float("inf")

        if "gemm" in parts:
            record(
                dtype_name,
                "cublas matmul",
                lambda: torch.matmul(a, b, out=cm),
                lambda: grel(torch.matmul(a, b)),
            )
            tiles = (
                (128, 128, 64, 8, 3),
                (128, 128, 64, 8, 4),
                (128, 256, 64, 8, 3),
                (128, 256, 64, 8, 4),
                (256, 128, 64, 8, 3),
            )
            for bm, bn, bk, warps, stages in tiles:
                grid = (triton.cdiv(m_, bm) * triton.cdiv(n_, bn),)

                def plain(bm=bm, bn=bn, bk=bk, warps=warps, stages=stages, grid=grid) -> None:
                    gemm_tma_kernel[grid](a, b, cm, m_, n_, k_, BM=bm, BN=bn, BK=bk, GROUP_M=8,
                                          num_warps=warps, num_stages=stages)  # fmt: skip

                def pcheck(plain=plain) -> float:
                    cm.fill_(float("nan"))
                    plain()
                    return grel(cm)

                record(dtype_name, f"gemm tma {bm}x{bn}x{bk} w{warps} s{stages}", plain, pcheck)
                for progs_per_sm in (1, 2):
                    if progs_per_sm == 2 and bm * bn > 128 * 128:
                        continue
                    for flatten, ws in ((True, False), (False, True)):
                        progs = NUM_SMS * progs_per_sm

                        def pers(
                            bm=bm,
                            bn=bn,
                            bk=bk,
                            warps=warps,
                            stages=stages,
                            progs=progs,
                            flatten=flatten,
                            ws=ws,
                        ):
                            gemm_tma_persistent_kernel[(progs,)](
                                a, b, cm, m_, n_, k_, NUM_PROGS=progs, BM=bm, BN=bn, BK=bk, GROUP_M=8,
                                FLATTEN=flatten, WS=ws, num_warps=warps, num_stages=stages,
                            )  # fmt: skip

                        def chk(pers=pers) -> float:
                            cm.fill_(float("nan"))
                            pers()
                            return grel(cm)

                        tag = "flatten" if flatten else "warp-spec"
                        record(
                            dtype_name,
                            f"gemm tma persistent {bm}x{bn}x{bk} w{warps} s{stages} x{progs_per_sm}/SM {tag}",
                            pers,
                            chk,
                        )

        if "padded" in parts:
            # the TMA conv's padded-grid main loop, non-persistent (the template) and persistent (here)
            hp, wp = h + 2, w + 2
            xp = torch.zeros(n, hp, wp, c, device="cuda", dtype=dt)
            xp[:, 1:-1, 1:-1, :] = x.permute(0, 2, 3, 1)
            wk = wt.permute(2, 3, 1, 0).reshape(9 * c, k).contiguous()  # [taps * C_in, C_out]
            for bm, bn, bk, warps, stages in tiles:
                span = (h - 1) * wp + w
                num_tiles = n * triton.cdiv(span, bm) * triton.cdiv(k, bn)
                for progs in sorted({NUM_SMS, 2 * NUM_SMS, num_tiles}):
                    if progs == 2 * NUM_SMS and bm * bn > 128 * 128:
                        continue

                    def pconv(bm=bm, bn=bn, bk=bk, warps=warps, stages=stages, progs=progs) -> None:
                        conv_tma_padded_persistent_kernel[(progs,)](
                            xp, wk, y, n, h, w, hp, wp, C_IN=c, C_OUT=k, KH=3, KW=3, NUM_PROGS=progs,
                            BM=bm, BN=bn, BK=bk, GROUP_M=8, FLATTEN=progs < num_tiles, num_warps=warps, num_stages=stages,
                        )  # fmt: skip

                    def cchk(pconv=pconv) -> float:
                        y.fill_(float("nan"))
                        pconv()
                        return rel(y)

                    kind = "non-persistent" if progs >= num_tiles else f"persistent {progs} progs"
                    record(
                        dtype_name, f"conv tma padded {bm}x{bn}x{bk} w{warps} s{stages} {kind}", pconv, cchk
                    )

    (args.out / "mainloop.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
