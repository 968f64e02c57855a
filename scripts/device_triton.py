#!/usr/bin/env python
"""Carry the export machine's Triton to the GPU machine, so its tuner and benchmarks compile what the export ships.

The GPU machine has its own Triton (3.6) and no package registry; the export pins another (3.7.1), and the two can
build the same schedule into different code (docs/performance.md, "Batch-1 layers": a depthwise schedule with no
spills here had 388 bytes of spills and 2000 shuffles there). A wheel is too large for one device call, so
``prepare`` downloads the pinned Triton's wheel for the GPU machine's Python and cuts it into pieces of at most
48 MiB, each in its own carried folder; ``install``, on the GPU machine after the pieces were carried to the same
warm machine, joins them, checks the SHA-256 and installs the wheel into ``build/device-triton`` (an ignored
path, kept between calls while the machine stays warm):

    python scripts/device_triton.py prepare [--python 3.12] [--version 3.7.1]     # here: prints the calls
    # device: carry .carry/device_triton_part1 (command: true), ... then carry .carry/device_triton and run
    python3 scripts/device_triton.py install
    PYTHONPATH=build/device-triton:backends python3 scripts/tune.py ...           # same machine, later calls

Use it for our kernels only (tune.py, bench_conv.py --no-inductor): the GPU machine's torch.compile expects its
own Triton.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CARRY = ROOT / ".carry" / "device_triton"
PART_PREFIX = "device_triton_part"
# A device call carries the working tree too (about 6 MiB) within its 64 MiB.
PART_MIB = 48
TARGET = ROOT / "build" / "device-triton"


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def cut(wheel: Path, limit: int = PART_MIB * 2**20) -> list[Path]:
    """Cut ``wheel`` into pieces of at most ``limit`` bytes, one per sibling folder of the carry, and write the
    manifest (the wheel's name, size, SHA-256 and pieces) into the carry; returns the piece folders."""
    for old in CARRY.parent.glob(f"{PART_PREFIX}*"):
        shutil.rmtree(old)
    shutil.rmtree(CARRY, ignore_errors=True)
    CARRY.mkdir(parents=True)
    pieces = []
    with wheel.open("rb") as f:
        for i, chunk in enumerate(iter(lambda: f.read(limit), b""), start=1):
            folder = CARRY.parent / f"{PART_PREFIX}{i}"
            folder.mkdir()
            (folder / "piece").write_bytes(chunk)
            pieces.append(folder)
    manifest = {"wheel": wheel.name, "size": wheel.stat().st_size, "sha256": _sha256(wheel),
                "pieces": [p.name for p in pieces]}  # fmt: skip
    (CARRY / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return pieces


def join(out_dir: Path) -> Path:
    """The wheel, put back together from the carried pieces into ``out_dir`` and checked; exits naming the
    folder to carry when a piece is missing, or when the joined bytes are not the wheel's."""
    manifest_path = CARRY / "manifest.json"
    if not manifest_path.exists():
        raise SystemExit(
            f"device_triton: {manifest_path.relative_to(ROOT)} is missing: carry .carry/device_triton"
        )
    manifest = json.loads(manifest_path.read_text())
    missing = [p for p in manifest["pieces"] if not (CARRY.parent / p / "piece").exists()]
    if missing:
        raise SystemExit(
            f"device_triton: pieces {missing} are not here: carry each .carry/<piece> folder first, on this same "
            "warm machine (command: true)"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / manifest["wheel"]
    with wheel.open("wb") as f:
        for p in manifest["pieces"]:
            f.write((CARRY.parent / p / "piece").read_bytes())
    if wheel.stat().st_size != manifest["size"] or _sha256(wheel) != manifest["sha256"]:
        wheel.unlink()
        raise SystemExit("device_triton: the joined wheel's SHA-256 differs from the one recorded at the cut")
    return wheel


def prepare(args: argparse.Namespace) -> int:
    tag = args.python.replace(".", "")
    download = ROOT / "build" / "device-triton-wheel"
    shutil.rmtree(download, ignore_errors=True)
    cmd = [sys.executable, "-m", "pip", "download", f"triton=={args.version}", "--no-deps", "--only-binary=:all:",
           "--python-version", args.python, "--platform", args.platform, "-d", str(download), "-q"]  # fmt: skip
    print(f"[device_triton] {' '.join(cmd)}", flush=True)
    subprocess.run(cmd, check=True)
    (wheel,) = list(download.glob(f"triton-{args.version}-cp{tag}-*.whl"))
    pieces = cut(wheel, args.piece_mib * 2**20)
    print(f"[device_triton] {wheel.name}: {wheel.stat().st_size / 2**20:.1f} MiB in {len(pieces)} pieces\n")
    print("On ONE warm GPU machine, with no other call between them:\n")
    for p in pieces:
        print(f"    carry ['{p.relative_to(ROOT)}'], command: true")
    print(f"    carry ['{CARRY.relative_to(ROOT)}'], command: python3 scripts/device_triton.py install")
    print(
        f"\nthen (same machine): PYTHONPATH={TARGET.relative_to(ROOT)}:backends python3 scripts/tune.py ...\n"
    )
    return 0


def install(args: argparse.Namespace) -> int:
    wheel = join(ROOT / "build" / "device-triton-wheel")
    shutil.rmtree(TARGET, ignore_errors=True)
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(TARGET), str(wheel),
           "-q"]  # fmt: skip
    subprocess.run(cmd, check=True)
    probe = "import triton, sys; print('triton', triton.__version__, 'from', triton.__file__)"
    out = subprocess.run([sys.executable, "-c", probe], env={"PYTHONPATH": str(TARGET)}, capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    print(f"[device_triton] installed into {TARGET.relative_to(ROOT)}: {out.strip()}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prepare", help="here: download and cut the wheel, print the device calls")
    p.add_argument("--python", default="3.12", help="the GPU machine's Python (python3 -V there)")
    p.add_argument("--version", default="3.7.1", help="the Triton the export pins")
    p.add_argument("--platform", default="manylinux_2_28_x86_64")
    p.add_argument("--piece-mib", type=int, default=PART_MIB, help="largest piece, MiB")
    sub.add_parser("install", help="GPU machine: join the carried pieces and install the wheel")
    args = ap.parse_args()
    return prepare(args) if args.step == "prepare" else install(args)


if __name__ == "__main__":
    sys.exit(main())
