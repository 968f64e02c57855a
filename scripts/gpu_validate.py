#!/usr/bin/env python
"""Validate exported .pte files on a GPU with the C++ runner, and time them against PyTorch eager (cuDNN).

Two halves, one per machine:

    # here (CPU, executorch installed): export the zoo and collect what the GPU machine needs in .carry/
    python scripts/gpu_validate.py prepare [--set core|unet|resnet18] [--only NAME ...] [--fresh]

    # there (GPU, no executorch; device tool with carry [".carry/gpu_validate"]): build the runtime + runner,
    # run every .pte, compare, time, corrupt, report
    PYTHONPATH=backends python scripts/gpu_validate.py run --out $OUT

`prepare` writes ``.carry/gpu_validate/``: ``exports/`` (.pte, .ptd, reference inputs/outputs and io.json from
scripts/export_pte.py; exports are cached in build/gpu_validate_exports/), ``build_deps.tar.xz`` (the ExecuTorch
wheel's include/, share/ and the runtime libraries the runner links, as ``executorch/``; cuda.h from the triton
wheel, as ``cuda_include/``; `run` unpacks it) and ``manifest.json``, and prints the device command. The
carried folder must stay under the device tool's 64 MiB limit, hence the sets (ResNet weights are large).

`run` builds into ``build/gpu/`` (CMake + Ninja of the GPU machine), then for every manifest entry runs
``cuda_triton_runner --inputs ... --output_file ...``, compares the outputs with the CPU reference (max |err| /
max |ref| must be < 1e-3 for fp32 with TF32 and < 1e-2 for fp16/bf16), parses the runner's latency, and times the
same zoo model in PyTorch eager on the GPU (cuDNN, ``cudnn.benchmark``; CUDA events), whose own error against the
same reference is reported beside the runner's (fp32: TF32 allowed, cuDNN's round-to-nearest TF32; informative,
not part of PASS/FAIL). It also checks the failure
paths: a program with cubins for another arch, and corrupted programs (scripts/gpu_faults.py: a clean error or a
clean run, never a crash, a hang or a GPU fault).
Results go to ``$OUT/gpu_validate.json`` and ``$OUT/gpu_validate.md`` (date, GPU, command, table).

The runner's latency is end to end: it includes the operators ExecuTorch runs on the CPU between delegates
(BatchNorm, activations, ...) and, for host-planned programs, the copies in and out of the GPU; eager runs the
whole model on the GPU.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CARRY = ROOT / ".carry" / "gpu_validate"
EXPORTS = CARRY / "exports"
ET_PREFIX = CARRY / "executorch"
CUDA_INCLUDE = CARRY / "cuda_include"
# ExecuTorch's headers and libraries and cuda.h travel xz-packed (13 MB -> 3 MB of the 64 MiB carry); `run` unpacks
# them beside the archive.
BUILD_DEPS = CARRY / "build_deps.tar.xz"
MANIFEST = CARRY / "manifest.json"
EXPORT_CACHE = ROOT / "build" / "gpu_validate_exports"  # ignored; reused by later `prepare` runs
BUILD_DIR = ROOT / "build" / "gpu"
# The device tool copies at most 64 MiB a call, the working tree (~6 MiB, growing) included. A carry above PART_BYTES is
# split (`split_carry`): the largest export files are cut, and the bytes beyond the limit go to sibling folders
# (.carry/gpu_validate_part1, ...) that earlier calls carry while the machine stays warm (a warm machine keeps
# ignored paths between calls); `join_carry` puts the files back together there and checks their SHA-256.
PART_BYTES = 52 * 2**20
# Programs of one model at several batch sizes or export variants hold mostly the same named data (weights and
# cubins): `dedupe_carry` keeps one copy of each buffer of at least this many bytes and records where the others
# were cut out; `join_carry` puts them back.
DEDUPE_MIN_BYTES = 4096
PART_DIR_PREFIX = "gpu_validate_part"
SPLIT_RECORD_BYTES = 512  # room for a cut file's record in the manifest (its name, sizes, digest, pieces)
ET_LIBS = ("libexecutorch.so", "libexecutorch_kernels_optimized.so", "libexecutorch_threadpool.so",
           "libexecutorch_etdump.so")  # fmt: skip
DEVICE_COMMAND = "PYTHONPATH=backends python scripts/gpu_validate.py run --out $OUT"
THRESHOLD = {"float32": 1e-3, "float16": 1e-2, "bfloat16": 1e-2}

# (name, zoo model, dtype, extra export_pte.py flags, expectation)
Entry = tuple[str, str, str, tuple[str, ...], str]
SETS: dict[str, list[Entry]] = {
    "core": [
        ("demo_fp32", "demo", "fp32", (), "pass"),
        ("demo_fp16", "demo", "fp16", ("--archs", "80,90"), "pass"),
        ("demo_bf16", "demo", "bf16", (), "pass"),
        ("demo_fp32_device", "demo", "fp32", ("--device-memory",), "pass"),
        ("demo_fp32_ptd", "demo", "fp32", ("--external-weights",), "pass"),
        ("demo_fp32_to_backend", "demo", "fp32", ("--api", "to_backend"), "pass"),
        ("demo_sm80_only", "demo", "fp32", ("--archs", "80"), "fail_arch"),
        ("wavenet_fp32", "wavenet", "fp32", (), "pass"),
        ("wavenet_fp16_device", "wavenet", "fp16", ("--device-memory",), "pass"),
        ("video_fp32", "video", "fp32", (), "pass"),
        ("mobilenetv2_fp16", "mobilenetv2", "fp16", (), "pass"),
        ("wav2vec2_fp16", "wav2vec2", "fp16", (), "pass"),
    ],
    "unet": [
        ("unet_fp16", "unet", "fp16", (), "pass"),
        ("unet_bf16_device", "unet", "bf16", ("--device-memory",), "pass"),
    ],
    "resnet18": [
        ("resnet18_fp16", "resnet18", "fp16", (), "pass"),
        ("mobilenetv2_fp32", "mobilenetv2", "fp32", (), "pass"),
    ],
    # the two zoo models the sets above leave out, in one carry (unet fp16 + resnet18 fp16 fit under 64 MiB)
    "zoo_rest": [
        ("unet_fp16", "unet", "fp16", (), "pass"),
        ("resnet18_fp16", "resnet18", "fp16", (), "pass"),
    ],
}
# fp32 with TF32 allowed on fp16 tensor cores (F16_MMA: fp16 weights, "amax" and "input_f16" scratch) in the
# C++ runtime: at batch 16, ResNet-18's 3x3 convs are heavy enough for the heuristic to choose it.
SETS["f16_mma"] = [
    ("resnet18_fp32_b16", "resnet18", "fp32", ("--input-shape", "16,3,224,224"), "pass"),
    ("demo_fp32", "demo", "fp32", (), "pass"),
]
# The Gluon box implicit GEMM in the C++ runtime (4-D TMA boxes, device-made descriptors, a channels-last copy
# of the contiguous input): every UNet convolution the template supports pinned to it. ``--pin-template T`` is
# this script's flag, not export_pte's: `prepare` exports the model once as it is, writes a table pinning its
# convolutions to T (`scripts/pin_table.py`) and exports again with that table.
SETS["box"] = [
    ("unet_fp16_box", "unet", "fp16", ("--pin-template", "implicit_gemm_box"), "pass"),
    (
        "unet_bf16_box_device",
        "unet",
        "bf16",
        ("--device-memory", "--pin-template", "implicit_gemm_box"),
        "pass",
    ),
]
# Separates three causes of a wrong UNet output: bf16, device-planned memory or the box template, each variant
# alone (three UNets fill the 64 MiB carry).
SETS["box_debug"] = [
    ("unet_bf16_box", "unet", "bf16", ("--pin-template", "implicit_gemm_box"), "pass"),
    (
        "unet_fp16_box_device",
        "unet",
        "fp16",
        ("--device-memory", "--pin-template", "implicit_gemm_box"),
        "pass",
    ),
    ("unet_bf16_device", "unet", "bf16", ("--device-memory",), "pass"),
]
# One carry for a closing run: the core set plus ResNet-18 (BatchNorm folds, split-K and channels-last copies).
SETS["final"] = [*SETS["core"], ("resnet18_fp16", "resnet18", "fp16", (), "pass")]
# ResNet-50's weights (51 MB in fp16) do not fit beside the runtime libraries in one carry.


# ---- prepare (CPU machine) ----------------------------------------------------------------------------------
def _executorch_root() -> Path:
    import executorch

    return Path(list(executorch.__path__)[0])


def _dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def export_stamp(model: str, dtype: str, flags: list[str], archs: str) -> str:
    """What a cached export was made from: the package's sources and tuning tables, the export script and the
    export's arguments (a digest). A cached program is reused only while its stamp matches, so an edit to the
    backend re-exports instead of timing a program the tree no longer makes."""
    h = hashlib.sha256(json.dumps([model, dtype, flags, archs]).encode())
    h.update(_sources_digest().encode())
    return h.hexdigest()


@functools.cache
def _sources_digest() -> str:
    h = hashlib.sha256()
    package = ROOT / "backends" / "cuda_triton"
    for f in [
        *sorted(package.rglob("*.py")),
        *sorted(package.rglob("*.json")),
        ROOT / "scripts" / "export_pte.py",
    ]:
        h.update(str(f.relative_to(ROOT)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def prepare(args: argparse.Namespace, finish: bool = True) -> int:
    """Export the set's programs into the carry; with ``finish``, split it to the device tool's limit
    (`finish_carry`)."""
    entries = SETS[args.set]
    if CARRY.exists():
        shutil.rmtree(CARRY)
    EXPORTS.mkdir(parents=True)

    et = _executorch_root()
    shutil.copytree(et / "include", ET_PREFIX / "include")
    shutil.copytree(et / "share", ET_PREFIX / "share")
    shutil.copytree(et / "lib" / "cmake", ET_PREFIX / "lib" / "cmake")
    for lib in ET_LIBS:
        if (et / "lib" / lib).exists():
            shutil.copy2(et / "lib" / lib, ET_PREFIX / "lib" / lib)
    import triton

    CUDA_INCLUDE.mkdir(parents=True)
    shutil.copy2(Path(triton.__file__).parent / "backends" / "nvidia" / "include" / "cuda.h", CUDA_INCLUDE)
    pack_build_deps()

    manifest: dict[str, Any] = {"set": args.set, "created": _now(), "host": platform.node(), "entries": []}
    env = dict(os.environ, PYTHONPATH=str(ROOT / "backends") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    EXPORT_CACHE.mkdir(parents=True, exist_ok=True)
    for name, model, dtype, flags, expect in entries:
        if args.only and name not in args.only:
            continue
        cached = EXPORT_CACHE / f"{name}.pte"
        out = EXPORTS / f"{name}.pte"
        export_flags, pin = _split_pin(flags)
        t0 = time.perf_counter()
        stamp_file = EXPORT_CACHE / f"{name}.stamp"
        stamp = export_stamp(model, dtype, flags, args.archs)
        fresh = not (EXPORT_CACHE / f"{name}.io.json").exists() or not stamp_file.exists()
        if args.fresh or fresh or stamp_file.read_text() != stamp:
            if pin is not None:
                export_flags += [
                    "--tuning-table",
                    str(_pin_table(name, model, dtype, export_flags, pin, args, env)),
                ]
            cmd = _export_cmd(model, dtype, cached, export_flags, args.archs)
            print(f"[prepare] {name}: {' '.join(cmd[1:])}", flush=True)
            r = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if r.returncode != 0:
                print(r.stdout[-3000:], r.stderr[-5000:], sep="\n", file=sys.stderr)
                print(f"[prepare] export of {name} failed", file=sys.stderr)
                return 1
            stamp_file.write_text(stamp)
        else:
            print(
                f"[prepare] {name}: reusing {cached}, exported by these sources (--fresh re-exports)",
                flush=True,
            )
            r = subprocess.CompletedProcess([], 0, "", "")
        for f in EXPORT_CACHE.glob(f"{name}.*"):
            if f != stamp_file:
                shutil.copy2(f, EXPORTS / f.name)
        report = [ln for ln in r.stdout.splitlines() if ln.startswith(("kernels:", "sizes:", "time:"))]
        for ln in report:
            print(f"    {ln}")
        io = json.loads((EXPORTS / f"{name}.io.json").read_text())
        manifest["entries"].append(
            {
                "name": name, "model": model, "dtype": io["dtype"], "flags": list(flags), "expect": expect,
                "pte": out.name, "io": f"{name}.io.json", "data_files": io.get("data_files", []),
                "export_seconds": round(time.perf_counter() - t0, 1),
            }
        )  # fmt: skip
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n")
    size = _dir_bytes(CARRY)
    print(f"[prepare] wrote {CARRY} ({size / 2**20:.1f} MiB, {len(manifest['entries'])} programs)")
    if finish:
        finish_carry()
    return 0


def finish_carry() -> None:
    """Share the programs' common named data, split the carry where it still exceeds one call's limit, then print
    the device calls that run it."""
    saved = dedupe_carry()
    if saved:
        print(f"[prepare] named data the programs share is carried once: {saved / 2**20:.1f} MiB saved")
    parts = split_carry()
    print(f"[prepare] {CARRY}: {_dir_bytes(CARRY) / 2**20:.1f} MiB")
    if parts:
        print("\nThe carry is split. On ONE warm GPU machine, with no other call between them:\n")
        for part in parts:
            print(f"    carry ['{part.relative_to(ROOT)}'], command: true")
        print(f"    carry ['{CARRY.relative_to(ROOT)}'], command: {DEVICE_COMMAND}\n")
    else:
        print(f"\nOn the GPU machine (device tool, carry ['{CARRY.relative_to(ROOT)}']):\n")
        print(f"    {DEVICE_COMMAND}\n")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def named_data_buffers(pte: Path) -> list[bytes]:
    """The named-data buffers (weights, cubins) a .pte holds, read with ExecuTorch's deserializer (`prepare` runs
    where executorch is installed)."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    return [bytes(b) for b in deserialize_pte_binary(pte.read_bytes()).named_data.buffers]


