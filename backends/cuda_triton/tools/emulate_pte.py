"""Run CudaTritonBackend delegate blobs on the CPU exactly as the C++ runtime would (TRITON_INTERPRET=1).

For every lowered module of an edge program the emulator

1. parses the blob with the Python reader (`cuda_triton.serialization.blob.deserialize`);
2. takes the constants (prepared weights, biases) from the module's named data, by key, with the recorded dtype;
3. gives every value its buffer: intermediates at their planned offsets in one arena (filled with NaN bytes),
   views at their byte offsets in their root's buffer, the delegate inputs it receives - in the order of the
   ``executorch_call_delegate`` node's arguments, which is what ExecuTorch hands the runtime - copied in with
   the recorded strides;
4. runs every launch of every op in order: the ``@triton.jit`` function behind the launch's kernel record
   through the interpreter, with the RECORDED args and grid (pointers = the buffers, like device addresses) and
   the kernel's constexprs. For a convolution record the launches are re-derived from the recorded op
   (ConvProblem + template + schedule) and must equal the recorded kernels, grids and args; other kinds find
   their launch through the fake cubin `fake_compile` stored for it;
5. compares every convolution's output with ATen (`reference_convolution` on the emulated input) and returns the
   delegate outputs read back with the recorded strides (`run_program` compares the whole program with eager).

`run_program` interprets the whole edge program (CPU ops in PyTorch, delegates emulated) so that its output can
be compared with eager PyTorch. ``main`` does that for a zoo model:

    TRITON_INTERPRET=1 PYTHONPATH=backends python -m cuda_triton.tools.emulate_pte demo --dtype fp32

(kernels are not compiled: the AOT compile is replaced by fake kernel records with the launch's ABI).
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import copy  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

from cuda_triton.conv.binding import CONV_OVERLOADS, aten_overload  # noqa: E402
from cuda_triton.conv.op import reference_convolution  # noqa: E402
from cuda_triton.conv.params import ConvParams  # noqa: E402
from cuda_triton.conv.problem import ConvProblem  # noqa: E402
from cuda_triton.conv.templates import get_template  # noqa: E402
from cuda_triton.conv.templates._interpreter import patch_interpreter_bf16_dot  # noqa: E402
from cuda_triton.conv.templates.base import SCRATCH_ROLES  # noqa: E402
from cuda_triton.kernel.launch import KernelLaunch, ScalarArg, Schedule, TensorArg, running_arch  # noqa: E402
from cuda_triton.serialization.blob import (  # noqa: E402
    ConstantRef,
    ConvRecord,
    DelegateBlob,
    NullPtr,
    OpRecord,
    Scalar,
    ValueRef,
    deserialize,
)

if os.environ.get("TRITON_INTERPRET") == "1":  # bf16 kernels are emulated too (see _interpreter.py)
    patch_interpreter_bf16_dot()

TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "fp64": torch.float64}
PROBLEM_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64"}


class EmulationError(AssertionError):
    """The blob disagrees with what the templates would launch, or an op computes a wrong result."""


# The launch behind each fake cubin (`fake_compile`): what the emulator runs for a kernel record.
FAKE_LAUNCHES: dict[bytes, KernelLaunch] = {}


# ---- fake AOT compile -----------------------------------------------------------------------------------------
@contextlib.contextmanager
def fake_compile() -> Iterator[None]:
    """Replace the AOT compile with kernel records that carry the launch's name and ABI (no cubins built)."""
    from cuda_triton.kernel.aot import CompiledKernel, abi_types
    from cuda_triton.preprocess import kernels

    saved = (kernels.compile_all, kernels.launch_key, kernels.prefetch_enabled)

    def key(template: str, problem: Any, schedule: Schedule, index: int, launch: KernelLaunch,
            arch: int) -> str:  # fmt: skip
        return repr((template, problem, schedule, index, int(arch)))

    def compile_all(jobs: dict[str, Any]) -> dict[str, CompiledKernel]:
        out = {}
        for k, job in jobs.items():
            launch = job.launch()
            target = launch.for_arch(job.arch)
            name = target.name
            # A distinct "cubin" per distinct kernel (name + constexprs), so deduplication behaves as for real.
            cubin = repr((name, target.constexprs, sorted(target.compile_options().items()))).encode()
            FAKE_LAUNCHES[cubin] = launch
            out[k] = CompiledKernel(
                name=name, arch=job.arch, cubin=cubin, ptx="", num_warps=target.num_warps, num_ctas=1, shared=0,
                global_scratch_size=0, global_scratch_align=1, profile_scratch_size=0, profile_scratch_align=1,
                launch_cooperative_grid=False, launch_pdl=False, param_types=abi_types(target),
                triton_version="emulated",
            )  # fmt: skip
        return out

    kernels.compile_all = compile_all  # type: ignore[assignment]
    kernels.launch_key = key  # type: ignore[assignment]
    kernels.prefetch_enabled = lambda: False  # type: ignore[assignment]
    try:
        yield
    finally:
        kernels.compile_all, kernels.launch_key, kernels.prefetch_enabled = saved


