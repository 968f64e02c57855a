"""The delegate blob: the ONE writer (`serialize`) and a pure-Python reader (`deserialize`, for tests).

The C++ runtime (runtime/blob/blob_reader.cpp) is the one production reader; docs/blob_format.md documents
every byte. This module does not import executorch, torch or triton.

API (everything a preprocess needs)::

    from cuda_triton.serialization.blob import (
        DelegateBlob, KernelRecord, ValueRecord, ConstantRecord, OpRecord, LaunchRecord,
        ValueRef, ConstantRef, NullPtr, Scalar, serialize, deserialize,
    )

    blob = DelegateBlob(
        triton_version="3.7.1",
        archs=[80, 90],                       # every launch has a kernel for each of these
        num_inputs=1, num_outputs=1,          # delegate inputs/outputs (tensors only)
        values=[ValueRecord("input", 0, "fp32", sizes, strides),
                ValueRecord("output", 0, "fp32", sizes, strides),
                ValueRecord("intermediate", 0, "fp32", sizes, strides)],   # index unused for intermediates
        constants=[ConstantRecord(key="ct_w0", nbytes=..., dtype="fp32", sizes=[...])],
        kernels=[KernelRecord.from_compiled(ck), ...],                  # or KernelRecord(...)
        ops=[OpRecord(stride=[1, 1], padding_before=[1, 1], padding_after=[1, 1], dilation=[1, 1],
                      transposed=False, output_padding=[0, 0], groups=1,
                      input=0, weight=0, bias=None, output=1,       # value / constant / constant-or-None / value
                      weight_sizes=[...], weight_strides=[...],     # the weight's ATen shape and strides
                      template="implicit_gemm", schedule="BM64_...",
                      launches=[LaunchRecord(kernels={80: 0, 90: 1}, grid=(gx, gy, gz),
                                             args=[ValueRef(0), ConstantRef(0), NullPtr(), ValueRef(1),
                                                   Scalar("i32", 56), Scalar("fp32", 1.0)])])],
    )
    data: bytes = serialize(blob)      # validates everything, raises BlobError with the reason
    cubins = named_cubins(blob)        # {cubin_key: ELF bytes}: what goes into ExecuTorch's NamedDataStore
    assert deserialize(data, cubins) == blob   # round trip (tests); without the map, cubin is None

Conventions:

* ``args`` are the kernel's runtime parameters in PTX order, *without* the two trailing scratch pointers every
  Triton kernel has (the runtime appends them). A ``ptr`` parameter takes a `ValueRef`, a `ConstantRef` or a
  `NullPtr` (e.g. the bias pointer when the conv has no bias and HAS_BIAS is a constexpr 0); an ``i32``/``i64``/
  ``fp32`` parameter takes a `Scalar` of the same type.
* Sizes and strides are in elements. For inputs/outputs they are what ExecuTorch plans (the node's meta val).
* A constant's bytes are fetched by ``key`` from ExecuTorch's NamedDataMap at init; ``nbytes`` must match.
* So are the cubins (format version 2): a kernel record names its ELF image by ``cubin_key``, a content address
  (`cubin_named_key`), and the preprocess stores the bytes in the NamedDataStore under that key. ExecuTorch merges
  the named data of every partition by key, so an identical cubin used by many partitions is stored once per .pte.
* Kernels are deduplicated by the writer's caller (same cubin + arch appears once); the writer rejects exact
  duplicates so a mistake shows up at export, not as a bigger .pte.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MAGIC = b"CTRB"
FORMAT_VERSION = 2

# Section tags, in the order they appear.
SECTION_KERNELS = b"KERN"
SECTION_VALUES = b"VALS"
SECTION_CONSTANTS = b"CNST"
SECTION_OPS = b"OPS_"
SECTIONS = (SECTION_KERNELS, SECTION_VALUES, SECTION_CONSTANTS, SECTION_OPS)

DTYPES = ("fp16", "bf16", "fp32", "fp64")  # code = index
PARAM_TYPES = ("ptr", "i32", "i64", "fp32")  # code = index
VALUE_KINDS = ("input", "output", "intermediate")  # code = index
ARG_VALUE, ARG_CONSTANT, ARG_NULL, ARG_I32, ARG_I64, ARG_FP32 = range(6)
NO_BIAS = 0xFFFFFFFF

KERNEL_FLAG_COOPERATIVE = 1
KERNEL_FLAG_PDL = 2

# Hard limits (also enforced by the C++ reader): keep a malformed blob from asking for absurd allocations.
MAX_RANK = 8
MAX_COUNT = 1 << 20
MAX_STRING = 1 << 16
MAX_CUBIN = 1 << 32  # exclusive bound on a cubin's size
CUBIN_KEY_PREFIX = "cuda_triton/cubin/"
ELEMENT_SIZE = {"fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8}


class BlobError(ValueError):
    """A blob that cannot be written or read, with the reason."""


def cubin_named_key(arch: int, cubin: bytes) -> str:
    """The NamedDataMap key of a cubin: a content address, so identical cubins share one entry in the .pte."""
    return f"{CUBIN_KEY_PREFIX}sm{int(arch)}/{hashlib.sha256(cubin).hexdigest()[:40]}"


# ---- records ------------------------------------------------------------------------------------------------
@dataclass
class KernelRecord:
    """One compiled kernel for one arch (mirrors `cuda_triton.conv.aot.CompiledKernel`).

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
        """From any object with the `CompiledKernel` attributes (duck-typed; no import of conv.aot here)."""
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


