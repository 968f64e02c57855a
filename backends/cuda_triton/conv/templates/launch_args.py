"""How the templates name a convolution's sizes in their launches: int32 size arguments and the per-dim
constexprs (depth, height, width: ``KD``, ``KH``, ``KW`` for the kernel, and so on) every kernel declares."""

from __future__ import annotations

from ...kernel.launch import ScalarArg


def size_args(**sizes: int) -> tuple[ScalarArg, ...]:
    """One int32 launch argument per size, in the order given (the kernel's parameter order)."""
    return tuple(ScalarArg(name, "i32", v) for name, v in sizes.items())


def dim_constexprs(axes: str = "DHW", **per_dim: tuple[int, ...]) -> tuple[tuple[str, int], ...]:
    """Per-dim constexprs, each quantity's dims in ``axes`` order: ``dim_constexprs(K=(1, 3, 3), S=(1, 2, 2))`` is
    ``(("KD", 1), ("KH", 3), ("KW", 3), ("SD", 1), ("SH", 2), ("SW", 2))``."""
    return tuple(
        (prefix + axis, v) for prefix, values in per_dim.items() for axis, v in zip(axes, values, strict=True)
    )


def channel_constexprs(cin: int, cout: int, cin_p: int, cout_p: int) -> tuple[tuple[str, int], ...]:
    """The channel constexprs of the kernels that read a tap-major weight (`TapMajorWeightTemplate`): the
    channels ``C_IN``, ``C_OUT`` and the weight's padded extents of them, ``CIN_P``, ``COUT_P``."""
    return (("C_IN", cin), ("C_OUT", cout), ("CIN_P", cin_p), ("COUT_P", cout_p))
