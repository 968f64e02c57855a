"""One CudaTritonBackend delegate blob run on the CPU exactly as the C++ runtime would (TRITON_INTERPRET=1); the
whole edge program around it is `cuda_triton.tools.emulate_pte` (whose docstring lists the steps of a blob's run).

`fake_compile` replaces the AOT compile with fake kernel records that carry the launch's ABI, so a lowering needs
no GPU; `EmulatedDelegate` is one initialised delegate (its constants, and its state buffer, zeroed once and kept
from one execute to the next), whose `execute` runs the blob's launches through the interpreter, keeping each
convolution's input and output (`LAST_OP_IO`) for the program's check against ATen; `emulate_blob` is one execute
of a fresh delegate.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import contextlib  # noqa: E402
import re  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from dataclasses import dataclass, replace  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

from cuda_triton.conv.epilogue import ConvEpilogue, ConvPrologue, epilogue_operand, prologue_operand  # noqa: E402
from cuda_triton.conv.params import ConvParams  # noqa: E402
from cuda_triton.conv.problem import ConvProblem  # noqa: E402
from cuda_triton.conv.templates import get_template  # noqa: E402
from cuda_triton.conv.templates._interpreter import patch_interpreter  # noqa: E402
from cuda_triton.conv.templates.base import SCRATCH_ROLES  # noqa: E402
from cuda_triton.conv.templates.epilogue_args import EPILOGUE_ROLES, PROLOGUE_ROLES  # noqa: E402
from cuda_triton.kernel.launch import KernelLaunch, ScalarArg, Schedule, TensorArg, running_arch  # noqa: E402
from cuda_triton.ops.tensor_meta import contiguous_strides  # noqa: E402
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

if os.environ.get("TRITON_INTERPRET") == "1":  # bf16 kernels run right, and faster (see _interpreter.py)
    patch_interpreter()

TORCH_DTYPES = {
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
    "fp32": torch.float32,
    "fp64": torch.float64,
    "int32": torch.int32,
}
PROBLEM_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64"}
# The blob dtype of a Triton pointer type a `TensorArg` names, where the two names differ.
_BLOB_DTYPE_OF_PTR = {"i32": "int32"}


class EmulationError(AssertionError):
    """The blob disagrees with what the templates would launch, or an op computes a wrong result."""


# The launch behind each fake cubin (`fake_compile`): what the emulator runs for a kernel record.
FAKE_LAUNCHES: dict[bytes, KernelLaunch] = {}


# ---- fake AOT compile -----------------------------------------------------------------------------------------
@contextlib.contextmanager
def fake_compile() -> Iterator[None]:
    """Replace the AOT compile with kernel records that carry the launch's name and ABI (no cubins built)."""
    from cuda_triton.kernel.aot import CompiledKernel, abi_types
    from cuda_triton.kernel.pdl import uses_pdl
    from cuda_triton.preprocess import kernels

    saved = (kernels.compile_all, kernels.launch_key, kernels.prefetch_enabled)

    def key(template: str, problem: Any, schedule: Schedule, index: int, launch: KernelLaunch,
            arch: int, pdl: bool = False) -> str:  # fmt: skip
        return repr((template, problem, schedule, index, int(arch), uses_pdl(pdl, arch)))

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
                launch_cooperative_grid=False, launch_pdl=job.pdl, param_types=abi_types(target),
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
    """The params a conv record holds (its fields carry `ConvParams.as_dict`'s names)."""
    return ConvParams.from_dict(vars(op))


def derive_launches(
    blob: DelegateBlob, op: OpRecord, allow_tf32: bool
) -> tuple[ConvProblem, list[KernelLaunch]]:
    """The launches the templates give for the recorded op (what the preprocess should have recorded)."""
    problem, template, sched = _derive(blob, op, allow_tf32)
    return problem, template.launches(problem, sched)


