#!/usr/bin/env python
"""Export a model to an ExecuTorch .pte whose convolutions run as AOT-compiled Triton kernels (no GPU needed).

Examples::

    python scripts/export_pte.py --model resnet50 --out exports/resnet50.pte
    python scripts/export_pte.py --model unet --dtype fp16 --archs 90 --external-weights
    python scripts/export_pte.py --module my_net.py:Net --input-shape 1,3,64,64 --out exports/net.pte
    python scripts/export_pte.py --list

It prints a partition report (convolutions delegated, those left on the CPU and why, kernels compiled, blob,
weight and .pte sizes, time per stage) and writes, beside ``<out>.pte``:

* ``<out>.ptd``-style weights file ``<tag>.ptd`` when ``--external-weights`` is given (default tag: the .pte's
  stem); pass it to the runner with ``--data_path``;
* ``<out>.input<i>.bin``: input ``i`` as raw little-endian elements of the model dtype in logical row-major
  order (the format of ``cuda_triton_runner --inputs``);
* ``<out>.ref.bin``: the reference outputs, every output's elements in logical row-major order, concatenated, in
  the model dtype (the format ``cuda_triton_runner --output_file`` writes, so the two files compare directly).
  Computed by eager PyTorch on the CPU in float32 from the same (dtype-rounded) weights and inputs, then cast
  to the model dtype;
* ``<out>.io.json``: what those files hold: for each input and output its file, byte offset, shape and dtype,
  the model, dtype, archs, and a suggested tolerance (``atol``/``rtol``) for comparing a GPU run with the
  reference (TF32 is on for fp32 unless ``--no-tf32``).

Run on a GPU machine: ``cuda_triton_runner --model_path <out>.pte [--data_path <tag>.ptd] --inputs
<out>.input0.bin --output_file <out>.gpu.bin``, then compare ``<out>.gpu.bin`` with ``<out>.ref.bin`` using
``<out>.io.json`` (scripts/gpu_validate.py does this).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import importlib.util
import json
import logging
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

DTYPES = {
    "fp32": torch.float32,
    "float32": torch.float32,
    "fp16": torch.float16,
    "float16": torch.float16,
    "half": torch.float16,
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
}
DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
APIS = ("transform_and_lower", "to_backend")


def parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(s) for s in text.replace("x", ",").split(",") if s.strip())
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"bad shape {text!r}; write it like 1,3,224,224") from e
    if not shape or any(s <= 0 for s in shape):
        raise argparse.ArgumentTypeError(f"bad shape {text!r}")
    return shape


def load_module_class(spec: str) -> type[torch.nn.Module]:
    """``path/to/file.py:ClassName`` -> the class."""
    if ":" not in spec:
        raise SystemExit(f"--module wants file.py:Class, got {spec!r}")
    path, name = spec.rsplit(":", 1)
    file = Path(path)
    if not file.is_file():
        raise SystemExit(f"--module: no file {file}")
    mod_spec = importlib.util.spec_from_file_location(file.stem, file)
    assert mod_spec is not None and mod_spec.loader is not None
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules[file.stem] = module
    mod_spec.loader.exec_module(module)
    cls = getattr(module, name, None)
    if cls is None:
        raise SystemExit(f"--module: {file} has no {name}")
    return cls


def build_model(
    args: argparse.Namespace, dtype: torch.dtype
) -> tuple[str, torch.nn.Module, tuple[torch.Tensor, ...]]:
    from cuda_triton.models.zoo import build

    if args.model:
        shape = args.input_shape[0] if args.input_shape else None
        if args.input_shape and len(args.input_shape) > 1:
            raise SystemExit("zoo models take one input; give --input-shape once")
        model, example = build(args.model, dtype, shape, seed=args.seed)
        return args.model, model, example
    if not args.input_shape:
        raise SystemExit("--module needs --input-shape (repeat it for several inputs)")
    cls = load_module_class(args.module)
    gen = torch.manual_seed(args.seed)
    model = cls().eval().to(dtype)
    example = tuple(torch.randn(s, generator=gen).to(dtype) for s in args.input_shape)
    return cls.__name__, model, example


def tolerance(dtype: torch.dtype, tf32: bool) -> dict[str, float]:
    if dtype == torch.float32:
        return {"atol": 2e-3, "rtol": 2e-3} if tf32 else {"atol": 1e-4, "rtol": 1e-4}
    if dtype == torch.float16:
        return {"atol": 2e-2, "rtol": 2e-2}
    return {"atol": 6e-2, "rtol": 6e-2}


def raw_bytes(t: torch.Tensor) -> bytes:
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def write_reference(
    out: Path, name: str, model: torch.nn.Module, example: tuple[torch.Tensor, ...], dtype: torch.dtype, tf32: bool,
    archs: tuple[int, ...], extra: dict[str, Any],
) -> list[Path]:  # fmt: skip
    """The input/output pair beside the .pte (formats in the module docstring)."""
    written: list[Path] = []
    inputs = []
    for i, x in enumerate(example):
        path = out.with_name(f"{out.stem}.input{i}.bin")
        path.write_bytes(raw_bytes(x))
        written.append(path)
        inputs.append({"file": path.name, "shape": list(x.shape), "dtype": DTYPE_NAMES[x.dtype]})
    ref_model = copy.deepcopy(model).float()
    with torch.no_grad():
        result = ref_model(*(x.float() for x in example))
    flat, _ = torch.utils._pytree.tree_flatten(result)
    outputs = []
    blob = bytearray()
    for t in flat:
        if not isinstance(t, torch.Tensor):
            continue
        data = raw_bytes(t.to(dtype))
        outputs.append(
            {
                "offset_bytes": len(blob),
                "nbytes": len(data),
                "shape": list(t.shape),
                "dtype": DTYPE_NAMES[dtype],
            }
        )
        blob += data
    ref = out.with_name(f"{out.stem}.ref.bin")
    ref.write_bytes(bytes(blob))
    written.append(ref)
    meta = {
        "model": name,
        "pte": out.name,
        "dtype": DTYPE_NAMES[dtype],
        "archs": list(archs),
        "allow_tf32": tf32,
        "inputs": inputs,
        "reference": {
            "file": ref.name,
            "computed_by": "eager PyTorch on the CPU in float32 from the dtype-rounded weights and inputs, cast to the model dtype",
            "outputs": outputs,
        },
        "tolerance": tolerance(dtype, tf32),
        **extra,
    }
    io = out.with_name(f"{out.stem}.io.json")
    io.write_text(json.dumps(meta, indent=1) + "\n")
    written.append(io)
    return written


def mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


# The on/off options of `CudaTritonOptions` as flags: (flag, option field, help). A ``--no-`` flag turns off an
# option that is on by default; any other turns on one that is off.
OPTION_FLAGS = (
    ("--no-strict", "strict", "leave ops the delegate declines on the CPU instead of failing the export"),
    ("--no-tf32", "allow_tf32", "exact fp32 (no TF32 tensor cores)"),
    ("--no-tf32-on-fp16", "tf32_on_fp16",
     "TF32 on TF32 tensor cores only (no fp32 convs on fp16 tensor cores with power-of-two scaling)"),
    ("--no-fold-bn", "fold_batch_norm",
     "keep eval-mode batch norms on the CPU instead of folding them into the convolution before them"),
    ("--no-channels-last", "channels_last",
     "keep every intermediate in the layout the graph records (default: channels-last after convolutions)"),
    ("--no-fuse-epilogues", "fuse_epilogues",
     "run every elementwise chain as its own kernel (default: in the convolution or GEMM before it, where it can)"),
    ("--no-fuse-prologues", "fuse_prologues",
     "run a chain that only a convolution reads as its own kernel (default: in that convolution's loads)"),
    ("--fold-layer-norms", "fold_layer_norms",
     "fold a layer norm that only a GEMM reads into the GEMM (default: a norm kernel of its own)"),
    ("--programmatic-launch", "programmatic_launch",
     "build and launch the sm_90 kernels for programmatic dependent launch (compile spec programmatic_launch)"),
)  # fmt: skip


def option_flags(args: argparse.Namespace) -> dict[str, bool]:
    """The `CudaTritonOptions` fields the OPTION_FLAGS set, from the parsed arguments."""
    out = {}
    for flag, field, _ in OPTION_FLAGS:
        given = getattr(args, flag.removeprefix("--").replace("-", "_"))
        out[field] = not given if flag.startswith("--no-") else given
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    src = ap.add_mutually_exclusive_group()
    src.add_argument(
        "--model", help="a model of the in-tree zoo (see --list), or tv:<name> for a torchvision classifier"
    )
    src.add_argument(
        "--module", help="file.py:Class, a module constructed with no arguments (needs --input-shape)"
    )
    src.add_argument("--list", action="store_true", help="list the zoo and exit")
    ap.add_argument(
        "--input-shape", type=parse_shape, action="append", help="e.g. 1,3,224,224; repeat per input"
    )
    ap.add_argument(
        "--dtype", default="fp32", choices=sorted(DTYPES), help="model and input dtype (default fp32)"
    )
    ap.add_argument(
        "--archs", default="80,90", help="SM archs to compile for, e.g. 80,90 or 90 (default 80,90)"
    )
    ap.add_argument("--out", type=Path, help="the .pte to write (default exports/<model>[_<dtype>].pte)")
    ap.add_argument(
        "--external-weights", nargs="?", const="", default=None, metavar="TAG",
        help="store the delegate's weights in <TAG>.ptd beside the .pte (default tag: the .pte's stem)",
    )  # fmt: skip
    ap.add_argument("--api", choices=APIS, default="transform_and_lower", help="the ExecuTorch lowering API")
    for flag, _, help_text in OPTION_FLAGS:
        ap.add_argument(flag, action="store_true", help=help_text)
    ap.add_argument("--tuning-table", help="a tuning table JSON to use before the shipped one")
    ap.add_argument(
        "--device-memory", action="store_true",
        help="plan delegate inputs/outputs in CUDA memory (compile spec target_device=cuda:0; the runner then needs "
        "the CUDA DeviceAllocator)",
    )  # fmt: skip
    ap.add_argument(
        "--device-io", action="store_true",
        help="with --device-memory implied: the program's inputs and outputs stay in device memory too (no copy at "
        "the program boundary; the caller hands over and receives CUDA tensors, cuda_triton.device_io)",
    )  # fmt: skip
    ap.add_argument(
        "--no-reference", action="store_true", help="do not write the reference input/output pair"
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of the random weights and inputs")
    ap.add_argument("--report-json", type=Path, help="also write the report as JSON here")
    ap.add_argument(
        "-v", "--verbose", action="store_true", help="list every convolution and show library logs"
    )
    args = ap.parse_args(argv)

    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR, format="%(name)s: %(message)s")
    if not args.verbose:
        warnings.filterwarnings(
            "ignore"
        )  # torch/executorch deprecation chatter; the report says what matters
    from cuda_triton.models.zoo import ZOO

    if args.list:
        for entry in ZOO.values():
            print(f"{entry.name:<12} input {','.join(map(str, entry.input_shape)):<16} {entry.description}")
        return 0
    if not args.model and not args.module:
        ap.error("give --model (see --list) or --module file.py:Class")
    if args.model and args.model not in ZOO and not args.model.startswith("tv:"):
        ap.error(f"unknown zoo model {args.model!r}; choose from {', '.join(ZOO)} or tv:<torchvision model>")

    import cuda_triton.backend as backend
    from cuda_triton import CudaTritonOptions, CudaTritonPartitioner
    from cuda_triton.conv import compile_pool
    from executorch.exir import to_edge, to_edge_transform_and_lower

    dtype = DTYPES[args.dtype]
    options = CudaTritonOptions(
        archs=args.archs,
        **option_flags(args),
        tuning_table=args.tuning_table,
        target_device="cuda:0" if args.device_memory or args.device_io else None,
    )
    t_start = time.perf_counter()
    name, model, example = build_model(args, dtype)
    out: Path = args.out or Path("exports") / (
        f"{name}.pte" if dtype == torch.float32 else f"{name}_{DTYPE_NAMES[dtype]}.pte"
    )
    if out.suffix != ".pte":
        out = out.with_suffix(".pte")
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.external_weights is not None:
        tag = args.external_weights or out.stem
        options = dataclasses.replace(options, external_tag=tag)

    shapes = " ".join("x".join(map(str, x.shape)) for x in example)
    print(
        f"exporting {name} (input {shapes}, {DTYPE_NAMES[dtype]}) for "
        f"{', '.join('sm_90a' if a == 90 else f'sm_{a}' for a in options.archs)} via {args.api}"
    )
    backend.reset_stats()
    partitioner = CudaTritonPartitioner(options)
    t0 = time.perf_counter()
    ep = torch.export.export(model, example)
    t1 = time.perf_counter()
    if args.api == "transform_and_lower":
        edge = to_edge_transform_and_lower(ep, partitioner=[partitioner])
    else:
        edge = to_edge(ep).to_backend(partitioner)
    t2 = time.perf_counter()
    if args.device_io:
        from cuda_triton.device_io import device_io_backend_config

        program = edge.to_executorch(device_io_backend_config())
    else:
        program = edge.to_executorch()
    t3 = time.perf_counter()
    program.save(str(out))
    written = [out]
    if options.external_tag:
        program.write_tensor_data_to_file(str(out.parent))
        written.append(out.parent / f"{options.external_tag}.ptd")
    t4 = time.perf_counter()

    compile_pool.shutdown(wait=True)  # reap the compile workers (their CPU time is counted below)
    cpu = os.times()
    cpu_s = cpu.user + cpu.system + cpu.children_user + cpu.children_system
    report = partitioner.last_report
    stats = backend.PreprocessStats()
    for s in backend.STATS_HISTORY:
        stats.merge(s)
    print()
    print(report.format(verbose=args.verbose) if report else "no partition report (nothing was partitioned)")
    per_arch = stats.kernels_unique // max(len(options.archs), 1)
    templates = ", ".join(f"{k} {v}" for k, v in sorted(stats.templates.items()))
    print(
        f"kernels: {stats.kernels_unique} distinct compiled ({per_arch} per arch x {len(options.archs)} archs), "
        f"{stats.kernels_in_blobs} kernel records in {stats.partitions} blobs; templates: {templates or '-'}; "
        f"schedules from a tuning table: {stats.tuned_ops}/{stats.ops}"
    )
    weights_where = f"in {options.external_tag}.ptd" if options.external_tag else "in the .pte"
    pte_size = out.stat().st_size
    print(
        f"sizes: blobs {mb(stats.blob_bytes)}, cubins {mb(stats.cubin_bytes)} ({stats.cubins_unique} distinct, in the "
        f".pte), delegate weights {mb(stats.constant_bytes)} ({weights_where}), .pte {mb(pte_size)}"
    )
    print(
        f"time: export {t1 - t0:.1f} s, lower {t2 - t1:.1f} s (preprocess {stats.total_seconds:.1f} s, waiting for "
        f"compiles {stats.compile_seconds:.1f} s), to_executorch {t3 - t2:.1f} s, write {t4 - t3:.1f} s; "
        f"total {t4 - t0:.1f} s; process CPU incl. start-up and compile workers {cpu_s:.1f} s"
    )
    timings = {
        "export": t1 - t0,
        "lower": t2 - t1,
        "to_executorch": t3 - t2,
        "write": t4 - t3,
        "total": t4 - t0,
    }
    if not args.no_reference:
        extra = {"data_files": [p.name for p in written if p.suffix == ".ptd"], "api": args.api}
        written += write_reference(out, name, model, example, dtype, not args.no_tf32, options.archs, extra)
    print("wrote: " + ", ".join(str(p) for p in written))
    if args.report_json:
        args.report_json.parent.mkdir(parents=True, exist_ok=True)
        args.report_json.write_text(
            json.dumps(
                {
                    "model": name, "dtype": DTYPE_NAMES[dtype], "api": args.api, "archs": list(options.archs),
                    "convs": report.num_convs if report else 0, "delegated": report.num_delegated if report else 0,
                    "partitions": len(report.partitions) if report else 0, "counts": report.counts() if report else {},
                    "batch_norms_folded": sum(d.folded_batch_norm is not None for d in report.decisions)
                    if report else 0,
                    "left_on_cpu": [d.__dict__ for d in report.left_on_cpu] if report else [],
                    "stats": stats.__dict__, "timings_s": timings, "pte_bytes": pte_size, "cpu_s": cpu_s,
                    "wall_s": time.perf_counter() - t_start,
                },
                indent=1,
            )
            + "\n"
        )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
