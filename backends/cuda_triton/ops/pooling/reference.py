"""CPU references of the pooling ops in ATen: 16-bit inputs are pooled in fp32 and rounded once, as the kernel does."""

from __future__ import annotations

import torch

from .shape import ADAPTIVE_AVG_POOL, AVG_POOL, MAX_POOL
from .spec import PoolSpec


def reference_pool(spec: PoolSpec, x: torch.Tensor) -> torch.Tensor:
    """ATen's result for ``spec`` on ``x`` (any layout; 1-D pools run as 2-D pools over a height of 1)."""
    xf = x.float()
    spatial = spec.spatial
    if spatial == 1:  # as the edge graph runs a 1-D pool: a 2-D pool over (N, C, 1, L)
        xf = xf.unsqueeze(-2)
        args = _as_2d(spec)
    else:
        args = (spec.kernel, spec.stride, spec.padding, spec.dilation)
    kernel, stride, padding, dilation = args
    dims = len(kernel)
    if spec.kind == MAX_POOL:
        op = torch.ops.aten.max_pool2d_with_indices if dims == 2 else torch.ops.aten.max_pool3d_with_indices
        y = op(xf, list(kernel), list(stride), list(padding), list(dilation), spec.ceil_mode)[0]
    elif spec.kind == AVG_POOL:
        op = torch.ops.aten.avg_pool2d if dims == 2 else torch.ops.aten.avg_pool3d
        y = op(
            xf,
            list(kernel),
            list(stride),
            list(padding),
            spec.ceil_mode,
            spec.count_include_pad,
            spec.divisor_override,
        )
    elif spec.kind == ADAPTIVE_AVG_POOL:
        op = torch.ops.aten._adaptive_avg_pool2d if dims == 2 else torch.ops.aten._adaptive_avg_pool3d
        y = op(xf, list(kernel))
    else:
        raise ValueError(f"unknown pool kind {spec.kind}")
    if spatial == 1:
        y = y.squeeze(-2)
    return y.to(x.dtype)


def _as_2d(spec: PoolSpec) -> tuple[tuple[int, ...], ...]:
    return ((1,) + spec.kernel, (1,) + spec.stride, (0,) + spec.padding, (1,) + spec.dilation)