# ---- one blob -------------------------------------------------------------------------------------------------
def _span(sizes: list[int], strides: list[int]) -> int:
    if any(s == 0 for s in sizes):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(sizes, strides, strict=True))


def _parse_schedule(key: str) -> dict[str, int]:
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"([A-Za-z_]+?)(-?\d+)(?:_|$)", key)}


def op_params(op: OpRecord) -> ConvParams:
    return ConvParams(
        tuple(op.stride), tuple(op.padding_before), tuple(op.padding_after), tuple(op.dilation),
        bool(op.transposed), tuple(op.output_padding), int(op.groups),
    )  # fmt: skip


def derive_launches(
    blob: DelegateBlob, op: OpRecord, allow_tf32: bool
) -> tuple[ConvProblem, list[KernelLaunch]]:
    """The launches the templates give for the recorded op (what the preprocess should have recorded)."""
    x = blob.values[op.input]
    template = get_template(op.template)
    raw = _parse_schedule(op.schedule)
    # Schedule keys are "<name><value>"; names that end in a digit cannot be split back, so match on the
    # template's own schedules when possible.
    sched = Schedule.make(raw.pop("w", 4), raw.pop("s", 2), **raw)
    problem = ConvProblem.from_shapes(
        tuple(x.sizes), tuple(x.strides), tuple(op.weight_sizes), tuple(op.weight_strides), op.bias is not None,
        op_params(op), PROBLEM_DTYPES[x.dtype], allow_tf32,
    )  # fmt: skip
    for cand in [sched, *template.schedules(problem), template.heuristic_schedule(problem)]:
        if cand.key() == op.schedule:
            sched = cand
            break
    return problem, template.launches(problem, sched)


@dataclass
class BlobRun:
    outputs: list[torch.Tensor]


def _rel_err(out: Any, ref: Any) -> float:
    """max |out - ref| / max |ref| (the worst over tuple outputs)."""
    if isinstance(out, (tuple, list)):
        return max(_rel_err(o, r) for o, r in zip(out, ref, strict=True))
    out64, ref64 = out.detach().double(), ref.detach().double()
    if out64.numel() == 0:
        return 0.0
    if not torch.isfinite(out64).all():
        return float("inf")
    return float((out64 - ref64).abs().max() / ref64.abs().max().clamp_min(1e-30))


def _tol(dtype: str) -> float:
    return {"fp32": 2e-3, "fp64": 1e-9, "fp16": 2e-2, "bf16": 5e-2}[dtype]


