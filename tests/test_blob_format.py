"""The delegate blob format: Python writer/reader round trip, validation, and the C++ reader under mutation.

The C++ reader runs in runtime/tests/blob_fuzz_harness (AddressSanitizer + UBSan): it must accept exactly
the blobs the Python reader accepts, and never crash on thousands of corrupted or truncated blobs.
"""

from __future__ import annotations

import dataclasses
import random
import subprocess

import pytest
from cuda_triton.serialization.blob import (
    FORMAT_VERSION,
    BlobError,
    ConstantRef,
    KernelRecord,
    Scalar,
    ValueRef,
    cubin_named_key,
    deserialize,
    named_cubins,
    serialize,
)
from runtime_helpers import blob_stream, conv_chain_blob, ensure_built


def _harness(mode: list[str], blobs: list[bytes]) -> str:
    exe = ensure_built() / "blob_fuzz_harness"
    r = subprocess.run([str(exe), *mode], input=blob_stream(blobs), capture_output=True, timeout=600)
    assert r.returncode == 0, f"blob_fuzz_harness crashed (rc={r.returncode}):\n{r.stderr.decode()[-4000:]}"
    return r.stdout.decode()


def _mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(5)
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
    if len(b) >= 16 and rng.random() < 0.5:
        b[8:16] = len(b).to_bytes(8, "little")  # keep the total-size field consistent
    return bytes(b)


def test_round_trip() -> None:
    rng = random.Random(0)
    for i in range(20):
        blob = conv_chain_blob(rng, n_ops=1 + i % 3, archs=(80, 90) if i % 2 else (90,))
        data = serialize(blob)
        assert data[:4] == b"CTRB"
        assert int.from_bytes(data[4:8], "little") == FORMAT_VERSION
        assert int.from_bytes(data[8:16], "little") == len(data)
        assert deserialize(data, named_cubins(blob)) == blob
        back = deserialize(data)  # without the named data: everything but the cubin bytes
        assert [dataclasses.replace(k, cubin=None) for k in blob.kernels] == back.kernels
        assert all(k.cubin not in data for k in blob.kernels if k.cubin)  # cubins are not in the blob


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


@pytest.mark.parametrize(
    "corrupt, message",
    [
        (lambda b: setattr(b.ops[0], "input", 99), "out of range"),
        (lambda b: setattr(b.ops[0].launches[0], "args", b.ops[0].launches[0].args[:-1]), "args for kernel"),
        (lambda b: b.ops[0].launches[0].args.__setitem__(0, Scalar("i32", 1)), "pointer parameter"),
        (lambda b: b.ops[0].launches[0].args.__setitem__(4, ValueRef(0)), "i32 parameter"),
        (lambda b: b.ops[0].launches[0].args.__setitem__(4, Scalar("i32", 1 << 31)), "i32 out of range"),
        (lambda b: b.ops[0].launches[0].args.__setitem__(1, ConstantRef(50)), "out of range"),
        (lambda b: b.ops[0].launches[0].kernels.pop(80), "archs"),
        (lambda b: setattr(b.kernels[0], "num_warps", 0), "num_warps"),
        (lambda b: setattr(b.kernels[0], "global_scratch_align", 3), "power of two"),
        (lambda b: setattr(b.constants[0], "nbytes", 3), "nbytes"),
        (lambda b: setattr(b.values[-1], "sizes", [9, 9, 9, 9]), "layout rule"),
        (lambda b: setattr(b.values[-1], "strides", [1, 1, 1, 1]), "layout rule"),
        (lambda b: setattr(b.ops[0], "stride", [0, 1]), "stride"),
        (lambda b: setattr(b, "num_outputs", 2), "no value record"),
        (lambda b: setattr(b.kernels[0], "name", "bad\nname"), "ASCII"),
        (lambda b: b.kernels.append(dataclasses.replace(b.kernels[0])), "duplicate kernel"),
        (lambda b: setattr(b.kernels[0], "cubin_key", ""), "cubin key"),
        (lambda b: setattr(b.kernels[0], "cubin_key", "k\u00e9y"), "cubin key"),
        (lambda b: setattr(b.kernels[0], "cubin_size", 0), "cubin size"),
        (lambda b: setattr(b.kernels[0], "cubin_size", 1 << 32), "cubin size"),
        (lambda b: setattr(b.kernels[0], "cubin_size", b.kernels[0].cubin_size + 1), "the record says"),
    ],
)
def test_writer_rejects(corrupt, message: str) -> None:
    blob = conv_chain_blob(random.Random(1), n_ops=1)
    corrupt(blob)
    with pytest.raises(BlobError, match=message):
        serialize(blob)


