"""The blob's byte-level encoding (docs/blob_format.md, "Encoding"): limits, enum codes, and the little-endian
writer and bounds-checked reader every section and record kind is built from.

Torch-free; the C++ twin is runtime/blob/encoding.h.
"""

from __future__ import annotations

import math
import struct

MAGIC = b"CTRB"
FORMAT_VERSION = 6
# magic, version, total size and the SHA-256 of every byte after it (docs/blob_format.md, "Layout").
HEADER_BYTES = 4 + 4 + 8 + 32

DTYPES = ("fp16", "bf16", "fp32", "fp64", "int32", "int64", "bool")  # code = index
ELEMENT_SIZE = {"fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8, "int32": 4, "int64": 8, "bool": 1}
PARAM_TYPES = ("ptr", "i32", "i64", "fp32")  # code = index

# Hard limits (the C++ reader enforces the same): a malformed blob cannot ask for absurd allocations.
MAX_RANK = 8
MAX_INTS = 1024
MAX_COUNT = 1 << 20
MAX_STRING = 1 << 16
MAX_NAME = 1024  # an op record's profiling name
MAX_OP_NAME = 64  # a reduction's or an elementwise step's op
MAX_PARAMS = 1024  # kernel parameters, launch arguments
MAX_ARCHS = 64
MAX_OPERANDS = 1024  # inputs / outputs of one op record
MAX_STEPS = 256
MAX_STEP_OPERANDS = 8
MAX_DIM = 1 << 62  # exclusive bound on sizes and strides
MAX_SPAN = 1 << 48  # exclusive bound on a value's span and the arena's and state buffer's sizes
MIN_ARENA_ALIGNMENT, MAX_ARENA_ALIGNMENT = 16, 256  # also the alignment of state offsets
VIEW_ALIGNMENT = 16  # every pointer a kernel receives is 16-byte aligned


class BlobError(ValueError):
    """A blob that cannot be written or read, with the reason."""


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise BlobError(msg)


def u32_ok(x: object) -> bool:
    return isinstance(x, int) and 0 <= x < (1 << 32)


def i64_ok(x: object) -> bool:
    return isinstance(x, int) and -(1 << 63) <= x < (1 << 63)


def ascii_ok(s: object, limit: int = MAX_STRING, allow_empty: bool = True) -> bool:
    return (
        isinstance(s, str)
        and (allow_empty or len(s) > 0)
        and len(s) <= limit
        and all(" " <= ch <= "~" for ch in s)
    )


def finite(x: object) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def is_pow2(x: int) -> bool:
    return isinstance(x, int) and x >= 1 and (x & (x - 1)) == 0


class Writer:
    """Little-endian byte writer."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def raw(self, b: bytes) -> None:
        self.parts.append(b)

    def u8(self, x: int) -> None:
        self.raw(struct.pack("<B", x))

    def u32(self, x: int) -> None:
        self.raw(struct.pack("<I", x))

    def u64(self, x: int) -> None:
        self.raw(struct.pack("<Q", x))

    def i64(self, x: int) -> None:
        self.raw(struct.pack("<q", x))

    def f32(self, x: float) -> None:
        self.raw(struct.pack("<f", x))

    def f64(self, x: float) -> None:
        self.raw(struct.pack("<d", x))

    def flag(self, x: bool) -> None:
        self.u8(1 if x else 0)

    def string(self, s: str) -> None:
        b = s.encode()
        self.u32(len(b))
        self.raw(b)

    def i64s(self, xs: list[int]) -> None:
        """``dims`` and ``ints``: a u32 count and the i64 entries."""
        self.u32(len(xs))
        for x in xs:
            self.i64(x)

    def f64s(self, xs: list[float]) -> None:
        self.u32(len(xs))
        for x in xs:
            self.f64(x)

    def bytes(self) -> bytes:
        return b"".join(self.parts)


class Reader:
    """Bounds-checked little-endian reader over ``data[pos:end]``; every failure is a `BlobError`."""

    def __init__(self, data: bytes, pos: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.end - self.pos < n:
            raise BlobError(f"truncated: need {n} bytes at offset {self.pos}, {self.end - self.pos} left")
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def sub(self, length: int, what: str) -> Reader:
        """A reader over the next ``length`` bytes (which this one skips)."""
        if length > self.remaining():
            raise BlobError(f"{what} of {length} bytes runs past the end")
        r = Reader(self.data, self.pos, self.pos + length)
        self.pos += length
        return r

    def done(self, what: str) -> None:
        if self.pos != self.end:
            raise BlobError(f"{what}: {self.end - self.pos} trailing bytes")

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

    def f64(self) -> float:
        return struct.unpack("<d", self.take(8))[0]

    def flag(self, what: str) -> bool:
        v = self.u8()
        if v > 1:
            raise BlobError(f"bad {what} flag {v}")
        return v == 1

    def count(self, what: str, limit: int = MAX_COUNT) -> int:
        n = self.u32()
        if n > limit:
            raise BlobError(f"{what}: count {n} exceeds {limit}")
        return n

    def string(self, what: str = "string", limit: int = MAX_STRING) -> str:
        n = self.count(what, limit)
        b = self.take(n)
        if any(c < 0x20 or c > 0x7E for c in b):
            raise BlobError(f"{what} is not printable ASCII")
        return b.decode()

    def dims(self, what: str = "dims") -> list[int]:
        n = self.count(what, MAX_RANK)
        return [self.i64() for _ in range(n)]

    def ints(self, what: str = "ints") -> list[int]:
        n = self.count(what, MAX_INTS)
        return [self.i64() for _ in range(n)]

    def f64s(self, what: str, limit: int = MAX_RANK) -> list[float]:
        n = self.count(what, limit)
        return [self.f64() for _ in range(n)]

    def enum(self, names: tuple[str, ...], what: str) -> str:
        c = self.u8()
        if c >= len(names):
            raise BlobError(f"bad {what} code {c}")
        return names[c]


def check_dims(what: str, sizes: list[int], strides: list[int] | None) -> None:
    """Rank <= 8 and every size (and stride) in [0, 2^62)."""
    check(
        isinstance(sizes, list | tuple) and len(sizes) <= MAX_RANK, f"{what}: rank {len(sizes)} > {MAX_RANK}"
    )
    check(all(isinstance(s, int) and 0 <= s < MAX_DIM for s in sizes), f"{what}: bad sizes {sizes}")
    if strides is not None:
        check(len(strides) == len(sizes), f"{what}: {len(sizes)} sizes but {len(strides)} strides")
        check(all(isinstance(s, int) and 0 <= s < MAX_DIM for s in strides), f"{what}: bad strides {strides}")


def span_bytes(dtype: str, sizes: list[int], strides: list[int]) -> int:
    """Bytes a strided tensor reaches from its first element: (1 + sum((size - 1) * stride)) * element size, 0 if
    a size is 0."""
    if any(s == 0 for s in sizes):
        return 0
    return (1 + sum((s - 1) * st for s, st in zip(sizes, strides, strict=True))) * ELEMENT_SIZE[dtype]
