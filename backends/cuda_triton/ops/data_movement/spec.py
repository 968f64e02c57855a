"""Specs of the data-movement ops, from static metadata only; each lists its copies as `CopyPiece`s.

* `StridedCopySpec`: one output that is a strided view of the input, materialised: ``permute_copy``,
  ``slice_copy``, ``select_copy``, ``expand_copy``, ``as_strided_copy``, ``_clone_dim_order``,
  ``_to_dim_order_copy`` (a dtype change too), ``squeeze_copy``/``unsqueeze_copy``/``view_copy`` (see views.py
  for when those are free instead).
* `CatSpec`: ``cat`` of N inputs along one dim (one piece per input).
* `SplitSpec`: ``split_with_sizes_copy`` (one piece per output).
* `PadSpec`: ``constant_pad_nd`` (any dims, negative amounts crop, any fill value).
* `UpsampleSpec` (upsample.py): ``upsample_nearest{1,2,3}d``, ``_upsample_nearest_exact{1,2,3}d``,
  ``upsample_bilinear2d``.

Tensor roles: inputs "in0", "in1", ... in the op's argument order; outputs "out", "out1", "out2", ...
Constructors take the op's arguments as the node holds them (negative dims, open slice ends, -1 sizes) and raise
ValueError naming the op and argument when they are malformed; ``supports()`` declines what the kernels do not
take (dtypes, empty tensors, output layouts) with a reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...conv.layout import contiguous_strides
from ...kernel.launch import Support
from ..tensor_meta import TensorMeta, float_dtype_support, max_offset
from .copy_plan import CopyPiece
from .kernels import MAX_RANK
from .shape import (
    cat_out_shape_and_stride,
    dim_order_copy_strides,
    drop_dim,
    expand_sizes,
    infer_view_sizes,
    pad_out_shape_and_stride,
    permute_sizes,
    slice_length,
    slice_start,
)


def input_role(k: int) -> str:
    return f"in{k}"


def output_role(k: int) -> str:
    return "out" if k == 0 else f"out{k}"


def _dim(op: str, dim: int, rank: int) -> int:
    if not -max(rank, 1) <= dim < max(rank, 1):
        raise ValueError(f"{op}: dim {dim} is out of range for a tensor of rank {rank}")
    return dim % max(rank, 1)


def _common_support(op: str, metas: list[TensorMeta], outputs: list[TensorMeta]) -> Support:
    ok = float_dtype_support(op, *metas, *outputs)
    if not ok:
        return ok
    for meta in [*metas, *outputs]:
        if meta.numel == 0:
            return Support.no(f"{op}: empty tensors are not supported")
        if meta.rank > MAX_RANK:
            return Support.no(f"{op}: tensors of rank {meta.rank} are not supported (at most {MAX_RANK})")
    return Support.yes()


# ---- one strided view, materialised --------------------------------------------------------------------------
@dataclass(frozen=True)
class StridedCopySpec:
    """out = the view (``view_sizes``, ``view_strides``, ``view_offset``) of the input's memory, written with
    ``out_strides`` and converted to ``out_dtype``.

    ``out_sizes`` differs from ``view_sizes`` only for a reshape (`view`): the copy then writes the input's
    elements in row-major order into a contiguous output, which ``out_sizes`` views.
    """

    op: str
    input: TensorMeta
    view_sizes: tuple[int, ...]
    view_strides: tuple[int, ...]
    view_offset: int
    out_sizes: tuple[int, ...]
    out_strides: tuple[int, ...]
    out_dtype: str

    @staticmethod
    def _of(
        op: str, x: TensorMeta, sizes, strides, offset: int = 0, dtype: str | None = None
    ) -> StridedCopySpec:
        sizes = tuple(int(s) for s in sizes)
        return StridedCopySpec(
            op,
            x,
            sizes,
            tuple(strides),
            offset,
            sizes,
            tuple(contiguous_strides(list(sizes))),
            dtype or x.dtype,
        )

    @staticmethod
    def permute(x: TensorMeta, dims: list[int]) -> StridedCopySpec:
        dims = [_dim("permute_copy", d, x.rank) for d in dims]
        if sorted(dims) != list(range(x.rank)):
            raise ValueError(f"permute_copy: dims {dims} are not a permutation of {x.rank} dims")
        return StridedCopySpec._of(
            "permute_copy", x, permute_sizes(list(x.sizes), dims), permute_sizes(list(x.strides), dims)
        )

    @staticmethod
    def slice(x: TensorMeta, dim: int = 0, start: int | None = None, end: int | None = None, step: int = 1):
        dim = _dim("slice_copy", dim, x.rank)
        if step < 1:
            raise ValueError(f"slice_copy: step must be positive, got {step}")
        size = x.sizes[dim]
        start = 0 if start is None else int(start)
        end = size if end is None else int(end)
        first = slice_start(size, start)
        sizes, strides = list(x.sizes), list(x.strides)
        sizes[dim] = slice_length(size, start, end, step)
        strides[dim] *= step
        return StridedCopySpec._of("slice_copy", x, sizes, strides, first * x.strides[dim])

    @staticmethod
    def select(x: TensorMeta, dim: int, index: int) -> StridedCopySpec:
        dim = _dim("select_copy", dim, x.rank)
        if not -x.sizes[dim] <= index < x.sizes[dim]:
            raise ValueError(
                f"select_copy: index {index} is out of range for dim {dim} of size {x.sizes[dim]}"
            )
        index %= x.sizes[dim]
        return StridedCopySpec._of(
            "select_copy",
            x,
            drop_dim(list(x.sizes), dim),
            drop_dim(list(x.strides), dim),
            index * x.strides[dim],
        )

    @staticmethod
    def expand(x: TensorMeta, sizes: list[int]) -> StridedCopySpec:
        sizes = expand_sizes(list(x.sizes), [int(s) for s in sizes])
        lead = len(sizes) - x.rank
        if lead < 0:
            raise ValueError(f"expand_copy: sizes {sizes} have fewer dims than the input {list(x.sizes)}")
        strides = [0] * lead
        for i, (old, st) in enumerate(zip(x.sizes, x.strides, strict=True)):
            new = sizes[lead + i]
            if old != new and old != 1:
                raise ValueError(f"expand_copy: cannot expand dim {i} of size {old} to {new}")
            strides.append(st if old == new else 0)
        return StridedCopySpec._of("expand_copy", x, sizes, strides)

    @staticmethod
    def as_strided(x: TensorMeta, size: list[int], stride: list[int], storage_offset: int | None = None):
        """Reads the input's memory (from its first element) through ``size``/``stride``/``storage_offset``."""
        if len(size) != len(stride):
            raise ValueError(f"as_strided_copy: {len(size)} sizes but {len(stride)} strides")
        return StridedCopySpec._of(
            "as_strided_copy", x, size, [int(s) for s in stride], int(storage_offset or 0)
        )

    @staticmethod
    def dim_order_copy(
        x: TensorMeta,
        dim_order: list[int] | None = None,
        dtype: str | None = None,
        op: str = "_clone_dim_order",
    ) -> StridedCopySpec:
        """``_clone_dim_order`` (dtype None) or ``_to_dim_order_copy``: a layout change, maybe a dtype change."""
        order = [] if dim_order is None else [int(d) for d in dim_order]
        if order and sorted(order) != list(range(x.rank)):
            raise ValueError(f"{op}: dim_order {order} is not a permutation of {x.rank} dims")
        strides = dim_order_copy_strides(list(x.sizes), list(x.strides), order)
        return StridedCopySpec(op, x, x.sizes, x.strides, 0, x.sizes, tuple(strides), dtype or x.dtype)

    @staticmethod
    def view(x: TensorMeta, sizes: list[int], op: str = "view_copy") -> StridedCopySpec:
        """A reshape as a copy: the input's elements in row-major order into a contiguous output of ``sizes``
        (also ``squeeze_copy``/``unsqueeze_copy``; check `views.view_is_free` first)."""
        new = infer_view_sizes(x.numel, [int(s) for s in sizes])
        if sum(1 for s in sizes if s == -1) > 1 or any(s < 0 for s in new):
            raise ValueError(f"{op}: sizes {list(sizes)} are invalid")
        numel = 1
        for s in new:
            numel *= s
        if numel != x.numel:
            raise ValueError(f"{op}: sizes {list(sizes)} do not hold the input's {x.numel} elements")
        return StridedCopySpec(
            op, x, x.sizes, x.strides, 0, tuple(new), tuple(contiguous_strides(new)), x.dtype
        )

    @staticmethod
    def squeeze(x: TensorMeta, dims: list[int] | None = None) -> StridedCopySpec:
        """``squeeze_copy.dims`` (``dims`` None: every dim of size 1)."""
        chosen = range(x.rank) if dims is None else [_dim("squeeze_copy", d, x.rank) for d in dims]
        gone = {d for d in chosen if x.sizes[d] == 1}
        return StridedCopySpec.view(x, [s for d, s in enumerate(x.sizes) if d not in gone], "squeeze_copy")

    @staticmethod
    def unsqueeze(x: TensorMeta, dim: int) -> StridedCopySpec:
        dim = _dim("unsqueeze_copy", dim, x.rank + 1)
        return StridedCopySpec.view(x, [*x.sizes[:dim], 1, *x.sizes[dim:]], "unsqueeze_copy")

    def with_out_strides(self, strides: tuple[int, ...]) -> StridedCopySpec:
        """The same copy writing another output layout (a planner keeping channels-last, say)."""
        return StridedCopySpec(
            self.op, self.input, self.view_sizes, self.view_strides, self.view_offset, self.out_sizes,
            tuple(strides), self.out_dtype,
        )  # fmt: skip

    @property
    def reshapes(self) -> bool:
        return self.out_sizes != self.view_sizes

    def outputs(self) -> list[TensorMeta]:
        return [TensorMeta(self.out_sizes, self.out_strides, self.out_dtype)]

    def supports(self) -> Support:
        out = self.outputs()[0]
        ok = _common_support(self.op, [self.input], [out])
        if not ok:
            return ok
        if len(self.out_strides) != len(self.out_sizes):
            return Support.no(
                f"{self.op}: {len(self.out_strides)} output strides for {len(self.out_sizes)} dims"
            )
        if self.reshapes and self.out_strides != tuple(contiguous_strides(list(self.out_sizes))):
            return Support.no(f"{self.op}: a reshape that is not a free view is written contiguous only")
        if any(st < 0 for st in self.view_strides) or self.view_offset < 0:
            return Support.no(f"{self.op}: negative strides or offsets are not supported")
        if max_offset(self.view_sizes, self.view_strides, self.view_offset) > max_offset(
            self.input.sizes, self.input.strides
        ):
            return Support.no(f"{self.op}: the view reads past the end of its input")
        return Support.yes()

    def pieces(self) -> list[CopyPiece]:
        dst = tuple(contiguous_strides(list(self.view_sizes))) if self.reshapes else self.out_strides
        return [
            CopyPiece(
                "in0",
                "out",
                self.input.dtype,
                self.out_dtype,
                self.view_sizes,
                self.view_strides,
                dst,
                src_offset=self.view_offset,
            )  # fmt: skip
        ]


