#!/usr/bin/env python3
"""Check the output-layout rule (`out_shape_and_stride`) against real CUDA convolutions, and the canonical op on CUDA.

    PYTHONPATH=backends python scripts/check_layout_gpu.py --out OUT            # on the GPU machine
    PYTHONPATH=backends python scripts/check_layout_gpu.py --out OUT --dry-run  # CPU: build cases, sizes only
    PYTHONPATH=backends python scripts/check_layout_gpu.py --out OUT --dry-run --interpret  # + CUDA body's dispatch

(``--interpret`` runs the CUDA body's dispatch on CPU tensors with TRITON_INTERPRET=1; its bf16 cases fail there
because Triton 3.7.1's interpreter computes ``tl.dot`` on bf16 operands wrongly, not because of the templates.)

For every case (dims 1/2/3, forward and transposed, depthwise, grouped, dilated, fp16/bf16/fp32/fp64, every rule of
docs/convolution.md: batch 0, C_in == 0, channels-last input or weight, channels_last_3d, 1-D weight layouts and the
(N, C, 1) input, transposed with output_padding >= stride, float64, unbatched, ambiguous size-1 strides, 'same'):

1. ATen on CUDA (``aten.convolution``, or ``F.conv*`` for unbatched inputs and string padding) gives the truth;
   the rule must give exactly its sizes and strides (``layout_ok``), and the hand-written expectation of the case
   (channels-last or contiguous) must hold (``expect_ok``);
2. ``torch.ops.triton.convolution`` runs on the same CUDA tensors with the canonical arguments, its output memory
   poisoned with NaN first (the caching allocator hands back a block just filled with 0xFF bytes); its sizes and
   strides must be the rule's and every element must match an fp64 reference within a dtype- and
   reduction-scaled tolerance (``op_ok``). TF32 is switched off, so fp32 is compared as fp32.

Writes OUT/check_layout_gpu.json (every case) and OUT/check_layout_gpu.md (summary line for docs/convolution.md).
Needs torch and triton only (no executorch). Exit status 1 when any counted case fails.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

if "--interpret" in sys.argv:  # must precede every import of triton kernels
    os.environ["TRITON_INTERPRET"] = "1"

import torch
import torch.nn.functional as F

try:
    import cuda_triton  # noqa: F401  (registers torch.ops.triton.convolution)
except ImportError:  # run from a checkout without PYTHONPATH=backends
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "backends"))
    import cuda_triton  # noqa: F401

from cuda_triton.conv.layout import contiguous_strides, out_shape_and_stride
from cuda_triton.conv.op import reference_convolution
from cuda_triton.conv.params import ConvParams

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "fp64": torch.float64}


@dataclass
class Case:
    name: str
    x_shape: tuple[int, ...]
    w_shape: tuple[int, ...]
    x_fmt: str = "c"  # c | cl | nlc (1-D stored N,L,C) | hwc (unbatched stored H,W,C) | sliced
    w_fmt: str = "c"  # c | cl | kc (1-D weight stored C_out,k,C_in)
    dtype: str = "fp32"
    stride: int | tuple[int, ...] = 1
    padding: int | tuple[int, ...] | str = 0
    dilation: int | tuple[int, ...] = 1
    transposed: bool = False
    output_padding: int | tuple[int, ...] = 0
    groups: int = 1
    bias: bool = True
    expect: str = "c"  # the layout this case should produce: "cl" (channels-last) or "c" (contiguous)
    informational: bool = False  # reported, not counted (ATen's behaviour is not specified there)
    rules: list[str] = field(default_factory=list)

    @property
    def spatial(self) -> int:
        return len(self.w_shape) - 2

    @property
    def unbatched(self) -> bool:
        return len(self.x_shape) == self.spatial + 1

    def tup(self, v: int | tuple[int, ...]) -> tuple[int, ...]:
        return tuple(v) if isinstance(v, tuple) else (v,) * self.spatial

    def params(self) -> ConvParams:
        n = self.spatial
        if isinstance(self.padding, str):
            if self.padding == "valid":
                before = after = (0,) * n
            else:
                total = [d * (k - 1) for d, k in zip(self.tup(self.dilation), self.w_shape[2:], strict=True)]
                before = tuple(t // 2 for t in total)
                after = tuple(t - b for t, b in zip(total, before, strict=True))
        else:
            before = after = self.tup(self.padding)
        return ConvParams(
            self.tup(self.stride),
            before,
            after,
            self.tup(self.dilation),
            self.transposed,
            self.tup(self.output_padding),
            self.groups,
        )


def C(name: str, x, w, rules: str, **kw) -> Case:
    return Case(name, tuple(x), tuple(w), rules=rules.split(), **kw)


CASES: list[Case] = [
    # ---- 2-D forward ------------------------------------------------------------------------------------
    C("c2_contiguous", (2, 8, 12, 12), (16, 8, 3, 3), "2d contiguous", padding=1),
    C("c2_cl_input", (2, 8, 12, 12), (16, 8, 3, 3), "2d cl_input", x_fmt="cl", padding=1, expect="cl"),
    C("c2_cl_weight", (2, 8, 12, 12), (16, 8, 3, 3), "2d cl_weight", w_fmt="cl", expect="cl"),
    C(
        "c2_cl_both_s2_fp16",
        (2, 8, 12, 12),
        (16, 8, 3, 3),
        "2d cl fp16 strided",
        x_fmt="cl",
        w_fmt="cl",
        dtype="fp16",
        stride=2,
        padding=1,
        expect="cl",
    ),
    C("c2_cl_input_bf16", (2, 8, 10, 9), (16, 8, 3, 3), "2d cl bf16", x_fmt="cl", dtype="bf16", expect="cl"),
    C("c2_cl_input_fp64", (2, 8, 10, 10), (16, 8, 3, 3), "2d fp64", x_fmt="cl", dtype="fp64"),
    C("c2_cl_weight_fp64", (2, 8, 10, 10), (16, 8, 3, 3), "2d fp64", w_fmt="cl", dtype="fp64"),
    C("c2_batch0_cl_input", (0, 8, 10, 10), (16, 8, 3, 3), "2d batch0", x_fmt="cl"),
    C("c2_batch0_cl_weight", (0, 8, 10, 10), (16, 8, 3, 3), "2d batch0", w_fmt="cl"),
    C("c2_cin0", (2, 0, 10, 10), (16, 0, 3, 3), "2d cin0", x_fmt="cl", bias=False),
    C("c2_cin0_bias", (2, 0, 10, 10), (16, 0, 3, 3), "2d cin0", w_fmt="cl"),
    C("c2_dw_contiguous_fp32", (2, 16, 14, 14), (16, 1, 3, 3), "2d depthwise", padding=1, groups=16),
    C(
        "c2_dw_contiguous_fp16_cudnn",
        (4, 64, 28, 28),
        (64, 1, 3, 3),
        "2d depthwise fp16",
        dtype="fp16",
        padding=1,
        groups=64,
    ),
    C(
        "c2_dw_cl_input_fp16",
        (2, 32, 14, 14),
        (32, 1, 3, 3),
        "2d depthwise cl_input fp16",
        x_fmt="cl",
        dtype="fp16",
        padding=1,
        groups=32,
        expect="cl",
    ),
    C(
        "c2_dw_cl_weight",
        (2, 16, 9, 9),
        (16, 1, 5, 5),
        "2d depthwise cl_weight",
        w_fmt="cl",
        padding=2,
        groups=16,
        expect="cl",
    ),
    C(
        "c2_dw_mult2_cl_s2",
        (2, 8, 11, 11),
        (16, 1, 3, 3),
        "2d depthwise cl_input strided",
        x_fmt="cl",
        stride=2,
        groups=8,
        expect="cl",
    ),
    C(
        "c2_grouped_cl_input",
        (2, 12, 9, 9),
        (18, 4, 3, 3),
        "2d grouped cl_input",
        x_fmt="cl",
        padding=1,
        groups=3,
        expect="cl",
    ),
    C("c2_grouped_dilated", (2, 8, 13, 13), (8, 4, 3, 3), "2d grouped dilated", dilation=2, groups=2),
    C(
        "c2_dilated_cl_input_bf16",
        (1, 8, 13, 13),
        (16, 8, 3, 3),
        "2d dilated cl_input bf16",
        x_fmt="cl",
        dtype="bf16",
        dilation=(2, 3),
        padding=(2, 3),
        expect="cl",
    ),
    C(
        "c2_dilated_cl_weight",
        (1, 8, 13, 13),
        (16, 8, 3, 3),
        "2d dilated cl_weight",
        w_fmt="cl",
        dilation=2,
        expect="cl",
    ),
    C("c2_1x1_cl_input", (2, 16, 7, 7), (32, 16, 1, 1), "2d 1x1 cl_input", x_fmt="cl", expect="cl"),
    C(
        "c2_patchify_cl_weight",
        (1, 3, 16, 16),
        (8, 3, 4, 4),
        "2d patchify cl_weight",
        w_fmt="cl",
        stride=4,
        expect="cl",
    ),
    C("c2_NC11_cl_input", (2, 8, 1, 1), (16, 8, 1, 1), "2d ambiguous cl_input", x_fmt="cl", expect="cl"),
    C("c2_NC11_contiguous", (2, 8, 1, 1), (16, 8, 1, 1), "2d ambiguous"),
    C("c2_N111", (2, 1, 1, 1), (16, 1, 1, 1), "2d ambiguous", x_fmt="cl"),
    C("c2_C1_cl_input", (2, 1, 9, 9), (8, 1, 3, 3), "2d ambiguous cl_input", x_fmt="cl", expect="cl"),
    C("c2_C1_contiguous", (2, 1, 9, 9), (8, 1, 3, 3), "2d ambiguous"),
    C("c2_k1_cl_weight", (2, 8, 6, 6), (16, 8, 1, 1), "2d ambiguous cl_weight", w_fmt="cl", expect="cl"),
    C("c2_H1_cl_input", (2, 8, 1, 12), (16, 8, 1, 3), "2d ambiguous cl_input", x_fmt="cl", expect="cl"),
    C("c2_sliced_input", (2, 8, 10, 10), (16, 8, 3, 3), "2d sliced", x_fmt="sliced"),
    C("c2_unbatched", (8, 10, 10), (16, 8, 3, 3), "2d unbatched", padding=1),
    C("c2_unbatched_hwc_input", (8, 10, 10), (16, 8, 3, 3), "2d unbatched", x_fmt="hwc"),
    C(
        "c2_unbatched_cl_weight",
        (8, 10, 10),
        (16, 8, 3, 3),
        "2d unbatched cl_weight",
        w_fmt="cl",
        expect="cl",
    ),
    C(
        "c2_same_even_k_cl",
        (2, 8, 10, 11),
        (16, 8, 2, 4),
        "2d same asymmetric cl_input",
        x_fmt="cl",
        padding="same",
        dilation=(1, 3),
        expect="cl",
    ),
    C(
        "c2_same_odd_k_bf16",
        (2, 8, 10, 11),
        (16, 8, 3, 3),
        "2d same bf16",
        dtype="bf16",
        padding="same",
        dilation=2,
    ),
    C(
        "c2_fwd_output_padding_big_cl",
        (2, 8, 10, 10),
        (16, 8, 3, 3),
        "2d forward_output_padding",
        x_fmt="cl",
        output_padding=1,
    ),
    # ---- 3-D forward ------------------------------------------------------------------------------------
    C("c3_contiguous", (2, 4, 6, 7, 8), (8, 4, 3, 3, 3), "3d contiguous", padding=1),
    C(
        "c3_cl3d_input_fp16",
        (2, 4, 6, 7, 8),
        (8, 4, 3, 3, 3),
        "3d cl3d_input fp16",
        x_fmt="cl",
        dtype="fp16",
        padding=1,
        expect="cl",
    ),
    C("c3_cl3d_weight", (2, 4, 6, 7, 8), (8, 4, 3, 3, 3), "3d cl3d_weight", w_fmt="cl", expect="cl"),
    C("c3_cl3d_input_fp64", (1, 4, 5, 5, 5), (8, 4, 3, 3, 3), "3d fp64", x_fmt="cl", dtype="fp64"),
    C("c3_batch0_cl3d", (0, 4, 5, 5, 5), (8, 4, 3, 3, 3), "3d batch0", x_fmt="cl"),
    C(
        "c3_dw_cl3d_input",
        (2, 8, 5, 6, 7),
        (8, 1, 3, 3, 3),
        "3d depthwise cl3d_input",
        x_fmt="cl",
        padding=1,
        groups=8,
        expect="cl",
    ),
    C("c3_dw_contiguous", (2, 8, 5, 6, 7), (8, 1, 3, 3, 3), "3d depthwise", padding=1, groups=8),
    C(
        "c3_grouped_dilated_cl3d_bf16",
        (1, 4, 7, 7, 7),
        (8, 2, 3, 3, 3),
        "3d grouped dilated bf16",
        x_fmt="cl",
        dtype="bf16",
        dilation=2,
        groups=2,
        expect="cl",
    ),
    C(
        "c3_unbatched_cl3d_weight",
        (4, 5, 5, 5),
        (8, 4, 3, 3, 3),
        "3d unbatched cl3d_weight",
        w_fmt="cl",
        expect="cl",
    ),
    C("c3_same_even_k", (1, 4, 5, 6, 7), (8, 4, 2, 2, 3), "3d same asymmetric", padding="same"),
    # ---- 1-D forward ------------------------------------------------------------------------------------
    C("c1_contiguous", (2, 8, 20), (16, 8, 3), "1d contiguous", padding=1),
    C("c1_nlc_input", (2, 8, 20), (16, 8, 3), "1d nlc_input", x_fmt="nlc"),
    C("c1_kc_weight", (2, 8, 20), (16, 8, 3), "1d kc_weight", w_fmt="kc", expect="cl"),
    C("c1_nlc_input_L1", (2, 8, 1), (16, 8, 1), "1d nlc_input L1", x_fmt="nlc", expect="cl"),
    C(
        "c1_nlc_input_L1_same_even_k",
        (2, 8, 1),
        (16, 8, 2),
        "1d nlc_input L1 same",
        x_fmt="nlc",
        padding="same",
    ),
    C(
        "c1_dw_kc_weight_fp16",
        (2, 16, 20),
        (16, 1, 5),
        "1d depthwise kc_weight fp16",
        w_fmt="kc",
        dtype="fp16",
        padding=2,
        groups=16,
        expect="cl",
    ),
    C(
        "c1_grouped_dilated_fp16",
        (2, 8, 30),
        (12, 4, 3),
        "1d grouped dilated fp16",
        dtype="fp16",
        dilation=3,
        groups=2,
    ),
    C("c1_unbatched_kc_weight", (8, 20), (16, 8, 3), "1d unbatched kc_weight", w_fmt="kc", expect="cl"),
    C("c1_cin0", (2, 0, 20), (16, 0, 3), "1d cin0"),
    C("c1_same_even_k_bf16", (2, 8, 20), (16, 8, 4), "1d same asymmetric bf16", dtype="bf16", padding="same"),
    C("c1_kc_weight_fp64", (2, 8, 20), (16, 8, 3), "1d fp64 kc_weight", w_fmt="kc", dtype="fp64"),
    # ---- transposed -------------------------------------------------------------------------------------
    C(
        "t2_contiguous",
        (2, 8, 6, 7),
        (8, 6, 3, 3),
        "2d transposed",
        transposed=True,
        stride=2,
        padding=1,
        output_padding=1,
    ),
    C(
        "t2_cl_input",
        (2, 8, 6, 7),
        (8, 6, 3, 3),
        "2d transposed cl_input",
        x_fmt="cl",
        transposed=True,
        stride=2,
        padding=1,
        output_padding=1,
        expect="cl",
    ),
    C(
        "t2_cl_weight",
        (2, 8, 6, 7),
        (8, 6, 4, 4),
        "2d transposed cl_weight",
        w_fmt="cl",
        transposed=True,
        stride=2,
        padding=1,
        expect="cl",
    ),
    C(
        "t2_op_ge_stride_cl",
        (2, 8, 6, 7),
        (8, 6, 3, 3),
        "2d transposed op_ge_stride",
        x_fmt="cl",
        transposed=True,
        dilation=2,
        output_padding=1,
    ),
    C(
        "t2_grouped_cl_fp16",
        (2, 8, 6, 6),
        (8, 4, 3, 3),
        "2d transposed grouped cl_input fp16",
        x_fmt="cl",
        dtype="fp16",
        transposed=True,
        stride=2,
        groups=2,
        expect="cl",
    ),
    C(
        "t2_dw_cl_bf16",
        (2, 8, 6, 6),
        (8, 1, 4, 4),
        "2d transposed depthwise cl_input bf16",
        x_fmt="cl",
        dtype="bf16",
        transposed=True,
        stride=2,
        padding=1,
        groups=8,
        expect="cl",
    ),
    C(
        "t2_cl_fp64",
        (2, 8, 6, 6),
        (8, 6, 3, 3),
        "2d transposed fp64",
        x_fmt="cl",
        dtype="fp64",
        transposed=True,
        stride=2,
    ),
    C(
        "t2_unbatched_cl_weight",
        (8, 6, 6),
        (8, 6, 3, 3),
        "2d transposed unbatched cl_weight",
        w_fmt="cl",
        transposed=True,
        stride=2,
        expect="cl",
    ),
    C(
        "t2_batch0_cl",
        (0, 8, 6, 6),
        (8, 6, 3, 3),
        "2d transposed batch0",
        x_fmt="cl",
        transposed=True,
        stride=2,
    ),
    C(
        "t3_cl3d_input",
        (1, 4, 4, 5, 6),
        (4, 6, 3, 3, 3),
        "3d transposed cl3d_input",
        x_fmt="cl",
        transposed=True,
        stride=2,
        padding=1,
        output_padding=1,
        expect="cl",
    ),
    C(
        "t3_op_ge_stride_cl3d",
        (1, 4, 4, 5, 6),
        (4, 6, 2, 2, 2),
        "3d transposed op_ge_stride",
        x_fmt="cl",
        transposed=True,
        dilation=2,
        output_padding=1,
    ),
    C(
        "t3_contiguous_fp16",
        (2, 4, 4, 4, 4),
        (4, 6, 3, 3, 3),
        "3d transposed fp16",
        dtype="fp16",
        transposed=True,
        stride=(1, 2, 2),
        groups=2,
    ),
    C(
        "t1_contiguous",
        (2, 8, 10),
        (8, 6, 3),
        "1d transposed",
        transposed=True,
        stride=2,
        padding=1,
        output_padding=1,
    ),
    C(
        "t1_kc_weight",
        (2, 8, 10),
        (8, 6, 3),
        "1d transposed kc_weight",
        w_fmt="kc",
        transposed=True,
        stride=2,
        expect="cl",
    ),
    C(
        "t1_op_ge_stride_kc_weight",
        (2, 8, 10),
        (8, 6, 3),
        "1d transposed op_ge_stride kc_weight",
        w_fmt="kc",
        transposed=True,
        dilation=3,
        output_padding=2,
    ),
    C(
        "t1_unbatched",
        (8, 10),
        (8, 6, 3),
        "1d transposed unbatched",
        transposed=True,
        stride=3,
        output_padding=2,
    ),
    # ---- informational (not counted) ----------------------------------------------------------------------
    C(
        "t2_zero_sized_output_cl",
        (1, 4, 2, 2),
        (4, 6, 3, 3),
        "2d transposed empty_output",
        x_fmt="cl",
        transposed=True,
        padding=2,
        informational=True,
    ),
]


# ---------------------------------------------------------------------------------------------------------
def make_tensor(
    shape: tuple[int, ...], fmt: str, dtype: torch.dtype, device: str, gen: torch.Generator
) -> torch.Tensor:
    def rnd(*s: int) -> torch.Tensor:
        t = torch.randn(*s, generator=gen, dtype=torch.float64).to(dtype)
        return t.to(device)

    rank = len(shape)
    if fmt == "c":
        return rnd(*shape)
    if fmt == "cl":
        return rnd(*shape).to(memory_format=torch.channels_last if rank == 4 else torch.channels_last_3d)
    if fmt in ("nlc", "kc"):  # (A, B, L) stored as (A, L, B)
        return rnd(shape[0], shape[2], shape[1]).transpose(1, 2)
    if fmt == "hwc":
        return rnd(*shape[1:], shape[0]).permute(rank - 1, *range(rank - 1))
    if fmt == "sliced":
        big = rnd(*shape[:-1], shape[-1] * 2 + 1)
        return big.narrow(rank - 1, 1, shape[-1])
    raise ValueError(fmt)


def aten_conv(case: Case, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """What PyTorch returns for this convolution (the truth for sizes and strides)."""
    n = case.spatial
    if case.unbatched or isinstance(case.padding, str):
        if case.transposed:
            fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[n - 1]
            return fn(x, w, b, case.tup(case.stride), case.tup(case.padding), case.tup(case.output_padding),
                      case.groups, case.tup(case.dilation))  # fmt: skip
        fn = (F.conv1d, F.conv2d, F.conv3d)[n - 1]
        pad = case.padding if isinstance(case.padding, str) else case.tup(case.padding)
        return fn(x, w, b, case.tup(case.stride), pad, case.tup(case.dilation), case.groups)
    return torch.ops.aten.convolution(
        x, w, b, case.tup(case.stride), case.tup(case.padding), case.tup(case.dilation), case.transposed,
        case.tup(case.output_padding), case.groups,
    )  # fmt: skip


def rule_layout(case: Case, x: torch.Tensor, w: torch.Tensor) -> tuple[list[int], list[int]]:
    p = case.params()
    return out_shape_and_stride(
        list(x.shape), list(x.stride()), list(w.shape), list(w.stride()), list(p.stride), list(p.padding_before),
        list(p.padding_after), list(p.dilation), p.transposed, list(p.output_padding), p.groups,
        x.dtype == torch.float64,
    )  # fmt: skip


def layout_class(sizes: list[int], strides: list[int]) -> str:
    return "c" if strides == contiguous_strides(sizes) else "cl"


TOL = {torch.float16: 1e-2, torch.bfloat16: 3e-2, torch.float32: 1e-4, torch.float64: 1e-10}


def poison_allocator(nbytes: int, device: str) -> None:
    """Fill freed blocks of the caching allocator with 0xFF (NaN for every float dtype) so the next
    allocations of that size class (the op's output among them) start out as NaN."""
    if device != "cuda" or nbytes <= 0:
        return
    blocks = [torch.empty(nbytes, dtype=torch.uint8, device=device) for _ in range(4)]
    for blk in blocks:
        blk.fill_(0xFF)
    del blocks, blk


def run_case(case: Case, device: str, seed: int, dry_run: bool, interpret: bool = False) -> dict[str, Any]:
    dtype = DTYPES[case.dtype]
    gen = torch.Generator().manual_seed(seed)
    rec: dict[str, Any] = {
        "name": case.name,
        "rules": case.rules,
        "case": asdict(case),
        "informational": case.informational,
    }
    x = make_tensor(case.x_shape, case.x_fmt, dtype, device, gen)
    w = make_tensor(case.w_shape, case.w_fmt, dtype, device, gen)
    out_ch = case.w_shape[1] * case.groups if case.transposed else case.w_shape[0]
    b = make_tensor((out_ch,), "c", dtype, device, gen) if case.bias else None
    rec["input_stride"], rec["weight_stride"] = list(x.stride()), list(w.stride())
    sizes, strides = rule_layout(case, x, w)
    rec["rule"] = {"sizes": sizes, "strides": strides}
    rec["expect_ok"] = layout_class(sizes, strides) == case.expect or 0 in sizes
    try:
        if device == "cpu" and dtype in (torch.float16, torch.bfloat16):
            # A dry run compares sizes only; ATen's 16-bit CPU convolutions are not used as references (they can
            # hang on some CPUs: docs/platform_facts.md), so its sizes come from the same conv in fp32.
            y = aten_conv(case, x.float(), w.float(), None if b is None else b.float())
        else:
            y = aten_conv(case, x, w, b)
        torch.cuda.synchronize() if device == "cuda" else None
        rec["aten"] = {"sizes": list(y.shape), "strides": list(y.stride())}
    except Exception as e:  # noqa: BLE001
        rec["aten"] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
        y = None
    if y is not None:
        rec["sizes_ok"] = list(y.shape) == sizes
        rec["layout_ok"] = rec["sizes_ok"] and (dry_run or list(y.stride()) == strides)
    else:
        rec["sizes_ok"] = rec["layout_ok"] = False

    # the canonical op on the same tensors
    p = case.params()
    try:
        numel = math.prod(sizes)
        poison_allocator(max(numel, 1) * x.element_size(), device)
        if interpret:
            # CPU stand-in for the CUDA body: the same dispatch, kernels in Triton's interpreter
            from cuda_triton.conv.dispatch import run_convolution

            out = run_convolution(x, w, b, p)
        else:
            out = torch.ops.triton.convolution(x, w, b, *p.as_op_args())
        if device == "cuda":
            torch.cuda.synchronize()
        rec["op"] = {"sizes": list(out.shape), "strides": list(out.stride())}
        ok = list(out.shape) == sizes and list(out.stride()) == strides
        if numel:
            ref = reference_convolution(
                (x.unsqueeze(0) if case.unbatched else x).double(),
                w.double(),
                None if b is None else b.double(),
                p,
            )
            ref = ref.squeeze(0) if case.unbatched else ref
            reduction = (
                case.w_shape[1] if not case.transposed else case.w_shape[0] // case.groups
            ) * math.prod(case.w_shape[2:])
            tol = TOL[dtype]
            err = (out.double() - ref).abs()
            bound = tol * (ref.abs() + math.sqrt(max(reduction, 1)))
            rec["op"]["max_abs_err"] = float(err.max()) if err.numel() else 0.0
            rec["op"]["nan"] = bool(torch.isnan(out).any())
            rec["op"]["values_ok"] = bool((err <= bound).all()) and not rec["op"]["nan"]
            ok = ok and rec["op"]["values_ok"]
        rec["op_ok"] = ok
    except Exception as e:  # noqa: BLE001
        rec["op"] = {"error": f"{type(e).__name__}: {str(e)[:300]}", "trace": traceback.format_exc()[-1500:]}
        rec["op_ok"] = False
    rec["pass"] = bool(rec["layout_ok"] and rec["expect_ok"] and rec["op_ok"])
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument(
        "--dry-run", action="store_true", help="CPU: build every case, check sizes and the op's CPU body"
    )
    ap.add_argument(
        "--interpret",
        action="store_true",
        help="with --dry-run: run the CUDA body's dispatch (templates in TRITON_INTERPRET) instead of the CPU body",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="run cases whose name contains this string")
    args = ap.parse_args()

    device = "cpu" if args.dry_run else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("check_layout_gpu: no CUDA device (use --dry-run on a CPU machine)", file=sys.stderr)
        return 2
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return run_cases(args, device)
    finally:  # a caller in the same process (the tests) keeps its own TF32 settings
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def run_cases(args: argparse.Namespace, device: str) -> int:
    """Every selected case, the JSON and markdown summaries; 0 when every counted case passes."""
    args.out.mkdir(parents=True, exist_ok=True)

    cases = [c for c in CASES if args.only in c.name]
    records = []
    t0 = time.time()
    for i, case in enumerate(cases):
        t = time.time()
        rec = run_case(case, device, args.seed + i, args.dry_run, args.interpret)
        rec["seconds"] = round(time.time() - t, 3)
        records.append(rec)
        status = "PASS" if rec["pass"] else ("info" if case.informational else "FAIL")
        aten = rec["aten"]
        aten_s = aten.get("error") or f"{aten['sizes']}/{aten['strides']}"
        op = rec["op"]
        op_s = op.get("error") or f"{op['sizes']}/{op['strides']} err={op.get('max_abs_err', 0):.2e}"
        print(
            f"[{status}] {case.name:<34} rule {rec['rule']['sizes']}/{rec['rule']['strides']}  aten {aten_s}  "
            f"op {op_s}  (layout_ok={rec['layout_ok']} expect_ok={rec['expect_ok']} op_ok={rec['op_ok']})",
            flush=True,
        )

    counted = [r for r in records if not r["informational"]]
    passed = sum(r["pass"] for r in counted)
    layout_passed = sum(r["layout_ok"] and r["expect_ok"] for r in counted)
    op_passed = sum(r["op_ok"] for r in counted)
    covered = sorted({rule for c in cases for rule in c.rules})
    summary = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "PYTHONPATH=backends python " + " ".join(sys.argv),
        "mode": "dry-run (CPU: sizes and the CPU body only, strides not compared)"
        if args.dry_run
        else "cuda",
        "device": torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "triton": _triton_version(),
        "cases": len(counted),
        "passed": passed,
        "layout_passed": layout_passed,
        "op_passed": op_passed,
        "failed": [r["name"] for r in counted if not r["pass"]],
        "informational": {
            r["name"]: {"aten": r["aten"], "rule": r["rule"], "op": r["op"]}
            for r in records
            if r["informational"]
        },
        "rules_covered": covered,
        "seconds": round(time.time() - t0, 1),
    }
    (args.out / "check_layout_gpu.json").write_text(
        json.dumps({"summary": summary, "records": records}, indent=1)
    )
    where = "ATen CUDA" if device == "cuda" else "ATen CPU sizes only (dry run)"
    line = (
        f"{summary['date']}, {summary['device']}, torch {summary['torch']}, triton {summary['triton']}: "
        f"`{summary['command']}` -> {passed}/{len(counted)} cases pass (layout rule vs {where}: "
        f"{layout_passed}/{len(counted)}; triton::convolution on {device}, values and strides: "
        f"{op_passed}/{len(counted)})"
    )
    (args.out / "check_layout_gpu.md").write_text(line + "\n")
    print()
    print(
        f"summary: {passed}/{len(counted)} pass; layout {layout_passed}, op {op_passed}; failed: {summary['failed']}"
    )
    print(line)
    return 0 if passed == len(counted) else 1


def _triton_version() -> str:
    try:
        import triton

        return triton.__version__
    except Exception:  # noqa: BLE001
        return "absent"


if __name__ == "__main__":
    sys.exit(main())
