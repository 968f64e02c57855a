"""How a tuning table names and compares convolutions: the key of an entry (arch, precision, layout, signature),
the JSON spec that rebuilds a problem exactly, the dense problem a signature string describes, and the distance
between two problems that the nearest-signature fallback ranks neighbours by."""

from __future__ import annotations

import math
from typing import Any

from .params import ConvParams
from .problem import ConvProblem
from .templates.geometry import dense_strides

# The numeric modes a table entry names (`precision_key`).
PRECISIONS = ("float16", "bfloat16", "tf32", "float32")


# ---- keys ---------------------------------------------------------------------------------------------------
def precision_key(problem: ConvProblem) -> str:
    """The numeric mode the kernel runs in: float16, bfloat16, tf32 (fp32 with TF32 allowed) or float32 (exact)."""
    if problem.dtype == "float32":
        return "tf32" if problem.allow_tf32 else "float32"
    return problem.dtype


def layout_key(problem: ConvProblem) -> str:
    """The input layout, plus ``->`` the output layout when the layout rule gives another one."""
    i, o = problem.input_layout, problem.output_layout
    return i if i == o else f"{i}->{o}"


def table_key(problem: ConvProblem, arch: int) -> tuple[int, str, str, str]:
    return (int(arch), precision_key(problem), layout_key(problem), problem.signature())


def structural_class(problem: ConvProblem) -> tuple[int, bool, bool]:
    """What a neighbour must share: spatial dims, transposed, depthwise."""
    return (problem.spatial_dims, problem.transposed, problem.is_depthwise)


# ---- problem <-> JSON -----------------------------------------------------------------------------------------
def problem_spec(problem: ConvProblem) -> dict[str, Any]:
    """A JSON-able description that `problem_from_spec` turns back into the identical ConvProblem."""
    return {
        "input_size": list(problem.input_size),
        "input_stride": list(problem.input_stride),
        "weight_size": list(problem.weight_size),
        "weight_stride": list(problem.weight_stride),
        "has_bias": problem.has_bias,
        "dtype": problem.dtype,
        "allow_tf32": problem.allow_tf32,
        **problem.params.as_dict(),
    }


def problem_from_spec(spec: dict[str, Any]) -> ConvProblem:
    return ConvProblem.from_shapes(
        tuple(spec["input_size"]),
        tuple(spec["input_stride"]),
        tuple(spec["weight_size"]),
        tuple(spec["weight_stride"]),
        bool(spec["has_bias"]),
        ConvParams.from_dict(spec),
        str(spec["dtype"]),
        bool(spec["allow_tf32"]),
    )


_SIG_FIELDS = ("n", "c", "k", "in", "w", "s", "pb", "pa", "d", "g")


def problem_from_signature(
    signature: str, dtype: str = "float16", layout: str = "contiguous", allow_tf32: bool = True
) -> ConvProblem:
    """The dense ConvProblem a `ConvProblem.signature()` string describes, in ``layout`` (input and weight).

    ``layout`` is "contiguous" or "channels_last" (1-D problems are always contiguous). Raises ValueError for
    a string that is not a signature.
    """
    parts = signature.split("_")
    try:
        vals: dict[str, tuple[int, ...]] = {}
        i = 0
        for name in _SIG_FIELDS:
            part = parts[i]
            if not part.startswith(name) or (name == "in" and not part[2:3].isdigit()):
                raise ValueError(f"expected field {name!r}, got {part!r}")
            vals[name] = tuple(int(v) for v in part[len(name) :].split("x"))
            i += 1
        output_padding: tuple[int, ...] | None = None
        if parts[i].startswith("t"):
            output_padding = tuple(int(v) for v in parts[i][1:].split("x"))
            i += 1
        if parts[i] not in ("b", "nb") or i + 1 != len(parts):
            raise ValueError(f"expected 'b' or 'nb' at the end, got {'_'.join(parts[i:])!r}")
        has_bias = parts[i] == "b"
    except (IndexError, ValueError) as e:
        raise ValueError(f"not a convolution signature: {signature!r} ({e})") from None
    n, c, k, g = vals["n"][0], vals["c"][0], vals["k"][0], vals["g"][0]
    nd = len(vals["w"])
    transposed = output_padding is not None
    params = ConvParams(
        stride=vals["s"],
        padding_before=vals["pb"],
        padding_after=vals["pa"],
        dilation=vals["d"],
        transposed=transposed,
        output_padding=output_padding if output_padding is not None else (0,) * nd,
        groups=g,
    )
    cl = layout == "channels_last" and nd > 1
    isize = (n, c, *vals["in"])
    wsize = (c, k // g, *vals["w"]) if transposed else (k, c // g, *vals["w"])
    return ConvProblem.from_shapes(
        isize,
        dense_strides(isize, cl),
        wsize,
        dense_strides(wsize, cl),
        has_bias,
        params,
        dtype,
        allow_tf32,
    )


# ---- distance ---------------------------------------------------------------------------------------------
def distance_features(problem: ConvProblem) -> tuple[float, ...]:
    """log2 features compared by `signature_distance` (same structural class, so same lengths)."""
    g = problem.groups
    lg = math.log2
    m = problem.batch * math.prod(problem.out_spatial)
    p = problem.params
    feats = [
        lg(max(m, 1)),  # GEMM M: output positions
        lg(max(problem.in_channels // g, 1)),  # GEMM K per tap
        lg(max(problem.out_channels // g, 1)),  # GEMM N
        lg(g),
        lg(problem.batch),
        *(lg(max(s, 1)) for s in problem.out_spatial),
        *(lg(k) for k in problem.kernel),
        *(lg(s) for s in p.stride),
        *(lg(d) for d in p.dilation),
        float(problem.has_bias),
        float(any(p.padding_before) or any(p.padding_after)),
    ]
    return tuple(feats)


def distance_weights(spatial_dims: int) -> tuple[float, ...]:
    n = spatial_dims
    return (1.0, 1.0, 1.0, 1.0, 0.25, *([0.25] * n), *([1.0] * n), *([1.0] * n), *([0.5] * n), 0.1, 0.1)


def signature_distance(a: ConvProblem, b: ConvProblem) -> float:
    """How far apart two convolutions are for tuning purposes (inf across structural classes).

    A weighted L1 distance over log2 of: output positions M = batch * prod(out spatial) (weight 1), input and
    output channels per group (1 each), groups (1), batch (0.25), each output spatial size (0.25), each kernel
    size (1), stride (1), dilation (0.5); plus 0.1 each when one has a bias and the other not, or one is padded
    and the other not. So 2x more channels on one side costs 1; a 3x3 vs a 1x1 kernel costs 2 * log2(3) = 3.2.
    """
    if structural_class(a) != structural_class(b):
        return math.inf
    w = distance_weights(a.spatial_dims)
    return sum(
        wi * abs(x - y) for wi, x, y in zip(w, distance_features(a), distance_features(b), strict=True)
    )
