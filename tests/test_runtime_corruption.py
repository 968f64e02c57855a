"""Corrupted delegate blobs through the real init() + execute() on a CPU (fake libcuda.so.1): never a signal.

The rule: for ANY bytes, the C++ runtime returns an ExecuTorch error (runner exit code 1) or runs; it never
crashes. A single changed byte in a cubin's ELF header (section header offset / count) crashes the real driver
(SIGSEGV inside cuModuleLoadData), which follows those offsets without knowing the image's size. The fake driver
follows them the same way, so without the runtime's cubin check (check_cubin) these tests crash on the CPU too.
A corrupted cubin that keeps a valid ELF structure loads and faults on the GPU, so every cubin is checked against
its content address (the SHA-256 its named-data key names) first: any changed byte of a cubin is refused at init.

Corruptions cover the WHOLE blob of a real export (header, every table byte) and every cubin the blobs name,
where the .pte stores it (once, as named data): every byte of its ELF header and section header table and a
sample of its body, plus the corruptions of scripts/gpu_faults.py (which the GPU validation runs).
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import struct
import subprocess
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from cuda_triton.serialization.blob import cubin_named_key, deserialize
from runtime_helpers import ROOT, ensure_built, export_tiny, reseal_blobs

# The first runtime test builds the C++ runtime from a clean tree: 7+ minutes on a loaded 2-core machine.
pytestmark = pytest.mark.timeout(1200)

INPUT_SHAPE = (1, 3, 16, 16)
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def build() -> Path:
    return ensure_built()


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> tuple[bytes, list[tuple[int, bytes]], list[tuple[int, bytes]], Path]:
    """The .pte bytes, (offset, bytes) of every delegate blob in it and of every cubin they name, and an input
    file."""
    d = tmp_path_factory.mktemp("corrupt")
    pte, blobs, named = export_tiny(d)
    data = pte.read_bytes()
    located = []
    cubins: dict[str, bytes] = {}
    for blob in blobs:
        at = data.find(blob)
        assert at >= 0, "the delegate blob is not stored verbatim in the .pte"
        located.append((at, blob))
        for k in deserialize(blob, named).kernels:
            assert k.cubin is not None and k.cubin not in blob
            cubins[k.cubin_key] = k.cubin
    placed = []
    for cubin in cubins.values():
        at = data.find(cubin)
        assert at >= 0 and data.count(cubin) == 1, "each cubin is stored once, verbatim, in the .pte"
        placed.append((at, cubin))
    x = np.random.default_rng(0).standard_normal(INPUT_SHAPE).astype(np.float32)
    (d / "in.bin").write_bytes(x.tobytes())
    return data, located, placed, d / "in.bin"


REFUSED_CUBIN = "fails its integrity check"


def _run_all(
    build: Path, work: Path, inputs: Path, variants: list[tuple[str, bytes]], refused: str | None = None
) -> list[str]:
    """Runs the runner on every (label, .pte bytes); returns the failures (signal, sanitizer report, timeout,
    an exit code other than 0/1, or an error that is not ExecuTorch's). With ``refused``, every variant must
    fail (exit code 1) with that text in the error."""
    env = dict(os.environ, LD_LIBRARY_PATH=str(build / "fake_cuda"), FAKE_CUDA_CC="8.0")

    def one(item: tuple[int, tuple[str, bytes]]) -> str | None:
        i, (label, data) = item
        path = work / f"c{i}.pte"
        path.write_bytes(data)
        cmd = [str(build / "cuda_triton_runner"), "--model_path", str(path), "--num_executions", "1",
               "--warmup", "0", "--inputs", str(inputs)]  # fmt: skip
        try:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, errors="replace", timeout=60)
        except subprocess.TimeoutExpired:
            return f"{label}: timeout"
        finally:
            path.unlink(missing_ok=True)
        if r.returncode not in (0, 1) or "Sanitizer" in r.stderr:
            return f"{label}: rc {r.returncode} {r.stderr[-400:]!r}"
        if refused is not None and (r.returncode != 1 or refused not in r.stderr):
            return f"{label}: not refused (rc {r.returncode}) {r.stderr[-400:]!r}"
        return None

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return [f for f in pool.map(one, enumerate(variants)) if f is not None]


def _cubin_offsets(cubin: bytes, rng: random.Random) -> list[int]:
    """Every byte of the ELF header and of the section header table, and 48 random bytes of the rest."""
    shoff, shnum = struct.unpack_from("<Q", cubin, 40)[0], struct.unpack_from("<H", cubin, 60)[0]
    picks = list(range(64))
    picks += list(range(shoff, min(shoff + 64 * shnum, len(cubin))))
    picks += [rng.randrange(64, len(cubin)) for _ in range(48)]
    return sorted(set(picks))


def _single_byte_variants(
    data: bytes, regions: list[tuple[str, int, bytes, Iterable[int]]], rng: random.Random
) -> list[tuple[str, bytes]]:
    variants = []
    for what, at, payload, offsets in regions:
        for o in offsets:
            new = (payload[o] + rng.randrange(1, 256)) % 256  # always a different byte
            b = bytearray(data)
            b[at + o] = new
            variants.append((f"{what} byte {o}: {payload[o]:#04x} -> {new:#04x}", bytes(b)))
    return variants


def test_single_byte_corruptions_across_the_whole_blob(build, program, tmp_path) -> None:
    data, located, _, inputs = program
    variants = _single_byte_variants(
        data,
        [(f"blob {i}", at, blob, range(len(blob))) for i, (at, blob) in enumerate(located)],
        random.Random(1234),
    )
    assert len(variants) > 500
    failures = _run_all(build, tmp_path, inputs, variants)
    shown = "\n".join(failures[:20])
    assert not failures, f"{len(failures)} of {len(variants)} corruptions crashed:\n{shown}"


def test_every_corrupted_cubin_is_refused_at_init(build, program, tmp_path) -> None:
    """A changed byte anywhere in a cubin (its ELF header, section headers, code): init refuses the program with
    an error naming the kernel, before the driver sees the image (on a GPU such code faulted at execute)."""
    data, _, placed, inputs = program
    rng = random.Random(4321)
    regions = [(f"cubin {i}", at, cubin, _cubin_offsets(cubin, rng)) for i, (at, cubin) in enumerate(placed)]
    variants = _single_byte_variants(data, regions, rng)
    assert len(variants) > 200
    failures = _run_all(build, tmp_path, inputs, variants, refused=REFUSED_CUBIN)
    shown = "\n".join(failures[:20])
    assert not failures, f"{len(failures)} of {len(variants)} corrupted cubins were not refused:\n{shown}"


def test_every_corrupted_weight_is_refused_at_init(build, tmp_path_factory, tmp_path) -> None:
    """A changed byte in a weight or bias: its SHA-256 no longer matches the blob's record, init refuses the program
    naming the constant (before, it ran with the wrong weights)."""
    d = tmp_path_factory.mktemp("weights")
    pte, blobs, named = export_tiny(d)
    data = pte.read_bytes()
    constants = [c for blob in blobs for c in deserialize(blob, named).constants]
    assert constants
    rng = random.Random(99)
    variants = []
    for c in constants:
        payload = named[c.key]
        at = data.find(payload)
        assert at >= 0 and len(payload) == c.nbytes
        for o in sorted({rng.randrange(len(payload)) for _ in range(12)} | {0, len(payload) - 1}):
            b = bytearray(data)
            b[at + o] ^= 1 << rng.randrange(8)
            variants.append((f"constant {c.key} byte {o}", bytes(b)))
    x = np.random.default_rng(0).standard_normal(INPUT_SHAPE).astype(np.float32)
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    failures = _run_all(build, tmp_path, tmp_path / "in.bin", variants, refused="the blob records")
    assert not failures, "\n".join(failures[:20])


def _gpu_faults():
    spec = importlib.util.spec_from_file_location("gpu_faults", ROOT / "scripts" / "gpu_faults.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_faults"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_gpu_fault_script_on_the_fake_driver(build, program, tmp_path) -> None:
    """scripts/gpu_faults.py's corruptions (random bytes anywhere, in a blob, in a cubin, extreme blob fields,
    truncations) through the runner: 0 crashes, 0 hangs, every corrupted cubin refused. It finds the blobs and
    cubins in the .pte by itself, as it must on the GPU machine (no executorch there)."""
    data, located, placed, inputs = program
    faults = _gpu_faults()
    regions = faults.locate_regions(data)
    assert regions.blobs == [(at, len(blob)) for at, blob in located]
    assert sorted(regions.cubins) == sorted((at, len(cubin)) for at, cubin in placed)
    assert set(regions.archs) == {at for at, _ in placed} and set(regions.archs.values()) == {80}
    pte = tmp_path / "program.pte"
    pte.write_bytes(data)
    env = dict(os.environ, LD_LIBRARY_PATH=str(build / "fake_cuda"), FAKE_CUDA_CC="8.0")
    result = faults.run_corruptions(build / "cuda_triton_runner", [faults.Program("tiny", pte, [inputs])], 1000,
                                    workers=max(2, os.cpu_count() or 2), env=env, work_dir=tmp_path)  # fmt: skip
    assert result["ok"], faults.summary_line(result) + "\n" + json.dumps(result["examples"], indent=1)[:4000]
    assert result["by_class"]["clean_error"] > 800 and result["cubin_corruptions"] == 200
    assert result["other_arch_cubin_corruptions"] == 0  # no device arch given: every cubin must be refused


def test_corrupt_cubin_headers_are_clean_errors(build, program, tmp_path) -> None:
    """The two crashes of the H200 run, on this export's first cubin: the section header count and offset. Once
    refused by the integrity check; and once in a program rewritten to carry the corrupted image's own content
    address (key in the blob and in the named data), where the ELF check must still refuse it."""
    data, _, placed, inputs = program
    c, cubin = placed[0]
    old_key = cubin_named_key(80, cubin).encode()
    env = dict(os.environ, LD_LIBRARY_PATH=str(build / "fake_cuda"), FAKE_CUDA_CC="8.0")
    for off, value in ((61, 0xD7), (47, 0x4B)):  # high byte of e_shnum, high byte of e_shoff
        b = bytearray(data)
        b[c + off] = value
        bad_cubin = bytes(b[c : c + len(cubin)])
        consistent = reseal_blobs(bytes(b).replace(old_key, cubin_named_key(80, bad_cubin).encode()))
        # the key is in the blob's KERN entry and in the named data
        assert consistent.count(cubin_named_key(80, bad_cubin).encode()) >= 2
        for variant, expected in (
            (bytes(b), REFUSED_CUBIN),
            (consistent, "malformed cubin: section header table"),
        ):
            path = tmp_path / "bad.pte"
            path.write_bytes(variant)
            r = subprocess.run([str(build / "cuda_triton_runner"), "--model_path", str(path), "--num_executions",
                                "1", "--warmup", "0", "--inputs", str(inputs)], env=env, capture_output=True,
                               text=True, errors="replace", timeout=60)  # fmt: skip
            assert r.returncode == 1, (off, r.returncode, r.stderr[-2000:])
            assert expected in r.stderr, r.stderr[-2000:]
