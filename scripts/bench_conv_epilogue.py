#!/usr/bin/env python
"""Fused convolution epilogues and prologues on the GPU: conv + chain against the plain conv, and against the conv
with the chain as a separate elementwise kernel, on the convolutions of whole models.

    # on the GPU machine (torch + triton, no executorch needed)
    PYTHONPATH=backends python scripts/bench_conv_epilogue.py --out $OUT
    # anywhere, small shapes in the interpreter: every case's three contenders agree with ATen
    TRITON_INTERPRET=1 PYTHONPATH=backends python scripts/bench_conv_epilogue.py --check

Cases: 1x1 (the `gemm` template) and 3x3 (`implicit_gemm`) convolutions of mobilenet_v3_large, efficientnet_b0
and resnet18 shapes, channels-last, at batch 1 and 32, each with the epilogues those networks put after them:
an activation (relu, hardswish, silu), and a residual add (a `LIKE_OUTPUT` operand). Per case, with both sides
replayed from CUDA graphs (`tools/timing.time_side_by_side`, medians of interleaved rounds, warm L2):

* ``plain``: the template's launches for the convolution alone (bias, no epilogue);
* ``fused``: the same template and schedule with the chain in its epilogue;
* ``split``: the plain convolution, then the chain as the standalone elementwise kernel (what an unfused
  delegate runs).

The 1x1 layers also run squeeze-excitation's ``x * s`` (``s`` per image and channel) as a prologue
(rows ``prologue:se``): ``fused`` computes it in the conv's input loads, ``split`` stores it with the elementwise
kernel first, then runs the plain conv on it.

The issue's bar: ``fused`` at most 3% slower than ``plain``. Writes ``$OUT/bench_conv_epilogue.json`` and a
markdown table; every fused output is checked against ATen first (NaN-poisoned outputs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from cuda_triton.conv import ConvParams, ConvProblem
from cuda_triton.conv.epilogue import ConvEpilogue, ConvPrologue, epilogue_operand, prologue_operand
from cuda_triton.conv.op import output_layout, reference_convolution
from cuda_triton.conv.templates import get_template
from cuda_triton.kernel.launch import TRITON_PTR_DTYPE
from cuda_triton.ops.elementwise import ChainBuilder
from cuda_triton.ops.elementwise.launches import launches as elementwise_launches
from cuda_triton.ops.elementwise.reference import run_program
from cuda_triton.ops.tensor_meta import TensorMeta

# (name, C_in, C_out, kernel, H=W, stride) from the models' layers.
LAYERS = [
    ("mnv3.expand.16-64.112", 16, 64, 1, 112, 1),
    ("mnv3.project.120-40.28", 120, 40, 1, 28, 1),
    ("mnv3.expand.80-480.14", 80, 480, 1, 14, 1),
    ("effnet.expand.24-144.56", 24, 144, 1, 56, 1),
    ("effnet.project.672-112.14", 672, 112, 1, 14, 1),
    ("effnet.head.320-1280.7", 320, 1280, 1, 7, 1),
    ("r18.l1.3x3.64", 64, 64, 3, 56, 1),
    ("r18.l2.3x3.128", 128, 128, 3, 28, 1),  # 16-bit: the box template's (its Gluon kernel's epilogue)
    ("r18.l3.3x3.256", 256, 256, 3, 14, 1),
]
# (name, chain builder: (builder, conv value, residual value or None) -> result, needs a residual)
EPILOGUES: list[tuple[str, Any, bool]] = [
    ("relu", lambda b, y, r: b.op("relu", y), False),
    ("hardswish", lambda b, y, r: b.op("hardswish", y), False),
    ("silu", lambda b, y, r: b.op("silu", y), False),
    ("add", lambda b, y, r: b.op("add", y, r), True),
    ("add_relu", lambda b, y, r: b.op("relu", b.op("add", y, r)), True),
]
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def case_tensors(layer: tuple, batch: int, dtype: torch.dtype, device: str) -> dict[str, Any]:
    _, cin, cout, k, hw, stride = layer
    g = torch.Generator(device="cpu").manual_seed(0)
    cl = torch.channels_last
    x = torch.randn(batch, cin, hw, hw, generator=g).to(dtype).to(device).to(memory_format=cl)
    w = (torch.randn(cout, cin, k, k, generator=g) / (cin * k * k) ** 0.5).to(dtype).to(device)
    w = w.to(memory_format=cl)
    bias = torch.randn(cout, generator=g).to(dtype).to(device)
    pad = k // 2
    p = ConvParams((stride, stride), (pad, pad), (pad, pad), (1, 1), False, (0, 0), 1)
    sizes, strides = output_layout(x, w, p)
    residual = torch.empty_strided(sizes, strides, dtype=dtype, device=device).normal_(generator=None)
    scale = torch.randn(batch, cin, 1, 1, generator=g).to(dtype).to(device).to(memory_format=cl)
    return {
        "scale": scale,
        "x": x,
        "w": w,
        "bias": bias,
        "params": p,
        "sizes": sizes,
        "strides": strides,
        "residual": residual,
    }


Launches = tuple[list, dict[str, Any]]  # a contender's launches and the tensors their roles bind


def _run(*steps: Launches) -> None:
    for launches, tensors in steps:
        for launch in launches:
            launch.run(tensors)


def _contender_fns(plain: Launches, fused: Launches, split: list[Launches]) -> dict[str, Any]:
    """The three contenders as callables; the fused one has run once (its output is checked)."""
    fns = {"plain": lambda: _run(plain), "fused": lambda: _run(fused), "split": lambda: _run(*split)}
    fns["fused"]()
    return fns


def contenders(
    t: dict[str, Any], epilogue: tuple[str, Any, bool]
) -> tuple[dict[str, Any], torch.Tensor, Any]:
    """The three contenders (callables), the fused run's output and its ATen reference."""
    x, w, bias, p = t["x"], t["w"], t["bias"], t["params"]
    sizes, strides = t["sizes"], t["strides"]
    dtype_name = TRITON_PTR_DTYPE[str(x.dtype).removeprefix("torch.")]
    problem = ConvProblem.from_tensors(x, w, bias, p, allow_tf32=True)
    template = get_template("gemm" if p.padding_before == (0, 0) else "implicit_gemm")
    schedule = template.heuristic_schedule(problem)
    if not template.takes_epilogue(problem, schedule):
        schedule = next(s for s in template.schedules(problem) if template.takes_epilogue(problem, s))
    out_meta = TensorMeta(tuple(sizes), tuple(strides), str(x.dtype).removeprefix("torch."))
    name, build, residual = epilogue
    b = ChainBuilder()
    y = b.input("in0", out_meta)
    r = b.input("in1", out_meta) if residual else None
    spec = b.build(build(b, y, r), out_dtype=out_meta.dtype, out_strides=out_meta.strides)
    operands = (epilogue_operand(sizes, strides, dtype_name, sizes, strides),) if residual else ()
    fused_problem = replace(problem, epilogue=ConvEpilogue(spec.program, operands))  # type: ignore[arg-type]
    weight = template.prepare_weight(w, problem, schedule)
    scratch = template.allocate_scratch(problem, schedule, x.device)
    plain_out = torch.empty_strided(sizes, strides, dtype=x.dtype, device=x.device)
    fused_out = torch.empty_strided(sizes, strides, dtype=x.dtype, device=x.device).fill_(float("nan"))
    split_out = torch.empty_strided(sizes, strides, dtype=x.dtype, device=x.device)
    base = {"input": x, "weight": weight, "bias": bias, **scratch}
    plain = template.launches(problem, schedule)
    fused = template.launches(fused_problem, schedule)
    chain = elementwise_launches(spec)
    plain_t = {**base, "output": plain_out}
    fused_t = {**base, "output": fused_out, "epilogue1": t["residual"]}
    chain_t = {"in0": plain_out, "in1": t["residual"], "out": split_out}
    fns = _contender_fns((plain, plain_t), (fused, fused_t), [(plain, plain_t), (chain, chain_t)])
    conv = reference_convolution(x.double(), w.double(), bias.double(), p)
    ref = run_program(spec.program, [conv, t["residual"]] if residual else [conv])
    return fns, fused_out, ref


