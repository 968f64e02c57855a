#!/usr/bin/env python
"""Corrupted programs through the runner: every run must end in a clean error or a clean run.

Thousands of copies of the exported programs, each corrupted one way - random bytes anywhere in the .pte, random
bytes inside a delegate blob, random bytes inside a cubin, a 32-bit field of a blob set to an extreme value, a
truncated file - are run with ``cuda_triton_runner`` (one execution), and each run is classified:

* ``crash``: killed by a signal, or an exit code other than 0 and 1 (the runner's error code);
* ``hang``: still running after ``--timeout`` seconds;
* ``gpu_fault``: the run reached the GPU and a kernel faulted (a CUDA error that poisons the context:
  illegal address or instruction, misaligned address, launch failure, ...);
* ``clean_error``: exit code 1 with an error message (what a corrupted program should get);
* ``ran``: exit code 0 (the corruption hit bytes nothing checks, e.g. a weight, or changed nothing that matters).

PASS: 0 crashes, 0 hangs, 0 GPU faults, and every corrupted cubin refused at init. Regions are found in the .pte
itself (delegate blobs by their ``CTRB`` header, cubins as ELF images whose SHA-256 prefix is a key the .pte
names), so no executorch is needed where this runs.

    # here (CPU): export the programs and the runtime's build inputs
    python scripts/gpu_validate.py prepare --set core
    # there (GPU; carry .carry/gpu_validate): build the runner, corrupt, run, classify
    PYTHONPATH=backends python scripts/gpu_faults.py --out $OUT [--count 3000] [--workers 8]

Writes ``$OUT/gpu_faults.json`` (counts per kind and class, examples) and ``$OUT/gpu_faults.md``; prints a summary;
exits 0 on PASS. ``scripts/gpu_validate.py run`` uses the same corruptions (``--corruptions N``).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import random
import re
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("anywhere", "blob", "cubin", "blob_field", "truncate")
CLASSES = ("crash", "hang", "gpu_fault", "clean_error", "ran")
# CUDA errors after which the context is unusable: a run that reports one faulted on the GPU.
GPU_FAULT = re.compile(
    r"CUDA_ERROR_(ILLEGAL_ADDRESS|ILLEGAL_INSTRUCTION|MISALIGNED_ADDRESS|INVALID_ADDRESS_SPACE|INVALID_PC|"
    r"LAUNCH_FAILED|HARDWARE_STACK_ERROR|ASSERT|LAUNCH_TIMEOUT|ECC_UNCORRECTABLE|TENSOR_MEMORY_LEAK)"
)
CUBIN_REFUSED = "fails its integrity check"
CUBIN_KEY = re.compile(rb"cuda_triton/cubin/sm(\d+)/([0-9a-f]{40})")


@dataclass
class Program:
    """A .pte with what the runner needs to execute it once."""

    name: str
    pte: Path
    inputs: list[Path] = field(default_factory=list)
    data_files: list[Path] = field(default_factory=list)


@dataclass
class Regions:
    blobs: list[tuple[int, int]]  # (offset, size) of every CudaTritonBackend delegate blob
    cubins: list[tuple[int, int]]  # (offset, size) of every cubin the program names
    # each cubin's offset -> the sm arch it is compiled for
    archs: dict[int, int] = field(default_factory=dict)


def elf_extent(data: bytes, at: int) -> int | None:
    """Bytes of the ELF64 image starting at ``at``: the furthest end of its headers and sections, or None."""
    if data[at : at + 4] != b"\x7fELF" or at + 64 > len(data) or data[at + 4] != 2:
        return None
    phoff, shoff = struct.unpack_from("<QQ", data, at + 32)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, at + 54)
    end = max(64, phoff + phentsize * phnum, shoff + shentsize * shnum)
    if shentsize != 64 or at + end > len(data):
        return None
    for i in range(shnum):
        sh = at + shoff + 64 * i
        sh_type = struct.unpack_from("<I", data, sh + 4)[0]
        off, size = struct.unpack_from("<QQ", data, sh + 24)
        if sh_type != 8:  # SHT_NOBITS occupies no bytes of the file
            end = max(end, off + size)
    return end if at + end <= len(data) else None


def locate_regions(data: bytes) -> Regions:
    blobs = []
    at = data.find(b"CTRB")
    while at >= 0:
        if at + 16 <= len(data):
            size = struct.unpack_from("<Q", data, at + 8)[0]
            if 16 < size <= len(data) - at:
                blobs.append((at, size))
        at = data.find(b"CTRB", at + 4)
    keys = {m.group(2).decode(): int(m.group(1)) for m in CUBIN_KEY.finditer(data)}
    cubins, archs = [], {}
    at = data.find(b"\x7fELF")
    while at >= 0:
        n = elf_extent(data, at)
        # The stored image is exactly what hashes to its key; padding after it (alignment) is not part of it.
        if n is not None:
            for size in (n, *range(n + 1, min(n + 64, len(data) - at) + 1)):
                key = hashlib.sha256(data[at : at + size]).hexdigest()[:40]
                if key in keys:
                    cubins.append((at, size))
                    archs[at] = keys[key]
                    break
        at = data.find(b"\x7fELF", at + 4)
    return Regions(blobs, cubins, archs)


def _scribble(b: bytearray, start: int, size: int, rng: random.Random) -> str:
    """Overwrites 1-8 bytes at a random place of [start, start + size) with random bytes, or flips one bit."""
    if rng.random() < 0.3:
        at = start + rng.randrange(size)
        bit = rng.randrange(8)
        b[at] ^= 1 << bit
        return f"bit {bit} of byte {at}"
    n = min(rng.randrange(1, 9), size)
    at = start + rng.randrange(size - n + 1)
    old = bytes(b[at : at + n])
    new = bytes(rng.randrange(256) for _ in range(n))
    if new == old:
        new = bytes((x + 1) % 256 for x in old)
    b[at : at + n] = new
    return f"{n} bytes at {at}"


def corruptions(
    data: bytes, regions: Regions, count: int, seed: int
) -> Iterator[tuple[str, str, bytes, int | None]]:
    """``count`` corrupted copies of ``data``: (kind, what was done, bytes, the arch of the cubin corrupted or
    None), the kinds in turn."""
    rng = random.Random(seed)
    kinds = [
        k
        for k in KINDS
        if (k not in ("blob", "blob_field") or regions.blobs) and (k != "cubin" or regions.cubins)
    ]
    for i in range(count):
        kind = kinds[i % len(kinds)]
        b = bytearray(data)
        arch = None
        if kind == "anywhere":
            what = _scribble(b, 0, len(b), rng)
        elif kind == "blob":
            at, size = rng.choice(regions.blobs)
            what = "blob: " + _scribble(b, at, size, rng)
        elif kind == "cubin":
            at, size = rng.choice(regions.cubins)
            arch = regions.archs.get(at)
            what = f"sm_{arch} cubin: " + _scribble(b, at, size, rng)
        elif kind == "blob_field":
            at, size = rng.choice(regions.blobs)
            off = at + rng.randrange(4, size - 3)
            value = rng.choice([0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x00010000, rng.randrange(1 << 32)])
            b[off : off + 4] = value.to_bytes(4, "little")
            what = f"blob: u32 at {off} = {value:#x}"
        else:
            n = rng.randrange(len(data))
            del b[n:]
            what = f"truncated to {n} bytes"
        yield kind, what, bytes(b), arch


def classify(returncode: int | None, stderr: str) -> str:
    if returncode is None:
        return "hang"
    if returncode not in (0, 1) or "Sanitizer" in stderr:
        return "crash"
    if GPU_FAULT.search(stderr):
        return "gpu_fault"
    return "clean_error" if returncode == 1 else "ran"


def _runner_cmd(runner: Path, program: Program, pte: Path) -> list[str]:
    cmd = [str(runner), "--model_path", str(pte), "--num_executions", "1", "--warmup", "0"]
    if program.inputs:
        cmd += ["--inputs", ",".join(str(p) for p in program.inputs)]
    for f in program.data_files:
        cmd += ["--data_path", str(f)]
    return cmd


def run_corruptions(
    runner: Path,
    programs: list[Program],
    count: int,
    *,
    workers: int = 8,
    timeout: float = 60.0,
    seed: int = 0,
    env: dict[str, str] | None = None,
    work_dir: Path | None = None,
    device_arch: int | None = None,
) -> dict[str, Any]:
    """Runs ``count`` corrupted programs (spread over ``programs``) through ``runner``; the counts per class and
    per kind, a few examples of each class, and ``ok`` (0 crashes, hangs and GPU faults, every corrupted cubin
    refused). With ``device_arch`` (the runner's GPU, e.g. 90) only a cubin of that arch must be refused: the
    runtime loads and checks the cubins of the GPU's arch alone, so a program built for several archs runs
    cleanly with another arch's cubin corrupted (counted apart, ``other_arch_cubin_corruptions``)."""
    jobs: list[tuple[Program, str, str, bytes, int | None]] = []
    per_program = max(1, count // max(1, len(programs)))
    located: dict[str, dict[str, int]] = {}
    for p_index, program in enumerate(programs):
        data = program.pte.read_bytes()
        regions = locate_regions(data)
        located[program.name] = {
            "blobs": len(regions.blobs),
            "cubins": len(regions.cubins),
            "bytes": len(data),
        }
        n = per_program if p_index < len(programs) - 1 else count - per_program * (len(programs) - 1)
        for kind, what, corrupted, arch in corruptions(data, regions, max(0, n), seed + p_index):
            jobs.append((program, kind, what, corrupted, arch))
    tmp = Path(tempfile.mkdtemp(prefix="gpu_faults_", dir=work_dir))

    def one(item: tuple[int, tuple[Program, str, str, bytes, int | None]]) -> dict[str, Any]:
        i, (program, kind, what, corrupted, arch) = item
        path = tmp / f"c{i}.pte"
        path.write_bytes(corrupted)
        try:
            r = subprocess.run(_runner_cmd(runner, program, path), env=env, capture_output=True, text=True,
                               errors="replace", timeout=timeout)  # fmt: skip
            rc, stderr = r.returncode, r.stderr
        except subprocess.TimeoutExpired as e:
            rc, stderr = None, (e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else "")
        finally:
            path.unlink(missing_ok=True)
        cls = classify(rc, stderr)
        message = next((ln for ln in reversed(stderr.splitlines()) if "CudaTritonBackend" in ln), "")
        if not message:
            message = next((ln for ln in reversed(stderr.splitlines()) if "error" in ln.lower()), "")
        return {"program": program.name, "kind": kind, "what": what, "class": cls, "rc": rc, "cubin_arch": arch,
                "refused_cubin": CUBIN_REFUSED in stderr, "message": message[-300:],
                "stderr_tail": stderr[-800:] if cls in ("crash", "hang", "gpu_fault") else ""}  # fmt: skip

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        runs = list(pool.map(one, enumerate(jobs)))
    try:
        tmp.rmdir()
    except OSError:
        pass
    by_class = {c: sum(r["class"] == c for r in runs) for c in CLASSES}
    by_kind = {k: {c: sum(r["class"] == c for r in runs if r["kind"] == k) for c in CLASSES} for k in KINDS}
    foreign = device_arch is not None  # only cubins of the GPU's arch must be refused
    cubin_runs, other_arch = [], []
    for r in runs:
        if r["kind"] == "cubin":
            is_other = foreign and r["cubin_arch"] not in (None, device_arch)
            (other_arch if is_other else cubin_runs).append(r)
    cubins_not_refused = [r for r in cubin_runs if not r["refused_cubin"]]
    examples: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        bucket = examples.setdefault(r["class"], [])
        if len(bucket) < (10 if r["class"] in ("crash", "hang", "gpu_fault") else 3):
            bucket.append(r)
    ok = (
        by_class["crash"] == 0
        and by_class["hang"] == 0
        and by_class["gpu_fault"] == 0
        and not cubins_not_refused
    )
    return {"runs": len(runs), "by_class": by_class, "by_kind": by_kind, "programs": located,
            "cubin_corruptions": len(cubin_runs), "cubin_corruptions_not_refused": len(cubins_not_refused),
            "other_arch_cubin_corruptions": len(other_arch),
            "cubin_not_refused_examples": cubins_not_refused[:5], "examples": examples, "ok": ok}  # fmt: skip


def summary_line(result: dict[str, Any]) -> str:
    c = result["by_class"]
    return (f"{result['runs']} corrupted programs: {c['clean_error']} clean errors, {c['ran']} ran, "
            f"{c['crash']} crashes, {c['hang']} hangs, {c['gpu_fault']} GPU faults; corrupted cubins refused "
            f"{result['cubin_corruptions'] - result['cubin_corruptions_not_refused']}/{result['cubin_corruptions']}"
            f" -> {'PASS' if result['ok'] else 'FAIL'}")  # fmt: skip


def markdown(result: dict[str, Any], header: dict[str, Any]) -> str:
    lines = [f"## Corrupted programs through the runner ({header['date']}, {header['gpu']})", "",
             f"Command: `{header['command']}`; {result['runs']} runs, timeout {header['timeout']} s.", "",
             "| kind | " + " | ".join(CLASSES) + " |", "|---|" + "---|" * len(CLASSES)]  # fmt: skip
    for k, counts in result["by_kind"].items():
        lines.append(f"| {k} | " + " | ".join(str(counts[c]) for c in CLASSES) + " |")
    lines.append("| all | " + " | ".join(str(result["by_class"][c]) for c in CLASSES) + " |")
    lines += ["", summary_line(result), ""]
    for cls in ("crash", "hang", "gpu_fault"):
        for r in result["examples"].get(cls, []):
            lines.append(f"- {cls}: {r['program']} {r['kind']} ({r['what']}): rc {r['rc']} {r['message']}")
    return "\n".join(lines) + "\n"


def programs_from_manifest(exports: Path, manifest: dict[str, Any], only: list[str] | None) -> list[Program]:
    out = []
    for e in manifest["entries"]:
        if e["expect"] != "pass" or (only and e["name"] not in only):
            continue
        io = json.loads((exports / e["io"]).read_text())
        out.append(Program(e["name"], exports / e["pte"], [exports / i["file"] for i in io["inputs"]],
                           [exports / f for f in e.get("data_files", [])]))  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--count", type=int, default=3000, help="corrupted programs in all (spread over the programs)"
    )
    ap.add_argument("--workers", type=int, default=8, help="runner processes at a time")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds before a run counts as a hang")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="*", help="only these manifest entries")
    ap.add_argument(
        "--runner", help="an already built cuda_triton_runner (default: build it like gpu_validate)"
    )
    args = ap.parse_args(argv)

    sys.path.insert(0, str(ROOT / "scripts"))
    import gpu_validate

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not gpu_validate.MANIFEST.exists():
        print(f"{gpu_validate.MANIFEST} not found: run `python scripts/gpu_validate.py prepare` on the CPU machine "
              "and carry .carry/gpu_validate", file=sys.stderr)  # fmt: skip
        return 2
    manifest = json.loads(gpu_validate.MANIFEST.read_text())
    programs = programs_from_manifest(gpu_validate.EXPORTS, manifest, args.only)
    runner = Path(args.runner) if args.runner else gpu_validate.build_runner([])
    gpu = gpu_name()
    print(
        f"[faults] {len(programs)} programs, {args.count} corruptions, {args.workers} workers on {gpu}",
        flush=True,
    )
    result = run_corruptions(runner, programs, args.count, workers=args.workers, timeout=args.timeout,
                             seed=args.seed, device_arch=gpu_arch())  # fmt: skip
    header = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "gpu": gpu,
              "command": "PYTHONPATH=backends python scripts/gpu_faults.py " + " ".join(argv or sys.argv[1:]),
              "timeout": args.timeout, "manifest_set": manifest.get("set")}  # fmt: skip
    (out / "gpu_faults.json").write_text(json.dumps({**header, **result}, indent=1) + "\n")
    md = markdown(result, header)
    (out / "gpu_faults.md").write_text(md)
    print(md)
    return 0 if result["ok"] else 1


def gpu_arch() -> int | None:
    """The first GPU's sm arch (90 for an H100 or H200), None when nvidia-smi cannot say."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=30)  # fmt: skip
        return round(float(r.stdout.split()[0]) * 10) if r.returncode == 0 and r.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None


def gpu_name() -> str:
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=30)  # fmt: skip
        return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else "no GPU"
    except (OSError, subprocess.TimeoutExpired):
        return "no GPU"


if __name__ == "__main__":
    sys.exit(main())