def _conv_launches(
    blob: DelegateBlob, oi: int, op: ConvRecord, allow_tf32: bool
) -> tuple[ConvProblem, list[KernelLaunch]]:
    """The template's launches for a convolution record, checked against what the record says it launches."""
    problem, derived = derive_launches(blob, op, allow_tf32)
    if len(derived) != len(op.launches):
        raise EmulationError(
            f"op {oi}: {len(op.launches)} launches recorded, the template gives {len(derived)}"
        )
    scratch_refs: dict[str, Any] = {}
    for li, (rec, launch) in enumerate(zip(op.launches, derived, strict=True)):
        kernel_names = {arch: blob.kernels[k].name for arch, k in rec.kernels.items()}
        expected = {arch: launch.for_arch(arch).name for arch in rec.kernels}
        if kernel_names != expected:
            raise EmulationError(
                f"op {oi} launch {li}: kernels {kernel_names}, the template gives {expected}"
            )
        if tuple(rec.grid) != tuple(launch.grid):
            raise EmulationError(f"op {oi} launch {li}: grid {rec.grid}, the template gives {launch.grid}")
        if len(rec.args) != len(launch.args):
            raise EmulationError(
                f"op {oi} launch {li}: {len(rec.args)} args, the template gives {len(launch.args)}"
            )
        for ai, (ra, da) in enumerate(zip(rec.args, launch.args, strict=True)):
            where = f"op {oi} launch {li} ({launch.name}) arg {ai}"
            if isinstance(da, TensorArg) and da.role in SCRATCH_ROLES:
                # Scratch (split-K partials, a channels-last input copy): an intermediate of the declared dtype,
                # the same value for every launch of the op.
                sv = blob.values[ra.value] if isinstance(ra, ValueRef) else None
                if (
                    sv is None
                    or sv.kind != "intermediate"
                    or sv.dtype != da.dtype
                    or ra != scratch_refs.setdefault(da.role, ra)
                ):
                    raise EmulationError(
                        f"{where} ({da.role}): recorded {ra}, expected a {da.dtype} intermediate"
                    )
            elif isinstance(da, TensorArg):
                want = {
                    "input": ValueRef(op.input), "output": ValueRef(op.output),
                    "weight": ConstantRef(op.weight),
                    "bias": NullPtr() if op.bias is None else ConstantRef(op.bias),
                }.get(da.role)  # fmt: skip
                if want is not None and ra != want:
                    raise EmulationError(f"{where} ({da.role}): recorded {ra}, expected {want}")
            else:
                assert isinstance(da, ScalarArg)
                if not isinstance(ra, Scalar) or ra.type != da.type or ra.value != da.value:
                    raise EmulationError(f"{where} ({da.name}): recorded {ra}, the template gives {da}")
    return problem, derived


def _faked_launch(
    blob: DelegateBlob, named_data: dict[str, bytes], oi: int, li: int, rec: Any
) -> KernelLaunch:
    """The launch behind a launch record's kernel, found through its (fake) cubin in the named data."""
    if not rec.kernels:
        raise EmulationError(f"op {oi} launch {li}: no kernel")
    kernel = blob.kernels[next(iter(rec.kernels.values()))]
    cubin = named_data.get(kernel.cubin_key)
    if cubin is None:
        raise EmulationError(f"op {oi} launch {li}: cubin {kernel.cubin_key} is not in the named data")
    launch = FAKE_LAUNCHES.get(cubin)
    if launch is None:
        raise EmulationError(
            f"op {oi} launch {li}: kernel {kernel.name} was not compiled under `fake_compile`, so the emulator "
            "cannot tell which Triton function it is"
        )
    return launch


def _element_size(dtype: str) -> int:
    return torch.empty((), dtype=TORCH_DTYPES[dtype]).element_size()