def dedupe_carry(buffers_of: Callable[[Path], list[bytes]] = named_data_buffers) -> int:
    """Cut out of each carried .pte every named-data buffer (``buffers_of``) of DEDUPE_MIN_BYTES or more that a
    .pte before it (by name) already holds, recording in the manifest's ``dedupe`` list where each came from
    (file and offset, in that file's whole form); `join_carry` puts them back. Returns the bytes saved."""
    manifest = json.loads(MANIFEST.read_text())
    first: dict[str, tuple[str, int]] = {}  # buffer digest -> (file, offset) of the copy that stays
    records: list[dict[str, Any]] = []
    saved = 0
    for path in sorted(EXPORTS.glob("*.pte")):
        data = path.read_bytes()
        cut: list[list[Any]] = []  # [offset, length, source file, source offset]
        for buffer in buffers_of(path):
            at = data.find(buffer) if len(buffer) >= DEDUPE_MIN_BYTES else -1
            if at < 0:
                continue
            digest = hashlib.sha256(buffer).hexdigest()
            if digest not in first:
                first[digest] = (path.name, at)
            elif not any(at < o + n and o < at + len(buffer) for o, n, _, _ in cut):
                cut.append([at, len(buffer), *first[digest]])
        if not cut:
            continue
        cut.sort()
        kept, pos = bytearray(), 0
        for at, length, _, _ in cut:
            kept += data[pos:at]
            pos = at + length
        kept += data[pos:]
        records.append({"file": path.name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                        "cut": cut})  # fmt: skip
        path.write_bytes(bytes(kept))
        saved += len(data) - len(kept)
    manifest["dedupe"] = records
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n")
    return saved