@dataclass
class ValueRecord:
    """A tensor the delegate touches. ``index``: delegate input/output index (0 for intermediates)."""

    kind: str  # "input" | "output" | "intermediate"
    index: int
    dtype: str  # "fp16" | "bf16" | "fp32" | "fp64"
    sizes: list[int]
    strides: list[int]


@dataclass
class ConstantRecord:
    """A weight or bias in ExecuTorch's NamedDataMap, already laid out the way the kernels read it."""

    key: str
    nbytes: int
    dtype: str
    sizes: list[int]


@dataclass(frozen=True)
class ValueRef:
    value: int


@dataclass(frozen=True)
class ConstantRef:
    constant: int


@dataclass(frozen=True)
class NullPtr:
    pass


@dataclass(frozen=True)
class Scalar:
    type: str  # "i32" | "i64" | "fp32"
    value: int | float


Arg = ValueRef | ConstantRef | NullPtr | Scalar


@dataclass
class LaunchRecord:
    """One kernel call: the kernel index per arch, the grid (before the num_ctas multiply) and the args."""

    kernels: dict[int, int]
    grid: tuple[int, int, int]
    args: list[Arg]


@dataclass
class OpRecord:
    """One convolution in canonical form (see `cuda_triton.conv.params.ConvParams`) and its launches."""

    stride: list[int]
    padding_before: list[int]
    padding_after: list[int]
    dilation: list[int]
    transposed: bool
    output_padding: list[int]
    groups: int
    input: int  # value index
    weight: int  # constant index
    bias: int | None  # constant index or None
    output: int  # value index
    weight_sizes: list[int]  # the weight's ATen shape (layout rule input), not the prepared one
    weight_strides: list[int]
    template: str = ""
    schedule: str = ""
    launches: list[LaunchRecord] = field(default_factory=list)


@dataclass
class DelegateBlob:
    triton_version: str
    archs: list[int]
    num_inputs: int
    num_outputs: int
    values: list[ValueRecord] = field(default_factory=list)
    constants: list[ConstantRecord] = field(default_factory=list)
    kernels: list[KernelRecord] = field(default_factory=list)
    ops: list[OpRecord] = field(default_factory=list)
    flags: int = 0  # reserved, must be 0


# ---- validation ---------------------------------------------------------------------------------------------
def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise BlobError(msg)


def _u32_ok(x: int) -> bool:
    return isinstance(x, int) and 0 <= x < (1 << 32)


def _check_dims(what: str, sizes: list[int], strides: list[int] | None) -> None:
    _check(len(sizes) <= MAX_RANK, f"{what}: rank {len(sizes)} > {MAX_RANK}")
    _check(all(isinstance(s, int) and 0 <= s < (1 << 62) for s in sizes), f"{what}: bad sizes {sizes}")
    if strides is not None:
        _check(len(strides) == len(sizes), f"{what}: {len(sizes)} sizes but {len(strides)} strides")
        _check(
            all(isinstance(s, int) and 0 <= s < (1 << 62) for s in strides), f"{what}: bad strides {strides}"
        )


