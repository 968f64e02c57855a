"""The kernel launch protocol shared by every op family.

An op family's template turns one problem and one `Schedule` (a point of its tuning space) into a list of
`KernelLaunch`es. That list is the single description of the kernel calls: the op's CUDA body launches it
through Triton's JIT, the AOT preprocess compiles the same functions with the same constexprs and records the
same argument list and grid in the delegate blob, and the C++ runtime replays it. Nothing else may describe a
kernel's arguments.

Depends on torch and triton only (never on executorch), so it imports on the GPU machine.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from typing import Any

import torch
import triton


@dataclass(frozen=True)
class Support:
    """Truthy when supported; otherwise ``reason`` says why not, in a sentence a user understands (a yes may say
    why it was taken)."""

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok

    @staticmethod
    def yes(reason: str = "") -> Support:
        return Support(True, reason)

    @staticmethod
    def no(reason: str) -> Support:
        return Support(False, reason)


@dataclass(frozen=True)
class Schedule:
    """One point of a template's tuning space: every value that changes generated code.

    ``params`` holds the template's own constexprs (block sizes, ...) as a sorted tuple of (name, value), so a
    schedule is hashable and prints the same everywhere; ``num_warps``/``num_stages`` are Triton launch options.
    """

    params: tuple[tuple[str, int], ...]
    num_warps: int = 4
    num_stages: int = 2

    @staticmethod
    def make(num_warps: int = 4, num_stages: int = 2, **params: int) -> Schedule:
        return Schedule(tuple(sorted(params.items())), num_warps, num_stages)

    def __getitem__(self, name: str) -> int:
        for key, value in self.params:
            if key == name:
                return value
        raise KeyError(name)

    def as_dict(self) -> dict[str, int]:
        return {**dict(self.params), "num_warps": self.num_warps, "num_stages": self.num_stages}

    @staticmethod
    def from_dict(d: dict[str, int]) -> Schedule:
        d = dict(d)
        return Schedule.make(d.pop("num_warps", 4), d.pop("num_stages", 2), **d)

    def key(self) -> str:
        parts = [f"{k}{v}" for k, v in self.params] + [f"w{self.num_warps}", f"s{self.num_stages}"]
        return "_".join(parts)


@dataclass(frozen=True)
class ScratchTensor:
    """A dense contiguous scratch tensor some launches of a schedule use: role, torch dtype name, sizes.

    ``zeroed``: the launches need it all zero when they start and leave it all zero when they finish (the tile
    counters of a split-K reduction done by the last share of each tile). The delegate keeps such a tensor in its
    state buffer, zeroed once at init, instead of the arena, whose bytes other values reuse.
    """

    role: str  # the name launches use for it (a ``TensorArg.role``)
    dtype: str  # "float32", "float16", "bfloat16", "int32"
    sizes: tuple[int, ...]
    zeroed: bool = False


def split_k_scratch(workspace_sizes: tuple[int, ...], counters: int) -> list[ScratchTensor]:
    """The scratch of a reduction split across programs and finished in the same launch by the last share to
    arrive (conv/templates/gemm_jit.py, `is_last_split_k_share`): fp32 partials of ``workspace_sizes`` (role
    "workspace") and ``counters`` zeroed int32 counters (role "tile_counters"), as `split_k_args` passes them."""
    return [
        ScratchTensor("workspace", "float32", workspace_sizes),
        ScratchTensor("tile_counters", "int32", (counters,), zeroed=True),
    ]


def split_k_args(split: int, unused: TensorArg) -> tuple[TensorArg, TensorArg]:
    """The workspace and counter pointer arguments of a kernel that may split its reduction (`split_k_scratch`):
    with ``split`` == 1 both are ``unused``, a pointer the kernel never reads."""
    if split > 1:
        return TensorArg("workspace", "fp32"), TensorArg("tile_counters", "i32")
    return unused, unused


def allocate_scratch(
    scratch: list[ScratchTensor], device: torch.device | str, poison: bool = False
) -> dict[str, torch.Tensor]:
    """Tensors for ``scratch``, by role, as a runtime hands them over: the ``zeroed`` ones all zero, the others
    uninitialised (or, with ``poison``, NaN, so a check catches a kernel that reads what it never wrote)."""
    out = {}
    for t in scratch:
        dtype = getattr(torch, t.dtype)
        if t.zeroed:
            out[t.role] = torch.zeros(t.sizes, dtype=dtype, device=device)
        elif poison:
            out[t.role] = torch.full(t.sizes, float("nan"), dtype=dtype, device=device)
        else:
            out[t.role] = torch.empty(t.sizes, dtype=dtype, device=device)
    return out


@dataclass(frozen=True)
class TensorArg:
    """A pointer argument: ``role`` names one of the op's tensors (its inputs, outputs and scratch tensors).

    Each op family defines its own role names (the convolution's are ``TENSOR_ROLES`` in
    ``cuda_triton.conv.templates.base``); the runtime binds every role to one tensor of the call.
    """

    role: str
    dtype: str  # Triton pointer element type: "fp16", "bf16", "fp32", "fp64"
    optional: bool = (
        False  # a role the caller may leave out (then a null pointer, which the kernel never reads)
    )


@dataclass(frozen=True)
class ScalarArg:
    """A runtime scalar argument (batch and spatial sizes, strides, ...): name, Triton type, value."""

    name: str
    type: str  # "i32" or "i64" or "fp32"
    value: int | float


@dataclass(frozen=True)
class KernelLaunch:
    """One kernel call: a ``@triton.jit`` function, its constexprs, its runtime arguments and its grid.

    ``args`` lists the non-constexpr parameters of ``fn`` in declaration order (the PTX parameter order);
    ``constexprs`` every constexpr parameter by name. ``grid`` is the launch grid, fixed by the static shapes.
    """

    fn: Any  # triton.runtime.jit.JITFunction (or a Gluon kernel, see ``portable_fn``)
    args: tuple[TensorArg | ScalarArg, ...]
    constexprs: tuple[tuple[str, Any], ...]
    grid: tuple[int, int, int]
    num_warps: int
    num_stages: int
    # A Gluon kernel is written for one architecture and has no interpreter. Such a launch names the archs
    # ``fn`` compiles for (``fn_archs``) and a Triton-language twin with the same parameters and results
    # (``portable_fn``): Triton's CPU interpreter runs the twin, and every other arch compiles it.
    portable_fn: Any = None
    fn_archs: tuple[int, ...] | None = None  # None: ``fn`` compiles for every arch
    # Triton's ``maxnreg`` for ``fn`` (registers per thread; the twin compiles without it): a warp-specialised
    # kernel's extra warps must fit the register file at launch (its partitions then trade registers with
    # setmaxnreg). None: the compiler's choice.
    maxnreg: int | None = None

    def compile_options(self) -> dict[str, int]:
        """The Triton options every compile and launch of this kernel passes (JIT, warm-up, AOT)."""
        options = {"num_warps": self.num_warps, "num_stages": self.num_stages}
        if self.maxnreg is not None:
            options["maxnreg"] = self.maxnreg
        return options

    @property
    def name(self) -> str:
        return self.fn.__name__

    def fn_for_arch(self, arch: int | None) -> Any:
        """The kernel function for compute capability ``arch`` (None: Triton's CPU interpreter)."""
        if self.portable_fn is None:
            return self.fn
        if arch is None or (self.fn_archs is not None and int(arch) not in self.fn_archs):
            return self.portable_fn
        return self.fn

    def for_arch(self, arch: int | None) -> KernelLaunch:
        """This launch with the kernel for ``arch`` as its only function (what a compiler or launcher sees)."""
        fn = self.fn_for_arch(arch)
        if fn is self.fn and self.portable_fn is None:
            return self
        maxnreg = self.maxnreg if fn is self.fn else None
        return replace(self, fn=fn, portable_fn=None, fn_archs=None, maxnreg=maxnreg)

    def resolve(self, tensors: dict[str, torch.Tensor | None]) -> list[Any]:
        """Positional JIT arguments: tensors by role, scalars by value."""
        out: list[Any] = []
        for a in self.args:
            if isinstance(a, TensorArg):
                out.append(tensors.get(a.role) if a.optional else tensors[a.role])
            else:
                out.append(a.value)
        return out

    def run(self, tensors: dict[str, torch.Tensor | None]) -> None:
        """Launch through Triton's JIT on the current stream (the op's CUDA body and GPU tests)."""
        ensure_scratch_allocator()
        launch = self if self.portable_fn is None else self.for_arch(running_arch())  # no device query else
        launch.fn[self.grid](*self.resolve(tensors), **dict(self.constexprs), **launch.compile_options())


def interpreting() -> bool:
    """Whether kernels run in Triton's CPU interpreter (TRITON_INTERPRET=1)."""
    try:
        return bool(triton.knobs.runtime.interpret)
    except AttributeError:  # older Triton
        return os.environ.get("TRITON_INTERPRET", "0") == "1"


def running_arch() -> int | None:
    """Compute capability kernels launched now run on: None under Triton's CPU interpreter."""
    if interpreting():
        return None
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


_allocator_set = False


def _torch_scratch(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    """Triton's global scratch (device-side TMA descriptors) from PyTorch's caching allocator (256-B aligned)."""
    device = "cpu" if interpreting() else "cuda"
    return torch.empty(size, dtype=torch.int8, device=device)


def ensure_scratch_allocator() -> None:
    """Kernels that make TMA descriptors on the device need Triton's allocator set before they are launched by
    the JIT (the C++ runtime allocates the same scratch itself from the kernel's metadata)."""
    global _allocator_set
    if not _allocator_set:
        triton.set_allocator(_torch_scratch)
        _allocator_set = True


TRITON_PTR_DTYPE = {
    "float16": "fp16",
    "bfloat16": "bf16",
    "float32": "fp32",
    "float64": "fp64",
    "int32": "i32",
}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def prod(xs: tuple[int, ...] | list[int]) -> int:
    return math.prod(xs)


__all__ = [
    "KernelLaunch",
    "ScalarArg",
    "Schedule",
    "ScratchTensor",
    "allocate_scratch",
    "Support",
    "TRITON_PTR_DTYPE",
    "TensorArg",
    "cdiv",
    "ensure_scratch_allocator",
    "interpreting",
    "prod",
    "running_arch",
]
