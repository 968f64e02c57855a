"""The kernel, value and constant tables (sections ``KERN``, ``VALS``, ``CNST`` of docs/blob_format.md): their
records and encodings. Torch-free; the C++ twin is runtime/blob/sections.cpp."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from .encoding import DTYPES, PARAM_TYPES, BlobError, Reader, Writer

VALUE_KINDS = ("input", "output", "intermediate", "view", "state")  # code = index
KERNEL_FLAG_COOPERATIVE = 1
KERNEL_FLAG_PDL = 2
CUBIN_KEY_PREFIX = "cuda_triton/cubin/"
CUBIN_DIGEST_HEX = 40  # hex digits of the SHA-256 in a cubin's key
MAX_CUBIN = 1 << 32  # exclusive bound on a cubin's size


def cubin_named_key(arch: int, cubin: bytes) -> str:
    """The NamedDataMap key of a cubin: its content address, so identical cubins share one entry in the .pte and
    the runtime can check the bytes it loads against the key."""
    return f"{CUBIN_KEY_PREFIX}sm{int(arch)}/{hashlib.sha256(cubin).hexdigest()[:CUBIN_DIGEST_HEX]}"


def is_cubin_key(key: str, arch: int) -> bool:
    """Whether ``key`` has the content-address form ``cuda_triton/cubin/sm<arch>/<40 lowercase hex digits>``."""
    prefix = f"{CUBIN_KEY_PREFIX}sm{arch}/"
    digest = key[len(prefix) :]
    return (
        key.startswith(prefix)
        and len(digest) == CUBIN_DIGEST_HEX
        and all(c in "0123456789abcdef" for c in digest)
    )


@dataclass
class KernelRecord:
    """One compiled kernel for one arch (mirrors `cuda_triton.kernel.aot.CompiledKernel`).

    The blob stores ``cubin_key`` and ``cubin_size``; the ELF bytes (``cubin``) live in ExecuTorch's named data
    under that key. ``cubin`` is None in a record read back without the named data. Left empty/0, the key and
    size are derived from ``cubin``.
    """

    name: str
    arch: int
    cubin: bytes | None
    num_warps: int
    num_ctas: int
    shared: int
    global_scratch_size: int = 0
    global_scratch_align: int = 1
    profile_scratch_size: int = 0
    profile_scratch_align: int = 1
    launch_cooperative_grid: bool = False
    launch_pdl: bool = False
    param_types: list[str] = field(default_factory=list)
    cubin_key: str = ""
    cubin_size: int = 0

    def __post_init__(self) -> None:
        if self.cubin is not None:
            self.cubin = bytes(self.cubin)
            if not self.cubin_key:
                self.cubin_key = cubin_named_key(self.arch, self.cubin)
            if not self.cubin_size:
                self.cubin_size = len(self.cubin)

    @staticmethod
    def from_compiled(ck: Any) -> KernelRecord:
        """From any object with the `CompiledKernel` attributes (duck-typed; no import of the compiler here)."""
        return KernelRecord(
            name=str(ck.name),
            arch=int(ck.arch),
            cubin=bytes(ck.cubin),
            num_warps=int(ck.num_warps),
            num_ctas=int(ck.num_ctas),
            shared=int(ck.shared),
            global_scratch_size=int(ck.global_scratch_size or 0),
            global_scratch_align=int(ck.global_scratch_align or 1),
            profile_scratch_size=int(ck.profile_scratch_size or 0),
            profile_scratch_align=int(ck.profile_scratch_align or 1),
            launch_cooperative_grid=bool(ck.launch_cooperative_grid),
            launch_pdl=bool(ck.launch_pdl),
            param_types=[str(t) for t in ck.param_types],
        )

    def encode(self, w: Writer) -> None:
        w.string(self.name)
        for x in (self.arch, self.num_warps, self.num_ctas, self.shared, self.global_scratch_size,
                  self.global_scratch_align, self.profile_scratch_size, self.profile_scratch_align):  # fmt: skip
            w.u32(x)
        w.u32(
            (KERNEL_FLAG_COOPERATIVE if self.launch_cooperative_grid else 0)
            | (KERNEL_FLAG_PDL if self.launch_pdl else 0)
        )
        w.u32(len(self.param_types))
        for t in self.param_types:
            w.u8(PARAM_TYPES.index(t))
        w.string(self.cubin_key)
        w.u64(self.cubin_size)

    @staticmethod
    def decode(r: Reader) -> KernelRecord:
        name = r.string("kernel name")
        arch, nw, nc, shared, gss, gsa, pss, psa, flags = (r.u32() for _ in range(9))
        if flags & ~(KERNEL_FLAG_COOPERATIVE | KERNEL_FLAG_PDL):
            raise BlobError(f"kernel {name}: unknown flags {flags:#x}")
        params = [r.enum(PARAM_TYPES, "param type") for _ in range(r.count("kernel params", 1024))]
        cubin_key = r.string("cubin key")
        cubin_size = r.u64()
        return KernelRecord(
            name, arch, None, nw, nc, shared, gss, gsa, pss, psa,
            bool(flags & KERNEL_FLAG_COOPERATIVE), bool(flags & KERNEL_FLAG_PDL), params, cubin_key, cubin_size,
        )  # fmt: skip


@dataclass
class ValueRecord:
    """A tensor the delegate touches.

    ``index``: the delegate input/output index; for a view, its base (an earlier value); 0 for intermediates and
    state values.
    ``offset``: an intermediate's byte offset in the arena, a state value's in the state buffer (`plan_arena` fills
    both in), a view's byte offset from its base's first element; 0 for inputs and outputs.

    A **state** value lives in the delegate's state buffer, zeroed once at init and kept from one execute to the
    next; the launches that use it must leave it all zero (split-K tile counters, `ScratchTensor.zeroed`).
    """

    kind: str  # "input" | "output" | "intermediate" | "view" | "state"
    index: int
    dtype: str  # one of encoding.DTYPES
    sizes: list[int]
    strides: list[int]
    offset: int = 0

    @staticmethod
    def view(base: int, dtype: str, sizes: list[int], strides: list[int], offset: int = 0) -> ValueRecord:
        """A view of value ``base``'s bytes, ``offset`` bytes after its first element (a multiple of 16)."""
        return ValueRecord("view", base, dtype, list(sizes), list(strides), offset)

    def encode(self, w: Writer) -> None:
        w.u8(VALUE_KINDS.index(self.kind))
        w.u8(DTYPES.index(self.dtype))
        w.u32(self.index)
        w.u64(self.offset)
        w.i64s(self.sizes)
        w.i64s(self.strides)

    @staticmethod
    def decode(r: Reader) -> ValueRecord:
        kind = r.enum(VALUE_KINDS, "value kind")
        dtype = r.enum(DTYPES, "dtype")
        index = r.u32()
        offset = r.u64()
        return ValueRecord(kind, index, dtype, r.dims("value sizes"), r.dims("value strides"), offset)


@dataclass
class ConstantRecord:
    """A weight or bias in ExecuTorch's NamedDataMap, already laid out the way the kernels read it.

    ``sha256``: the SHA-256 of exactly the ``nbytes`` bytes stored under ``key`` (`of_bytes` computes it).
    """

    key: str
    nbytes: int
    dtype: str
    sizes: list[int]
    sha256: bytes = b""

    @staticmethod
    def of_bytes(key: str, dtype: str, sizes: list[int], data: bytes) -> ConstantRecord:
        """The record of a constant whose named-data bytes are ``data``."""
        return ConstantRecord(key, len(data), dtype, [int(s) for s in sizes], hashlib.sha256(data).digest())

    def encode(self, w: Writer) -> None:
        w.string(self.key)
        w.u8(DTYPES.index(self.dtype))
        w.u64(self.nbytes)
        w.i64s(self.sizes)
        w.raw(self.sha256)

    @staticmethod
    def decode(r: Reader) -> ConstantRecord:
        key = r.string("constant key")
        dtype = r.enum(DTYPES, "dtype")
        nbytes = r.u64()
        sizes = r.dims("constant sizes")
        return ConstantRecord(key, nbytes, dtype, sizes, r.take(32))
