"""`gemm_tma_kernel`: `gemm_kernel` (kernels.py) with its A and W tiles read through TMA descriptors.

Hopper's tensor cores are fed best by TMA: a copy engine moves a whole tile from global to shared memory, with
no address arithmetic in the kernel's warps, and Triton pipelines those copies (``num_stages``) into ``wgmma``.
Each program makes its descriptors on the device (``tl.make_tensor_descriptor``) for its batch's matrices:
Triton's global scratch holds them (128 bytes each per program), which the C++ runtime allocates from the
kernel's metadata, as for the convolutions' TMA template (conv/templates/implicit_gemm_tma.py). Compiled for
sm_80, Triton lowers the descriptors to ordinary loads, so a multi-arch export stays correct everywhere.

The copy engine writes zeros for a tile's rows and columns past the matrix, so neither the K tail nor the M
and N tails take a mask (gemm_kernel wraps its rows modulo M and masks the K tail instead). A TMA row is read
along the operand's unit-stride dim: A is [M, K] or its transpose [K, M] in memory (``A_K_UNIT``), W is [N, K]
(an nn.Linear's weight, ``W_K_UNIT``) or [K, N]; a tile stored transposed is loaded as it lies, then ``.T``.

Making a descriptor costs each program a write of 128 bytes and a fence before its first copy, which a program
of a short reduction (ConvNeXt's K = 96) barely amortises. So a program may compute several tiles: with a grid of
one program per tile it computes one, with a persistent grid (a ``PERSIST`` schedule: PERSIST programs per SM,
tma.py) each makes its descriptors once and steps through the tiles by the grid's size.

Same runtime arguments and results as `gemm_kernel` without split-K and without a row norm (launches.py; its
``colsum_ptr`` is never read), the same epilogue
(`_epilogue`: bias, alpha/beta, the fused chain, one rounding, a masked store through any output strides).
16-bit dtypes and 32-bit offsets only: the host-side rules are `tma_problem` (tma.py).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...conv.templates.gemm_jit import grouped_tile_ids
from .kernels import _epilogue


@triton.jit
def _descriptor(base, ROWS, K, S_ROW, S_K,
                K_UNIT: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    """A descriptor of a [ROWS, K] matrix at ``base`` for [BLOCK_R, BLOCK_K] tiles, over the matrix as it lies in
    memory: [ROWS, K] when K is its unit-stride dim, else [K, ROWS] (a TMA row must be contiguous)."""
    if K_UNIT:
        return tl.make_tensor_descriptor(base, [ROWS, K], [S_ROW, 1], [BLOCK_R, BLOCK_K])
    else:
        return tl.make_tensor_descriptor(base, [K, ROWS], [S_K, 1], [BLOCK_K, BLOCK_R])


@triton.jit
def _load(desc, r0, k0, K_UNIT: tl.constexpr):
    """Tile [r0:, k0:] of the matrix `_descriptor` describes, as [BLOCK_R, BLOCK_K]."""
    if K_UNIT:
        return desc.load([r0, k0])
    else:
        return desc.load([k0, r0]).T


@triton.jit
def gemm_tma_kernel(
    a_ptr, w_ptr, bias_ptr, c_ptr, ws_ptr, cnt_ptr, colsum_ptr,
    M, N, K,
    SAB, SAM, SAK, SWB, SWK, SWN, SBM, SBN, SCB, SCM, SCN,
    ALPHA, BETA,
    e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc,
    A_K_UNIT: tl.constexpr, W_K_UNIT: tl.constexpr, C_N_UNIT: tl.constexpr, HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    PROGRAM: tl.constexpr, E_KINDS: tl.constexpr, PERSISTENT: tl.constexpr,
):  # fmt: skip
    """Grid: (programs, B, 1); program p computes tiles p, p + programs, ... of batch B's [M, N]."""
    batch = tl.program_id(1).to(tl.int64)
    a_desc = _descriptor(a_ptr + batch * SAB, M, K, SAM, SAK, A_K_UNIT, BLOCK_M, BLOCK_K)
    w_desc = _descriptor(w_ptr + batch * SWB, N, K, SWN, SWK, W_K_UNIT, BLOCK_N, BLOCK_K)
    tiles_m, tiles_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    # A persistent program's tile and K loops are flattened into one, so the software pipeline issues the next
    # tile's copies while this tile's epilogue runs instead of draining at every tile.
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, tl.num_programs(0), flatten=PERSISTENT):
        pid_m, pid_n = grouped_tile_ids(tile, tiles_m, tiles_n, GROUP_M)
        m0 = pid_m * BLOCK_M
        n0 = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kb in range(tl.cdiv(K, BLOCK_K)):
            a = _load(a_desc, m0, kb * BLOCK_K, A_K_UNIT)
            w = _load(w_desc, n0, kb * BLOCK_K, W_K_UNIT)
            acc = tl.dot(a, w.T, acc)

        offs_m = m0 + tl.arange(0, BLOCK_M)
        offs_n = n0 + tl.arange(0, BLOCK_N)
        _epilogue(acc, bias_ptr, c_ptr, batch * SCB, offs_m, offs_n, M, N, SBM, SBN, SCM, SCN, ALPHA, BETA,
                  e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc, HAS_BIAS, C_N_UNIT, PROGRAM,
                  E_KINDS)  # fmt: skip
