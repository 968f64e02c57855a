"""Implicit GEMM on TMA pixel boxes, written in Gluon, for 1-D/2-D convolutions on Hopper.

A program computes BOX_N images x BOX_H rows x BOX_W columns of output pixels (BLOCK_M = their product) by
BLOCK_N output channels. With stride 1, the input pixels that tap (kh, kw) multiplies for those outputs are
again a box: rows oh0 + kh*DH - PH .. + BOX_H, columns ow0 + kw*DW - PW .. + BOX_W, of the channels-last
input [N, H, W, C]. One 4-D TMA copy moves that box (BLOCK_K channels) into shared memory, and the copy engine
writes zeros wherever the box leaves the tensor: the convolution's padding, the last images and channels past
C_in. So the input is read as it is, with no padded copy (implicit_gemm_tma.py's 11 us on vgg) and no masks.

Strided convolutions (strides SH, SW; H % SH == W % SW == 0, C_in % 16 == 0) read the same input through a
5-D view [N, H/SH, SH, W/SW, SW*C_in] (strides N: H*W*C, H/SH: SH*W*C, SH: W*C, W/SW: SW*C, SW*C: 1): input row
oh*SH + dh is view row oh + floor(dh/SH) of parity dh mod SH, and column ow*SW + dw is view column
ow + floor(dw/SW), its parity selecting channels (dw mod SW)*C_in.. of the merged last dim. So each tap is again
one box [BOX_N, BOX_H, 1, BOX_W, BLOCK_K] of the view, zero-filled exactly where the input row or column is
outside the tensor (a parity never leaves it; channel blocks divide C_in so none reaches the next parity).
Checked against ATen on the H200 (a third of 80 random box cases strided); used only where a tuning-table entry
of the conv itself names it (`transfers_to` refuses strided convs), and the shipped table has none.

The shared-memory box [BOX_N, BOX_H, BOX_W, BLOCK_K] is, byte for byte, the [BLOCK_M, BLOCK_K] A operand
(the rows are the box's pixels in row-major order), so ``wgmma`` can read it from shared memory in place. Plain
Triton (3.6, 3.7) reshapes a box through registers instead; Gluon's ``memdesc`` reshape is a view, hence Gluon.
The main loop is a STAGES-deep ring of TMA copies (an mbarrier per slot) feeding asynchronous ``wgmma`` with
one group in flight. On the H200 this ran vgg.3x3.256 fp16 in 49.6 us against cuDNN's 48.5 us and the TMA
template's 56.8 us (docs/performance.md). WS=1 schedules split the loop across warps instead
(`gl.warp_specialize`): one copy warp waits for a free slot and issues the TMA copies, the kernel's warpgroup
waits for full slots, issues wgmma and releases each slot once the wgmma that read it has finished (a second
ring of mbarriers).

Gluon kernels target one architecture and have no interpreter, so each launch carries a Triton-language twin,
``conv_box_portable_kernel``: the same parameters, grid and results, with masked pointer loads in place of
the boxes. Triton's CPU interpreter runs the twin (CI checks the tiling, tap offsets and epilogue with it), and
archs other than sm_90 compile it (`KernelLaunch.portable_fn`), so a multi-arch export still works.

fp32 (with TF32 allowed) runs the same 16-bit kernel as an F16_MMA=2 schedule (_f16_mma.py): a first launch
writes the input's partial maxima ("amax"), a second its copy scaled by a power of two to fp16, channels-last
("input_f16": `scale_to_f16_kernel`, or the channels-last copy with SCALE_F16 for a contiguous input); the
weight is prepared scaled to fp16 with its shift in a trailer, and the epilogue undoes both scales (exact) before
the fp32 bias and store. TF32's precision, fp16's tensor-core rate, and boxes of half the bytes.
fp32 also runs as TF32 itself (TF32=1: schedules without an F16_MMA key, 32-channel K steps): fp32 boxes, the
weight prepared K-major ([COUT_P, taps * CIN_P], TF32 wgmma reads shared operands only K-major) and rounded to
nearest TF32, and each A box rounded to nearest TF32 in place in shared memory (ROUND_TF32, the `_tf32.py`
mode; `_mma_step`), so wgmma still reads both operands from there. One launch for a channels-last input, where
F16_MMA=2 takes three (on the H200 it won no public fp32 conv: the implicit GEMM stayed faster).

Kernel arguments (PTX order): x, w, bias, y, amax pointers, int32 BATCH, H, W, OH, OW. x is the input if it is
channels-last, else its channels-last copy ("input_cl", _cl_copy.py, a first launch), or for F16_MMA the scaled
fp16 copy; amax is the partial maxima for F16_MMA and an unused pointer (the input) otherwise. Grid:
(cdiv(BATCH, BOX_N) * cdiv(OH, BOX_H) * cdiv(OW, BOX_W), cdiv(C_OUT, BLOCK_N), 1). The TMA descriptors are
made on the device: Triton's global scratch holds them (the C++ runtime allocates it from the metadata).

Prepared weight: the implicit GEMM's ([taps, CIN_P, COUT_P], CIN_P and COUT_P whole blocks); for F16_MMA that
matrix scaled to fp16 and flattened, then its shift (`prepare_f16_weight`); for TF32 its K-major transpose.
"""

from .template import TEMPLATES, ImplicitGemmBoxTemplate

__all__ = ["TEMPLATES", "ImplicitGemmBoxTemplate"]