# ---- cat / split ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CatSpec:
    """``cat(inputs, dim)``; ``out_strides`` None means the layout rule (shape.py)."""

    inputs: tuple[TensorMeta, ...]
    dim: int
    out_strides: tuple[int, ...] | None = None

    @staticmethod
    def of(inputs: list[TensorMeta], dim: int = 0) -> CatSpec:
        if not inputs:
            raise ValueError("cat: no inputs")
        return CatSpec(tuple(inputs), _dim("cat", dim, inputs[0].rank))

    def outputs(self) -> list[TensorMeta]:
        rank = self.inputs[0].rank
        sizes, strides = cat_out_shape_and_stride(
            rank,
            self.dim,
            [s for t in self.inputs for s in t.sizes],
            [s for t in self.inputs for s in t.strides],
        )
        return [TensorMeta(tuple(sizes), tuple(self.out_strides or strides), self.inputs[0].dtype)]

    def supports(self) -> Support:
        first = self.inputs[0]
        for t in self.inputs:
            if t.rank != first.rank or t.dtype != first.dtype:
                return Support.no("cat: inputs of different ranks or dtypes are not supported")
            for d in range(first.rank):
                if d != self.dim and t.sizes[d] != first.sizes[d]:
                    return Support.no(
                        f"cat: input sizes {list(t.sizes)} and {list(first.sizes)} differ off dim {self.dim}"
                    )
        if any(t.numel == 0 for t in self.inputs):
            return Support.no("cat: empty inputs are not supported")
        return _common_support("cat", list(self.inputs), self.outputs())

    def pieces(self) -> list[CopyPiece]:
        out = self.outputs()[0]
        pieces, position = [], 0
        for k, t in enumerate(self.inputs):
            pieces.append(
                CopyPiece(
                    input_role(k),
                    "out",
                    t.dtype,
                    out.dtype,
                    t.sizes,
                    t.strides,
                    out.strides,
                    dst_offset=position * out.strides[self.dim],
                )  # fmt: skip
            )
            position += t.sizes[self.dim]
        return pieces