def _restore_deduped(manifest: dict[str, Any]) -> None:
    """Put back the buffers `dedupe_carry` cut out, in its order (a source file is whole before it is read)."""
    whole: dict[str, bytes] = {}
    for record in manifest.get("dedupe", []):
        path = EXPORTS / record["file"]
        data = path.read_bytes()
        if len(data) == record["size"] and hashlib.sha256(data).hexdigest() == record["sha256"]:
            whole[path.name] = data
            continue
        out, pos = bytearray(), 0
        for at, length, source, source_at in record["cut"]:
            take = at - len(out)
            out += data[pos : pos + take]
            pos += take
            if source not in whole:
                whole[source] = (EXPORTS / source).read_bytes()
            out += whole[source][source_at : source_at + length]
        out += data[pos:]
        if len(out) != record["size"] or hashlib.sha256(out).hexdigest() != record["sha256"]:
            raise SystemExit(
                f"{path.name}: rebuilt from the shared named data, its SHA-256 differs from the export's"
            )
        path.write_bytes(bytes(out))
        whole[path.name] = bytes(out)
        print(f"[run] restored {path.name}'s {len(record['cut'])} shared buffers")


def split_carry(limit: int = PART_BYTES) -> list[Path]:
    """Keep the carry within ``limit`` bytes: cut the largest export files, moving their tails in pieces of at
    most ``limit`` bytes to sibling folders (each within ``limit``), recorded in the manifest's ``split`` list.
    Returns the sibling folders (none when the carry fits). Stale sibling folders are removed first."""
    for old in CARRY.parent.glob(f"{PART_DIR_PREFIX}*"):
        shutil.rmtree(old)
    over = _dir_bytes(CARRY) - limit
    if over <= 0:
        return []
    manifest = json.loads(MANIFEST.read_text())
    split: list[dict[str, Any]] = []
    dirs: list[Path] = []
    room = 0  # bytes left in the last sibling folder
    for path in sorted(EXPORTS.iterdir(), key=lambda f: f.stat().st_size, reverse=True):
        if over <= 0:
            break
        size = path.stat().st_size
        keep = max(0, size - over - SPLIT_RECORD_BYTES)
        record: dict[str, Any] = {
            "file": path.name, "size": size, "kept": keep, "sha256": _sha256(path), "pieces": []
        }  # fmt: skip
        with path.open("r+b") as f:
            offset = keep
            while offset < size:
                if room == 0:
                    dirs.append(CARRY.parent / f"{PART_DIR_PREFIX}{len(dirs) + 1}")
                    dirs[-1].mkdir()
                    room = limit
                f.seek(offset)
                chunk = f.read(min(room, size - offset))
                piece = f"{path.name}.{offset}"
                (dirs[-1] / piece).write_bytes(chunk)
                record["pieces"].append([dirs[-1].name, piece])
                offset += len(chunk)
                room -= len(chunk)
            f.truncate(keep)
        over -= size - keep - SPLIT_RECORD_BYTES  # the manifest grows by the record
        split.append(record)
    manifest["split"] = split
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n")
    for d in dirs:
        print(f"[prepare] {d}: {_dir_bytes(d) / 2**20:.1f} MiB of split export files")
    return dirs


