"""`launches(spec, schedule)`: the GEMM kernel calls for one `GemmSpec`, its scratch and its schedules.

`gemm_kernel` arguments (PTX order): a, w, bias, out, workspace, tile-counter and column-sum pointers (a missing
bias is a's pointer, never read; the split-K workspace, role "workspace", and tile counters, role
"tile_counters", only with SPLIT_K > 1, else out's pointer, never read; the column sums, role "colsum", only with
a row norm, else a's pointer, never read), int32 M, N, K and the strides of a [B, M, K], w [B, K, N], bias
[M, N] and out [B, M, N] (int64 when an offset needs it), fp32 alpha and beta, the epilogue's three operand slots
(conv/templates/epilogue_args.py); everything else is a constexpr.
Grid: (cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N), B, SPLIT_K): one launch, split or not (kernels.py). A TMA schedule
(tma.py) runs `gemm_tma_kernel` instead, with the same arguments, grid (tma_grid_x, B, 1): one program per tile or
a persistent grid.
"""

from __future__ import annotations

from ...conv.templates._splitk import split_k_of
from ...conv.templates._tf32 import NO_ROUNDING, tf32_rounding
from ...conv.templates.epilogue_args import epilogue_args, epilogue_constexprs
from ...kernel.launch import (
    TRITON_PTR_DTYPE,
    KernelLaunch,
    ScalarArg,
    Schedule,
    ScratchTensor,
    TensorArg,
    cdiv,
    split_k_args,
    split_k_scratch,
)
from .kernels import gemm_kernel, heuristic_schedule_for, schedule_space
from .row_norm import COLSUM_ROLE
from .spec import GemmSpec
from .tma import TMA_ARCH, is_persistent, is_tma, tma_grid_x, tma_problem, tma_schedules
from .tma_kernel import gemm_tma_kernel


def heuristic_schedule(spec: GemmSpec) -> Schedule:
    fp32, split_ok = spec.dtype == "float32", spec.row_norm_eps is None
    return heuristic_schedule_for(
        spec.batch, spec.m, spec.n, spec.k, fp32, split_ok, spec.epilogue is not None
    )


def schedules(spec: GemmSpec, arch: int | None = None) -> list[Schedule]:
    """The tuning space (the heuristic's pick first); for ``arch`` sm_90 or later the TMA variant's schedules
    follow where TMA can read the operands (None: an arch unknown, so none). A row norm needs the whole K in
    one program: no split-K, no TMA."""
    space = schedule_space(
        spec.batch, spec.m, spec.n, spec.k, spec.dtype == "float32", spec.epilogue is not None
    )
    if spec.row_norm_eps is not None:
        return [s for s in space if split_k_of(s) == 1]
    if arch is not None and arch >= TMA_ARCH:
        space += tma_schedules(spec)
    return space


def scratch(spec: GemmSpec, schedule: Schedule) -> list[ScratchTensor]:
    """A split-K schedule's fp32 partial sums [SPLIT_K, B, M, N] and zeroed tile counters, one per program of grid
    axes 0 and 1 (none otherwise)."""
    split = split_k_of(schedule)
    if split == 1:
        return []
    tiles = cdiv(spec.m, schedule["BLOCK_M"]) * cdiv(spec.n, schedule["BLOCK_N"]) * spec.batch
    return split_k_scratch((split, spec.batch, spec.m, spec.n), tiles)


def dot_precision(spec: GemmSpec) -> str:
    """``tl.dot`` input precision: TF32 for fp32 when allowed, else exact fp32 (16-bit dtypes ignore it)."""
    return "ieee" if spec.dtype == "float32" and not spec.allow_tf32 else "tf32"