def emulate_blob(
    data: bytes,
    named_data: dict[str, bytes],
    inputs: list[torch.Tensor],
    allow_tf32: bool = False,
) -> BlobRun:
    """Execute one delegate blob on the CPU the way runtime/backend/delegate.cpp does."""
    blob = deserialize(data)
    if len(inputs) != blob.num_inputs:
        raise EmulationError(f"the delegate gets {len(inputs)} inputs, the blob has {blob.num_inputs}")
    consts: list[torch.Tensor] = []
    for c in blob.constants:
        raw = named_data.get(c.key)
        if raw is None:
            raise EmulationError(f"constant {c.key} is not in the named data")
        if len(raw) != c.nbytes:
            raise EmulationError(f"constant {c.key}: {len(raw)} bytes, the blob says {c.nbytes}")
        t = torch.frombuffer(bytearray(raw), dtype=TORCH_DTYPES[c.dtype]) if raw else torch.empty(0)
        consts.append(t.reshape(c.sizes) if raw else t)
    # The device arena: intermediates at their planned offsets, so a plan that overlaps two live values computes
    # a wrong result here too. All-ones bytes are NaN in every float dtype: a read before a write poisons.
    arena = torch.full((max(blob.arena_size, 1),), 255, dtype=torch.uint8)
    bufs: list[torch.Tensor] = []  # one flat buffer per value: what its device address points at
    for i, v in enumerate(blob.values):
        n = max(_span(v.sizes, v.strides), 1)
        dtype = TORCH_DTYPES[v.dtype]
        nbytes = n * _element_size(v.dtype)
        if v.kind == "intermediate":
            if v.offset + nbytes > arena.numel():
                raise EmulationError(f"value {i}: bytes {v.offset}..{v.offset + nbytes} outside the arena")
            buf = arena[v.offset : v.offset + nbytes].view(dtype)
        elif v.kind == "view":
            root = bufs[v.index].view(torch.uint8)
            if v.offset + nbytes > root.numel():
                raise EmulationError(
                    f"view {i}: bytes {v.offset}..{v.offset + nbytes} outside value {v.index}"
                )
            buf = root[v.offset : v.offset + nbytes].view(dtype)
        else:
            buf = torch.full((n,), float("nan"), dtype=dtype)
        if v.kind == "input":
            x = inputs[v.index]
            if x.dtype != dtype:
                raise EmulationError(f"delegate input {v.index}: dtype {x.dtype}, the plan has {v.dtype}")
            if list(x.shape) != v.sizes:
                raise EmulationError(
                    f"delegate input {v.index}: sizes {list(x.shape)}, the plan has {v.sizes}"
                )
            if _span(v.sizes, v.strides):
                torch.as_strided(buf, v.sizes, v.strides).copy_(x)
        bufs.append(buf)

    def view(i: int) -> torch.Tensor:
        v = blob.values[i]
        return torch.as_strided(bufs[i], v.sizes, v.strides)

    def argument(ra: Any) -> Any:
        if isinstance(ra, ValueRef):
            return bufs[ra.value]
        if isinstance(ra, ConstantRef):
            return consts[ra.constant].reshape(-1)
        if isinstance(ra, NullPtr):
            return None
        return ra.value

    for oi, op in enumerate(blob.ops):
        if isinstance(op, ConvRecord):
            problem, launches = _conv_launches(blob, oi, op, allow_tf32)
            x_in = view(op.input).clone()
        else:
            launches = [_faked_launch(blob, named_data, oi, li, rec) for li, rec in enumerate(op.launches)]
        for rec, launch in zip(op.launches, launches, strict=True):
            target = launch.for_arch(running_arch())
            target.fn[tuple(rec.grid)](
                *(argument(a) for a in rec.args), **dict(target.constexprs), **target.compile_options()
            )
        if isinstance(op, ConvRecord):
            # The ATen comparison needs the original weights: `run_program` does it with these.
            _LAST_OP_IO.append((op, problem, x_in, view(op.output).clone()))
    outs: list[torch.Tensor | None] = [None] * blob.num_outputs
    for i, v in enumerate(blob.values):
        if v.kind == "output":
            outs[v.index] = view(i).clone()
    return BlobRun(outputs=[o for o in outs if o is not None])


_LAST_OP_IO: list[tuple[OpRecord, ConvProblem, torch.Tensor, torch.Tensor]] = []


# ---- a whole edge program -------------------------------------------------------------------------------------
def named_data_of(lowered: Any) -> dict[str, bytes]:
    """The lowered module's named data (weights, cubins); the backend module imports executorch, so lazily."""
    from cuda_triton.backend import named_data_of as of_lowered

    return of_lowered(lowered)


@dataclass
class ProgramRun:
    output: Any
    delegates: list[BlobRun] = field(default_factory=list)
    op_errors: list[tuple[str, float, float]] = field(default_factory=list)  # (op description, rel err, tol)


