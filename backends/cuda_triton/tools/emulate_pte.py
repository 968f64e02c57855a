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
import copy  # noqa: E402
import sys  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

from cuda_triton.conv.binding import CONV_OVERLOADS, aten_overload  # noqa: E402
from cuda_triton.conv.op import reference_convolution  # noqa: E402
from cuda_triton.tools.emulate_blob import (  # noqa: E402
    LAST_OP_IO,
    TORCH_DTYPES,
    BlobRun,
    emulate_blob,
    fake_compile,
    op_params,
    rel_err,
    tolerance,
)


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
    from cuda_triton.ops.elementwise.reference import run_program as run_chain
    from cuda_triton.partition.options import CudaTritonOptions
    from cuda_triton.preprocess.elementwise import steps_program
    from cuda_triton.utils.graph import constant_names

    ep = lowered.original_module
    folds = CudaTritonOptions.from_compile_specs(lowered.compile_specs).fold_batch_norm
    convs = [n for n in ep.graph_module.graph.nodes if is_conv_node(n)]
    errs = []
    # Records name their convolution first (`profiling_name`); a convolution with a fused epilogue is drafted
    # where its chain ends, so records are not in graph order.
    io = {entry[0].name.split(":", 1)[0]: entry for entry in LAST_OP_IO}
    if sorted(io) != sorted(n.name for n in convs):
        return [(f"convolution records {sorted(io)} != graph {[n.name for n in convs]}", float("inf"), 0.0)]
    for node in convs:
        op, _problem, x_in, out, extras = io[node.name]
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
        if op.epilogue:  # the fused chain on the convolution's result (in fp32, as the kernel computes it)
            ref = run_chain(steps_program(op.epilogue, first_is_result=True), [ref, *extras]).double()
        dtype = {v: k for k, v in TORCH_DTYPES.items()}[out.dtype]
        errs.append((f"{node.name} ({op.template}/{op.schedule})", rel_err(out, ref), tolerance(dtype)))
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
                LAST_OP_IO.clear()
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
          allow_tf32: bool = False, options: Any = None) -> Any:  # fmt: skip
    """Export and lower ``model`` with the CudaTritonPartitioner (fake AOT compile); the edge ExportedProgram.
    ``options`` (a `CudaTritonOptions`) replaces the default options with ``allow_tf32``."""
    from executorch.exir import to_edge, to_edge_transform_and_lower

    from cuda_triton import CudaTritonOptions, CudaTritonPartitioner

    options = options or CudaTritonOptions(allow_tf32=allow_tf32)
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
                verbose: bool = True, options: Any = None) -> tuple[float, ProgramRun]:  # fmt: skip
    """Lower (with ``options``, default ones when None), emulate, and return (relative error of the program output
    vs eager, the run)."""
    edge_ep = lower(model, example, api, options=options)
    fresh = tuple(torch.randn_like(x) for x in example)
    ref = eager_reference(model, fresh)
    run = run_program(edge_ep, fresh)
    err = rel_err(run.output, ref)
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
        tol = tolerance(args.dtype) * 10
        wrong = err > tol or any(e > t for _, e, t in run.op_errors)
        bad += wrong
        print(f"  {'WRONG' if wrong else 'ok'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