def launches(spec: GemmSpec, schedule: Schedule) -> list[KernelLaunch]:
    support = spec.supports()
    if not support:
        raise ValueError(support.reason)
    tma, split = is_tma(schedule), split_k_of(schedule)
    if tma and (reason := tma_problem(spec) or ("the TMA kernel does not split K" if split > 1 else None)):
        raise ValueError(f"{spec.op}: schedule {schedule.key()}: {reason}")
    if spec.row_norm_eps is not None and (tma or split > 1):
        raise ValueError(f"{spec.op}: schedule {schedule.key()}: a row norm needs the whole K in one program")
    int64 = spec.needs_int64()
    index = "i64" if int64 else "i32"
    dt = TRITON_PTR_DTYPE[spec.dtype]
    has_bias = spec.bias is not None
    bias_role = spec.bias.role if has_bias else spec.a.role
    bias_strides = spec.bias.strides[1:] if has_bias else (0, 0)
    (_, sam, sak), (_, swk, swn), (scb, scm, scn) = spec.a.strides, spec.w.strides, spec.out_view
    alpha_beta = (ScalarArg("ALPHA", "fp32", spec.alpha), ScalarArg("BETA", "fp32", spec.beta))
    out_strides = (ScalarArg("SCB", index, scb), ScalarArg("SCM", index, scm), ScalarArg("SCN", index, scn))
    bias_args = (ScalarArg("SBM", index, bias_strides[0]), ScalarArg("SBN", index, bias_strides[1]))

    bm, bn, bk = schedule["BLOCK_M"], schedule["BLOCK_N"], schedule["BLOCK_K"]
    args = (
        TensorArg(spec.a.role, dt),
        TensorArg(spec.w.role, dt),
        TensorArg(bias_role, dt),
        TensorArg("out", dt),
        *split_k_args(split, TensorArg("out", dt)),
        TensorArg(COLSUM_ROLE if spec.row_norm_eps is not None else spec.a.role, "fp32"),
        *(ScalarArg(name, index, v) for name, v in (("M", spec.m), ("N", spec.n), ("K", spec.k))),
        *(ScalarArg(name, index, v) for name, v in zip(("SAB", "SAM", "SAK"), spec.a.strides, strict=True)),
        *(ScalarArg(name, index, v) for name, v in zip(("SWB", "SWK", "SWN"), spec.w.strides, strict=True)),
        *bias_args,
        *out_strides,
        *alpha_beta,
        *epilogue_args(spec),
    )
    grid = (cdiv(spec.m, bm) * cdiv(spec.n, bn), spec.batch, split)
    if tma:
        tma_constexprs = (
            ("A_K_UNIT", sak == 1),
            ("W_K_UNIT", swk == 1),
            ("C_N_UNIT", scn == 1),
            ("HAS_BIAS", has_bias),
            *((name, schedule[name]) for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")),
            *epilogue_constexprs(spec),
            ("PERSISTENT", is_persistent(schedule)),
        )
        tma_grid = (tma_grid_x(spec, schedule), spec.batch, 1)
        return [
            KernelLaunch(
                gemm_tma_kernel, args, tma_constexprs, tma_grid, schedule.num_warps, schedule.num_stages
            )
        ]
    constexprs = (
        ("A_M_UNIT", sam == 1),
        ("A_K_UNIT", sak == 1),
        ("W_K_UNIT", swk == 1),
        ("W_N_UNIT", swn == 1),
        ("C_N_UNIT", scn == 1),
        ("HAS_BIAS", has_bias),
        ("EVEN_K", spec.k % bk == 0),
        ("PRECISION", dot_precision(spec)),
        ("ROUND_TF32", tf32_rounding(spec)),
        ("ROUND_W", NO_ROUNDING if spec.w_rounded else tf32_rounding(spec)),
        ("INT64", int64),
        ("ROW_NORM", spec.row_norm_eps is not None),
        ("NORM_EPS", spec.row_norm_eps or 0.0),
        ("BLOCK_M", bm),
        ("BLOCK_N", bn),
        ("BLOCK_K", bk),
        ("GROUP_M", schedule["GROUP_M"]),
        ("SPLIT_K", split),
        *epilogue_constexprs(spec),
    )
    return [KernelLaunch(gemm_kernel, args, constexprs, grid, schedule.num_warps, schedule.num_stages)]