def _derive(blob: DelegateBlob, op: OpRecord, allow_tf32: bool) -> tuple[ConvProblem, Any, Schedule]:
    """The problem, template and schedule of a recorded convolution."""
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
    if op.epilogue:
        problem = replace(problem, epilogue=recorded_epilogue(blob, op))
    if op.prologue:
        problem = replace(problem, prologue=recorded_prologue(blob, op))
    for cand in [sched, *template.schedules(problem), template.heuristic_schedule(problem)]:
        if cand.key() == op.schedule:
            sched = cand
            break
    return problem, template, sched


def _operand_layout(blob: DelegateBlob, ref: Any) -> tuple[list[int], list[int], str]:
    """Sizes, strides and dtype of a fused chain's operand (a value, or a dense constant)."""
    if isinstance(ref, ValueRef):
        v = blob.values[ref.value]
        return v.sizes, v.strides, v.dtype
    c = blob.constants[ref.constant]
    return c.sizes, list(contiguous_strides(tuple(c.sizes))), c.dtype


def recorded_epilogue(blob: DelegateBlob, op: ConvRecord) -> ConvEpilogue:
    """The fused epilogue a convolution record's steps and extra inputs describe (conv/epilogue.py)."""
    from cuda_triton.preprocess.elementwise import steps_program

    out = blob.values[op.output]
    operands = []
    for ref in op.epilogue_inputs:
        operand = epilogue_operand(*_operand_layout(blob, ref), out.sizes, out.strides)
        if operand is None:
            raise EmulationError(f"{op.name}: an epilogue input {ref} the epilogue cannot read")
        operands.append(operand)
    return ConvEpilogue(steps_program(op.epilogue, first_is_result=True), tuple(operands))


def recorded_prologue(blob: DelegateBlob, op: ConvRecord) -> ConvPrologue:
    """The fused prologue a convolution record's prologue steps and inputs describe (conv/epilogue.py)."""
    from cuda_triton.preprocess.elementwise import steps_program

    x = blob.values[op.input]
    operands = []
    for ref in op.prologue_inputs:
        operand = prologue_operand(*_operand_layout(blob, ref), x.sizes)
        if operand is None:
            raise EmulationError(f"{op.name}: a prologue input {ref} the prologue cannot read")
        operands.append(operand)
    return ConvPrologue(steps_program(op.prologue, first_is_result=True), tuple(operands))


def epilogue_tensor(blob: DelegateBlob, ref: Any, view: Any, consts: list[torch.Tensor]) -> torch.Tensor:
    """An epilogue input as a tensor of its recorded shape (for the ATen comparison)."""
    if isinstance(ref, ValueRef):
        return view(ref.value).clone()
    c = blob.constants[ref.constant]
    return consts[ref.constant].reshape(c.sizes).clone()


def prologue_applied(
    blob: DelegateBlob, op: ConvRecord, view: Any, consts: list[torch.Tensor]
) -> torch.Tensor:
    """The convolution's input as its kernels multiply it: the recorded input, through the fused prologue (in
    fp32, rounded to the input's dtype, as the kernel does) when there is one."""
    x = view(op.input).clone()
    if not op.prologue:
        return x
    from cuda_triton.ops.elementwise.reference import run_program as run_chain
    from cuda_triton.preprocess.elementwise import steps_program

    extras = [epilogue_tensor(blob, r, view, consts) for r in op.prologue_inputs]
    return run_chain(steps_program(op.prologue, first_is_result=True), [x, *extras]).to(x.dtype)


@dataclass
class BlobRun:
    outputs: list[torch.Tensor]


def rel_err(out: Any, ref: Any) -> float:
    """max |out - ref| / max |ref| (the worst over tuple outputs)."""
    if isinstance(out, (tuple, list)):
        return max(rel_err(o, r) for o, r in zip(out, ref, strict=True))
    out64, ref64 = out.detach().double(), ref.detach().double()
    if out64.numel() == 0:
        return 0.0
    if not torch.isfinite(out64).all():
        return float("inf")
    return float((out64 - ref64).abs().max() / ref64.abs().max().clamp_min(1e-30))