def _ascii_ok(s: str, allow_empty: bool = True) -> bool:
    return (allow_empty or len(s) > 0) and len(s) <= MAX_STRING and all(" " <= ch <= "~" for ch in s)


def _storage_bytes(dtype: str, sizes: list[int], strides: list[int]) -> int:
    if any(s == 0 for s in sizes):
        return 0
    span = 1 + sum((s - 1) * st for s, st in zip(sizes, strides, strict=True))
    return span * ELEMENT_SIZE[dtype]


def _same_layout(sa: list[int], sta: list[int], sb: list[int], stb: list[int]) -> bool:
    """Same sizes and the same strides on every dim of size > 1 (the C++ runtime's `same_layout`)."""
    return list(sa) == list(sb) and all(s <= 1 or x == y for s, x, y in zip(sa, sta, stb, strict=True))


def _output_layout(
    op: OpRecord, dtype: str, sizes: list[int], strides: list[int]
) -> tuple[list[int], list[int]]:
    from cuda_triton.conv.layout import out_shape_and_stride  # pure Python; imported lazily

    return out_shape_and_stride(
        list(sizes), list(strides), list(op.weight_sizes), list(op.weight_strides), list(op.stride),
        list(op.padding_before), list(op.padding_after), list(op.dilation), op.transposed,
        list(op.output_padding), op.groups, dtype == "fp64",
    )  # fmt: skip


