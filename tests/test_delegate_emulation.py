"""Delegate blobs executed on the CPU the way the C++ runtime executes them (cuda_triton.tools.emulate_pte).

Each lowered partition's blob is parsed, its constants taken from the named data, values allocated with the
recorded sizes/strides, and every LaunchRecord replayed through the Triton interpreter with the RECORDED args
and grid (the derived KernelLaunch must agree with them). Every op is compared with ATen and the program output
with eager PyTorch. A saved .pte is also run with ExecuTorch's memory plan (arenas, offsets, dim orders) over
several executions, which is where the H200 failure came from: a runner that sets its inputs once reads a
clobbered input from the second execution on.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

pytest.importorskip("executorch")
if os.environ.get("TRITON_INTERPRET") != "1":  # a GPU machine: the emulator needs the interpreter
    pytest.skip("needs TRITON_INTERPRET=1", allow_module_level=True)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from cuda_triton.models.zoo import build  # noqa: E402
from cuda_triton.serialization.blob import ValueRef, deserialize  # noqa: E402
from cuda_triton.tools import emulate_blob as EB  # noqa: E402
from cuda_triton.tools import emulate_pte as E  # noqa: E402


def _assert_ok(run: E.ProgramRun, err: float, tol: float) -> None:
    assert run.delegates, "nothing was delegated"
    assert run.op_errors, "no op was checked"
    for what, e, t in run.op_errors:
        assert e <= t, f"op {what}: rel err {e:.2e} > {t:.0e}"
    assert err <= tol, f"program output rel err {err:.2e} > {tol:.0e}"


def test_demo_model_blob_matches_eager() -> None:
    model, example = build("demo", torch.float32)
    err, run = E.check_model(model, example, verbose=False)
    _assert_ok(run, err, 1e-4)
    templates = {what.split("(")[1].split("/")[0] for what, _, _ in run.op_errors}
    assert {"implicit_gemm", "depthwise", "transposed"} <= templates


class TinyMixed(nn.Module):
    """1-D with an absorbed asymmetric pad and a chained 1-D conv, a 3-D conv and a 3-D transposed conv."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv1d(3, 8, 3, dilation=2)
        self.c1b = nn.Conv1d(8, 6, 1)
        self.c3 = nn.Conv3d(2, 4, 3, stride=(1, 2, 2), padding=1)
        self.t3 = nn.ConvTranspose3d(4, 3, 2, stride=2)

    def forward(self, a: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.c1b(self.c1(F.pad(a, (4, 0))))  # causal pad (absorbed) -> conv -> conv (an intermediate)
        z = self.t3(torch.relu(self.c3(v)))
        return y, z


def test_tiny_1d_3d_transposed_pad_model() -> None:
    torch.manual_seed(0)
    model = TinyMixed().eval()
    example = (torch.randn(2, 3, 20), torch.randn(1, 2, 4, 6, 6))
    err, run = E.check_model(model, example, verbose=False)
    _assert_ok(run, err, 1e-4)
    assert len(run.op_errors) == 4


def test_bf16_blob_matches_eager() -> None:
    """bf16 through the emulator: conv + BatchNorm (folded) + ReLU + conv, implicit GEMM (tensor-core dots, which
    the interpreter can only run with `patch_interpreter_bf16_dot`: without it this read 1e10 relative error)."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(16, 32, 3, padding=1, bias=False),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.Conv2d(32, 8, 3, padding=1),
    ).eval()
    model[1].running_mean.uniform_(-0.1, 0.1)
    model[1].running_var.uniform_(0.5, 1.5)
    model = model.to(torch.bfloat16)
    err, run = E.check_model(model, (torch.randn(1, 16, 12, 12).to(torch.bfloat16),), verbose=False)
    _assert_ok(run, err, 5e-2)
    assert len(run.op_errors) == 2


def test_saved_pte_memory_plan_needs_inputs_every_execution(tmp_path: Path) -> None:
    """The runner bug: ExecuTorch reuses a dead input's planned bytes, so inputs must be set before each run."""
    from cuda_triton import CudaTritonOptions, CudaTritonPartitioner
    from cuda_triton.partition.config import configs_for
    from executorch.exir import to_edge_transform_and_lower

    model, example = build("demo", torch.float32)
    # Exact fp32, like the emulation (with TF32 the prepared weights are rounded to TF32: ~1e-4 off eager). The
    # demo's flatten stays on the CPU (no data-movement family), so the head's delegate reads an input that
    # ExecuTorch's memory plan places in bytes it reuses.
    part = CudaTritonPartitioner(
        CudaTritonOptions(allow_tf32=False), configs=configs_for(["conv", "elementwise"])
    )
    with E.fake_compile():
        ep = torch.export.export(model, example)
        program = to_edge_transform_and_lower(ep, partitioner=[part]).to_executorch()
    path = tmp_path / "demo.pte"
    program.save(str(path))
    x = torch.randn_like(example[0])
    with torch.no_grad():
        ref = model(x)

    def rel(out: torch.Tensor) -> float:
        return float((out - ref).abs().max() / ref.abs().max())

    good = E.emulate_pte_file(str(path), [x], executions=2, set_inputs_each_time=True)
    assert rel(good[0]) < 1e-4
    stale = E.emulate_pte_file(str(path), [x], executions=2, set_inputs_each_time=False)
    assert rel(stale[0]) > 1e-2, "the memory plan no longer reuses the input's bytes (update the runner note)"


class SmallMapLongK(nn.Module):
    """A 3x3 conv on a 4x4 map with 256 input channels and a 1x1 conv with 1024: few output tiles and a long
    reduction, so the heuristic picks split-K for the 3x3 and the head (a workspace intermediate + the reduction kernel)."""

    def __init__(self) -> None:
        super().__init__()
        self.c3 = nn.Conv2d(256, 64, 3, padding=1)
        self.c1 = nn.Conv2d(64, 1024, 1, bias=False)
        self.head = nn.Conv2d(1024, 48, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.c1(self.c3(x)))


def test_split_k_ops_use_a_workspace_and_state_counters() -> None:
    model = SmallMapLongK().eval()
    example = (torch.randn(1, 256, 4, 4),)
    err, run = E.check_model(model, example, verbose=False)
    _assert_ok(run, err, 1e-4)
    assert sum("SPLIT_K" in what for what, _, _ in run.op_errors) >= 2, run.op_errors
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    ep = E.lower(model, example)
    lowered = [m for _, m in ep.graph_module.named_modules() if isinstance(m, LoweredBackendModule)]
    split_ops = 0
    for blob in (deserialize(m.processed_bytes) for m in lowered):
        for op in blob.ops:
            if "SPLIT_K" not in op.schedule:
                continue
            split_ops += 1
            # one launch: the last share of each tile sums the shares (no reduction kernel)
            assert len(op.launches) == 1 + ("CL_COPY" in op.schedule)
            refs = {a.value for lr in op.launches for a in lr.args if isinstance(a, ValueRef)}
            scratch = [blob.values[v] for v in refs - {op.input, op.output}]
            # The split's fp32 partial sums (and, the input being NCHW, maybe its channels-last copy) in the
            # arena; its int32 tile counters in the state buffer.
            intermediates = [rec for rec in scratch if rec.kind == "intermediate"]
            assert sum(rec.dtype == "fp32" and rec.sizes[0] > 1 for rec in intermediates) == 1
            (counters,) = [rec for rec in scratch if rec.kind == "state"]
            assert counters.dtype == "int32" and len(counters.sizes) == 1
    assert split_ops >= 2


@triton.jit
def _counting_kernel(cnt_ptr, out_ptr, x_ptr, N: tl.constexpr, RESET: tl.constexpr):
    """out = x + the counter; the counter then goes up by one, or (RESET) back to zero."""
    count = tl.load(cnt_ptr)
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + count.to(tl.float32))
    if RESET:
        tl.store(cnt_ptr, 0)
    else:
        tl.store(cnt_ptr, count + 1)