def test_python_reader_only_raises_blob_error() -> None:
    rng = random.Random(2)
    base = [serialize(conv_chain_blob(rng, n_ops=2)) for _ in range(3)]
    for i in range(3000):
        data = _mutate(base[i % 3], rng)
        try:
            deserialize(data)
        except BlobError:
            pass


@pytest.mark.timeout(1200)  # may build the C++ runtime from a clean tree first: 7+ minutes, loaded 2 cores
def test_cpp_reader_accepts_valid_blobs() -> None:
    rng = random.Random(3)
    blobs = [conv_chain_blob(rng, n_ops=1 + i % 4, archs=((80,), (90,), (80, 90))[i % 3]) for i in range(12)]
    lines = _harness(["check"], [serialize(b) for b in blobs]).splitlines()
    assert len(lines) == len(blobs)
    for blob, line in zip(blobs, lines, strict=True):
        assert line.startswith("ok "), line
        launches = sum(len(op.launches) for op in blob.ops)
        assert (
            f"kernels={len(blob.kernels)} values={len(blob.values)} constants={len(blob.constants)} "
            f"ops={len(blob.ops)} launches={launches}"
        ) in line


@pytest.mark.timeout(1200)  # may build the C++ runtime from a clean tree first: 7+ minutes, loaded 2 cores
def test_cpp_and_python_readers_agree_on_mutated_blobs() -> None:
    """Every corrupted/truncated blob: both readers accept it, or both reject it (C++ never crashes)."""
    rng = random.Random(4)
    base = [serialize(conv_chain_blob(rng, n_ops=2)) for _ in range(4)]
    mutated = [_mutate(base[i % 4], rng) for i in range(4000)]
    lines = _harness(["check"], mutated).splitlines()
    assert len(lines) == len(mutated)
    disagreements = []
    accepted = 0
    for data, line in zip(mutated, lines, strict=True):
        try:
            deserialize(data)
            py_ok = True
        except BlobError:
            py_ok = False
        accepted += py_ok
        if py_ok != line.startswith("ok "):
            disagreements.append((data, line))
    assert not disagreements, f"{len(disagreements)} disagreements, first: {disagreements[0][1]}"
    assert 0 < accepted < len(mutated)  # the mutations reach past the header checks and some are benign


@pytest.mark.timeout(1200)  # may build the C++ runtime from a clean tree first: 7+ minutes, loaded 2 cores
def test_cpp_reader_survives_mass_mutation() -> None:
    """Tens of thousands of structured mutations inside the ASan harness; a crash fails the run."""
    rng = random.Random(5)
    base = [serialize(conv_chain_blob(rng, n_ops=1 + i)) for i in range(3)]
    out = _harness(["mutate", "10000", "12345"], base).split()
    accepted, rejected = int(out[0]), int(out[1])
    assert accepted + rejected == 30000
    assert rejected > 20000


@pytest.mark.timeout(1200)  # may build the C++ runtime from a clean tree first: 7+ minutes, loaded 2 cores
def test_cpp_reader_rejects_truncations_and_bad_headers() -> None:
    data = serialize(conv_chain_blob(random.Random(6), n_ops=2))
    cases = [data[:n] for n in range(0, len(data), max(1, len(data) // 300))]
    cases += [b"XXXX" + data[4:], data[:4] + (1).to_bytes(4, "little") + data[8:], data + b"\0"]
    lines = _harness(["check"], cases).splitlines()
    assert len(lines) == len(cases)
    assert all(line.startswith("err ") for line in lines)
    assert "bad magic" in lines[-3] and "format version 1" in lines[-2]  # version 1 had the cubins inline