def tolerance(dtype: str) -> float:
    return {"fp32": 2e-3, "fp64": 1e-9, "fp16": 2e-2, "bf16": 5e-2}[dtype]


def _conv_launches(
    blob: DelegateBlob, oi: int, op: ConvRecord, allow_tf32: bool
) -> tuple[ConvProblem, list[KernelLaunch]]:
    """The template's launches for a convolution record, checked against what the record says it launches."""
    problem, template, sched = _derive(blob, op, allow_tf32)
    derived = template.launches(problem, sched)
    scratch = {t.role: t for t in template.scratch(problem, sched)}
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
            if isinstance(da, TensorArg) and (da.role in SCRATCH_ROLES or da.role in scratch):
                # Scratch (split-K partials, a channels-last input copy): an intermediate of the declared dtype,
                # the same value for every launch of the op; zeroed scratch (split-K tile counters) is a state value.
                sv = blob.values[ra.value] if isinstance(ra, ValueRef) else None
                kind = "state" if da.role in scratch and scratch[da.role].zeroed else "intermediate"
                dtype = _BLOB_DTYPE_OF_PTR.get(da.dtype, da.dtype)
                if (
                    sv is None
                    or sv.kind != kind
                    or sv.dtype != dtype
                    or ra != scratch_refs.setdefault(da.role, ra)
                ):
                    raise EmulationError(
                        f"{where} ({da.role}): recorded {ra}, expected a {dtype} {kind} value"
                    )
            elif isinstance(da, TensorArg):
                want = {
                    "input": ValueRef(op.input), "output": ValueRef(op.output),
                    "weight": ConstantRef(op.weight),
                    "bias": NullPtr() if op.bias is None else ConstantRef(op.bias),
                    **{role: NullPtr() for role in EPILOGUE_ROLES},
                    **dict(zip(EPILOGUE_ROLES, op.epilogue_inputs, strict=False)),
                    **{role: NullPtr() for role in PROLOGUE_ROLES},
                    **dict(zip(PROLOGUE_ROLES, op.prologue_inputs, strict=False)),
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


class EmulatedDelegate:
    """One delegate blob initialised as runtime/backend/delegate_init.cpp does: the constants read from the named
    data, and the state buffer (``state_size`` bytes, every state value at its offset) zeroed once. Its contents
    carry from one `execute` to the next, as on the GPU.

    With ``check_state`` an execute that leaves a state value other than all zero (the writer's contract: split-K
    tile counters are reset by the last share of each tile) raises `EmulationError`.
    """

    def __init__(
        self, data: bytes, named_data: dict[str, bytes], allow_tf32: bool = False, check_state: bool = True
    ) -> None:
        self.blob = deserialize(data)
        self.named_data = named_data
        self.allow_tf32 = allow_tf32
        self.check_state = check_state
        self.consts: list[torch.Tensor] = []
        for c in self.blob.constants:
            raw = named_data.get(c.key)
            if raw is None:
                raise EmulationError(f"constant {c.key} is not in the named data")
            if len(raw) != c.nbytes:
                raise EmulationError(f"constant {c.key}: {len(raw)} bytes, the blob says {c.nbytes}")
            t = torch.frombuffer(bytearray(raw), dtype=TORCH_DTYPES[c.dtype]) if raw else torch.empty(0)
            self.consts.append(t.reshape(c.sizes) if raw else t)
        self.state = torch.zeros((max(self.blob.state_size, 1),), dtype=torch.uint8)

    def state_value(self, i: int) -> torch.Tensor:
        """State value ``i``'s bytes in the state buffer, as a flat tensor of its dtype (a view: writes stick)."""
        v = self.blob.values[i]
        if v.kind != "state":
            raise EmulationError(f"value {i} is a {v.kind} value, not a state value")
        nbytes = max(_span(v.sizes, v.strides), 1) * _element_size(v.dtype)
        return self.state[v.offset : v.offset + nbytes].view(TORCH_DTYPES[v.dtype])

    def execute(self, inputs: list[torch.Tensor]) -> BlobRun:
        """One execute on the CPU, the way runtime/backend/delegate.cpp does it."""
        blob, consts, allow_tf32 = self.blob, self.consts, self.allow_tf32
        if len(inputs) != blob.num_inputs:
            raise EmulationError(f"the delegate gets {len(inputs)} inputs, the blob has {blob.num_inputs}")
        # The device arena: intermediates at their planned offsets, so a plan that overlaps two live values
        # computes a wrong result here too. All-ones bytes are NaN in every float dtype: a read before a write
        # poisons.
        arena = torch.full((max(blob.arena_size, 1),), 255, dtype=torch.uint8)
        bufs: list[torch.Tensor] = []  # one flat buffer per value: what its device address points at
        for i, v in enumerate(blob.values):
            n = max(_span(v.sizes, v.strides), 1)
            dtype = TORCH_DTYPES[v.dtype]
            nbytes = n * _element_size(v.dtype)
            if v.kind == "intermediate":
                if v.offset + nbytes > arena.numel():
                    raise EmulationError(
                        f"value {i}: bytes {v.offset}..{v.offset + nbytes} outside the arena"
                    )
                buf = arena[v.offset : v.offset + nbytes].view(dtype)
            elif v.kind == "state":
                if v.offset + nbytes > self.state.numel():
                    raise EmulationError(
                        f"value {i}: bytes {v.offset}..{v.offset + nbytes} outside the state buffer"
                    )
                buf = self.state_value(i)
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
                x_in = prologue_applied(blob, op, view, consts)
            else:
                launches = [
                    _faked_launch(blob, self.named_data, oi, li, rec) for li, rec in enumerate(op.launches)
                ]
            for rec, launch in zip(op.launches, launches, strict=True):
                target = launch.for_arch(running_arch())
                target.fn[tuple(rec.grid)](
                    *(argument(a) for a in rec.args), **dict(target.constexprs), **target.compile_options()
                )
            if isinstance(op, ConvRecord):
                # The ATen comparison needs the original weights: `run_program` does it with these.
                extras = [epilogue_tensor(blob, r, view, consts) for r in op.epilogue_inputs]
                LAST_OP_IO.append((op, problem, x_in, view(op.output).clone(), extras))
        if self.check_state:
            for i, v in enumerate(blob.values):
                if v.kind == "state" and bool(self.state_value(i).view(torch.uint8).any()):
                    raise EmulationError(
                        f"state value {i} is not all zero after the execute: its launches must leave it as they "
                        "found it"
                    )
        outs: list[torch.Tensor | None] = [None] * blob.num_outputs
        for i, v in enumerate(blob.values):
            if v.kind == "output":
                outs[v.index] = view(i).clone()
        return BlobRun(outputs=[o for o in outs if o is not None])


def emulate_blob(
    data: bytes,
    named_data: dict[str, bytes],
    inputs: list[torch.Tensor],
    allow_tf32: bool = False,
) -> BlobRun:
    """Execute one delegate blob on the CPU the way runtime/backend/delegate.cpp does: the first execute of a
    freshly initialised delegate (`EmulatedDelegate` keeps one across executes)."""
    return EmulatedDelegate(data, named_data, allow_tf32).execute(inputs)


# Each convolution's (record, problem, input, output) in the last `emulate_blob` call, for the program's check
# against ATen (`emulate_pte.run_program`).
LAST_OP_IO: list[tuple[OpRecord, ConvProblem, torch.Tensor, torch.Tensor, list[torch.Tensor]]] = []