def _state_blob(reset: bool) -> tuple[bytes, dict[str, bytes]]:
    """input x [4] -> output x + counter, the int32 counter a state value the launch updates."""
    from cuda_triton.kernel.launch import KernelLaunch, TensorArg
    from cuda_triton.serialization import (
        DelegateBlob,
        ElementwiseRecord,
        FromInput,
        KernelRecord,
        LaunchRecord,
        Step,
        ValueRecord,
        named_cubins,
        plan_arena,
        serialize,
    )

    launch = KernelLaunch(
        _counting_kernel, (TensorArg("counter", "i32"), TensorArg("out", "fp32"), TensorArg("x", "fp32")),
        (("N", 4), ("RESET", reset)), (1, 1, 1), num_warps=1, num_stages=1,
    )  # fmt: skip
    cubin = b"\x7fELF counting " + bytes([reset])
    EB.FAKE_LAUNCHES[cubin] = launch
    kernel = KernelRecord("_counting_kernel", 90, cubin, 1, 1, 0, param_types=["ptr", "ptr", "ptr"])
    values = [ValueRecord("input", 0, "fp32", [4], [1]), ValueRecord("output", 0, "fp32", [4], [1]),
              ValueRecord("state", 0, "int32", [1], [1])]  # fmt: skip
    op = ElementwiseRecord(
        inputs=[ValueRef(0)], steps=[Step("neg", [FromInput(0)])], output=1, name="counting",
        launches=[LaunchRecord({90: 0}, (1, 1, 1), [ValueRef(2), ValueRef(1), ValueRef(0)])],
    )  # fmt: skip
    blob = plan_arena(DelegateBlob("emulated", [90], 1, 1, values, [], [kernel], [op]))
    assert blob.state_size == 256 and blob.values[2].offset == 0
    return serialize(blob), named_cubins(blob)


