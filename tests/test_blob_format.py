"""The delegate blob format (docs/blob_format.md): Python writer/reader round trip, validation of every record kind,
the arena planner, and the C++ reader under mutation.

The C++ reader runs in runtime/tests/blob_fuzz_harness (AddressSanitizer + UBSan): it must accept exactly the
blobs the Python reader accepts, and never crash on thousands of corrupted, truncated or semantically wrong blobs.
"""

from __future__ import annotations

import dataclasses
import random
import struct
import subprocess

import pytest
from blob_cases import conv_chain_blob, every_kind_blob, random_record_blob
from cuda_triton.conv.layout import contiguous_strides
from cuda_triton.serialization import (
    FORMAT_VERSION,
    RECORD_KINDS,
    BlobError,
    ConstantRef,
    DelegateBlob,
    FromInput,
    FromResult,
    FromStep,
    KernelRecord,
    NullPtr,
    Scalar,
    Step,
    ValueRecord,
    ValueRef,
    cubin_named_key,
    deserialize,
    named_cubins,
    plan_arena,
    serialize,
)
from cuda_triton.serialization.blob import _encode, seal
from cuda_triton.serialization.encoding import HEADER_BYTES
from cuda_triton.serialization.validation import live_ranges
from runtime_helpers import blob_stream, ensure_built

KIND_CODES = sorted(RECORD_KINDS)


def _harness(mode: list[str], blobs: list[bytes]) -> str:
    exe = ensure_built() / "blob_fuzz_harness"
    r = subprocess.run([str(exe), *mode], input=blob_stream(blobs), capture_output=True, timeout=600)
    assert r.returncode == 0, f"blob_fuzz_harness crashed (rc={r.returncode}):\n{r.stderr.decode()[-4000:]}"
    return r.stdout.decode()


def _mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(7)
        if kind == 0 and b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif kind == 1 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif kind == 2:
            del b[rng.randrange(len(b) + 1) :]
        elif kind == 3:
            at = rng.randrange(len(b) + 1)
            b[at:at] = rng.randbytes(rng.randint(1, 8))
        elif kind == 4 and len(b) >= 4:
            at = rng.randrange(len(b) - 3)
            b[at : at + 4] = rng.choice([0, 1, 0xFFFFFFFF, 0x7FFFFFFF]).to_bytes(4, "little")
        elif kind == 5 and b:
            b[rng.randrange(len(b))] = rng.randrange(9)  # kind codes, tags, enum fields
        elif kind == 6 and len(b) >= 8:
            at = rng.randrange(len(b) - 7)
            b[at : at + 8] = (16 * rng.randrange(64)).to_bytes(8, "little")  # offsets
    if len(b) >= 16 and rng.random() < 0.5:
        b[8:16] = len(b).to_bytes(8, "little")  # keep the total-size field consistent
        if len(b) >= HEADER_BYTES and rng.random() < 0.9:
            return seal(bytes(b))  # and the digest, so the mutation reaches the tables behind it
    return bytes(b)


def _py_ok(data: bytes) -> bool:
    try:
        deserialize(data)
    except BlobError:
        return False
    return True


def _agree(blobs: list[bytes]) -> tuple[int, list[tuple[bytes, str]]]:
    """How many blobs the Python reader accepts, and where the C++ reader's verdict differs."""
    lines = _harness(["check"], blobs).splitlines()
    assert len(lines) == len(blobs)
    accepted = 0
    disagreements = []
    for data, line in zip(blobs, lines, strict=True):
        ok = _py_ok(data)
        accepted += ok
        if ok != line.startswith("ok "):
            disagreements.append((data, line))
    return accepted, disagreements


def _describe(data: bytes) -> str:
    try:
        deserialize(data)
        return "python: ok"
    except BlobError as e:
        return f"python: {e}"