def join_carry() -> None:
    """Put the files `split_carry` cut back together from the sibling folders earlier calls carried, then the named
    data `dedupe_carry` cut out back into each program (a no-op for files already whole); exits with the folder to
    carry when a piece is missing, or when a rebuilt file's SHA-256 differs from the one recorded at the cut."""
    manifest = json.loads(MANIFEST.read_text())
    restored = {r["file"]: (r["size"], r["sha256"]) for r in manifest.get("dedupe", [])}
    for record in manifest.get("split", []):
        path = EXPORTS / record["file"]
        now = (path.stat().st_size, _sha256(path))
        # whole as split, or also with its shared buffers put back by an earlier run
        if now == (record["size"], record["sha256"]) or now == restored.get(record["file"]):
            continue
        sources = [CARRY.parent / folder / piece for folder, piece in record["pieces"]]
        missing = sorted({str(p.parent.relative_to(ROOT)) for p in sources if not p.exists()})
        if missing:
            raise SystemExit(
                f"{path.name} is split and pieces are missing: carry {', '.join(missing)} in earlier calls on the "
                "same warm machine (`prepare` printed the calls)"
            )
        with path.open("r+b") as f:
            f.truncate(record["kept"])
            f.seek(record["kept"])
            for piece in sources:
                f.write(piece.read_bytes())
        if _sha256(path) != record["sha256"]:
            raise SystemExit(f"{path.name}: joined from its pieces, its SHA-256 differs from the split's")
        print(f"[run] joined {path.name} from {len(sources)} pieces")
    _restore_deduped(manifest)