def _check_op_against_aten(lowered: Any, call_args: list[torch.Tensor]) -> list[tuple[str, float, float]]:
    """Compare each emulated op with ATen on the emulated input and the ORIGINAL weights of the submodule
    (with a batch norm the partitioner put after the convolution folded in, as the graph module says, unless
    the delegate's options turn the fold off: then the batch norm is an op of its own)."""
    from cuda_triton._passes.batch_norm_fold import batch_norm_fold, conv_constants
    from cuda_triton._passes.pad_fold import folds_into_users, pad_fold
    from cuda_triton.conv.binding import bind_conv, is_conv_node
    from cuda_triton.partition.options import CudaTritonOptions
    from cuda_triton.utils.graph import constant_names

    ep = lowered.original_module
    folds = CudaTritonOptions.from_compile_specs(lowered.compile_specs).fold_batch_norm
    convs = [n for n in ep.graph_module.graph.nodes if is_conv_node(n)]
    errs = []
    for node, (op, _problem, x_in, out) in zip(convs, _LAST_OP_IO, strict=True):
        a = bind_conv(node)
        params = a.params
        if folds_into_users(a.input):  # else the pad is a kernel of the delegate, whose output the conv reads
            fold, _ = pad_fold(node, a, True)
            assert fold is not None
            params = fold.params
        bn_fold = batch_norm_fold(node, a, constant_names(ep))[0] if folds else None
        w, b = conv_constants(ep, a, bn_fold)
        if params != op_params(op):
            errs.append(
                (f"{node.name}: recorded params {op_params(op)} != graph {params}", float("inf"), 0.0)
            )
            continue
        ref = reference_convolution(x_in.double(), w.double(), None if b is None else b.double(), params)
        dtype = {v: k for k, v in TORCH_DTYPES.items()}[out.dtype]
        errs.append((f"{node.name} ({op.template}/{op.schedule})", _rel_err(out, ref), _tol(dtype)))
    return errs


def run_program(ep: Any, inputs: tuple[torch.Tensor, ...], allow_tf32: bool = False) -> ProgramRun:
    """Interpret an edge ExportedProgram (after lowering): CPU nodes in PyTorch, delegate calls emulated."""
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    gm = ep.graph_module
    result = ProgramRun(output=None)

    class Interp(torch.fx.Interpreter):
        def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
            if aten_overload(target) in CONV_OVERLOADS:  # a convolution left on the CPU
                return convolution_in_fp32(target, args, kwargs)
            if "executorch_call_delegate" in str(target):
                lowered = args[0]
                assert isinstance(lowered, LoweredBackendModule)
                call_args = list(args[1:])
                _LAST_OP_IO.clear()
                run = emulate_blob(lowered.processed_bytes, named_data_of(lowered), call_args, allow_tf32)
                result.delegates.append(run)
                result.op_errors.extend(_check_op_against_aten(lowered, call_args))
                return tuple(run.outputs)
            return super().call_function(target, args, kwargs)

    # Program state (parameters/buffers/constants) first, then user inputs, in placeholder order.
    sig = ep.graph_signature
    state: list[Any] = []
    user = iter(inputs)
    for spec in sig.input_specs:
        if spec.target is not None and spec.target in ep.state_dict:
            state.append(ep.state_dict[spec.target])
        elif spec.target is not None and spec.target in ep.constants:
            state.append(ep.constants[spec.target])
        else:
            state.append(next(user))
    out = Interp(gm).run(*state)
    n_user = len(sig.user_outputs)
    out = list(out)[-n_user:] if isinstance(out, (list, tuple)) else [out]
    result.output = out[0] if len(out) == 1 else tuple(out)
    return result


def emulate_pte_file(path: str, inputs: list[torch.Tensor], **kwargs: Any) -> list[torch.Tensor]:
    """A saved .pte's first method run on the CPU (`emulate_pte_file.emulate_pte_file`)."""
    from cuda_triton.tools.emulate_pte_file import emulate_pte_file as run_file

    return run_file(path, inputs, **kwargs)