# ---- the Python side -------------------------------------------------------------------------------------------
def test_round_trip() -> None:
    rng = random.Random(0)
    for i in range(12):
        archs = (80, 90) if i % 2 else (90,)
        for blob in (
            conv_chain_blob(rng, 1 + i % 3, archs),
            every_kind_blob(rng, archs, ("fp32", "fp16", "bf16")[i % 3]),
        ):
            data = serialize(blob)
            assert data[:4] == b"CTRB"
            assert int.from_bytes(data[4:8], "little") == FORMAT_VERSION == 6
            assert int.from_bytes(data[8:16], "little") == len(data)
            assert deserialize(data, named_cubins(blob)) == blob
            back = deserialize(data)  # without the named data: everything but the cubin bytes
            assert [dataclasses.replace(k, cubin=None) for k in blob.kernels] == back.kernels
            assert all(k.cubin not in data for k in blob.kernels if k.cubin)  # cubins are not in the blob


def test_state_values_round_trip_and_are_planned_apart() -> None:
    """State values (kind 4) and the header's state_size survive the writer and the Python reader; plan_arena puts
    them one after the other at aligned offsets, apart from the arena, and sizes the state buffer to hold them."""
    for seed in range(8):
        blob = every_kind_blob(random.Random(seed))
        states = _states(blob)
        assert len(states) == 2 and all(blob.values[v].dtype == "int32" for v in states)
        spans = [4 * blob.values[v].sizes[0] for v in states]
        first, second = (blob.values[v].offset for v in states)
        assert first == 0 and second == -(-spans[0] // blob.arena_alignment) * blob.arena_alignment
        assert blob.state_size == -(-(second + spans[1]) // blob.arena_alignment) * blob.arena_alignment
        back = deserialize(serialize(blob))
        assert back == dataclasses.replace(blob, kernels=back.kernels)
        assert [back.values[v].kind for v in states] == ["state"] * 2
        assert back.state_size == blob.state_size
    # No state values: an empty state buffer.
    blob = random_record_blob(random.Random(0), 1)
    blob.values = [v for v in blob.values if v.kind != "state"]
    assert plan_arena(blob).state_size == 0


def test_every_kind_blob_has_every_kind() -> None:
    blob = every_kind_blob(random.Random(1))
    assert {op.KIND for op in blob.ops} == set(KIND_CODES)
    assert {type(op).__name__ for op in blob.ops if op.KIND == 6} == {
        "CopyRecord", "ReshapeRecord", "PermuteRecord", "CatRecord", "SplitRecord", "SliceRecord", "PadRecord",
        "UpsampleRecord",
    }  # fmt: skip
    assert any(v.kind == "view" for v in blob.values) and blob.num_outputs == 2


def test_cubins_are_named_data() -> None:
    blob = conv_chain_blob(random.Random(7), n_ops=2)
    blob.kernels[1] = dataclasses.replace(
        blob.kernels[1], cubin=blob.kernels[0].cubin, cubin_key="", cubin_size=0
    )
    named = named_cubins(blob)
    assert len(named) == len(blob.kernels) - 1  # two records, one cubin: stored once
    for k in blob.kernels:
        assert (
            k.cubin is not None
            and k.cubin_key == cubin_named_key(k.arch, k.cubin)
            and k.cubin_size == len(k.cubin)
        )
        assert k.cubin_key.startswith(f"cuda_triton/cubin/sm{k.arch}/")
    data = serialize(blob)
    missing = dict(named)
    missing.pop(blob.kernels[2].cubin_key)
    with pytest.raises(BlobError, match="not in the named data"):
        deserialize(data, missing)
    short = dict(named)
    short[blob.kernels[2].cubin_key] = short[blob.kernels[2].cubin_key][:-1]
    with pytest.raises(BlobError, match="bytes, the record says"):
        deserialize(data, short)


def test_kernel_record_from_compiled() -> None:
    @dataclasses.dataclass
    class FakeCompiled:
        name: str = "k"
        arch: int = 90
        cubin: bytes = b"\x7fELF"
        ptx: str = ""
        num_warps: int = 4
        num_ctas: int = 1
        shared: int = 0
        global_scratch_size: int = 0
        global_scratch_align: int = 1
        profile_scratch_size: int = 0
        profile_scratch_align: int = 1
        launch_cooperative_grid: bool = False
        launch_pdl: bool = False
        param_types: tuple[str, ...] = ("ptr", "i32")
        triton_version: str = "3.7.1"

    rec = KernelRecord.from_compiled(FakeCompiled())
    assert rec.param_types == ["ptr", "i32"] and rec.arch == 90 and rec.cubin == b"\x7fELF"
    assert rec.cubin_key == cubin_named_key(90, b"\x7fELF") and rec.cubin_size == 4


def test_constant_checksum_is_sha256_of_its_bytes() -> None:
    import hashlib

    from cuda_triton.serialization import ConstantRecord

    rec = ConstantRecord.of_bytes("cuda_triton/w", "fp16", [2, 3], bytes(range(12)))
    assert rec.nbytes == 12 and rec.sha256 == hashlib.sha256(bytes(range(12))).digest()
    blob = conv_chain_blob(random.Random(2), n_ops=1)
    data = serialize(blob)
    assert all(c.sha256 in data for c in blob.constants)  # stored raw, 32 bytes each


def _op(blob: DelegateBlob, kind_name: str, index: int = 0):  # noqa: ANN202
    return [op for op in blob.ops if type(op).__name__ == kind_name][index]


def _intermediates(blob: DelegateBlob) -> list[int]:
    return [v for v, vr in enumerate(blob.values) if vr.kind == "intermediate"]


def _states(blob: DelegateBlob) -> list[int]:
    return [v for v, vr in enumerate(blob.values) if vr.kind == "state"]


def _state_end(blob: DelegateBlob) -> int:
    """Where the last state value's bytes end."""
    return max(blob.values[v].offset + 4 * blob.values[v].sizes[0] for v in _states(blob))


def _state_op(blob: DelegateBlob, v: int):  # noqa: ANN202
    """The op whose launches take state value ``v``."""
    return next(op for op in blob.ops if any(ValueRef(v) in lr.args for lr in op.launches))


def _unuse_state(blob: DelegateBlob) -> None:
    v = _states(blob)[0]
    for lr in _state_op(blob, v).launches:
        lr.args = [NullPtr() if a == ValueRef(v) else a for a in lr.args]


def _two_live_at_once(blob: DelegateBlob) -> tuple[int, int]:
    ranges = live_ranges(blob)
    for v in ranges:
        for u in ranges:
            if u != v and ranges[v][0] <= ranges[u][1] and ranges[u][0] <= ranges[v][1]:
                return v, u
    raise AssertionError("no two intermediates live at once")


def _alias(blob: DelegateBlob) -> None:
    v, u = _two_live_at_once(blob)
    blob.values[u].offset = blob.values[v].offset


def _set_view(blob: DelegateBlob, **changes: object) -> None:
    v = next(v for v, vr in enumerate(blob.values) if vr.kind == "view")
    blob.values[v] = dataclasses.replace(blob.values[v], **changes)


# (corruption of every_kind_blob, message): the writer refuses each; the C++ reader rejects each too.
CORRUPTIONS = [
    # common checks
    (lambda b: setattr(_op(b, "ConvRecord"), "input", 999), "out of range"),
    (lambda b: setattr(_op(b, "ConvRecord").launches[0], "args", _op(b, "ConvRecord").launches[0].args[:-1]), "args for kernel"),
    (lambda b: _op(b, "ConvRecord").launches[0].args.__setitem__(0, Scalar("i32", 1)), "pointer parameter"),
    (lambda b: _op(b, "ConvRecord").launches[0].args.__setitem__(4, ValueRef(0)), "i32 parameter"),
    (lambda b: _op(b, "ConvRecord").launches[0].args.__setitem__(4, Scalar("i32", 1 << 31)), "i32 out of range"),
    (lambda b: _op(b, "ConvRecord").launches[0].args.__setitem__(1, ConstantRef(500)), "out of range"),
    (lambda b: setattr(b.kernels[0], "num_warps", 0), "num_warps"),
    (lambda b: setattr(b.kernels[0], "global_scratch_align", 3), "power of two"),
    (lambda b: setattr(b.kernels[0], "cubin_key", "cuda_triton/cubin/sm90/xyz"), "content address"),
    (lambda b: setattr(b.kernels[0], "cubin_key", cubin_named_key(81, b.kernels[0].cubin)), "content address"),
    (lambda b: setattr(b.kernels[0], "cubin_size", 1 << 32), "cubin size"),
    (lambda b: setattr(b.constants[0], "nbytes", 3), "nbytes"),
    (lambda b: setattr(b, "num_outputs", 3), "no value record"),
    (lambda b: setattr(b, "arena_alignment", 8), "arena alignment"),
    (lambda b: setattr(b, "arena_size", b.arena_size - 16), "outside the"),
    (lambda b: setattr(b.values[_intermediates(b)[0]], "offset", 8), "not aligned"),
    (_alias, "share arena bytes"),
    (lambda b: _set_view(b, offset=8), "multiple of 16"),
    (lambda b: _set_view(b, offset=16 * 1024), "outside its base"),
    (lambda b: _set_view(b, dtype="int32"), "view of a"),
    (lambda b: _set_view(b, index=len(b.values)), "earlier value"),
    # state values
    (lambda b: setattr(b.values[_states(b)[1]], "offset", b.values[_states(b)[1]].offset + 4), "state offset .* is not aligned"),
    (lambda b: setattr(b, "state_size", _state_end(b) - 4), "outside the .*-byte state buffer"),
    (lambda b: setattr(b.values[_states(b)[1]], "offset", b.state_size), "outside the .*-byte state buffer"),
    (lambda b: setattr(b, "state_size", 1 << 48), "state buffer size"),
    (lambda b: setattr(b.values[_states(b)[1]], "offset", b.values[_states(b)[0]].offset), "share state bytes"),
    (lambda b: b.values.append(ValueRecord.view(_states(b)[0], "int32", [1], [1])), "a view of state value"),
    (lambda b: setattr(_op(b, "ReductionRecord"), "input", _states(b)[0]), "as a record input"),
    (lambda b: setattr(_op(b, "ReductionRecord"), "output", _states(b)[0]), "as a record output"),
    (_unuse_state, "not a launch argument of any op"),
    (lambda b: setattr(b.values[_states(b)[0]], "strides", [0]), "must be dense"),
    (lambda b: setattr(b.values[_states(b)[0]], "index", 1), "state values have index 0"),
    (lambda b: setattr(_op(b, "ElementwiseRecord", 1), "output", 0), "delegate input"),
    (lambda b: setattr(b.values[_op(b, "PoolingRecord").output], "strides", [0, 0, 0, 0]), "overlapping"),
    (lambda b: b.ops.insert(0, b.ops.pop(1)), "before any op produces it"),
    (lambda b: setattr(b.ops[0], "name", "bad\nname"), "name"),
    # fused steps
    (lambda b: _op(b, "ConvRecord").epilogue.append(Step("relu", [FromStep(9)])), "not an earlier step"),
    (lambda b: _op(b, "ElementwiseRecord").steps.append(Step("relu", [FromResult()])), "no result of its own"),
    (lambda b: _op(b, "ConvRecord").epilogue_inputs.append(ConstantRef(len(b.constants) - 1)), "broadcast"),
    (lambda b: setattr(_op(b, "ElementwiseRecord"), "steps", []), "at least one step"),
    # a convolution's prologue
    (lambda b: _op(b, "ConvRecord", 1).prologue.append(Step("relu", [FromInput(2)])), "out of range"),
    (lambda b: setattr(_op(b, "ConvRecord", 1), "prologue", []), "no prologue steps"),
    (lambda b: _op(b, "ConvRecord", 1).prologue_inputs.__setitem__(0, ValueRef(_op(b, "ConvRecord", 1).input)), "per image and channel"),
    # per kind
    (lambda b: setattr(_op(b, "ConvRecord"), "stride", [0, 1]), "stride"),
    (lambda b: setattr(b.values[_op(b, "ConvRecord").output], "strides", contiguous_strides(b.values[_op(b, "ConvRecord").output].sizes)), "layout rule"),
    (lambda b: setattr(b.values[_op(b, "ElementwiseRecord").output], "sizes", [1, 1, 1, 1]), "shape rule"),
    (lambda b: setattr(_op(b, "ReductionRecord"), "dims", [3, 2]), "strictly increasing"),
    (lambda b: setattr(_op(b, "ReductionRecord"), "keepdim", True), "shape rule"),
    (lambda b: setattr(_op(b, "PoolingRecord"), "padding", [2, 2]), "half the kernel"),
    (lambda b: setattr(_op(b, "PoolingRecord"), "op", "avg") or setattr(_op(b, "PoolingRecord"), "dilation", [2, 2]), "dilation"),
    (lambda b: setattr(_op(b, "GemmRecord"), "b_sizes", [99, 3]), "inner dims"),
    (lambda b: setattr(_op(b, "GemmRecord"), "alpha", float("nan")), "finite"),
    (lambda b: setattr(_op(b, "NormRecord"), "op", "group_norm") or setattr(_op(b, "NormRecord"), "groups", 3), "groups"),
    (lambda b: setattr(_op(b, "NormRecord"), "dim", 2), "dim 1"),
    (lambda b: setattr(_op(b, "NormRecord"), "eps", -1.0), "eps"),
    (lambda b: setattr(_op(b, "PermuteRecord"), "perm", [0, 2, 2, 1]), "repeats"),
    (lambda b: setattr(_op(b, "CatRecord"), "dim", 2), "shape rule"),
    (lambda b: setattr(_op(b, "CatRecord"), "inputs", [_op(b, "CatRecord").inputs[0], _op(b, "UpsampleRecord").output]), "differ outside the cat dim"),
    (lambda b: setattr(_op(b, "SplitRecord"), "outputs", _op(b, "SplitRecord").outputs[:1]), "concatenated"),
    (lambda b: setattr(_op(b, "SliceRecord"), "end", 99), "slice bounds"),
    (lambda b: setattr(_op(b, "PadRecord"), "mode", "reflect") or setattr(_op(b, "PadRecord"), "pad", [0, 0, 50, 0]), "reflect"),
    (lambda b: setattr(_op(b, "UpsampleRecord"), "mode", "nearest") or setattr(_op(b, "UpsampleRecord"), "align_corners", True), "align_corners"),
    (lambda b: setattr(_op(b, "UpsampleRecord"), "scales", [2.0]), "scales"),
    (lambda b: setattr(_op(b, "SplitRecord"), "outputs", [_op(b, "SplitRecord").outputs[0]] * 2), "writes a value twice"),
    (lambda b: setattr(b.values[_op(b, "CopyRecord").output], "sizes", [1, 2]), "shape rule"),
]  # fmt: skip


def _corrupted(i: int) -> DelegateBlob:
    blob = every_kind_blob(random.Random(100 + i), dtype="fp32")
    CORRUPTIONS[i][0](blob)
    return blob


@pytest.mark.parametrize("case", range(len(CORRUPTIONS)))
def test_writer_rejects(case: int) -> None:
    blob = _corrupted(case)
    with pytest.raises(BlobError, match=CORRUPTIONS[case][1]):
        serialize(blob)


def test_writer_rejects_duplicate_kernels_and_foreign_archs() -> None:
    blob = conv_chain_blob(random.Random(1), n_ops=1)
    blob.kernels.append(dataclasses.replace(blob.kernels[0]))
    with pytest.raises(BlobError, match="duplicate kernel"):
        serialize(blob)
    blob = conv_chain_blob(random.Random(1), n_ops=1)
    blob.ops[0].launches[0].kernels.pop(80)
    with pytest.raises(BlobError, match="archs"):
        serialize(blob)


def test_arena_plan() -> None:
    """Intermediates live at once get disjoint bytes, the others reuse them: the arena is below the sum of spans."""
    for seed in range(10):
        blob = every_kind_blob(random.Random(seed))
        spans = {v: 0 for v in _intermediates(blob)}
        for v in spans:
            vr = blob.values[v]
            spans[v] = (1 + sum((s - 1) * st for s, st in zip(vr.sizes, vr.strides, strict=True))) * {
                "fp32": 4,
                "fp16": 2,
            }[vr.dtype]
        assert blob.arena_size < sum(spans.values())
        assert all(blob.values[v].offset % blob.arena_alignment == 0 for v in spans)
        serialize(blob)  # the readers' lifetime check accepts the plan
    blob = every_kind_blob(random.Random(3))
    for v in _intermediates(blob):
        blob.values[v].offset = 0
    with pytest.raises(BlobError, match="share arena bytes"):
        serialize(blob)
    serialize(plan_arena(blob))


def test_python_reader_only_raises_blob_error() -> None:
    rng = random.Random(2)
    base = [
        serialize(conv_chain_blob(rng, n_ops=2)),
        serialize(every_kind_blob(rng)),
        serialize(every_kind_blob(rng)),
    ]
    for i in range(3000):
        try:
            deserialize(_mutate(base[i % 3], rng))
        except BlobError:
            pass


def test_version_2_is_rejected() -> None:
    data = bytearray(serialize(conv_chain_blob(random.Random(3), n_ops=1)))
    data[4:8] = struct.pack("<I", 2)
    with pytest.raises(BlobError, match="format version 2, this reader reads version 6; re-export"):
        deserialize(bytes(data))


# ---- the C++ reader --------------------------------------------------------------------------------------------
def test_cpp_reader_accepts_valid_blobs() -> None:
    rng = random.Random(3)
    blobs = [conv_chain_blob(rng, n_ops=1 + i % 4, archs=((80,), (90,), (80, 90))[i % 3]) for i in range(6)]
    blobs += [
        every_kind_blob(rng, ((80,), (90,), (80, 90))[i % 3], ("fp32", "fp16", "bf16")[i % 3])
        for i in range(6)
    ]
    lines = _harness(["check"], [serialize(b) for b in blobs]).splitlines()
    assert len(lines) == len(blobs)
    for blob, line in zip(blobs, lines, strict=True):
        assert line.startswith("ok "), line
        launches = sum(len(op.launches) for op in blob.ops)
        kinds = ",".join(str(op.KIND) for op in blob.ops)
        assert (
            f"kernels={len(blob.kernels)} values={len(blob.values)} constants={len(blob.constants)} "
            f"ops={len(blob.ops)} launches={launches}"
        ) in line
        assert f"arena={blob.arena_size} state={blob.state_size} kinds={kinds}" in line


def test_cpp_reader_rejects_each_corruption() -> None:
    """Every check of the writer has a C++ twin: each corrupted plan, encoded without validation, is refused."""
    blobs = [_encode(_corrupted(i)) for i in range(len(CORRUPTIONS))]
    lines = _harness(["check"], blobs).splitlines()
    missed = [(i, CORRUPTIONS[i][1]) for i, line in enumerate(lines) if not line.startswith("err ")]
    assert not missed, f"the C++ reader accepted corrupted plans: {missed}"


def test_both_readers_refuse_a_blob_that_does_not_hash_to_its_digest() -> None:
    """One changed byte anywhere after the header (a launch argument, a grid, a weight key) is refused by the
    digest before any field is read, by the Python and the C++ reader alike; re-sealed, the same blob reads."""
    rng = random.Random(7)
    data = serialize(conv_chain_blob(rng))
    corrupted = []
    for at in [HEADER_BYTES, len(data) - 1, *rng.sample(range(HEADER_BYTES, len(data)), 30)]:
        b = bytearray(data)
        b[at] ^= 0x10
        corrupted.append(bytes(b))
        with pytest.raises(BlobError, match="SHA-256"):
            deserialize(bytes(b))
    lines = _harness(["check"], [*corrupted, seal(data)]).splitlines()
    assert all(line.startswith("err ") and "SHA-256" in line for line in lines[:-1]), lines[:3]
    assert lines[-1].startswith("ok ")


def _huge_sizes(blob: DelegateBlob, rng: random.Random) -> DelegateBlob:
    """Some sizes near 2^62 (inputs with zero strides, so their span stays small): where a rule's arithmetic
    overflows int64 both readers must refuse the record."""
    for v in blob.values:
        if rng.random() < 0.5:
            v.sizes = [
                rng.choice([s, 0, 1 << rng.randint(20, 61), (1 << 61) + rng.randint(0, 99)]) for s in v.sizes
            ]
            if v.kind == "input":
                v.strides = [0] * len(v.sizes)
    return blob


@pytest.mark.timeout(600)
def test_cpp_and_python_readers_agree_on_random_records() -> None:
    """Single records of every kind with random parameters, valid or not (some with huge sizes): the readers give
    the same verdict."""
    rng = random.Random(8)
    blobs = [random_record_blob(rng, KIND_CODES[i % len(KIND_CODES)]) for i in range(2800)]
    blobs = [_encode(_huge_sizes(b, rng) if i % 4 == 3 else b) for i, b in enumerate(blobs)]
    accepted, disagreements = _agree(blobs)
    assert not disagreements, (
        f"{len(disagreements)} disagreements, first: {disagreements[0][1]} / {_describe(disagreements[0][0])}"
    )
    assert len(blobs) // 4 < accepted < len(blobs) * 3 // 4


@pytest.mark.timeout(600)
def test_cpp_and_python_readers_agree_on_mutated_blobs() -> None:
    """Every corrupted/truncated blob of every kind: both readers accept it, or both reject it."""
    rng = random.Random(4)
    base = [serialize(conv_chain_blob(rng, n_ops=2)), serialize(every_kind_blob(rng)),
            serialize(every_kind_blob(rng, (80,), "fp16")), serialize(every_kind_blob(rng, (90,), "bf16"))]  # fmt: skip
    base += [serialize(random_valid_record_blob(rng, k)) for k in KIND_CODES]
    mutated = [_mutate(base[i % len(base)], rng) for i in range(5000)]
    accepted, disagreements = _agree(mutated)
    assert not disagreements, (
        f"{len(disagreements)} disagreements, first: {disagreements[0][1]} / {_describe(disagreements[0][0])}"
    )
    assert 0 < accepted < len(mutated)  # the mutations reach past the header checks and some are benign


def random_valid_record_blob(rng: random.Random, kind: int) -> DelegateBlob:
    while True:
        blob = random_record_blob(rng, kind)
        try:
            serialize(blob)
            return blob
        except BlobError:
            continue


@pytest.mark.timeout(600)
def test_cpp_reader_survives_mass_mutation() -> None:
    """Tens of thousands of structured mutations inside the ASan harness; a crash fails the run."""
    rng = random.Random(5)
    base = [serialize(conv_chain_blob(rng, n_ops=2)), serialize(every_kind_blob(rng))]
    base += [serialize(random_valid_record_blob(rng, k)) for k in KIND_CODES]
    out = _harness(["mutate", "4000", "12345"], base).split()
    accepted, rejected = int(out[0]), int(out[1])
    assert accepted + rejected == 4000 * len(base)
    assert rejected > accepted


@pytest.mark.timeout(1200)  # may build the C++ runtime from a clean tree first: 7+ minutes, loaded 2 cores
def test_cpp_reader_rejects_truncations_and_bad_headers() -> None:
    data = serialize(every_kind_blob(random.Random(6)))
    cases = [data[:n] for n in range(0, len(data), max(1, len(data) // 300))]
    cases += [b"XXXX" + data[4:], data[:4] + (2).to_bytes(4, "little") + data[8:], data + b"\0"]
    lines = _harness(["check"], cases).splitlines()
    assert len(lines) == len(cases)
    assert all(line.startswith("err ") for line in lines)
    assert "bad magic" in lines[-3]
    assert "format version 2, this runtime reads version 6" in lines[-2]


def test_value_record_view_helper() -> None:
    v = ValueRecord.view(3, "fp16", [2, 2], [4, 1], 32)
    assert (v.kind, v.index, v.offset) == ("view", 3, 32)