def test_emulated_state_is_zero_at_init_and_kept_across_executes() -> None:
    """A state value starts zero when the delegate is initialised and keeps what the launches leave in it from one
    execute to the next (as the runtime's state buffer does); a fresh delegate starts from zero again."""
    data, named = _state_blob(reset=False)
    x = torch.arange(4, dtype=torch.float32)
    delegate = EB.EmulatedDelegate(data, named, check_state=False)
    for count in range(3):
        (out,) = delegate.execute([x]).outputs
        assert torch.equal(out, x + count)
        assert int(delegate.state_value(2)[0]) == count + 1
    (out,) = EB.EmulatedDelegate(data, named, check_state=False).execute([x]).outputs
    assert torch.equal(out, x)


def test_emulator_checks_that_launches_leave_state_zero() -> None:
    """The writer's contract: launches leave a state value all zero. The emulator refuses an execute that does
    not (emulate_blob checks it), and accepts one whose launches reset what they used."""
    data, named = _state_blob(reset=False)
    x = torch.ones(4)
    with pytest.raises(EB.EmulationError, match="state value 2 is not all zero"):
        EB.emulate_blob(data, named, [x])
    data, named = _state_blob(reset=True)
    delegate = EB.EmulatedDelegate(data, named)
    for _ in range(2):
        assert torch.equal(delegate.execute([x]).outputs[0], x)


def test_the_interpreters_discarded_overflow_checks_are_dropped() -> None:
    """With Triton's debug option off the interpreter discards its int32 overflow checks (an overflowing product
    wraps either way), so conftest and the emulator stop it computing them."""
    import dataclasses

    import triton
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    assert not builder.options.debug and not builder.options.sanitize_overflow

    @triton.jit
    def product_kernel(out_ptr, a, b):
        tl.store(out_ptr, a * b)

    dropped = builder.options
    for options in (dataclasses.replace(dropped, sanitize_overflow=True), dropped):
        builder.options = options
        out = torch.full((1,), -1, dtype=torch.int32)
        try:
            product_kernel[(1,)](out, 65536, 65537)
        finally:
            builder.options = dropped
        assert out.item() == 65536  # 2**32 + 65536, wrapped to int32 with or without the check