def validate(blob: DelegateBlob) -> None:
    """Every check the C++ reader (runtime/blob/blob_reader.cpp) makes; raises `BlobError` with the first problem.

    Besides ranges and cross-references this includes the plan's consistency: ops read only delegate inputs
    or values an earlier op wrote, every delegate output is written, channels match the weight, and each op's
    recorded output layout is what the layout rule (`cuda_triton.conv.layout`) gives for its input.
    """
    _check(blob.flags == 0, f"flags must be 0 in format version {FORMAT_VERSION}")
    _check(_ascii_ok(blob.triton_version), "triton_version must be printable ASCII")
    _check(0 < len(blob.archs) <= 64, "no target archs")
    _check(len(set(blob.archs)) == len(blob.archs), f"duplicate archs {blob.archs}")
    _check(all(_u32_ok(a) for a in blob.archs), f"bad archs {blob.archs}")
    _check(
        0 <= blob.num_inputs <= MAX_COUNT and 0 <= blob.num_outputs <= MAX_COUNT, "bad input/output counts"
    )
    for name, table in (("kernels", blob.kernels), ("values", blob.values), ("constants", blob.constants)):
        _check(len(table) <= MAX_COUNT, f"too many {name}")
    _check(len(blob.ops) <= MAX_COUNT, "too many ops")

    for k, kr in enumerate(blob.kernels):
        w = f"kernel {k} ({kr.name})"
        _check(_ascii_ok(kr.name, allow_empty=False), f"{w}: name must be non-empty printable ASCII")
        _check(kr.arch in blob.archs, f"{w}: arch {kr.arch} not among the blob's archs {blob.archs}")
        _check(
            _ascii_ok(kr.cubin_key, allow_empty=False), f"{w}: cubin key must be non-empty printable ASCII"
        )
        _check(
            isinstance(kr.cubin_size, int) and 0 < kr.cubin_size < MAX_CUBIN,
            f"{w}: cubin size {kr.cubin_size}",
        )
        _check(
            kr.cubin is None or len(kr.cubin) == kr.cubin_size,
            f"{w}: cubin has {0 if kr.cubin is None else len(kr.cubin)} bytes, the record says {kr.cubin_size}",
        )
        _check(1 <= kr.num_warps <= 32, f"{w}: num_warps {kr.num_warps}")
        _check(1 <= kr.num_ctas <= 16, f"{w}: num_ctas {kr.num_ctas}")
        for attr in ("shared", "global_scratch_size", "profile_scratch_size"):
            _check(_u32_ok(getattr(kr, attr)), f"{w}: bad {attr}")
        for attr in ("global_scratch_align", "profile_scratch_align"):
            v = getattr(kr, attr)
            _check(_u32_ok(v) and v >= 1 and (v & (v - 1)) == 0, f"{w}: {attr} {v} not a power of two")
        _check(len(kr.param_types) <= 1024, f"{w}: too many params")
        _check(all(t in PARAM_TYPES for t in kr.param_types), f"{w}: bad param types {kr.param_types}")

    io_seen: set[tuple[str, int]] = set()
    for v, vr in enumerate(blob.values):
        w = f"value {v}"
        _check(vr.kind in VALUE_KINDS, f"{w}: bad kind {vr.kind!r}")
        _check(vr.dtype in DTYPES, f"{w}: bad dtype {vr.dtype!r}")
        _check_dims(w, vr.sizes, vr.strides)
        _check(_storage_bytes(vr.dtype, vr.sizes, vr.strides) < (1 << 48), f"{w}: storage too large")
        if vr.kind == "input":
            _check(0 <= vr.index < blob.num_inputs, f"{w}: input index {vr.index} out of range")
        elif vr.kind == "output":
            _check(0 <= vr.index < blob.num_outputs, f"{w}: output index {vr.index} out of range")
        else:
            _check(vr.index == 0, f"{w}: intermediates have index 0")
        if vr.kind != "intermediate":
            _check((vr.kind, vr.index) not in io_seen, f"{w}: {vr.kind} {vr.index} described twice")
            io_seen.add((vr.kind, vr.index))
    for i in range(blob.num_outputs):
        _check(("output", i) in io_seen, f"delegate output {i} has no value record")

    for c, cr in enumerate(blob.constants):
        w = f"constant {c} ({cr.key})"
        _check(_ascii_ok(cr.key, allow_empty=False), f"{w}: key must be non-empty printable ASCII")
        _check(cr.dtype in DTYPES, f"{w}: bad dtype {cr.dtype!r}")
        _check_dims(w, cr.sizes, None)
        _check(
            cr.nbytes == math.prod(cr.sizes) * ELEMENT_SIZE[cr.dtype],
            f"{w}: nbytes {cr.nbytes} != prod(sizes {cr.sizes}) * {ELEMENT_SIZE[cr.dtype]}",
        )

    produced = [vr.kind == "input" for vr in blob.values]
    for o, op in enumerate(blob.ops):
        w = f"op {o}"
        n = len(op.stride)
        _check(1 <= n <= 3, f"{w}: {n} spatial dims")
        for attr in ("padding_before", "padding_after", "dilation", "output_padding"):
            _check(
                len(getattr(op, attr)) == n, f"{w}: {attr} has {len(getattr(op, attr))} entries, expected {n}"
            )
        for attr in ("stride", "padding_before", "padding_after", "dilation", "output_padding"):
            lo = 1 if attr in ("stride", "dilation") else 0
            _check(
                all(isinstance(x, int) and lo <= x < (1 << 31) for x in getattr(op, attr)), f"{w}: bad {attr}"
            )
        _check(1 <= op.groups < (1 << 31), f"{w}: bad groups {op.groups}")
        _check(0 <= op.input < len(blob.values), f"{w}: input value {op.input} out of range")
        _check(0 <= op.output < len(blob.values), f"{w}: output value {op.output} out of range")
        _check(0 <= op.weight < len(blob.constants), f"{w}: weight constant {op.weight} out of range")
        _check(
            op.bias is None or 0 <= op.bias < len(blob.constants),
            f"{w}: bias constant {op.bias} out of range",
        )
        inp, out = blob.values[op.input], blob.values[op.output]
        _check(out.kind != "input", f"{w}: writes a delegate input")
        _check(produced[op.input], f"{w}: reads value {op.input} before any op produces it")
        _check(inp.dtype == out.dtype, f"{w}: input is {inp.dtype} but output is {out.dtype}")
        _check(len(op.weight_sizes) == n + 2, f"{w}: weight rank {len(op.weight_sizes)} != {n + 2}")
        _check_dims(f"{w} weight", op.weight_sizes, op.weight_strides)
        _check(len(inp.sizes) in (n + 1, n + 2), f"{w}: input rank {len(inp.sizes)} for a {n}-D conv")
        in_channels = inp.sizes[1 if len(inp.sizes) == n + 2 else 0]
        expect = op.weight_sizes[0] if op.transposed else op.weight_sizes[1] * op.groups
        _check(in_channels == expect, f"{w}: input has {in_channels} channels, weight expects {expect}")
        try:
            sizes, strides = _output_layout(op, inp.dtype, inp.sizes, inp.strides)
        except (IndexError, ZeroDivisionError) as e:
            raise BlobError(f"{w}: layout rule failed: {e}") from e
        _check(all(s >= 0 for s in sizes), f"{w}: the conv's output would have a negative size {sizes}")
        _check(all(abs(x) < (1 << 63) for x in sizes + strides), f"{w}: layout rule overflows int64")
        _check(
            _same_layout(sizes, strides, out.sizes, out.strides),
            f"{w}: the layout rule gives an output of sizes {sizes} strides {strides}, "
            f"the plan records sizes {out.sizes} strides {out.strides}",
        )
        _check(len(op.template) <= MAX_STRING and len(op.schedule) <= MAX_STRING, f"{w}: name too long")
        _check(_ascii_ok(op.template) and _ascii_ok(op.schedule), f"{w}: names must be printable ASCII")
        _check(len(op.launches) <= MAX_COUNT, f"{w}: too many launches")
        for li, lr in enumerate(op.launches):
            lw = f"{w} launch {li}"
            _check(
                sorted(lr.kernels) == sorted(blob.archs),
                f"{lw}: kernels for archs {sorted(lr.kernels)}, blob targets {sorted(blob.archs)}",
            )
            _check(
                len(lr.grid) == 3 and all(_u32_ok(g) and g >= 1 for g in lr.grid), f"{lw}: bad grid {lr.grid}"
            )
            _check(lr.grid[1] <= 65535 and lr.grid[2] <= 65535, f"{lw}: grid y/z above 65535: {lr.grid}")
            _check(len(lr.args) <= 1024, f"{lw}: too many args")
            for arch, ki in lr.kernels.items():
                _check(0 <= ki < len(blob.kernels), f"{lw}: kernel {ki} out of range")
                kr = blob.kernels[ki]
                _check(kr.arch == arch, f"{lw}: kernel {ki} is for arch {kr.arch}, listed under {arch}")
                _check(
                    len(kr.param_types) == len(lr.args),
                    f"{lw}: {len(lr.args)} args for kernel {kr.name} with {len(kr.param_types)} params",
                )
                _check(lr.grid[0] * kr.num_ctas <= 0x7FFFFFFF, f"{lw}: grid x * num_ctas too large")
                for ai, (t, a) in enumerate(zip(kr.param_types, lr.args, strict=True)):
                    _check_arg(f"{lw} arg {ai}", t, a, blob)
        produced[op.output] = True
    for v, vr in enumerate(blob.values):
        _check(vr.kind != "output" or produced[v], f"delegate output {vr.index} is never written")