@dataclass(frozen=True)
class SplitSpec:
    """``split_with_sizes_copy(input, split_sizes, dim)``: contiguous outputs."""

    input: TensorMeta
    split_sizes: tuple[int, ...]
    dim: int

    @staticmethod
    def of(x: TensorMeta, split_sizes: list[int], dim: int = 0) -> SplitSpec:
        dim = _dim("split_with_sizes_copy", dim, x.rank)
        if sum(split_sizes) != x.sizes[dim] or any(s < 0 for s in split_sizes):
            raise ValueError(
                f"split_with_sizes_copy: split_sizes {list(split_sizes)} do not add up to dim {dim} of size "
                f"{x.sizes[dim]}"
            )
        return SplitSpec(x, tuple(int(s) for s in split_sizes), dim)

    def outputs(self) -> list[TensorMeta]:
        out = []
        for size in self.split_sizes:
            sizes = list(self.input.sizes)
            sizes[self.dim] = size
            out.append(TensorMeta.contiguous(tuple(sizes), self.input.dtype))
        return out

    def supports(self) -> Support:
        return _common_support("split_with_sizes_copy", [self.input], self.outputs())

    def pieces(self) -> list[CopyPiece]:
        pieces, position = [], 0
        for k, out in enumerate(self.outputs()):
            pieces.append(
                CopyPiece(
                    "in0",
                    output_role(k),
                    self.input.dtype,
                    out.dtype,
                    out.sizes,
                    self.input.strides,
                    out.strides,
                    src_offset=position * self.input.strides[self.dim],
                )  # fmt: skip
            )
            position += self.split_sizes[k]
        return pieces


