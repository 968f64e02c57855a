"""Direct depthwise convolution (groups == C_in, any channel multiplier), 1-D/2-D/3-D.

A depthwise conv does only ``k`` multiply-adds per output element: a GEMM formulation (one tiny GEMM per
channel) wastes the tensor cores and the bandwidth. These kernels compute a tile of outputs directly, each tap
a load along the tensor's contiguous dimension (vectorized along C for channels-last inputs) that hits L1 for
all but the first tap reading an element, fp32 accumulation, bias fused.

Every problem is viewed as 3-D: a 1-D conv is (1, 1, L), a 2-D conv (1, H, W); missing dims get kernel 1,
stride 1, dilation 1, padding 0. Output channel ``co`` reads input channel ``co // MULT`` (ATen's grouping with
C_out = MULT * C_in).

Measured on an H200 these kernels are bound by instructions, not by DRAM (fp32 runs as fast as fp16), so each
program first asks one scalar question (`_tile_is_interior`): is the tile full and does every tap of every
output read inside the input? Such interior programs (most of them, with tiles small next to the map) run a tap
loop with no bounds math: a load at a compile-time offset from its row's pointer, a convert, an FMA. The rest
(tiles touching the padding or the edge, partial channel blocks) run the masked loop.

Four kernels: the two direct ones, chosen by the input layout (the read-heavy side), and the band kernel (general
and 1-D), a schedule choice for contiguous half-precision inputs (the heuristic picks it for 1-D rows with 7+
taps). The channels-last kernel runs one of three loops (constexpr LOOP), each a schedule choice: the direct loop;
the taps loop (the "taps kernel" of the tuning notes; the heuristic picks it for small layers:
`heuristic_schedule`); the columns loop (the "columns kernel", `columns_kernel.py`; the heuristic picks it for
larger 5x5 and 7x7 layers). All three share its arguments, grid, prepared weight and fused epilogue:

``_depthwise_cl_kernel`` (channels-last input): a program computes a tile of ``BLOCK_H x BLOCK_W`` output
positions of one (n, od) slice times ``BLOCK_C`` output channels; loads are vectors along C.

- LOOP = DIRECT_LOOP: a tap at a time, interior tiles without bounds checks. With fp16 inputs each filter row's
  products are summed in fp16 (packed HFMA2, half the instructions of an fp32 FMA and a convert per product) and
  the row sums in fp32 (ROW_SUMS_16, `template.sums_rows_in_16_bit`); schedules with F32_TAPS=1, and every bf16
  one, sum every product in fp32.
- LOOP = TAPS_LOOP (schedules carry TAP_ROWS): each load fetches TAP_ROWS filter rows of taps at once, a
  [TAP_SLOTS, positions, channels] tile reduced over its slots in registers. A load per tap leaves a warp waiting
  out one memory latency per tap, which dominates when the SMs hold few warps (small maps at batch 1: ConvNeXt's
  7x7 layers ran 1.8-2.9x faster on an H100). One masked path, no interior split; every product in fp32.
- LOOP = COLUMNS_LOOP (schedules carry COLS): the tile's BLOCK_W output columns unrolled, one [BLOCK_H, BLOCK_C]
  accumulator each; per filter row it loads the input columns those outputs read once and every tap of the row
  reuses them, so the L1 serves (BLOCK_W + KW - 1) loads per filter row instead of BLOCK_W * KW. fp16 rows summed
  in fp16 as the direct loop's (ROW_SUMS_16, F32_TAPS twins offered), else every product in fp32; one masked path.

    args (PTX order): x, w, b, y (pointers; b is null when HAS_BIAS is False), ID, IH, IW, OD, OH, OW (i32), then
                      the epilogue's three operand slots
    constexprs: C_IN, MULT, KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OUT_CL, HAS_BIAS,
                BLOCK_H, BLOCK_W, BLOCK_C, LOOP, ROW_SUMS_16, TAP_ROWS (filter rows per load, at most KH; 0 off
                the taps loop), TAP_SLOTS (the power of two covering TAP_ROWS * KW taps; 0 likewise), PROGRAM,
                E_KINDS
    grid: (N * OD * cdiv(OH, BLOCK_H) * cdiv(OW, BLOCK_W), cdiv(C_out, BLOCK_C), 1)
    weight: prepared (KD*KH*KW, C_out) contiguous (taps major, channels contiguous), fp16 where rows sum in fp16,
            else fp32.

``_depthwise_nc_kernel`` (contiguous input): a program computes ``BLOCK_C`` consecutive output channels times
a ``BLOCK_H x BLOCK_W`` tile of their (n, co, od) planes (tile rows are (channel, row) pairs, so a 1-D conv
gets several rows per program too); loads are vectors along W. Schedules of one channel have no BLOCK_C key.

    args (PTX order): x, w, b, y, ID, IH, IW, OD, OH, OW (i32)
    constexprs: as above (BLOCK_C = 1 when the schedule has none)
    grid: (N * cdiv(C_out, BLOCK_C) * OD * cdiv(OH, BLOCK_H) * cdiv(OW, BLOCK_W), 1, 1), program ids ordered
          (n, channel block, od, row tile, column tile), the column tile fastest.
    weight: prepared as fp32 (C_out, KD*KH*KW) contiguous.

``_depthwise_band_kernel`` (contiguous fp16/bf16 input, stride 1 along W; schedules carry SEG, SEGS, IMG): the
direct kernels issue one narrow load per tap and output (a shifted row pointer is never provably aligned), so
they are bound by L1 load instructions. For one channel, a W row segment of SEG outputs is its input window
times a banded (Toeplitz) matrix, band[j, i] = w[t] where j - i + PW - HALO == t * DW: a program loads the
windows of IMG images x SEGS segments once (rows of SEG + TAIL elements, every element loaded once per (kd, kh)
filter row), builds the band from the filter row (masked gathers) and runs ``tl.dot`` with fp32 accumulation
(fp16/bf16 products are exact, as in the direct kernels' FMAs). One masked path, no interior split.

    args (PTX order): x, w, b, y, ID, IH, IW, OD, OH, OW (i32), as the other kernels
    constexprs: C_IN, MULT, KD, KH, KW, SD, SH, SW (= 1), PD, PH, PW, DD, DH, DW, OUT_CL, HAS_BIAS,
                SEG, SEGS, IMG (IMG divides N), HALO (PW rounded up to 8), TAIL (power of two >= 16 covering
                HALO - PW + (KW-1)*DW), DOT_FP32 (True only under TRITON_INTERPRET for bf16, whose interpreter
                tl.dot reads bf16 as integers; compiled kernels always have False)
    grid: ((N / IMG) * C_out * cdiv(OD * OH * cdiv(OW, SEG), SEGS), 1, 1), program ids ordered
          (image block, channel, row block), the row block fastest.
    weight: prepared as fp32 (C_out, KD*KH*KW) contiguous, as for ``_depthwise_nc_kernel``.

``_depthwise_band1d_kernel`` (band schedules on 1-D rows: ID = IH = OD = OH = 1, KD = KH = 1): the band kernel
without its runtime divisions (grid axis 0 is image block x channel, split by the constexpr C_out; axis 1 the
row block) and with VEC-wide window loads and stores (VEC = gcd(IW, OW, 8), constexpr): conformer.dw15's
heuristic schedule (IMG 8, SEG 32, SEGS 16, 4 warps) compiles for sm_90 to 552 SASS instructions (1080 on the
general kernel; 196 integer/compare ones instead of 541), 12 8-byte window loads per thread instead of 48
2-byte ones. Same args; constexprs add VEC after TAIL.

    grid: ((N / IMG) * C_out, cdiv(cdiv(OW, SEG), SEGS), 1), the channel fastest along axis 0.

Strides are not arguments: inputs are dense channels-last or dense contiguous (``supports`` checks), outputs
follow the layout rule (``OUT_CL`` says which), so every stride is a product of constexpr channel counts and
runtime sizes, which lets the compiler prove vector alignment from the channel count alone. In-sample offsets
are 32-bit (``supports`` refuses samples of 2^31 elements or more); the batch offset is 64-bit.
"""

from .template import TEMPLATES, DepthwiseTemplate

__all__ = ["TEMPLATES", "DepthwiseTemplate"]
