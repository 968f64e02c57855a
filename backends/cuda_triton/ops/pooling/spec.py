"""`PoolSpec`: one max, avg or adaptive avg pool over 1, 2 or 3 spatial dims, from static metadata only.

Edge graphs carry ``max_pool{2,3}d_with_indices`` (only output 0, the values, may be used: the kernels do not
compute indices), ``avg_pool{2,3}d`` and ``_adaptive_avg_pool{2,3}d``; 1-D pools arrive as 2-D pools over an
unsqueezed height of 1, but 1-D specs are supported too. The constructors take the ops' arguments as the node
holds them (an int list of length 1 stands for every spatial dim, an empty stride means the kernel size) and
normalise them the way ATen does.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...kernel.launch import Support
from ..tensor_meta import TensorMeta, float_dtype_support
from .shape import ADAPTIVE_AVG_POOL, AVG_POOL, MAX_POOL, out_shape_and_stride

KIND_NAMES = {MAX_POOL: "max_pool", AVG_POOL: "avg_pool", ADAPTIVE_AVG_POOL: "adaptive_avg_pool"}


def _per_dim(op: str, name: str, value: int | list[int] | tuple[int, ...], spatial: int) -> tuple[int, ...]:
    values = (value,) if isinstance(value, int) else tuple(int(v) for v in value)
    if len(values) == 1:
        return values * spatial
    if len(values) != spatial:
        raise ValueError(f"{op}: {name} must have 1 or {spatial} entries, got {list(values)}")
    return values


@dataclass(frozen=True)
class PoolSpec:
    """A pool: ``kind`` is MAX_POOL, AVG_POOL or ADAPTIVE_AVG_POOL (shape.py); per-spatial-dim tuples.

    For ADAPTIVE_AVG_POOL ``kernel`` holds the output sizes (stride, padding and dilation are unused).
    ``out_strides`` is the output layout the kernel writes (None: the layout rule, `out_shape_and_stride`).
    """

    kind: int
    input: TensorMeta
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    ceil_mode: bool = False
    count_include_pad: bool = True
    divisor_override: int | None = None
    out_strides: tuple[int, ...] | None = None

    # -- construction from the edge ops' arguments -------------------------------------------------------
    @staticmethod
    def max_pool(
        input: TensorMeta,
        spatial: int,
        kernel_size: int | list[int],
        stride: int | list[int] = (),
        padding: int | list[int] = 0,
        dilation: int | list[int] = 1,
        ceil_mode: bool = False,
    ) -> PoolSpec:
        op = f"max_pool{spatial}d"
        kernel = _per_dim(op, "kernel_size", kernel_size, spatial)
        strides = kernel if stride in ((), []) else _per_dim(op, "stride", stride, spatial)
        return PoolSpec(
            MAX_POOL,
            input,
            kernel,
            strides,
            _per_dim(op, "padding", padding, spatial),
            _per_dim(op, "dilation", dilation, spatial),
            bool(ceil_mode),
        )

    @staticmethod
    def avg_pool(
        input: TensorMeta,
        spatial: int,
        kernel_size: int | list[int],
        stride: int | list[int] = (),
        padding: int | list[int] = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> PoolSpec:
        op = f"avg_pool{spatial}d"
        kernel = _per_dim(op, "kernel_size", kernel_size, spatial)
        strides = kernel if stride in ((), []) else _per_dim(op, "stride", stride, spatial)
        return PoolSpec(
            AVG_POOL,
            input,
            kernel,
            strides,
            _per_dim(op, "padding", padding, spatial),
            (1,) * spatial,
            bool(ceil_mode),
            bool(count_include_pad),
            None if divisor_override is None else int(divisor_override),
        )

    @staticmethod
    def adaptive_avg_pool(input: TensorMeta, output_size: list[int] | tuple[int, ...]) -> PoolSpec:
        spatial = len(output_size)
        return PoolSpec(
            ADAPTIVE_AVG_POOL,
            input,
            tuple(int(s) for s in output_size),
            (1,) * spatial,
            (0,) * spatial,
            (1,) * spatial,
        )

    # -- derived ------------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{KIND_NAMES[self.kind]}{self.spatial}d"

    @property
    def spatial(self) -> int:
        return len(self.kernel)

    @property
    def batched(self) -> bool:
        return self.input.rank == self.spatial + 2

    @property
    def dtype(self) -> str:
        return self.input.dtype

    def output(self) -> TensorMeta:
        sizes, strides = out_shape_and_stride(
            self.kind,
            list(self.input.sizes),
            list(self.input.strides),
            list(self.kernel),
            list(self.stride),
            list(self.padding),
            list(self.dilation),
            self.ceil_mode,
        )
        if self.out_strides is not None:
            strides = list(self.out_strides)
        return TensorMeta(tuple(sizes), tuple(strides), self.dtype)

    def adaptive_windows(self) -> tuple[int, ...]:
        """The longest adaptive window per spatial dim: output o of a dim of length I out of O reads input
        [floor(o * I / O), ceil((o + 1) * I / O))."""
        lead = self.input.rank - self.spatial
        windows = []
        for size, out in zip(self.input.sizes[lead:], self.kernel, strict=True):
            windows.append(max(-(-((o + 1) * size) // out) - (o * size) // out for o in range(out)))
        return tuple(windows)

    # -- support ------------------------------------------------------------------------------------------
    def supports(self) -> Support:
        name = self.name
        if not 1 <= self.spatial <= 3:
            return Support.no(f"{name}: only 1-D, 2-D and 3-D pools are supported")
        dtype_ok = float_dtype_support(name, self.input)
        if not dtype_ok:
            return dtype_ok
        if self.input.rank not in (self.spatial + 1, self.spatial + 2):
            return Support.no(
                f"{name}: the input must have {self.spatial + 1} or {self.spatial + 2} dims, got {self.input.rank}"
            )
        if self.input.numel == 0:
            return Support.no(f"{name}: empty inputs are not supported")
        if any(s < 1 for s in self.kernel):
            what = "output_size" if self.kind == ADAPTIVE_AVG_POOL else "kernel_size"
            return Support.no(f"{name}: {what} {list(self.kernel)} must be positive")
        if self.kind != ADAPTIVE_AVG_POOL:
            if any(s < 1 for s in self.stride) or any(d < 1 for d in self.dilation):
                return Support.no(f"{name}: stride {list(self.stride)} and dilation must be positive")
            for k, p in zip(self.kernel, self.padding, strict=True):
                if p < 0 or p > k // 2:
                    return Support.no(
                        f"{name}: padding {list(self.padding)} must be between 0 and half the kernel size "
                        f"{list(self.kernel)}"
                    )
            if self.divisor_override == 0:
                return Support.no(f"{name}: divisor_override must not be zero")
        out = self.output()
        if any(s < 1 for s in out.sizes):
            return Support.no(
                f"{name}: the output {list(out.sizes)} of input {list(self.input.sizes)} is empty"
            )
        if self.out_strides is not None and len(self.out_strides) != out.rank:
            return Support.no(
                f"{name}: out_strides {list(self.out_strides)} do not match the output rank {out.rank}"
            )
        return Support.yes()