def prologue_contenders(t: dict[str, Any]) -> tuple[dict[str, Any], torch.Tensor, Any]:
    """`contenders` for squeeze-excitation's ``x * s`` before a 1x1 conv (the gemm template); ``s`` is the gate,
    already through its sigmoid, which a whole-model export computes once per (image, channel) in the epilogue of
    the convolution that makes it."""
    x, w, bias, p, s = t["x"], t["w"], t["bias"], t["params"], t["scale"]
    sizes, strides = t["sizes"], t["strides"]
    dtype_name = TRITON_PTR_DTYPE[str(x.dtype).removeprefix("torch.")]
    problem = ConvProblem.from_tensors(x, w, bias, p, allow_tf32=True)
    template = get_template("gemm")
    schedule = template.heuristic_schedule(problem)
    x_meta = TensorMeta(tuple(x.shape), tuple(x.stride()), str(x.dtype).removeprefix("torch."))
    s_meta = TensorMeta(tuple(s.shape), tuple(s.stride()), x_meta.dtype)
    b = ChainBuilder()
    spec = b.build(b.op("mul", b.input("in0", x_meta), b.input("in1", s_meta)))
    operand = prologue_operand(list(s.shape), list(s.stride()), dtype_name, list(x.shape))
    fused_problem = replace(problem, prologue=ConvPrologue(spec.program, (operand,)))  # type: ignore[arg-type]
    weight = template.prepare_weight(w, problem, schedule)
    scratch = template.allocate_scratch(problem, schedule, x.device)
    plain_out = torch.empty_strided(sizes, strides, dtype=x.dtype, device=x.device)
    fused_out = torch.empty_strided(sizes, strides, dtype=x.dtype, device=x.device).fill_(float("nan"))
    scaled = torch.empty_like(x)
    base = {"weight": weight, "bias": bias, **scratch}
    plain, fused = template.launches(problem, schedule), template.launches(fused_problem, schedule)
    chain = elementwise_launches(spec)
    plain_t = {**base, "input": x, "output": plain_out}
    split_t = {**base, "input": scaled, "output": plain_out}
    fused_t = {**base, "input": x, "output": fused_out, "prologue1": s}
    chain_t = {"in0": x, "in1": s, "out": scaled}
    fns = _contender_fns((plain, plain_t), (fused, fused_t), [(chain, chain_t), (plain, split_t)])
    xs = run_program(spec.program, [x, s]).to(x.dtype)
    return fns, fused_out, reference_convolution(xs.double(), w.double(), bias.double(), p)