def _check_no_duplicate_kernels(blob: DelegateBlob) -> None:
    """Writer-only lint: identical kernels must appear once per arch (deduplicate before writing)."""
    seen: set[tuple[int, str, str]] = set()
    for k, kr in enumerate(blob.kernels):
        key = (kr.arch, kr.cubin_key, kr.name)
        _check(key not in seen, f"kernel {k} ({kr.name}): duplicate kernel (same arch, name and cubin)")
        seen.add(key)


def named_cubins(blob: DelegateBlob) -> dict[str, bytes]:
    """``{cubin_key: cubin}`` of every kernel: the named data the blob needs besides its constants."""
    out: dict[str, bytes] = {}
    for k, kr in enumerate(blob.kernels):
        _check(kr.cubin is not None, f"kernel {k} ({kr.name}): no cubin bytes to store")
        assert kr.cubin is not None
        _check(out.get(kr.cubin_key, kr.cubin) == kr.cubin, f"kernel {k}: cubin key {kr.cubin_key} reused")
        out[kr.cubin_key] = kr.cubin
    return out


def _check_arg(w: str, t: str, a: Arg, blob: DelegateBlob) -> None:
    if t == "ptr":
        _check(isinstance(a, ValueRef | ConstantRef | NullPtr), f"{w}: pointer parameter given {a!r}")
        if isinstance(a, ValueRef):
            _check(0 <= a.value < len(blob.values), f"{w}: value {a.value} out of range")
        if isinstance(a, ConstantRef):
            _check(0 <= a.constant < len(blob.constants), f"{w}: constant {a.constant} out of range")
        return
    _check(isinstance(a, Scalar) and a.type == t, f"{w}: {t} parameter given {a!r}")
    assert isinstance(a, Scalar)
    if t == "i32":
        _check(isinstance(a.value, int) and -(1 << 31) <= a.value < (1 << 31), f"{w}: i32 out of range")
    elif t == "i64":
        _check(isinstance(a.value, int) and -(1 << 63) <= a.value < (1 << 63), f"{w}: i64 out of range")
    else:
        _check(isinstance(a.value, int | float), f"{w}: fp32 value {a.value!r}")