def lower(model: torch.nn.Module, example: tuple[torch.Tensor, ...], api: str = "transform_and_lower",
          allow_tf32: bool = False) -> Any:  # fmt: skip
    """Export and lower ``model`` with the CudaTritonPartitioner (fake AOT compile); the edge ExportedProgram."""
    from executorch.exir import to_edge, to_edge_transform_and_lower

    from cuda_triton import CudaTritonOptions, CudaTritonPartitioner

    options = CudaTritonOptions(allow_tf32=allow_tf32)
    with fake_compile():
        ep = torch.export.export(model, example)
        part = CudaTritonPartitioner(options)
        if api == "transform_and_lower":
            edge = to_edge_transform_and_lower(ep, partitioner=[part])
        else:
            edge = to_edge(ep).to_backend(part)
    return edge.exported_program()


def convolution_in_fp32(target: Any, args: Any, kwargs: Any) -> Any:
    """``target(*args, **kwargs)`` for an ATen convolution; with fp16/bf16 tensors computed in fp32 and rounded once
    (CPU references of 16-bit convolutions are computed in fp32: `cuda_triton.conv.op.reference_convolution`)."""
    tensors = [t for t in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    half = {t.dtype for t in tensors if t.dtype in (torch.float16, torch.bfloat16)}
    if not half:
        return target(*args, **kwargs)
    (dtype,) = half
    widen = lambda v: v.float() if isinstance(v, torch.Tensor) and v.dtype == dtype else v
    tree_map = torch.utils._pytree.tree_map
    return target(*tree_map(widen, args), **tree_map(widen, kwargs)).to(dtype)


def eager_reference(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> Any:
    """``model(*inputs)`` without autograd. With fp16/bf16 inputs an fp32 copy of the model runs on the widened
    inputs and every floating output is rounded once to that dtype: CPU references of 16-bit convolutions are
    computed in fp32 (`cuda_triton.conv.op.reference_convolution` says why)."""
    half = {x.dtype for x in inputs if x.dtype in (torch.float16, torch.bfloat16)}
    if not half:
        with torch.no_grad():
            return model(*inputs)
    if len(half) > 1:
        raise ValueError(f"eager_reference: inputs mix {sorted(map(str, half))}")
    (dtype,) = half
    with torch.no_grad():
        out = copy.deepcopy(model).float()(*(x.float() if x.dtype == dtype else x for x in inputs))
    return torch.utils._pytree.tree_map(
        lambda t: t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t, out
    )


def check_model(model: torch.nn.Module, example: tuple[torch.Tensor, ...], api: str = "transform_and_lower",
                verbose: bool = True) -> tuple[float, ProgramRun]:  # fmt: skip
    """Lower, emulate, and return (relative error of the program output vs eager, the run)."""
    edge_ep = lower(model, example, api)
    fresh = tuple(torch.randn_like(x) for x in example)
    ref = eager_reference(model, fresh)
    run = run_program(edge_ep, fresh)
    err = _rel_err(run.output, ref)
    if verbose:
        for what, e, tol in run.op_errors:
            print(f"  op {what}: rel err {e:.2e} (tol {tol:.0e}){'' if e <= tol else '  <-- WRONG'}")
        print(f"  program output: rel err {err:.2e} vs eager ({len(run.delegates)} delegate calls)")
    return err, run


def main(argv: list[str] | None = None) -> int:
    from cuda_triton.models.zoo import build

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="+")
    ap.add_argument("--dtype", default="fp32", choices=sorted(TORCH_DTYPES))
    ap.add_argument("--api", default="transform_and_lower", choices=["transform_and_lower", "to_backend"])
    ap.add_argument("--shape", default=None, help="input shape override, e.g. 1x3x32x32")
    args = ap.parse_args(argv)
    bad = 0
    for name in args.model:
        shape = tuple(int(s) for s in args.shape.split("x")) if args.shape else None
        model, example = build(name, TORCH_DTYPES[args.dtype], input_shape=shape)
        print(f"{name} ({args.dtype}, {args.api}):")
        err, run = check_model(model, example, args.api)
        tol = _tol(args.dtype) * 10
        wrong = err > tol or any(e > t for _, e, t in run.op_errors)
        bad += wrong
        print(f"  {'WRONG' if wrong else 'ok'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