def bytes_ratio(t: dict[str, Any], chain_name: str) -> float:
    """The fused launch's DRAM bytes over the plain conv's, each tensor read or written once: the floor of
    fused/plain for a memory-bound layer (a residual add reads a second output-sized tensor)."""
    plain = sum(
        t[k].numel() * t[k].element_size() for k in ("x", "w", "bias", "residual")
    )  # residual: the output
    extra = {"add": t["residual"], "add_relu": t["residual"], "prologue:se": t["scale"]}.get(chain_name)
    return 1.0 + (extra.numel() * extra.element_size() / plain if extra is not None else 0.0)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out64, ref64 = out.double(), ref.double().to(out.device)
    if not torch.isfinite(out64).all():
        return float("inf")
    return float((out64 - ref64).abs().max() / ref64.abs().max().clamp_min(1e-30))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="folder for bench_conv_epilogue.json/.md (GPU runs)")
    ap.add_argument("--dtypes", default="fp16", help="comma-separated: fp16, bf16, fp32")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--check", action="store_true", help="correctness only, small shapes (the interpreter's)")
    args = ap.parse_args(argv)
    device = "cpu" if args.check else "cuda"
    if args.check:  # the interpreter's bf16 dot needs the project's patch (conv/templates/_interpreter.py)
        from cuda_triton.conv.templates._interpreter import patch_interpreter_bf16_dot

        patch_interpreter_bf16_dot()
    rows: list[dict[str, Any]] = []
    layers = [(n, ci, co, k, 6 if args.check else hw, s) for n, ci, co, k, hw, s in LAYERS]
    batches = [1, 2] if args.check else [int(b) for b in args.batches.split(",")]
    tol = {"fp16": 1e-2, "bf16": 3e-2, "fp32": 2e-3}
    bad = 0
    for dtype in args.dtypes.split(","):
        for layer in layers[:3] if args.check else layers:
            for batch in batches:
                t = case_tensors(layer, batch, DTYPES[dtype], device)
                chains: list[tuple[str, Any]] = [(e[0], lambda t=t, e=e: contenders(t, e)) for e in EPILOGUES]
                if layer[3] == 1:
                    chains.append(("prologue:se", lambda t=t: prologue_contenders(t)))
                for chain_name, make in chains:
                    fns, out, ref = make()
                    err = rel_err(out, ref)
                    row: dict[str, Any] = {
                        "layer": layer[0], "batch": batch, "dtype": dtype, "epilogue": chain_name, "err": err,
                        "bytes_ratio": bytes_ratio(t, chain_name),
                    }  # fmt: skip
                    bad += not err <= tol[dtype]
                    if not args.check:
                        from cuda_triton.tools.timing import time_side_by_side

                        timed = time_side_by_side(fns, reps=args.reps)
                        row.update({f"{k}_us": v for k, (v, _) in timed.items()})
                        row["fused_vs_plain"] = row["fused_us"] / row["plain_us"]
                        row["split_vs_fused"] = row["split_us"] / row["fused_us"]
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
        ratios = [r["fused_vs_plain"] for r in rows if "fused_vs_plain" in r]
        summary = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "gpu": gpu, "torch": torch.__version__,
            "command": "PYTHONPATH=backends python scripts/bench_conv_epilogue.py --out $OUT", "rows": rows,
            "geomean_fused_vs_plain": statistics.geometric_mean(ratios) if ratios else None,
            "worst_fused_vs_plain": max(ratios) if ratios else None,
        }  # fmt: skip
        (out / "bench_conv_epilogue.json").write_text(json.dumps(summary, indent=1) + "\n")
        lines = [
            f"# Fused conv epilogues and prologues ({gpu}, {summary['date']})", "",
            "fused/plain beside bytes fused/plain, its floor where the layer is memory-bound.", "",
            "| layer | batch | dtype | chain | plain us | fused us | split us | fused/plain | bytes fused/plain "
            "| split/fused |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]  # fmt: skip
        for r in rows:
            if "fused_us" in r:
                lines.append(
                    f"| {r['layer']} | {r['batch']} | {r['dtype']} | {r['epilogue']} | {r['plain_us']:.2f} | "
                    f"{r['fused_us']:.2f} | {r['split_us']:.2f} | {r['fused_vs_plain']:.3f} | "
                    f"{r['bytes_ratio']:.3f} | {r['split_vs_fused']:.2f}x |"
                )
        (out / "bench_conv_epilogue.md").write_text("\n".join(lines) + "\n")
    print(f"{len(rows)} cases, {bad} wrong")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
