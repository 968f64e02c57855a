"""Export the zoo models and compare two trees' delegate blobs launch by launch.

Two steps, so that each tree's ``cuda_triton`` package does its own export (either tree may be an older checkout,
whose package keeps the AOT compiler in ``cuda_triton.conv.aot``):

    # dump the plans of one tree (the package on PYTHONPATH is the one exported with)
    PYTHONPATH=/work/main/backends python scripts/compare_exports.py dump --out /tmp/main.json
    PYTHONPATH=$PWD/backends       python scripts/compare_exports.py dump --out /tmp/branch.json
    # print every difference (exit status 1 when there is one)
    python scripts/compare_exports.py diff /tmp/main.json /tmp/branch.json

A dump holds, per (model, dtype, lowering API): the ops left outside the delegates (edge op name -> count) and,
per delegate, the blob read back with its named data (`cuda_triton.backend.read_lowered`) as plain JSON: the
value table, every constant (dtype, shape, SHA-256 of its bytes), and every op record with its launches
(kernel name and launch metadata per arch, grid, each argument with the value or constant it points at resolved).
Indices that only number records are kept as they are, so a reordering shows up as a difference too.

By default kernels are not compiled: every launch gets a stand-in kernel record with the launch's kernel name,
warps and parameter types, and a stand-in "cubin" that identifies the kernel by name, constexprs and compile
options (two launches share one iff they would compile to the same code). ``--compile`` compiles for real
(slow on a small machine; a warm ``TRITON_CACHE_DIR`` makes the second tree cheap).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

API_NAMES = ("transform_and_lower", "to_backend")
DTYPE_NAMES = ("fp32", "fp16", "bf16")


# ---- stand-in compile ----------------------------------------------------------------------------------------
def install_fake_compile() -> None:
    """Replace ``compile_launch`` wherever the package imported it with a record-only stand-in."""
    try:
        import cuda_triton.kernel.aot as aot
    except ImportError:
        # Checkouts older than commit 7f70df6 (e.g. 777edd1, the code docs/performance.md measured) keep the AOT
        # compiler in cuda_triton.conv.aot; dumping one of them is how an export is compared with such a baseline.
        import cuda_triton.conv.aot as aot  # type: ignore[no-redef]

    real = aot.compile_launch

    def fake(launch: Any, arch: int, pdl: bool = False) -> Any:
        launch = launch.for_arch(arch)
        identity = (launch.name, launch.constexprs, sorted(launch.compile_options().items()))
        # pdl is named only when set, so that dumps of trees that predate it compare equal to newer ones
        stand_in = repr((*identity, "pdl") if pdl else identity).encode()
        return aot.CompiledKernel(
            name=launch.name, arch=arch, cubin=stand_in, ptx="", num_warps=launch.num_warps, num_ctas=1,
            shared=0, global_scratch_size=0, global_scratch_align=1, profile_scratch_size=0,
            profile_scratch_align=1, launch_cooperative_grid=False, launch_pdl=False,
            param_types=aot.abi_types(launch), triton_version="stand-in",
        )  # fmt: skip

    # Import every module of the package that could hold the name, then rebind it there.
    import cuda_triton.backend  # noqa: F401
    import cuda_triton.partition.partitioner  # noqa: F401

    for name, module in list(sys.modules.items()):
        if name.startswith("cuda_triton") and getattr(module, "compile_launch", None) is real:
            module.compile_launch = fake  # type: ignore[attr-defined]


# ---- one export -> JSON --------------------------------------------------------------------------------------
def _digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()[:24]


def _plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (bytes, bytearray)):
        return _digest(bytes(obj))
    if isinstance(obj, float) and obj != obj:
        return "nan"
    return obj


def describe_blob(blob: Any, named: dict[str, bytes]) -> dict[str, Any]:
    """A blob as JSON, launch arguments and kernel indices resolved to what they point at."""
    values = [_plain(v) for v in blob.values]
    constants = []
    for c in blob.constants:
        d = _plain(c)
        d["sha256"] = _digest(named.get(c.key))
        d.pop("key", None)  # a content address: the digest says the same and survives a key scheme change
        constants.append(d)
    kernels = []
    for k in blob.kernels:
        d = _plain(k)
        d.pop("cubin_key", None)
        d.pop("cubin_size", None)
        kernels.append(d)

    def arg(a: Any) -> Any:
        kind = type(a).__name__
        if kind == "ValueRef":
            return {"value": a.value, **values[a.value]}
        if kind == "ConstantRef":
            return {"constant": a.constant, **constants[a.constant]}
        return {kind: _plain(a)}

    ops = []
    for op in blob.ops:
        d = _plain(op)
        d["launches"] = [
            {
                "kernels": {str(arch): kernels[i] for arch, i in lr.kernels.items()},
                "grid": list(lr.grid),
                "args": [arg(a) for a in lr.args],
            }
            for lr in op.launches
        ]
        ops.append(d)
    header = {
        f.name: _plain(getattr(blob, f.name))
        for f in dataclasses.fields(blob)
        if f.name not in ("values", "constants", "kernels", "ops", "triton_version")
    }
    return {"header": header, "values": values, "constants": constants, "kernels": len(kernels), "ops": ops}


def export_one(model_name: str, dtype_name: str, api: str, archs: list[int]) -> dict[str, Any]:
    import torch
    from cuda_triton import CudaTritonOptions, CudaTritonPartitioner
    from cuda_triton.backend import named_data_of, read_lowered
    from cuda_triton.models.zoo import build
    from executorch.exir import to_edge, to_edge_transform_and_lower
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype_name]
    model, example = build(model_name, dtype)
    partitioner = CudaTritonPartitioner(CudaTritonOptions(archs=archs))
    ep = torch.export.export(model, example)
    if api == "transform_and_lower":
        edge = to_edge_transform_and_lower(ep, partitioner=[partitioner])
    else:
        edge = to_edge(ep).to_backend(partitioner)
    gm = edge.exported_program().graph_module
    cpu_ops: collections.Counter[str] = collections.Counter()
    delegates = []
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        name = getattr(node.target, "__name__", str(node.target))
        if name == "executorch_call_delegate":
            continue
        cpu_ops[name] += 1
    for _, module in gm.named_children():
        if isinstance(module, LoweredBackendModule):
            delegates.append(describe_blob(read_lowered(module), named_data_of(module)))
    return {"cpu_ops": dict(sorted(cpu_ops.items())), "delegates": delegates}


def dump(args: argparse.Namespace) -> int:
    os.environ.setdefault("CUDA_TRITON_PROGRESS", "0")
    if not args.compile:
        os.environ["CUDA_TRITON_JOBS"] = "1"  # stand-in compiles are cheap: no worker processes
        os.environ["CUDA_TRITON_PREFETCH"] = "0"
        install_fake_compile()
    import cuda_triton
    from cuda_triton.models.zoo import ZOO

    models = args.models or list(ZOO)
    out: dict[str, Any] = {
        "package": str(Path(cuda_triton.__file__).parent),
        "compiled": bool(args.compile),
        "exports": {},
    }
    for model in models:
        for dtype in args.dtypes:
            for api in args.apis:
                key = f"{model}/{dtype}/{api}"
                t0 = time.perf_counter()
                try:
                    out["exports"][key] = export_one(model, dtype, api, args.archs)
                except Exception as e:  # a failed export is a result to compare too
                    out["exports"][key] = {"error": f"{type(e).__name__}: {e}"}
                print(f"{key}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, sort_keys=True))
    print(f"wrote {args.out} ({len(out['exports'])} exports from {out['package']})")
    return 0


# ---- two dumps -> differences ----------------------------------------------------------------------------
def _flatten(obj: Any, path: str, into: dict[str, Any]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(v, f"{path}.{k}" if path else str(k), into)
    elif isinstance(obj, list):
        into[f"{path}#len"] = len(obj)
        for i, v in enumerate(obj):
            _flatten(v, f"{path}[{i}]", into)
    else:
        into[path] = obj


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    fa: dict[str, Any] = {}
    fb: dict[str, Any] = {}
    _flatten(a, "", fa)
    _flatten(b, "", fb)
    missing = object()
    lines = []
    for path in sorted(set(fa) | set(fb)):
        va, vb = fa.get(path, missing), fb.get(path, missing)
        if va != vb:
            sa = "(absent)" if va is missing else json.dumps(va)
            sb = "(absent)" if vb is missing else json.dumps(vb)
            lines.append(f"{path}: {sa} -> {sb}")
    return lines


def diff(args: argparse.Namespace) -> int:
    a = json.loads(Path(args.a).read_text())
    b = json.loads(Path(args.b).read_text())
    print(f"A: {args.a} ({a['package']})\nB: {args.b} ({b['package']})")
    if a["compiled"] != b["compiled"]:
        print("note: one dump compiled kernels for real and the other did not; kernel records will differ")
    ea, eb = a["exports"], b["exports"]
    differing = 0
    for key in sorted(set(ea) | set(eb)):
        if key not in ea or key not in eb:
            print(f"{key}: only in {'A' if key in ea else 'B'}")
            differing += 1
            continue
        lines = differences(ea[key], eb[key])
        if not lines:
            launches = sum(len(op["launches"]) for d in ea[key].get("delegates", []) for op in d["ops"])
            print(f"{key}: same ({len(ea[key].get('delegates', []))} delegates, {launches} launches)")
            continue
        differing += 1
        print(f"{key}: {len(lines)} differences")
        for line in lines[: args.limit]:
            print(f"  {line}")
        if len(lines) > args.limit:
            print(f"  ... {len(lines) - args.limit} more (--limit)")
    print(f"{differing} of {len(set(ea) | set(eb))} exports differ")
    return 1 if differing else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    d = sub.add_parser(
        "dump", help="export the zoo with the package on PYTHONPATH and write its plans as JSON"
    )
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--models", nargs="*", help="zoo model names (default: all)")
    d.add_argument("--dtypes", nargs="*", default=["fp32"], choices=DTYPE_NAMES)
    d.add_argument("--apis", nargs="*", default=list(API_NAMES), choices=API_NAMES)
    d.add_argument("--archs", nargs="*", type=int, default=[80, 90])
    d.add_argument("--compile", action="store_true", help="compile kernels for real (default: stand-ins)")
    c = sub.add_parser("diff", help="print the differences between two dumps")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--limit", type=int, default=40, help="differences printed per export")
    args = ap.parse_args(argv)
    return dump(args) if args.command == "dump" else diff(args)


if __name__ == "__main__":
    raise SystemExit(main())
