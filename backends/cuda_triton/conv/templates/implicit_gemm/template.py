"""The implicit GEMM template: support, tuning space, prepared weight and launches (the package docstring has the
kernel's contract)."""

from __future__ import annotations

import itertools

import torch

from ....kernel.launch import KernelLaunch, Schedule, ScratchTensor, Support, TensorArg, cdiv
from ...problem import ConvProblem
from .._cl_copy import can_copy, copy_launch, input_cl
from .._f16_mma import f16_input_launches, f16_mma_allowed, f16_scratch, prepare_f16_weight, uses_f16_mma
from .._splitk import (
    SPLIT_CONFIGS,
    split_k_of,
    split_options,
    split_scratch,
    splitk_reduce_launch,
    tail_options,
    tail_rows,
    tail_split_of,
)
from .._tf32 import prepare_tf32_weight
from ..epilogue_args import (
    epilogue_args,
    epilogue_constexprs,
    prologue_args,
    prologue_constexprs,
    prologue_images,
)
from ..gemm_common import GemmShapedTemplate, dot_constexprs, tile_constexprs, weight_k_major
from ..geometry import Geometry, fit_block
from ..launch_args import dim_constexprs, size_args
from .heuristics import heuristic_schedule
from .kernel import conv_implicit_gemm_kernel
from .tiling import (
    BASE_CONFIGS,
    block_k,
    group_tile_options,
    k_iterations,
    row_tiles,
    tile_channels,
    tile_schedule,
)