def _export_cmd(model: str, dtype: str, out: Path, flags: list[str], archs: str) -> list[str]:
    return [sys.executable, str(ROOT / "scripts" / "export_pte.py"), "--model", model, "--dtype", dtype,
            "--out", str(out), *(flags if "--archs" in flags else ("--archs", archs, *flags))]  # fmt: skip


def _split_pin(flags: tuple[str, ...]) -> tuple[list[str], str | None]:
    """(export_pte flags, the template of this script's own ``--pin-template`` flag or None)."""
    out = list(flags)
    if "--pin-template" not in out:
        return out, None
    i = out.index("--pin-template")
    template = out[i + 1]
    del out[i : i + 2]
    return out, template


def _pin_table(
    name: str, model: str, dtype: str, flags: list[str], template: str, args: Any, env: dict
) -> Path:
    """Export the model as it is (beside the cache, not carried), then pin its convolutions to ``template``."""
    base = EXPORT_CACHE / "unpinned" / f"{name}.pte"
    base.parent.mkdir(parents=True, exist_ok=True)
    table = EXPORT_CACHE / "unpinned" / f"{name}.pin.json"
    for cmd in (
        _export_cmd(model, dtype, base, flags, args.archs),
        [sys.executable, str(ROOT / "scripts" / "pin_table.py"), str(base), "--template", template, "--out", str(table)],
    ):  # fmt: skip
        print(f"[prepare] {name}: {' '.join(cmd[1:])}", flush=True)
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"[prepare] {name}: failed\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        print("    " + (r.stdout.strip().splitlines() or [""])[-1], flush=True)
    return table


# ---- run (GPU machine) --------------------------------------------------------------------------------------
def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _sh(cmd: list[str], timeout: float = 600, **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout, **kw)


def pack_build_deps() -> None:
    """Replace the copied ExecuTorch prefix and cuda.h with one xz archive (`unpack_build_deps` reverses it)."""
    with tarfile.open(BUILD_DEPS, "w:xz", preset=6) as tar:
        for d in (ET_PREFIX, CUDA_INCLUDE):
            tar.add(d, arcname=d.name)
    for d in (ET_PREFIX, CUDA_INCLUDE):
        shutil.rmtree(d)


def unpack_build_deps() -> None:
    if BUILD_DEPS.exists() and not ET_PREFIX.exists():
        with tarfile.open(BUILD_DEPS) as tar:
            tar.extractall(CARRY, filter="data")


