"""The tuning problems of common networks: the convolution layers of `cuda_triton.tools.tuning_networks` as
`ConvProblem`s.

`problems(networks, batches, dtypes, layouts)` turns them into `ConvProblem`s (batch sizes are applied here;
1-D layers are always contiguous; 2-D/3-D layers come in each requested layout, input and weight alike).
Run it to print a summary: ``PYTHONPATH=backends python -m cuda_triton.tools.tuning_signatures``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from cuda_triton.conv.layout import channels_last_strides, contiguous_strides
from cuda_triton.conv.params import ConvParams
from cuda_triton.conv.problem import ConvProblem
from cuda_triton.tools.tuning_networks import NETWORKS, Layer


# ---- layers -> problems --------------------------------------------------------------------------------------
def dense_strides(sizes: tuple[int, ...], layout: str) -> tuple[int, ...]:
    """Element strides of a dense tensor: 'contiguous' (N, C, *spatial) or 'channels_last' (N, *spatial, C)."""
    if layout == "contiguous":
        return tuple(contiguous_strides(list(sizes)))
    return tuple(channels_last_strides(list(sizes)))


def layer_problem(layer: Layer, batch: int, dtype: str, layout: str, allow_tf32: bool = True) -> ConvProblem:
    n = len(layer.spatial)
    if n == 1:
        layout = "contiguous"
    if layer.transposed:
        wsize = (layer.C, layer.K // layer.groups, *layer.kernel)
    else:
        wsize = (layer.K, layer.C // layer.groups, *layer.kernel)
    isize = (batch, layer.C, *layer.spatial)
    params = ConvParams(
        stride=layer.stride,
        padding_before=layer.pad_before,
        padding_after=layer.pad_after,
        dilation=layer.dilation,
        transposed=layer.transposed,
        output_padding=layer.output_padding if layer.transposed else (0,) * n,
        groups=layer.groups,
    )
    return ConvProblem.from_shapes(
        isize,
        dense_strides(isize, layout),
        wsize,
        dense_strides(wsize, layout),
        layer.bias,
        params,
        dtype,
        allow_tf32,
    )


DTYPE_ALIASES = {
    "fp16": ("float16", True),
    "float16": ("float16", True),
    "half": ("float16", True),
    "bf16": ("bfloat16", True),
    "bfloat16": ("bfloat16", True),
    "fp32": ("float32", True),
    "tf32": ("float32", True),
    "float32": ("float32", True),
    "fp32-ieee": ("float32", False),
    "ieee": ("float32", False),
}


def parse_dtype(name: str) -> tuple[str, bool]:
    """'fp16'/'bf16'/'fp32' (TF32 allowed, PyTorch's default for convs)/'fp32-ieee' -> (dtype, allow_tf32)."""
    try:
        return DTYPE_ALIASES[name.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; choose from {sorted(DTYPE_ALIASES)}") from None


def network_layers(names: Iterable[str] | None = None) -> list[Layer]:
    out: list[Layer] = []
    for name in names if names is not None else NETWORKS:
        if name not in NETWORKS:
            raise KeyError(f"unknown network {name!r}; choose from {sorted(NETWORKS)}")
        out += NETWORKS[name]()
    return out


def problems(
    networks: Iterable[str] | None = None,
    batches: Iterable[int] = (1, 8),
    dtypes: Iterable[str] = ("fp16", "bf16", "fp32"),
    layouts: Iterable[str] = ("channels_last", "contiguous"),
) -> list[tuple[str, ConvProblem]]:
    """(network name, problem) pairs, first occurrence of each distinct problem only, in a stable order."""
    seen: set[ConvProblem] = set()
    out: list[tuple[str, ConvProblem]] = []
    layers = network_layers(networks)
    for dtype_name in dtypes:
        dtype, tf32 = parse_dtype(dtype_name)
        for layout in layouts:
            for batch in batches:
                for layer in layers:
                    if len(layer.spatial) == 1 and layout != "contiguous" and "contiguous" in layouts:
                        continue  # 1-D layers exist once, contiguous
                    pr = layer_problem(layer, batch, dtype, layout, tf32)
                    if pr not in seen:
                        seen.add(pr)
                        out.append((layer.net, pr))
    return out


def main() -> None:
    total = 0
    for name, fn in NETWORKS.items():
        layers = fn()
        distinct = {
            (
                la.C,
                la.spatial,
                la.K,
                la.kernel,
                la.stride,
                la.pad_before,
                la.pad_after,
                la.dilation,
                la.groups,
                la.transposed,
            )
            for la in layers
        }
        gflop = (
            sum(
                2 * la.K * math.prod(la.out_spatial()) * (la.C // la.groups) * math.prod(la.kernel)
                for la in layers
                if not la.transposed
            )
            / 1e9
        )
        print(
            f"{name:16s} {len(layers):4d} convs, {len(distinct):3d} distinct, {gflop:7.2f} GFLOP (forward, batch 1)"
        )
        total += len(distinct)
    print(
        f"distinct geometries: {total}; problems at batch 1,8 x fp16/bf16/fp32 x both layouts: {len(problems())}"
    )


if __name__ == "__main__":
    main()
