"""Transposed convolution by phase (sub-pixel) decomposition, 1-D/2-D/3-D, any stride/dilation/padding/groups.

Semantics (op.py): input element ``x`` scatters ``weight[c_in, :, t]`` to full-output position
``f = x*s + t*d`` (per spatial dim); output position ``o = f - padding_before``. Write ``f = q*s + r`` with
``0 <= r < s``: the phase ``r`` of an output position decides which taps reach it, namely the ``t`` with
``t*d = r (mod s)``. With ``g = gcd(s, d)`` those are ``t = t0(r) + j*(s/g)`` (none when ``g`` does not divide
``r``), and the input they read is ``x = q - (t0*d - r)/s - j*(d/g)``. So every phase is a dense, stride-1
convolution of the input with its own (fewer) taps: a GEMM with M = N * (output positions of the phase),
N = C_out/groups, K = taps_in_phase * C_in/groups. No zero is ever inserted and no tap is ever masked out;
phases that receive no tap (``g`` does not divide ``r``, or ``t0 >= k``) run an empty K loop and write bias or 0.

One launch covers every phase (the phase is part of grid axis 0, next to the N tiles, so the phases that
read the same input rows run close together and share them in L2). Every problem is viewed as 3-D, missing
dims having kernel 1, stride 1, dilation 1 and no padding.

Kernel ``_conv_transpose_phase_kernel``:

    args (PTX order): x, w, b, y, amax (pointers; b is null when HAS_BIAS is False; amax is the "amax" scratch
                      for F16_MMA schedules, an unused pointer (the output) otherwise),
                      N, ID, IH, IW, OD, OH, OW (i32)
    constexprs: CIN_G, COUT_G, GROUPS, KD, KH, KW, SD, SH, SW, PD, PH, PW (padding_before), DD, DH, DW,
                GD, GH, GW (gcd(stride, dilation) per dim), IN_CL, OUT_CL, HAS_BIAS, ALLOW_TF32, ROUND_TF32
                (fp32 with TF32: the A tile is rounded to nearest TF32, see _tf32.py; 0 for F16_MMA), F16_MMA
                (0, 1 or 2, below), W_NUMEL (F16_MMA: elements of the prepared weight before its trailer, else
                0), ROW_TILED, W_FOLD (0/1, below), DOT_FP32 (True only under TRITON_INTERPRET for bf16: the
                interpreter's tl.dot mishandles bf16 operands, so they are widened first; compiled kernels always
                have False), BLOCK_M, BLOCK_N, BLOCK_K
    grid: (TILES_M * SD*SH*(1 if W_FOLD else SW) * cdiv(COUT_G, BLOCK_N), GROUPS, 1) where, with QX = the
          largest number of output positions any phase has along dim X,
          TILES_M = cdiv(N * QD * QH * QW, BLOCK_M)           (ROW_TILED = 0: tiles over all of M)
          TILES_M = N * QD * QH * cdiv(QW, BLOCK_M)            (ROW_TILED = 1: a tile stays in one W row, so
                                                                contiguous inputs are read along W)
    weight: prepared as (GROUPS, KD, KH, KW, COUT_G, CIN_G) contiguous (K-major B tiles: TF32 wgmma needs them);
            F16_MMA: that matrix scaled by 2^shift to fp16, flattened, then the trailer holding the shift.

W_FOLD schedules (offered only where `w_phases_fold` holds: KW == SW >= 2 a power of two, DW == 1, PW == 0,
OW % SW == 0, e.g. UNet's 2x2 stride-2 up-convolutions) have one program compute every W phase of its tile:
there W phase j has the single tap j, the same q range (0 .. OW/SW) and reads the same input pixels x = q, so
each K step loads (and rounds or scales) the A tile once and multiplies it by the SW phases' B tiles side by
side, one [BLOCK_K, SW*BLOCK_N] tile whose column c is tap c // BLOCK_N, channel c % BLOCK_N; the
[BLOCK_M, SW*BLOCK_N] accumulator's column c is stored at ow = qw*SW + c // BLOCK_N (with a channels-last output,
the SW*C_out elements of SW adjacent pixels). The grid's phase count is then SD*SH. Without W_FOLD, the SW
programs of a tile each re-load the same A tile and write every SW-th pixel. Every tile config whose SW
accumulators stay within 128 x 128 fp32 values (and SW*BLOCK_N <= 256) is offered folded too, F16_MMA ones
included, with 8 warps where the accumulators exceed 64 values a thread; the heuristic picks W_FOLD only for
channels-last fp32 with TF32 (`TransposedTemplate.heuristic_schedule` says why).

Input and output are dense channels-last or dense contiguous (``IN_CL``/``OUT_CL``; ``supports`` checks), so
strides are products of constexpr channel counts and runtime sizes. In-sample offsets are 32-bit
(``supports`` refuses samples of 2^31 elements or more); batch offsets are 64-bit.
fp16/bf16 run on tensor cores with fp32 accumulation; fp32 uses TF32 when ``ALLOW_TF32`` (PyTorch's default for
convolutions), with both operands rounded to nearest TF32 (weight at export, A tile in the kernel), and exact
fp32 otherwise.

F16_MMA schedules (fp32 with TF32 allowed, see _f16_mma.py) run the MMAs on fp16 tensor cores at TF32's
precision, with power-of-two scales: the weight is fp16 (scaled when prepared), the A tile is the fp32 input
times 2^shift converted to fp16 in the kernel (F16_MMA=1) or read from the scaled fp16 copy of the input
(F16_MMA=2: x is the "input_f16" scratch, same layout as the input), and the accumulator is multiplied by
2^-shift_x * 2^-shift_w before the bias. Launches: `amax_partial_kernel` (input -> "amax"), for F16_MMA=2
`scale_to_f16_kernel` (input, amax -> "input_f16"), then the phase kernel; other schedules launch the phase
kernel alone. The heuristic picks F16_MMA=2 for compute-heavy convs (`f16_mma_pays`).
"""

from .template import TEMPLATES, TransposedTemplate

__all__ = ["TEMPLATES", "TransposedTemplate"]