class ImplicitGemmTemplate(GemmShapedTemplate):
    """Implicit GEMM over channels-last or contiguous dense tensors (see the package docstring)."""

    def __init__(self) -> None:
        self.name = "implicit_gemm"

    # -- support -------------------------------------------------------------------------------------------
    def family_support(self, problem: ConvProblem) -> Support:
        if problem.groups > 65535:
            return Support.no("more than 65535 groups")
        return Support.yes()

    # -- schedules -----------------------------------------------------------------------------------------
    def schedules(self, problem: ConvProblem) -> list[Schedule]:
        g = Geometry.of(problem)
        fp32 = problem.dtype == "float32"
        # fp32 with TF32 allowed: each tile shape also on fp16 tensor cores (F16_MMA, _f16_mma.py), with the
        # 16-bit BLOCK_K where shared memory allows.
        all_precisions = [0, 1, 2] if f16_mma_allowed(problem) else [0]
        out: list[Schedule] = []
        for gt in group_tile_options(g):
            cin_t, cout_t = tile_channels(g, gt)
            flat = 1 if cin_t < 16 else 0
            k_extent = g.taps * cin_t if flat else cin_t
            # A contiguous input is also offered copied to channels-last first (_cl_copy.py), then read by
            # channel rows instead of ROW_TILES.
            copies = [0, 1] if not g.in_cl and not flat and can_copy(problem, g.int64) else [0]
            for copy in copies:
                rows = 0 if copy else row_tiles(g)
                # the keys every candidate below shares
                group_keys = dict(group_tile=gt, flat=flat, rows=rows, copy=copy)
                candidates: list[Schedule] = []
                for (bm, bn, bk0, warps, stages), f16 in itertools.product(BASE_CONFIGS, all_precisions):
                    bm, bn, bk = (
                        fit_block(bm, g.out_spatial[2] if rows else g.m),
                        fit_block(bn, cout_t),
                        fit_block(block_k(bk0, bm, bn, stages, fp32, f16), k_extent),
                    )
                    candidates.append(tile_schedule(warps, stages, bm, bn, bk, **group_keys, f16=f16))
                    if not rows and g.groups == gt and bm * bn >= 64 * 128:
                        iters = k_iterations(g, cin_t, flat, bk)
                        for tail_m, tail in tail_options(g, bm, cdiv(cout_t, bn), iters):
                            candidates.append(
                                tile_schedule(
                                    warps,
                                    stages,
                                    bm,
                                    bn,
                                    bk,
                                    **group_keys,
                                    f16=f16,
                                    TAIL_M_TILES=tail_m,
                                    TAIL_SPLIT=tail,
                                )
                            )
                for (bm, bn, bk0, warps, stages), f16 in itertools.product(SPLIT_CONFIGS, all_precisions):
                    if rows:  # row tiles walk whole output rows: long rows have enough tiles already
                        break
                    bk = block_k(bk0, bm, bn, stages, fp32, f16)
                    bm, bn, bk = fit_block(bm, g.m), fit_block(bn, cout_t), fit_block(bk, k_extent)
                    programs = cdiv(g.m, bm) * cdiv(cout_t, bn) * (g.groups // gt)
                    for split in split_options(g, programs, k_iterations(g, cin_t, flat, bk)):
                        candidates.append(
                            tile_schedule(warps, stages, bm, bn, bk, **group_keys, f16=f16, SPLIT_K=split)
                        )
                out.extend(c for c in dict.fromkeys(candidates) if c not in out)
        # The heuristic's pick is always part of the space, and so is its pick without the channels-last copy
        # (tuning-table entries tuned without CL_COPY name it).
        for heuristic in (heuristic_schedule(problem, allow_copy=False), self.heuristic_schedule(problem)):
            if heuristic not in out:
                out.insert(0, heuristic)
        return out

    def heuristic_schedule(self, problem: ConvProblem) -> Schedule:
        return heuristic_schedule(problem)

    # -- weight and launches -------------------------------------------------------------------------------
    @staticmethod
    def tap_major_schedule(block_n: int, block_k: int, f16_mma: int = 0) -> Schedule:
        """A schedule whose prepared weight is the plain tap-major matrix [taps, CIN_P, COUT_P] (one group tile,
        K not flattened; with ``f16_mma`` scaled to fp16, then its trailer) for these blocks: the weight the
        TMA-fed templates read (`prepare_weight`, `prepared_shape`; their other keys do not change it)."""
        # 4 warps, 2 stages, 64-row tiles: placeholders (Schedule.make's defaults); the weight depends on none
        return tile_schedule(4, 2, 64, block_n, block_k, group_tile=1, flat=0, rows=0, copy=0, f16=f16_mma)

    def prepared_shape(self, problem: ConvProblem, schedule: Schedule) -> tuple[int, int, int, int]:
        g = Geometry.of(problem)
        gt = schedule["GROUP_TILE"]
        cin_t, cout_t = tile_channels(g, gt)
        if schedule["FLAT_K"]:
            rows = cdiv(g.taps * cin_t, schedule["BLOCK_K"]) * schedule["BLOCK_K"]
            return (g.groups // gt, 1, rows, cdiv(cout_t, schedule["BLOCK_N"]) * schedule["BLOCK_N"])
        cin_p = cdiv(cin_t, schedule["BLOCK_K"]) * schedule["BLOCK_K"]
        return (g.groups // gt, g.taps, cin_p, cdiv(cout_t, schedule["BLOCK_N"]) * schedule["BLOCK_N"])

    def prepare_weight(self, weight: torch.Tensor, problem: ConvProblem, schedule: Schedule) -> torch.Tensor:
        """(C_out, C_in/g, *k) -> [groups/GT, taps, CIN_P, COUT_P], block-diagonal within a group tile
        (F16_MMA: that matrix scaled to fp16 and flattened, then its scale, see _f16_mma.py)."""
        g = Geometry.of(problem)
        gt = schedule["GROUP_TILE"]
        f16 = uses_f16_mma(schedule)
        tiles, taps_dim, rows, cout_p = self.prepared_shape(problem, schedule)
        # [groups, cout_g, cin_g, taps] -> [groups, taps, cin_g, cout_g]
        weight = weight.detach()
        if not f16:
            weight = prepare_tf32_weight(weight, problem)  # rounded once here, never at run time
        w = weight.reshape(g.groups, g.cout_g, g.cin_g, g.taps).permute(0, 3, 2, 1)
        out = weight.new_zeros((tiles, g.taps, gt * g.cin_g, cout_p))
        for j in range(gt):  # group j of each tile sits on the diagonal block j
            ci = slice(j * g.cin_g, (j + 1) * g.cin_g)
            co = slice(j * g.cout_g, (j + 1) * g.cout_g)
            out[:, :, ci, co] = w[j::gt]
        if schedule["FLAT_K"]:
            flat = out.reshape(tiles, 1, g.taps * gt * g.cin_g, cout_p)
            padded = weight.new_zeros((tiles, 1, rows, cout_p))
            padded[:, :, : flat.shape[2]] = flat
        else:
            padded = weight.new_zeros((tiles, g.taps, rows, cout_p))
            padded[:, :, : gt * g.cin_g] = out
        if f16:
            return prepare_f16_weight(padded)
        if weight_k_major(problem):  # [tiles, K_ROWS, COUT_P] -> [tiles, COUT_P, K_ROWS]
            return padded.reshape(tiles, taps_dim * rows, cout_p).transpose(1, 2).contiguous()
        return padded.contiguous()

    def takes_epilogue(self, problem: ConvProblem, schedule: Schedule) -> bool:
        # Every output channel of a tile stored by one program (no groups; with split-K, the tile's last share);
        # not tail splits (whose rows two launches write).
        return problem.groups == 1 and tail_split_of(schedule) == 1

    def takes_prologue(self, problem: ConvProblem, schedule: Schedule) -> bool:
        # Channels index the input directly (no groups); F16_MMA reads a scaled copy the prologue never saw; on
        # long reductions only a cheap chain (GemmShapedTemplate.prologue_pays).
        return problem.groups == 1 and not uses_f16_mma(schedule) and self.prologue_pays(problem)

    def scratch(self, problem: ConvProblem, schedule: Schedule) -> list[ScratchTensor]:
        f16 = uses_f16_mma(schedule)
        # F16_MMA=2: one copy, "input_f16", is both the fp16 and (with CL_COPY) the channels-last copy
        copy = [input_cl(problem)] if dict(schedule.params).get("CL_COPY", 0) and f16 != 2 else []
        return (
            copy
            + f16_scratch(problem, f16)
            + split_scratch(problem, schedule, self._tiles(problem, schedule))
        )

    @staticmethod
    def _grid(problem: ConvProblem, schedule: Schedule) -> tuple[int, int, int]:
        """(M tiles (plus a tail split's extra programs) x N tiles, group tiles, SPLIT_K)."""
        g = Geometry.of(problem)
        bm = schedule["BLOCK_M"]
        if schedule["ROW_TILES"]:
            m_programs = g.m // g.out_spatial[2] * cdiv(g.out_spatial[2], bm)
        else:
            m_programs = cdiv(g.m, bm)
        tail = tail_split_of(schedule)
        if tail > 1:  # the tail's programs: TAIL_SPLIT per tile of its TAIL_M_TILES rows of tiles
            m_programs += dict(schedule.params).get("TAIL_M_TILES", 0) * (tail - 1)
        _, cout_t = tile_channels(g, schedule["GROUP_TILE"])
        return (
            m_programs * cdiv(cout_t, schedule["BLOCK_N"]),
            g.groups // schedule["GROUP_TILE"],
            split_k_of(schedule),
        )

    @classmethod
    def _tiles(cls, problem: ConvProblem, schedule: Schedule) -> int:
        """Programs of grid axes 0 and 1: one split-K tile counter each."""
        grid = cls._grid(problem, schedule)
        return grid[0] * grid[1]

    def launches(self, problem: ConvProblem, schedule: Schedule) -> list[KernelLaunch]:
        g = Geometry.of(problem)
        gt = schedule["GROUP_TILE"]
        split = split_k_of(schedule)
        tail = tail_split_of(schedule)
        tail_m = dict(schedule.params).get("TAIL_M_TILES", 0)
        copy = bool(dict(schedule.params).get("CL_COPY", 0))
        f16 = uses_f16_mma(schedule)
        if f16 and not (problem.dtype == "float32" and problem.allow_tf32):
            raise ValueError("F16_MMA schedules run fp32 convolutions with TF32 allowed only")
        if g.groups % gt:
            raise ValueError(f"GROUP_TILE {gt} does not divide groups {g.groups}")
        cin_t, cout_t = tile_channels(g, gt)
        _, taps_dim, cin_p, cout_p = self.prepared_shape(problem, schedule)
        k_rows = taps_dim * cin_p  # rows of one group tile's weight matrix
        if schedule["FLAT_K"]:
            cin_p = cin_t  # flat rows: (tap * CIN_T + c), padded at the end only
        dt = problem.ptr_dtype
        (d, h, w), (od, oh, ow) = g.spatial, g.out_spatial
        args = (
            TensorArg("input_f16", "fp16") if f16 == 2 else TensorArg("input_cl" if copy else "input", dt),
            TensorArg("weight", "fp16" if f16 else dt),
            TensorArg("bias", dt),
            TensorArg("output", dt),
            # the split or tail shares' partial sums; otherwise an unused pointer
            TensorArg("workspace", "fp32") if split > 1 or tail > 1 else TensorArg("output", dt),
            # a split's tile counters; otherwise an unused pointer
            TensorArg("tile_counters", "i32") if split > 1 else TensorArg("output", dt),
            # the input's partial maxima (F16_MMA); otherwise an unused pointer
            TensorArg("amax", "fp32") if f16 else TensorArg("output", dt),
            *size_args(BATCH=g.batch, D=d, H=h, W=w, OD=od, OH=oh, OW=ow),
            *epilogue_args(problem),
            *prologue_args(problem),
        )
        bm = schedule["BLOCK_M"]
        constexprs = (
            ("C_IN", g.cin),
            ("C_OUT", g.cout),
            ("CIN_T", cin_t),
            ("COUT_T", cout_t),
            ("CIN_P", cin_p),
            ("COUT_P", cout_p),
            ("K_ROWS", k_rows),
            *dim_constexprs(K=g.kernel, S=g.stride, P=g.pad, D=g.dilation),
            ("IN_CL", g.in_cl or copy),
            ("OUT_CL", g.out_cl),
            ("HAS_BIAS", problem.has_bias),
            ("FLAT_K", bool(schedule["FLAT_K"])),
            ("W_KMAJOR", weight_k_major(problem) and not f16),
            ("ROW_TILES", bool(schedule["ROW_TILES"])),
            ("INT64", g.int64),
            *dot_constexprs(problem, f16_mma=bool(f16)),
            ("F16_MMA", f16),
            ("W_NUMEL", k_rows * cout_p * (g.groups // gt) if f16 else 0),
            *tile_constexprs(schedule),
            ("SPLIT_K", split),
            ("TAIL_SPLIT", tail),
            ("TAIL_M_TILES", tail_m),
            *epilogue_constexprs(problem),
            *prologue_constexprs(problem, prologue_images(problem, bm, bool(schedule["ROW_TILES"]))),
        )
        grid = self._grid(problem, schedule)
        main = KernelLaunch(
            conv_implicit_gemm_kernel, args, constexprs, grid, schedule.num_warps, schedule.num_stages
        )
        launches = f16_input_launches(problem, f16, copy_elsewhere=copy)
        if copy:
            launches.append(copy_launch(problem, scale_f16=f16 == 2))
        launches.append(main)
        if tail > 1:
            row0, rows = tail_rows(g, bm, tail_m)
            launches.append(splitk_reduce_launch(problem, tail, row0, rows))
        return launches


class TapMajorWeightTemplate(GemmShapedTemplate):
    """A TMA-fed template (implicit_gemm_tma, implicit_gemm_box): it reads the implicit GEMM's plain tap-major
    prepared weight (`ImplicitGemmTemplate.tap_major_schedule`) for its schedule's blocks."""

    def _gemm_schedule(self, schedule: Schedule) -> Schedule:
        """The implicit GEMM schedule whose prepared weight this one reads (F16_MMA: scaled fp16 + trailer)."""
        return ImplicitGemmTemplate.tap_major_schedule(
            schedule["BLOCK_N"], schedule["BLOCK_K"], uses_f16_mma(schedule)
        )

    def prepare_weight(self, weight: torch.Tensor, problem: ConvProblem, schedule: Schedule) -> torch.Tensor:
        return _IMPLICIT_GEMM.prepare_weight(weight, problem, self._gemm_schedule(schedule))

    def tap_major_shape(self, problem: ConvProblem, schedule: Schedule) -> tuple[int, int, int]:
        """(taps, CIN_P, COUT_P) of the prepared weight ``schedule`` reads."""
        _, taps, cin_p, cout_p = _IMPLICIT_GEMM.prepared_shape(problem, self._gemm_schedule(schedule))
        return taps, cin_p, cout_p


# The template whose prepared weight the TMA-fed templates read.
_IMPLICIT_GEMM = ImplicitGemmTemplate()
TEMPLATES = [ImplicitGemmTemplate()]