# ---- writer -------------------------------------------------------------------------------------------------
class _W:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def raw(self, b: bytes) -> None:
        self.parts.append(b)

    def u8(self, x: int) -> None:
        self.raw(struct.pack("<B", x))

    def u32(self, x: int) -> None:
        self.raw(struct.pack("<I", x))

    def i32(self, x: int) -> None:
        self.raw(struct.pack("<i", x))

    def u64(self, x: int) -> None:
        self.raw(struct.pack("<Q", x))

    def i64(self, x: int) -> None:
        self.raw(struct.pack("<q", x))

    def f32(self, x: float) -> None:
        self.raw(struct.pack("<f", x))

    def string(self, s: str) -> None:
        b = s.encode()
        self.u32(len(b))
        self.raw(b)

    def i64s(self, xs: list[int]) -> None:
        self.u32(len(xs))
        for x in xs:
            self.i64(x)

    def bytes(self) -> bytes:
        return b"".join(self.parts)


def _write_kernel(w: _W, k: KernelRecord) -> None:
    w.string(k.name)
    w.u32(k.arch)
    w.u32(k.num_warps)
    w.u32(k.num_ctas)
    w.u32(k.shared)
    w.u32(k.global_scratch_size)
    w.u32(k.global_scratch_align)
    w.u32(k.profile_scratch_size)
    w.u32(k.profile_scratch_align)
    w.u32(
        (KERNEL_FLAG_COOPERATIVE if k.launch_cooperative_grid else 0)
        | (KERNEL_FLAG_PDL if k.launch_pdl else 0)
    )
    w.u32(len(k.param_types))
    for t in k.param_types:
        w.u8(PARAM_TYPES.index(t))
    w.string(k.cubin_key)
    w.u64(k.cubin_size)


def _write_value(w: _W, v: ValueRecord) -> None:
    w.u8(VALUE_KINDS.index(v.kind))
    w.u8(DTYPES.index(v.dtype))
    w.u32(v.index)
    w.i64s(v.sizes)
    w.i64s(v.strides)


def _write_constant(w: _W, c: ConstantRecord) -> None:
    w.string(c.key)
    w.u8(DTYPES.index(c.dtype))
    w.u64(c.nbytes)
    w.i64s(c.sizes)


def _write_arg(w: _W, a: Arg) -> None:
    if isinstance(a, ValueRef):
        w.u8(ARG_VALUE)
        w.u64(a.value)
    elif isinstance(a, ConstantRef):
        w.u8(ARG_CONSTANT)
        w.u64(a.constant)
    elif isinstance(a, NullPtr):
        w.u8(ARG_NULL)
        w.u64(0)
    elif a.type == "i32":
        w.u8(ARG_I32)
        w.i64(int(a.value))
    elif a.type == "i64":
        w.u8(ARG_I64)
        w.i64(int(a.value))
    else:
        w.u8(ARG_FP32)
        w.f32(float(a.value))
        w.u32(0)


def _write_op(w: _W, op: OpRecord) -> None:
    w.i64s(op.stride)
    w.i64s(op.padding_before)
    w.i64s(op.padding_after)
    w.i64s(op.dilation)
    w.i64s(op.output_padding)
    w.u8(1 if op.transposed else 0)
    w.i64(op.groups)
    w.u32(op.input)
    w.u32(op.weight)
    w.u32(NO_BIAS if op.bias is None else op.bias)
    w.u32(op.output)
    w.i64s(op.weight_sizes)
    w.i64s(op.weight_strides)
    w.string(op.template)
    w.string(op.schedule)
    w.u32(len(op.launches))
    for lr in op.launches:
        w.u32(len(lr.kernels))
        for arch in sorted(lr.kernels):
            w.u32(arch)
            w.u32(lr.kernels[arch])
        for g in lr.grid:
            w.u32(g)
        w.u32(len(lr.args))
        for a in lr.args:
            _write_arg(w, a)