# ---- constant_pad_nd -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PadSpec:
    """``constant_pad_nd(input, pad, value)``: ``pad`` = (before, after) pairs from the last dim backwards."""

    input: TensorMeta
    pad: tuple[int, ...]
    value: float = 0.0
    out_strides: tuple[int, ...] | None = None

    @staticmethod
    def of(x: TensorMeta, pad: list[int], value: float = 0.0) -> PadSpec:
        if len(pad) % 2 or len(pad) // 2 > x.rank:
            raise ValueError(f"constant_pad_nd: pad {list(pad)} must be pairs for at most {x.rank} dims")
        return PadSpec(x, tuple(int(p) for p in pad), float(value))

    def outputs(self) -> list[TensorMeta]:
        sizes, strides = pad_out_shape_and_stride(
            list(self.input.sizes), list(self.input.strides), list(self.pad)
        )
        return [TensorMeta(tuple(sizes), tuple(self.out_strides or strides), self.input.dtype)]

    def supports(self) -> Support:
        out = self.outputs()[0]
        if any(s < 0 for s in out.sizes):
            return Support.no(
                f"constant_pad_nd: pad {list(self.pad)} leaves a negative size {list(out.sizes)}"
            )
        return _common_support("constant_pad_nd", [self.input], [out])

    def before(self) -> tuple[int, ...]:
        rank = self.input.rank
        before = [0] * rank
        for i in range(len(self.pad) // 2):
            before[rank - 1 - i] = self.pad[2 * i]
        return tuple(before)

    def pieces(self) -> list[CopyPiece]:
        out = self.outputs()[0]
        return [
            CopyPiece(
                "in0",
                "out",
                self.input.dtype,
                out.dtype,
                out.sizes,
                self.input.strides,
                out.strides,
                pad_before=self.before(),
                src_sizes=self.input.sizes,
                value=self.value,
            )  # fmt: skip
        ]