def build_runner(log: list[str]) -> Path:
    unpack_build_deps()
    cmake = shutil.which("cmake") or "cmake"
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    if not (BUILD_DIR / "CMakeCache.txt").exists():
        cfg = [cmake, "-S", str(ROOT), "-B", str(BUILD_DIR), *gen, "-DCMAKE_BUILD_TYPE=Release",
               f"-DCMAKE_PREFIX_PATH={ET_PREFIX}", f"-DCUDA_INCLUDE_DIR={CUDA_INCLUDE}",
               "-DCUDA_TRITON_BUILD_TESTS=OFF"]  # fmt: skip
        r = _sh(cfg)
        log.append(r.stdout[-2000:] + r.stderr[-2000:])
        if r.returncode != 0:
            raise RuntimeError(f"cmake configure failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    r = _sh([cmake, "--build", str(BUILD_DIR), "-j", str(os.cpu_count() or 4)])
    log.append(r.stdout[-2000:] + r.stderr[-2000:])
    if r.returncode != 0:
        raise RuntimeError(f"build failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return BUILD_DIR / "cuda_triton_runner"


LATENCY = re.compile(r"min ([\d.]+) ms, median ([\d.]+) ms, p90 ([\d.]+) ms")
EXECUTE_HOST = re.compile(r"execute host time: median ([\d.]+) us")
SUMMARY = re.compile(r"CudaTritonBackend: (\d+ delegates: .*)")


def _torch_dtype(name: str):
    import torch

    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]


def compare(out_file: Path, io: dict[str, Any]) -> dict[str, Any]:
    return compare_bytes(out_file.read_bytes() if out_file.exists() else b"", io)


def compare_bytes(got_bytes: bytes, io: dict[str, Any]) -> dict[str, Any]:
    """Outputs (every output's elements, row-major, concatenated: the reference file's format) against the CPU
    reference: the worst max |err| / max |ref| over the outputs, and whether it is under the dtype's threshold."""
    import torch

    ref_meta = io["reference"]
    ref_bytes = (EXPORTS / ref_meta["file"]).read_bytes()
    if len(got_bytes) != len(ref_bytes):
        return {"ok": False, "error": f"output has {len(got_bytes)} bytes, reference {len(ref_bytes)}"}
    worst = 0.0
    max_abs = 0.0
    details = []
    for o in ref_meta["outputs"]:
        dt = _torch_dtype(o["dtype"])
        sl = slice(o["offset_bytes"], o["offset_bytes"] + o["nbytes"])
        ref = torch.frombuffer(bytearray(ref_bytes[sl]), dtype=dt).float()
        got = torch.frombuffer(bytearray(got_bytes[sl]), dtype=dt).float()
        if not torch.isfinite(got).all():
            return {"ok": False, "error": "non-finite values in the output"}
        err = (got - ref).abs().max().item() if ref.numel() else 0.0
        scale = ref.abs().max().item() if ref.numel() else 1.0
        rel = err / max(scale, 1e-12)
        details.append({"shape": o["shape"], "max_abs_err": err, "rel_to_max": rel})
        worst = max(worst, rel)
        max_abs = max(max_abs, err)
    threshold = THRESHOLD[io["dtype"]]
    return {"ok": worst < threshold, "rel_to_max": worst, "max_abs_err": max_abs, "threshold": threshold,
            "outputs": details}  # fmt: skip


def run_runner(runner: Path, entry: dict[str, Any], io: dict[str, Any], out_dir: Path, n: int, warmup: int):
    out_file = out_dir / f"{entry['name']}.gpu.bin"
    cmd = [str(runner), "--model_path", str(EXPORTS / entry["pte"]),
           "--inputs", ",".join(str(EXPORTS / i["file"]) for i in io["inputs"]),
           "--output_file", str(out_file), "--num_executions", str(n), "--warmup", str(warmup)]  # fmt: skip
    for f in entry.get("data_files", []):
        cmd += ["--data_path", str(EXPORTS / f)]
    t0 = time.perf_counter()
    try:
        r = _sh(cmd, timeout=300)
    except subprocess.TimeoutExpired:
        return None, out_file, {"rc": None, "error": "timeout", "cmd": cmd}
    info = {"rc": r.returncode, "wall_s": round(time.perf_counter() - t0, 2), "cmd": " ".join(cmd[1:]),
            "stderr_tail": r.stderr[-1500:]}  # fmt: skip
    m = LATENCY.search(r.stdout)
    lat = (
        {"min_ms": float(m.group(1)), "median_ms": float(m.group(2)), "p90_ms": float(m.group(3))}
        if m
        else None
    )
    # The backend's host time per delegate execute (the target of a captured delegate: under 20 us) and how its
    # delegates ran (graph replay or direct launches).
    if h := EXECUTE_HOST.search(r.stdout):
        info["execute_host_us"] = float(h.group(1))
    if g := SUMMARY.search(r.stdout):
        info["execution"] = g.group(1).strip()
    return lat, out_file, info


def eager_time(model_name: str, io: dict[str, Any], n: int) -> dict[str, Any]:
    import torch
    from cuda_triton.models.zoo import build

    dt = _torch_dtype(io["dtype"])
    shape = tuple(io["inputs"][0]["shape"])
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = bool(io.get("allow_tf32", True))
    torch.backends.cudnn.allow_tf32 = bool(io.get("allow_tf32", True))
    model, example = build(model_name, dt, shape, seed=0)
    model = model.cuda()
    x = example[0].cuda()
    res: dict[str, Any] = {}
    with torch.no_grad():
        for _ in range(10):
            y = model(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(n):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            y = model(x)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        # end to end like the runner: host input in, host output out
        xh = example[0].pin_memory() if example[0].is_contiguous() else example[0]
        e2e = []
        for _ in range(n):
            t0 = time.perf_counter()
            y = model(xh.cuda(non_blocking=True))
            y.cpu()
            e2e.append((time.perf_counter() - t0) * 1e3)
    res["median_ms"] = statistics.median(times)
    res["min_ms"] = min(times)
    res["e2e_median_ms"] = statistics.median(e2e)
    # Eager on the GPU against the same CPU reference (same seed, same weights), measured like the runner's
    # output: what cuDNN itself reaches on this model (for fp32, with TF32 as the export allowed it, the
    # PyTorch default: cuDNN rounds operands to nearest TF32). Informative only, never part of PASS/FAIL.
    res["eager_tf32"] = bool(torch.backends.cudnn.allow_tf32) if dt == torch.float32 else None
    flat, _ = torch.utils._pytree.tree_flatten(y)
    got = b"".join(
        t.detach().to(dt).contiguous().cpu().reshape(-1).view(torch.uint8).numpy().tobytes()
        for t in flat
        if isinstance(t, torch.Tensor)
    )
    cmp_ = compare_bytes(got, io)
    if "rel_to_max" in cmp_:
        res["eager_rel_to_max"] = cmp_["rel_to_max"]
    else:
        res["eager_compare_error"] = cmp_.get("error", "?")
    return res


def corruption_test(runner: Path, entries: list[dict[str, Any]], count: int) -> dict[str, Any]:
    """Corrupted copies of the programs through the runner (scripts/gpu_faults.py: random bytes anywhere, in a
    delegate blob, in a cubin, extreme blob fields, truncations): no crash, hang or GPU fault."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import gpu_faults

    programs = gpu_faults.programs_from_manifest(EXPORTS, {"entries": entries}, None)
    return gpu_faults.run_corruptions(
        runner,
        programs,
        count,
        workers=max(1, min(8, (os.cpu_count() or 2) // 2)),
        device_arch=gpu_faults.gpu_arch(),
    )


def run(args: argparse.Namespace) -> int:
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not MANIFEST.exists():
        print(
            f"{MANIFEST} not found: run `python scripts/gpu_validate.py prepare` here and carry .carry",
            file=sys.stderr,
        )
        return 2
    join_carry()
    manifest = json.loads(MANIFEST.read_text())
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    log: list[str] = []
    t0 = time.perf_counter()
    runner = build_runner(log)
    build_s = time.perf_counter() - t0
    print(f"[run] built {runner} in {build_s:.0f} s on {gpu}", flush=True)
    results: list[dict[str, Any]] = []
    for entry in manifest["entries"]:
        if args.only and entry["name"] not in args.only:
            continue
        io = json.loads((EXPORTS / entry["io"]).read_text())
        lat, out_file, info = run_runner(runner, entry, io, out_dir, args.num_executions, args.warmup)
        res: dict[str, Any] = {"name": entry["name"], "model": entry["model"], "dtype": entry["dtype"],
                               "flags": entry["flags"], "expect": entry["expect"], "runner": info, "latency": lat}  # fmt: skip
        if entry["expect"] == "fail_arch":
            msg = info.get("stderr_tail", "")
            res["ok"] = info.get("rc") == 1 and "cubins for sm_80" in msg
        else:
            res["compare"] = (
                compare(out_file, io) if info.get("rc") == 0 else {"ok": False, "error": "runner failed"}
            )
            res["ok"] = info.get("rc") == 0 and res["compare"]["ok"]
            if not args.no_eager and torch.cuda.is_available():
                try:
                    res["eager"] = eager_time(entry["model"], io, args.num_executions)
                except Exception as e:  # report, keep going
                    res["eager"] = {"error": f"{type(e).__name__}: {e}"}
        status = "PASS" if res["ok"] else "FAIL"
        extra = ""
        if lat:
            extra += f" runner median {lat['median_ms']:.3f} ms"
        if "eager" in res and "median_ms" in res["eager"]:
            extra += (
                f", eager {res['eager']['median_ms']:.3f} ms (e2e {res['eager']['e2e_median_ms']:.3f} ms)"
            )
        if "compare" in res and "rel_to_max" in res["compare"]:
            extra += f", err/max {res['compare']['rel_to_max']:.2e}"
        if "eager_rel_to_max" in res.get("eager", {}):
            extra += f" (eager cuDNN {res['eager']['eager_rel_to_max']:.2e})"
        print(f"[run] {status} {entry['name']}{extra}", flush=True)
        if not res["ok"]:
            print(info.get("stderr_tail", "")[-1200:], flush=True)
        results.append(res)

    corruption = None
    passing = [
        e for e in manifest["entries"] if e["expect"] == "pass" and (not args.only or e["name"] in args.only)
    ]
    if passing and args.corruptions > 0:
        sys.path.insert(0, str(ROOT / "scripts"))
        import gpu_faults

        corruption = corruption_test(runner, passing, args.corruptions)
        print(f"[run] {gpu_faults.summary_line(corruption)}")

    summary = {
        "date": _now(), "gpu": gpu, "torch": torch.__version__, "command": DEVICE_COMMAND,
        "manifest_set": manifest.get("set"), "exported": manifest.get("created"), "build_seconds": round(build_s, 1),
        "num_executions": args.num_executions, "warmup": args.warmup, "results": results, "corruption": corruption,
        "all_ok": all(r["ok"] for r in results) and (corruption is None or corruption.get("ok", False)),
    }  # fmt: skip
    (out_dir / "gpu_validate.json").write_text(json.dumps(summary, indent=1) + "\n")
    md = markdown(summary)
    (out_dir / "gpu_validate.md").write_text(md)
    print(md)
    return 0 if summary["all_ok"] else 1


def markdown(s: dict[str, Any]) -> str:
    lines = [
        f"## GPU validation ({s['date']}, {s['gpu']}, torch {s['torch']})",
        "",
        f"Command: `{s['command']}` (set `{s['manifest_set']}`, exported {s['exported']}); runtime build "
        f"{s['build_seconds']} s; {s['num_executions']} timed executions after {s['warmup']} warmup.",
        "Runner latency is end to end (CPU ops between delegates and host copies included); eager is the whole "
        "model on the GPU (cuDNN), `e2e` adds the host->device input copy and device->host output copy.",
        "`err / max` is max |out - ref| / max |ref| against the CPU fp32 reference (PASS: < 1e-3 for fp32 with "
        "TF32, < 1e-2 for fp16/bf16); `eager err / max` is the same measure for PyTorch eager on the GPU (cuDNN; "
        "fp32 with TF32 allowed, PyTorch's default), for comparison only.",
        "",
        "| program | dtype | variant | result | err / max | eager err / max | runner median ms | eager median ms "
        "| eager e2e ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in s["results"]:
        cmp_ = r.get("compare", {})
        err = f"{cmp_['rel_to_max']:.2e}" if "rel_to_max" in cmp_ else cmp_.get("error", "-")
        lat = r.get("latency") or {}
        eager = r.get("eager") or {}
        variant = " ".join(r["flags"]) or "-"
        eager_err = f"{eager['eager_rel_to_max']:.2e}" if "eager_rel_to_max" in eager else "-"
        if r["expect"] == "fail_arch":
            err = "expected clean arch error"
            eager_err = "-"
        lines.append(
            f"| {r['name']} | {r['dtype']} | {variant} | {'PASS' if r['ok'] else 'FAIL'} | {err} | {eager_err} | "
            f"{lat.get('median_ms', '-')} | {round(eager['median_ms'], 3) if 'median_ms' in eager else '-'} | "
            f"{round(eager['e2e_median_ms'], 3) if 'e2e_median_ms' in eager else '-'} |"
        )
    c = s.get("corruption")
    if c:
        k = c["by_class"]
        lines += ["", f"Corrupted programs (scripts/gpu_faults.py): {c['runs']} runs, {k['clean_error']} clean "
                      f"errors, {k['ran']} ran, {k['crash']} crashes, {k['hang']} hangs, {k['gpu_fault']} GPU faults; "
                      f"corrupted cubins refused {c['cubin_corruptions'] - c['cubin_corruptions_not_refused']}/"
                      f"{c['cubin_corruptions']}."]  # fmt: skip
    lines += ["", f"All OK: {s['all_ok']}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="export the zoo and fill .carry/gpu_validate (CPU machine)")
    p.add_argument("--set", choices=sorted(SETS), default="core")
    p.add_argument(
        "--archs", default="90", help="archs for entries that do not set their own (default 90: H200)"
    )
    p.add_argument("--only", nargs="*", help="only these entry names")
    p.add_argument("--fresh", action="store_true", help=f"re-export even if {EXPORT_CACHE} has the program")
    r = sub.add_parser("run", help="build, run, compare and time on the GPU machine")
    r.add_argument("--out", required=True)
    r.add_argument("--num-executions", type=int, default=50)
    r.add_argument("--warmup", type=int, default=5)
    r.add_argument("--corruptions", type=int, default=40)
    r.add_argument("--no-eager", action="store_true")
    r.add_argument("--only", nargs="*", help="only these entry names")
    args = ap.parse_args(argv)
    return prepare(args) if args.cmd == "prepare" else run(args)


if __name__ == "__main__":
    sys.exit(main())
