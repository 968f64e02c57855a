"""Where the TMA GEMM (`gemm_tma_kernel`, tma_kernel.py) may run, and its schedules: the ``TMA1`` variant.

A TMA schedule carries ``TMA=1`` among its params, so its key (``Schedule.key``) names the variant, e.g.
``BLOCK_K64_BLOCK_M128_BLOCK_N128_GROUP_M8_TMA1_w8_s3``; schedules without the key run `gemm_kernel`. The
tuning space offers them for sm_90 and later (`TMA_ARCH`, the first with a TMA unit) where `tma_problem` finds
nothing; the heuristic never picks one until GPU timings say where they win (scripts/tune_gemm.py). A schedule
with ``PERSIST=p`` launches p programs per SM (at most one per tile), each computing tiles until none is left;
without it, one program per tile.
"""

from __future__ import annotations

import torch

from ...conv.templates.geometry import NUM_SMS, fit_block
from ...kernel.launch import Schedule, cdiv
from ...kernel.spaces import TILE_FIELDS, load_rows
from .kernels import GROUP_M
from .spec import GemmSpec, Operand

TMA_ARCH = 90
TMA_KEY = "TMA"
PERSIST_KEY = "PERSIST"
# TMA copies start at 16-byte aligned addresses and step by whole 16-byte units between rows. Every pointer a
# kernel of the delegate receives is 16-byte aligned (serialization/encoding.py's VIEW_ALIGNMENT), so the base
# needs no check; the row and batch strides do.
TMA_ALIGN_BYTES = 16

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): Hopper-sized tiles for many tiles over a long K (ConvNeXt's
# M = 100352 layers), every one within the H100's 227 KiB of shared memory per block at its stage count.
_TMA_CONFIGS = load_rows(__file__, "TMA_CONFIGS", TILE_FIELDS)
# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, programs per SM) of the persistent grid.
_PERSISTENT_CONFIGS = load_rows(__file__, "PERSISTENT_CONFIGS", (*TILE_FIELDS, "PERSIST"))


def is_tma(schedule: Schedule) -> bool:
    """Whether ``schedule`` runs the TMA kernel."""
    return dict(schedule.params).get(TMA_KEY, 0) == 1


def is_persistent(schedule: Schedule) -> bool:
    """Whether ``schedule`` launches a persistent grid (PERSIST programs per SM)."""
    return dict(schedule.params).get(PERSIST_KEY, 0) > 0


def tma_grid_x(spec: GemmSpec, schedule: Schedule) -> int:
    """The grid's x extent of a TMA schedule: one program per tile, or PERSIST per SM but not beyond the tiles."""
    tiles = cdiv(spec.m, schedule["BLOCK_M"]) * cdiv(spec.n, schedule["BLOCK_N"])
    persist = dict(schedule.params).get(PERSIST_KEY, 0)
    return min(tiles, persist * NUM_SMS) if persist else tiles


def _operand_problem(op: Operand, dtype: str, name: str) -> str | None:
    """Why TMA cannot read the [B, rows, K]-shaped operand ``op`` (strides in elements), or None."""
    _, s_rows, s_k = op.strides
    if 1 not in (s_rows, s_k):
        return f"{name} has no unit-stride dim (a TMA row must be contiguous)"
    other = s_rows if s_k == 1 else s_k
    size = getattr(torch, dtype).itemsize
    if (other * size) % TMA_ALIGN_BYTES or (op.strides[0] * size) % TMA_ALIGN_BYTES:
        return f"{name}'s row and batch strides must be multiples of {TMA_ALIGN_BYTES} bytes"
    return None


def tma_problem(spec: GemmSpec) -> str | None:
    """Why the TMA kernel cannot compute ``spec`` (one `GemmSpec.supports`), or None."""
    if spec.dtype not in ("float16", "bfloat16"):
        # Hopper's TF32 wgmma reads both operands K-major only, and the convolutions' fp32 TMA tiles (rounded
        # to TF32 in registers) miscomputed on the H200 (conv/templates/implicit_gemm_tma.py).
        return f"TMA schedules take fp16 and bf16 only, not {spec.dtype}"
    if spec.needs_int64():
        return "TMA schedules index in 32 bits (descriptor sizes are int32)"
    # A as [B, M, K]; W as [B, N, K] (its strides swapped), so both are read along rows of K.
    w_nk = Operand(spec.w.role, spec.w.sizes, (spec.w.strides[0], spec.w.strides[2], spec.w.strides[1]))
    return _operand_problem(spec.a, spec.dtype, "a") or _operand_problem(w_nk, spec.dtype, "w")


def tma_schedules(spec: GemmSpec) -> list[Schedule]:
    """The TMA variant's schedules for ``spec`` ([] where `tma_problem` finds a reason), distinct."""
    if tma_problem(spec):
        return []
    configs = [(*c, 0) for c in _TMA_CONFIGS] + list(_PERSISTENT_CONFIGS)
    out: dict[Schedule, None] = {}
    for bm, bn, bk, warps, stages, persist in configs:
        params = {
            "BLOCK_M": fit_block(bm, spec.m),
            "BLOCK_N": fit_block(bn, spec.n),
            "BLOCK_K": fit_block(bk, spec.k),
            "GROUP_M": GROUP_M,
            TMA_KEY: 1,
        }
        if persist:
            params[PERSIST_KEY] = persist
        out[Schedule.make(warps, stages, **params)] = None
    return list(out)
