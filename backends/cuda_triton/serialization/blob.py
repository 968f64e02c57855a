"""The delegate blob: `DelegateBlob`, the ONE writer (`serialize`) and the pure-Python reader (`deserialize`).

The C++ runtime (runtime/blob/) is the one production reader; docs/blob_format.md documents every byte and has
an example of the API. Records of each op kind live in `cuda_triton.serialization.records`, the checks both
readers make in `validation`, the arena planner in `arena`.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

from .encoding import FORMAT_VERSION, HEADER_BYTES, MAGIC, MAX_ARCHS, BlobError, Reader, Writer, check
from .records import RECORD_KINDS, ConstantRef, ConvRecord, LaunchRecord, NullPtr, OpRecord, Scalar, ValueRef
from .records.base import decode_record, encode_record
from .sections import ConstantRecord, KernelRecord, ValueRecord, cubin_named_key
from .validation import validate

# The names a preprocess needs, importable from here as well as from the package.
__all__ = [
    "FORMAT_VERSION",
    "seal",
    "BlobError",
    "ConstantRecord",
    "ConstantRef",
    "ConvRecord",
    "DelegateBlob",
    "KernelRecord",
    "LaunchRecord",
    "NullPtr",
    "OpRecord",
    "Scalar",
    "ValueRecord",
    "ValueRef",
    "cubin_named_key",
    "deserialize",
    "named_cubins",
    "serialize",
]

SECTIONS = (b"KERN", b"VALS", b"CNST", b"OPS_")


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
    arena_size: int = 0  # `arena.plan_arena` sets it with the intermediates' offsets
    arena_alignment: int = 256
    flags: int = 0  # reserved, must be 0
    state_size: int = 0  # `arena.plan_arena` sets it with the state values' offsets


def _check_no_duplicate_kernels(blob: DelegateBlob) -> None:
    """Writer-only lint: identical kernels must appear once per arch (deduplicate before writing)."""
    seen: set[tuple[int, str, str]] = set()
    for k, kr in enumerate(blob.kernels):
        key = (kr.arch, kr.cubin_key, kr.name)
        check(key not in seen, f"kernel {k} ({kr.name}): duplicate kernel (same arch, name and cubin)")
        seen.add(key)


def named_cubins(blob: DelegateBlob) -> dict[str, bytes]:
    """``{cubin_key: cubin}`` of every kernel: the named data the blob needs besides its constants."""
    out: dict[str, bytes] = {}
    for k, kr in enumerate(blob.kernels):
        check(kr.cubin is not None, f"kernel {k} ({kr.name}): no cubin bytes to store")
        assert kr.cubin is not None
        check(out.get(kr.cubin_key, kr.cubin) == kr.cubin, f"kernel {k}: cubin key {kr.cubin_key} reused")
        out[kr.cubin_key] = kr.cubin
    return out


def serialize(blob: DelegateBlob) -> bytes:
    """The blob's bytes (format in docs/blob_format.md). Validates first; raises `BlobError`."""
    validate(blob)
    _check_no_duplicate_kernels(blob)
    return _encode(blob)


def _encode(blob: DelegateBlob) -> bytes:
    """The bytes of ``blob`` without validating it (tests use it to feed the readers invalid plans)."""
    try:
        body = Writer()
        for tag, items in zip(SECTIONS, (blob.kernels, blob.values, blob.constants, blob.ops), strict=True):
            sec = Writer()
            sec.u32(len(items))
            for item in items:
                if isinstance(item, OpRecord):
                    encode_record(sec, item)
                else:
                    item.encode(sec)
            payload = sec.bytes()
            body.raw(tag)
            body.u64(len(payload))
            body.raw(payload)
        head = Writer()
        head.string(blob.triton_version)
        head.u32(blob.flags)
        head.u32(len(blob.archs))
        for a in blob.archs:
            head.u32(a)
        head.u32(blob.num_inputs)
        head.u32(blob.num_outputs)
        head.u64(blob.arena_size)
        head.u32(blob.arena_alignment)
        head.u64(blob.state_size)
    except struct.error as e:
        raise BlobError(f"a field does not fit its encoding: {e}") from e
    rest = head.bytes() + body.bytes()
    return seal(MAGIC + struct.pack("<IQ", FORMAT_VERSION, HEADER_BYTES + len(rest)) + bytes(32) + rest)


def seal(data: bytes) -> bytes:
    """``data`` with its header's SHA-256 set to the digest of its bytes after the header.

    The writer seals every blob; tests that edit a field of a written blob re-seal it to reach the checks behind
    the digest.
    """
    data = bytes(data)
    return data[: HEADER_BYTES - 32] + hashlib.sha256(data[HEADER_BYTES:]).digest() + data[HEADER_BYTES:]


def deserialize(data: bytes, named_data: Mapping[str, bytes] | None = None) -> DelegateBlob:
    """Parse and validate a blob written by `serialize`; raises `BlobError` on anything malformed.

    With ``named_data`` (the program's named data, key -> bytes) each kernel's ``cubin`` is filled in from it,
    as the runtime does at init: a missing key or a size other than the record's is an error. Without it,
    ``cubin`` is None.
    """
    data = bytes(data)
    r = Reader(data)
    if r.take(4) != MAGIC:
        raise BlobError("bad magic (not a CudaTritonBackend blob)")
    version = r.u32()
    if version != FORMAT_VERSION:
        raise BlobError(
            f"CudaTritonBackend blob format version {version}, this reader reads version {FORMAT_VERSION}; "
            "re-export the model with this version of cuda_triton"
        )
    total = r.u64()
    if total != len(data):
        raise BlobError(f"blob says {total} bytes, got {len(data)}")
    digest = r.take(32)
    if hashlib.sha256(data[HEADER_BYTES:]).digest() != digest:
        raise BlobError("the blob's bytes do not hash to the SHA-256 its header records (a corrupted blob)")
    triton_version = r.string("triton version")
    flags = r.u32()
    archs = [r.u32() for _ in range(r.count("archs", MAX_ARCHS))]
    num_inputs, num_outputs = r.u32(), r.u32()
    arena_size, arena_alignment = r.u64(), r.u32()
    state_size = r.u64()
    readers = (
        KernelRecord.decode,
        ValueRecord.decode,
        ConstantRecord.decode,
        lambda sec: decode_record(sec, RECORD_KINDS),
    )
    tables: list[list] = []
    for tag, read in zip(SECTIONS, readers, strict=True):
        got = r.take(4)
        if got != tag:
            raise BlobError(f"expected section {tag!r}, found {got!r}")
        sec = r.sub(r.u64(), f"section {tag!r}")
        tables.append([read(sec) for _ in range(sec.count(tag.decode()))])
        sec.done(f"section {tag!r}")
    r.done("blob")
    kernels, values, constants, ops = tables
    blob = DelegateBlob(
        triton_version, archs, num_inputs, num_outputs, values, constants, kernels, ops, arena_size,
        arena_alignment, flags, state_size,
    )  # fmt: skip
    validate(blob)
    if named_data is not None:
        for k, kr in enumerate(blob.kernels):
            cubin = named_data.get(kr.cubin_key)
            check(cubin is not None, f"kernel {k} ({kr.name}): cubin {kr.cubin_key} is not in the named data")
            assert cubin is not None
            check(
                len(cubin) == kr.cubin_size,
                f"kernel {k} ({kr.name}): cubin {kr.cubin_key} has {len(cubin)} bytes, the record says {kr.cubin_size}",
            )
            kr.cubin = bytes(cubin)
    return blob
