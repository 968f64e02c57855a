"""Implicit GEMM for forward convolutions, 1-D/2-D/3-D, any stride, dilation, (asymmetric) padding and groups.

The GEMM: M = batch * output pixels, N = output channels of a group tile, K = taps * input channels of the
tile. A program computes a BLOCK_M x BLOCK_N output tile; its K loop runs over (tap, channel block) pairs in one
flat loop (so Triton pipelines it), taps outer and channels inner, so a channels-last A tile is BLOCK_M rows of
BLOCK_K contiguous channels. Padding is a load mask. When a group has few channels, GROUP_TILE groups share a
program: the prepared weight of such a tile is block-diagonal (zeros between groups), so one dense MMA covers
them, instead of a grid axis of tiny GEMMs. When the tile has fewer than 16 input channels (RGB stems), FLAT_K
walks the flattened (tap, channel) axis instead, so K blocks are not mostly padding.

Kernel arguments (PTX order): x, w, bias, y, ws, tile-counter, amax pointers, then int32 BATCH, D, H, W, OD, OH,
OW (1-D/2-D problems have leading sizes 1), then the fused epilogue's three operands (epilogue_args.py; an
epilogue needs one group tile and no tail split), then the fused prologue's three (no groups, no F16_MMA). Everything else is a constexpr. Grid: (cdiv(M, BLOCK_M) * cdiv(COUT_T, BLOCK_N),
groups / GROUP_TILE, SPLIT_K), plus TAIL_M_TILES * (TAIL_SPLIT - 1) * cdiv(COUT_T, BLOCK_N) programs on axis 0
for tail-split schedules.

Split-K schedules (SPLIT_K > 1, for few output tiles and a long K): the same kernel, ws the fp32 workspace and the
tile counters those of _splitk.py; the last share of each tile stores it, with bias and epilogue. Tail-split
schedules (TAIL_SPLIT > 1, for whole waves plus a nearly empty last one): the last TAIL_M_TILES rows of tiles are
split along K into ws, then ``splitk_reduce_kernel`` writes them. ws and the counters are unused pointers (the
output) where they are not needed.

Prepared weight: [groups / GROUP_TILE, taps, CIN_P, COUT_P] contiguous, CIN_P = CIN_T rounded up to BLOCK_K,
COUT_P = COUT_T rounded up to BLOCK_N, zero-filled, so weight loads need no mask (FLAT_K: [tiles, 1, K_ROWS,
COUT_P] with the taps * CIN_T (tap, channel) rows rounded up to BLOCK_K). K_ROWS = rows of one tile's matrix.
fp32 with TF32 allowed: the weight is rounded to the nearest TF32 values when prepared and the A tile in the
kernel (ROUND_TF32), instead of the tensor core's truncation (see _tf32.py); or, with F16_MMA, both run on fp16
tensor cores scaled by powers of two (_f16_mma.py): x is then the scaled fp16 copy (F16_MMA=2) or scaled in the
kernel (1), the prepared weight is fp16 with a trailer after its W_NUMEL values, amax the input's partial maxima
(an unused pointer otherwise). Launches: [amax, scale or channels-last copy,] conv [, tail-split reduction].
"""

from .template import TEMPLATES, ImplicitGemmTemplate, TapMajorWeightTemplate

__all__ = ["TEMPLATES", "ImplicitGemmTemplate", "TapMajorWeightTemplate"]