def serialize(blob: DelegateBlob) -> bytes:
    """The blob's bytes (format in docs/blob_format.md). Validates first; raises `BlobError`."""
    validate(blob)
    _check_no_duplicate_kernels(blob)
    body = _W()
    for tag, items, fn in (
        (SECTION_KERNELS, blob.kernels, _write_kernel),
        (SECTION_VALUES, blob.values, _write_value),
        (SECTION_CONSTANTS, blob.constants, _write_constant),
        (SECTION_OPS, blob.ops, _write_op),
    ):
        sec = _W()
        sec.u32(len(items))
        for item in items:
            fn(sec, item)  # type: ignore[operator]
        payload = sec.bytes()
        body.raw(tag)
        body.u64(len(payload))
        body.raw(payload)

    head = _W()
    head.string(blob.triton_version)
    head.u32(blob.flags)
    head.u32(len(blob.archs))
    for a in blob.archs:
        head.u32(a)
    head.u32(blob.num_inputs)
    head.u32(blob.num_outputs)
    rest = head.bytes() + body.bytes()
    total = 4 + 4 + 8 + len(rest)
    return MAGIC + struct.pack("<IQ", FORMAT_VERSION, total) + rest


# ---- reader (tests) -----------------------------------------------------------------------------------------
class _R:
    def __init__(self, data: bytes, pos: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end

    def take(self, n: int) -> bytes:
        if n < 0 or self.end - self.pos < n:
            raise BlobError(f"truncated: need {n} bytes at offset {self.pos}, {self.end - self.pos} left")
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def u8(self) -> int:
        return self.take(1)[0]

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def u64(self) -> int:
        return struct.unpack("<Q", self.take(8))[0]

    def i64(self) -> int:
        return struct.unpack("<q", self.take(8))[0]

    def f32(self) -> float:
        return struct.unpack("<f", self.take(4))[0]

    def count(self, what: str, limit: int = MAX_COUNT) -> int:
        n = self.u32()
        if n > limit:
            raise BlobError(f"{what}: count {n} exceeds {limit}")
        return n

    def string(self) -> str:
        n = self.count("string", MAX_STRING)
        try:
            return self.take(n).decode()
        except UnicodeDecodeError as e:
            raise BlobError(f"bad UTF-8 string: {e}") from e

    def i64s(self) -> list[int]:
        n = self.count("dims", MAX_RANK)
        return [self.i64() for _ in range(n)]

    def enum(self, names: tuple[str, ...], what: str) -> str:
        c = self.u8()
        if c >= len(names):
            raise BlobError(f"bad {what} code {c}")
        return names[c]


def _read_kernel(r: _R) -> KernelRecord:
    name = r.string()
    arch, nw, nc, shared, gss, gsa, pss, psa, flags = (r.u32() for _ in range(9))
    if flags & ~(KERNEL_FLAG_COOPERATIVE | KERNEL_FLAG_PDL):
        raise BlobError(f"kernel {name}: unknown flags {flags:#x}")
    n = r.count("params", 1024)
    params = [r.enum(PARAM_TYPES, "param type") for _ in range(n)]
    cubin_key = r.string()
    cubin_size = r.u64()
    return KernelRecord(
        name, arch, None, nw, nc, shared, gss, gsa, pss, psa,
        bool(flags & KERNEL_FLAG_COOPERATIVE), bool(flags & KERNEL_FLAG_PDL), params, cubin_key, cubin_size,
    )  # fmt: skip


def _read_value(r: _R) -> ValueRecord:
    kind = r.enum(VALUE_KINDS, "value kind")
    dtype = r.enum(DTYPES, "dtype")
    index = r.u32()
    return ValueRecord(kind, index, dtype, r.i64s(), r.i64s())


def _read_constant(r: _R) -> ConstantRecord:
    key = r.string()
    dtype = r.enum(DTYPES, "dtype")
    nbytes = r.u64()
    return ConstantRecord(key, nbytes, dtype, r.i64s())


def _read_arg(r: _R) -> Arg:
    tag = r.u8()
    if tag == ARG_VALUE:
        return ValueRef(r.u64())
    if tag == ARG_CONSTANT:
        return ConstantRef(r.u64())
    if tag == ARG_NULL:
        r.u64()
        return NullPtr()
    if tag == ARG_I32:
        return Scalar("i32", r.i64())
    if tag == ARG_I64:
        return Scalar("i64", r.i64())
    if tag == ARG_FP32:
        v = r.f32()
        r.u32()
        return Scalar("fp32", v)
    raise BlobError(f"bad argument tag {tag}")


def _read_op(r: _R) -> OpRecord:
    stride, pb, pa, dil, op_ = r.i64s(), r.i64s(), r.i64s(), r.i64s(), r.i64s()
    transposed = r.u8()
    if transposed > 1:
        raise BlobError(f"bad transposed flag {transposed}")
    groups = r.i64()
    inp, weight, bias, out = r.u32(), r.u32(), r.u32(), r.u32()
    ws, wst = r.i64s(), r.i64s()
    template, schedule = r.string(), r.string()
    launches = []
    for _ in range(r.count("launches")):
        kernels = {}
        for _ in range(r.count("launch archs", 64)):
            arch = r.u32()
            if arch in kernels:
                raise BlobError(f"launch lists arch {arch} twice")
            kernels[arch] = r.u32()
        grid = (r.u32(), r.u32(), r.u32())
        args = [_read_arg(r) for _ in range(r.count("args", 1024))]
        launches.append(LaunchRecord(kernels, grid, args))
    return OpRecord(
        stride, pb, pa, dil, bool(transposed), op_, groups, inp, weight,
        None if bias == NO_BIAS else bias, out, ws, wst, template, schedule, launches,
    )  # fmt: skip


def deserialize(data: bytes, named_data: Mapping[str, bytes] | None = None) -> DelegateBlob:
    """Parse and validate a blob written by `serialize`; raises `BlobError` on anything malformed.

    With ``named_data`` (the program's named data, key -> bytes) each kernel's ``cubin`` is filled in from it,
    as the runtime does at init: a missing key or a size other than the record's is an error. Without it,
    ``cubin`` is None.
    """
    data = bytes(data)
    r = _R(data)
    if r.take(4) != MAGIC:
        raise BlobError("bad magic (not a CudaTritonBackend blob)")
    version = r.u32()
    if version != FORMAT_VERSION:
        raise BlobError(f"format version {version}, this reader supports {FORMAT_VERSION}")
    total = r.u64()
    if total != len(data):
        raise BlobError(f"blob says {total} bytes, got {len(data)}")
    triton_version = r.string()
    flags = r.u32()
    archs = [r.u32() for _ in range(r.count("archs", 64))]
    num_inputs, num_outputs = r.u32(), r.u32()
    tables: dict[bytes, list[Any]] = {}
    readers = {
        SECTION_KERNELS: _read_kernel,
        SECTION_VALUES: _read_value,
        SECTION_CONSTANTS: _read_constant,
        SECTION_OPS: _read_op,
    }
    for tag in SECTIONS:
        got = r.take(4)
        if got != tag:
            raise BlobError(f"expected section {tag!r}, found {got!r}")
        length = r.u64()
        if length > r.end - r.pos:
            raise BlobError(f"section {tag!r} length {length} past the end")
        sec = _R(data, r.pos, r.pos + length)
        tables[tag] = [readers[tag](sec) for _ in range(sec.count(tag.decode()))]
        if sec.pos != sec.end:
            raise BlobError(f"section {tag!r}: {sec.end - sec.pos} trailing bytes")
        r.pos = sec.end
    if r.pos != r.end:
        raise BlobError(f"{r.end - r.pos} trailing bytes")
    blob = DelegateBlob(
        triton_version, archs, num_inputs, num_outputs,
        tables[SECTION_VALUES], tables[SECTION_CONSTANTS], tables[SECTION_KERNELS], tables[SECTION_OPS], flags,
    )  # fmt: skip
    validate(blob)
    if named_data is not None:
        for k, kr in enumerate(blob.kernels):
            cubin = named_data.get(kr.cubin_key)
            _check(
                cubin is not None, f"kernel {k} ({kr.name}): cubin {kr.cubin_key} is not in the named data"
            )
            assert cubin is not None
            _check(
                len(cubin) == kr.cubin_size,
                f"kernel {k} ({kr.name}): cubin {kr.cubin_key} has {len(cubin)} bytes, the record says {kr.cubin_size}",
            )
            kr.cubin = bytes(cubin)
    return blob
