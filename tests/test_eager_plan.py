"""The eager op's plan cache (`cuda_triton.conv.dispatch`): a repeat call reuses everything that does not depend on
the data, any change of the call signature makes a new plan, and prepared weights follow their tensor.

The CUDA body runs on CPU tensors with the kernels in Triton's interpreter (TRITON_INTERPRET=1, as conftest.py
sets); outputs are NaN-poisoned when allocated and every element is compared with ATen. The GPU-only part, a plan
launching the compiled kernels directly, runs here against a stand-in for Triton's JIT function and compiled kernel.
"""

from __future__ import annotations

import gc
import math
import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from cuda_triton.conv import dispatch  # noqa: E402
from cuda_triton.conv.op import reference_in_layout  # noqa: E402
from cuda_triton.conv.params import ConvParams  # noqa: E402
from cuda_triton.conv.problem import ConvProblem  # noqa: E402
from cuda_triton.conv.templates import Candidate, force_conv_candidate  # noqa: E402
from cuda_triton.conv.templates.base import ConvTemplate  # noqa: E402
from cuda_triton.kernel.launch import KernelLaunch, ScalarArg, Schedule, Support, TensorArg  # noqa: E402

P3 = ConvParams((1, 1), (1, 1), (1, 1), (1, 1), False, (0, 0), 1)


@pytest.fixture(autouse=True)
def fresh_plans(monkeypatch):
    """No plan from another test; outputs NaN-poisoned; select_candidate calls counted (one per new plan)."""
    dispatch.clear_plans()

    def poisoned(*args, **kwargs):
        return torch.empty_strided(*args, **kwargs).fill_(float("nan"))

    monkeypatch.setattr(dispatch, "_empty_strided", poisoned)
    selected = []
    select = dispatch.select_candidate

    def counting(problem, lookup=None):
        selected.append(problem)
        return select(problem, lookup)

    monkeypatch.setattr(dispatch, "select_candidate", counting)
    yield selected
    dispatch.clear_plans()


def _inputs(n=1, c=4, k=4, hw=(5, 6), kernel=(3, 3), groups=1, dtype=torch.float32, bias=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, *hw, generator=g).to(dtype)
    w = torch.randn(k, c // groups, *kernel, generator=g).to(dtype)
    b = torch.randn(k, generator=g).to(dtype) if bias else None
    return x, w, b


def _check(x, w, b, p: ConvParams) -> torch.Tensor:
    out = dispatch.run_convolution(x, w, b, p)
    ref = reference_in_layout(x.double(), w.double(), None if b is None else b.double(), p)
    assert out.dtype == x.dtype and out.shape == ref.shape
    assert out.stride() == reference_in_layout(x, w, b, p).stride()
    assert not torch.isnan(out).any(), "some output elements were never written"
    reduction = w.shape[1] * math.prod(w.shape[2:])
    tf32 = x.dtype == torch.float32 and torch.backends.cudnn.allow_tf32  # inputs may be rounded to TF32
    tol = 2e-3 if tf32 else {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[x.dtype]
    tol *= math.sqrt(reduction)
    torch.testing.assert_close(out.double(), ref, atol=tol, rtol=tol)
    return out


def test_repeat_call_reuses_the_plan(fresh_plans):
    x, w, b = _inputs()
    _check(x, w, b, P3)
    plan = dispatch.plan_for(x, w, b, P3)
    assert isinstance(plan, dispatch.ConvPlan) and len(fresh_plans) == 1
    # Fresh data, same signature: no new selection, the same plan object, still right.
    x2, _, b2 = _inputs(seed=1)
    _check(x2, w, b2, P3)
    assert dispatch.plan_for(x2, w, b2, P3) is plan and len(fresh_plans) == 1
    # The plan holds what the template would describe for this problem: launches, grids, argument lists.
    problem = ConvProblem.from_tensors(x, w, b, P3)
    assert plan.problem == problem and plan.candidate == dispatch.select_candidate(
        problem, dispatch.tuning_lookup
    )
    assert [launch.launch for launch in plan.launches] == plan.candidate.launches(problem)
    assert plan.scratch == tuple(
        (t.role, t.sizes, getattr(torch, t.dtype), t.zeroed)
        for t in plan.candidate.template.scratch(problem, plan.candidate.schedule)
    )
    assert not plan.bound  # nothing to bind under the interpreter


def _scratch_plan(monkeypatch):
    """A plan whose launches are replaced by a recorder of the scratch they get (as clones and as tensors)."""
    x, w, b = _inputs()
    _check(x, w, b, P3)
    plan = dispatch.plan_for(x, w, b, P3)
    plan.scratch = (("tile_counters", (6,), torch.int32, True), ("workspace", (6,), torch.float32, False))
    plan.roles = (*plan.roles[:4], "tile_counters", "workspace")
    empty = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *a, **k: empty(*a, **k).fill_(7))  # what fresh memory may hold
    seen = []

    def launch(tensors, aligned):
        counters, workspace = tensors[4:]
        seen.append((counters.clone(), workspace.clone(), counters))
        counters.fill_(3)  # a launch that broke the contract

    monkeypatch.setattr(plan, "launch_jit", launch)
    return plan, (x, w, b), seen


def test_zeroed_scratch_is_zero_at_every_interpreted_call(fresh_plans, monkeypatch):
    """In the interpreter a scratch tensor declared ``zeroed`` (split-K tile counters) is fresh and all zero at
    every call, even after a call left it otherwise; other scratch is allocated uninitialised."""
    plan, (x, w, b), seen = _scratch_plan(monkeypatch)
    for _ in range(2):
        plan.run(x, w, b)
    assert len(seen) == 2
    for counters, workspace, _ in seen:
        assert counters.dtype == torch.int32 and not counters.any()
        assert (workspace == 7).all()


def test_bound_plan_keeps_zeroed_scratch_per_stream(fresh_plans, monkeypatch):
    """On a GPU the launches leave zeroed scratch zero, so a plan keeps one set per stream instead of zeroing
    memory on every call; a call on another stream gets its own set, and a call inside a CUDA-graph capture a
    fresh one that is not kept."""
    plan, (x, w, b), seen = _scratch_plan(monkeypatch)
    current = [0]
    plan.bindable, plan.current_stream = True, lambda index: current[0]
    monkeypatch.setattr(dispatch, "_current_device", lambda: None)  # a CPU plan's device index
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: current[0] == 33)
    for stream in (11, 11, 22, 11, 33):
        current[0] = stream
        plan.run(x, w, b)
    first, again, other, back, captured = (kept for _, _, kept in seen)
    assert again is first and back is first and other is not first
    assert captured is not first and captured is not other
    assert not seen[0][0].any() and not seen[2][0].any() and not seen[4][0].any()
    assert set(plan.zeroed_scratch) == {11, 22}
    assert all((workspace == 7).all() for _, workspace, _ in seen)


# Each variant changes one part of the call signature against the base call (x, w, b, P3, fp32, TF32 allowed).
def _variants():
    x, w, b = _inputs()
    cl = x.contiguous(memory_format=torch.channels_last)
    yield "batch", _inputs(n=2)[0], w, b, P3
    yield "spatial", _inputs(hw=(6, 6))[0], w, b, P3
    yield "channels_last input", cl, w, b, P3
    yield "channels_last weight", x, w.contiguous(memory_format=torch.channels_last), b, P3
    yield "no bias", x, w, None, P3
    yield "fp16", x.half(), w.half(), b.half(), P3
    yield "unbatched", x[0], w, b, P3
    yield "stride", x, w, b, ConvParams((2, 1), (1, 1), (1, 1), (1, 1), False, (0, 0), 1)
    yield "padding_before", x, w, b, ConvParams((1, 1), (2, 1), (1, 1), (1, 1), False, (0, 0), 1)
    yield "padding_after", x, w, b, ConvParams((1, 1), (1, 1), (0, 1), (1, 1), False, (0, 0), 1)
    yield "dilation", x, w, b, ConvParams((1, 1), (1, 1), (1, 1), (1, 2), False, (0, 0), 1)
    xg, wg, bg = _inputs(groups=2)
    yield "groups", xg, wg, bg, ConvParams((1, 1), (1, 1), (1, 1), (1, 1), False, (0, 0), 2)
    xt, wt, bt = _inputs(c=4, k=4)
    yield "transposed", xt, wt, bt, ConvParams((2, 2), (1, 1), (1, 1), (1, 1), True, (0, 0), 1)
    yield "output_padding", xt, wt, bt, ConvParams((2, 2), (1, 1), (1, 1), (1, 1), True, (1, 0), 1)


def test_every_part_of_the_signature_makes_a_new_plan(fresh_plans):
    x, w, b = _inputs()
    _check(x, w, b, P3)
    plans = {id(dispatch.plan_for(x, w, b, P3))}
    for name, *call in _variants():
        before = len(fresh_plans)
        _check(*call)
        assert len(fresh_plans) == before + 1, f"{name}: reused a plan"
        plans.add(id(dispatch.plan_for(*call)))
        _check(*call)  # and now it is cached
        assert len(fresh_plans) == before + 1, f"{name}: the repeat call made a new plan"
    assert len(plans) == 1 + len(list(_variants()))


def test_tf32_mode_and_forced_candidate_are_part_of_the_signature(fresh_plans):
    x, w, b = _inputs()
    base = _check(x, w, b, P3)
    previous = torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32 = not previous
        _check(x, w, b, P3)
        assert len(fresh_plans) == 2
        assert dispatch.plan_for(x, w, b, P3).problem.allow_tf32 == (not previous)
    finally:
        torch.backends.cudnn.allow_tf32 = previous
    plan = dispatch.plan_for(x, w, b, P3)
    problem = ConvProblem.from_tensors(x, w, b, P3)
    other = next(s for s in plan.candidate.template.schedules(problem) if s != plan.candidate.schedule)
    with force_conv_candidate(plan.candidate.template, other):
        forced = _check(x, w, b, P3)
        assert dispatch.plan_for(x, w, b, P3).candidate.schedule == other
    assert len(fresh_plans) == 3
    torch.testing.assert_close(forced, base, atol=1e-4, rtol=1e-4)
    assert dispatch.plan_for(x, w, b, P3) is plan  # the unforced plan is still there


def test_prepared_weight_follows_its_tensor(fresh_plans):
    # The implicit GEMM template prepares a re-laid-out copy of the weight (not the weight itself).
    x, w, b = _inputs()
    with force_conv_candidate("implicit_gemm"):
        _check(x, w, b, P3)
        plan = dispatch.plan_for(x, w, b, P3)
        first = plan.prepared_weight(w)
        assert first is not w and plan.prepared_weight(w) is first  # cached
        with torch.no_grad():
            w.mul_(-2.0)  # in place: the version counter moves
        _check(x, w, b, P3)
        assert plan.prepared_weight(w) is not first
        # Another tensor with the same values is another weight: prepared for itself.
        w2 = w.clone()
        _check(x, w2, b, P3)
        assert plan.prepared_weight(w2) is not plan.prepared_weight(w)
        # A dead weight's entry goes with it.
        key = (plan.serial, id(w2))
        assert key in dispatch._WEIGHTS
        del w2
        gc.collect()
        assert key not in dispatch._WEIGHTS
        assert len(fresh_plans) == 1


def test_weights_read_as_they_are_are_not_held(fresh_plans):
    x, w, b = _inputs()
    problem = ConvProblem.from_tensors(x, w, b, P3)
    as_is = Candidate(_StandInTemplate(None, copy_weight=False), Schedule.make())
    plan = dispatch.ConvPlan(problem, as_is, (1,), (1,), x.dtype, x.device)
    assert plan.prepared_weight(w) is w and plan.prepared_weight(w) is w
    (entry,) = dispatch._WEIGHTS.values()
    assert entry[3] is None  # the cache holds no reference to the weight


def test_no_template_falls_back_to_aten_once_per_signature(fresh_plans):
    x, w, b = _inputs(dtype=torch.float64)
    with pytest.warns(UserWarning, match="falls back to ATen"):
        out = dispatch.run_convolution(x, w, b, P3)
    assert isinstance(dispatch.plan_for(x, w, b, P3), dispatch.AtenPlan)
    torch.testing.assert_close(out, reference_in_layout(x, w, b, P3))
    dispatch.run_convolution(x, w, b, P3)
    assert len(fresh_plans) == 1


def test_empty_output_needs_no_candidate(fresh_plans):
    x, w, b = _inputs(n=0)
    out = dispatch.run_convolution(x, w, b, P3)
    assert out.shape == (0, 4, 5, 6) and isinstance(dispatch.plan_for(x, w, b, P3), dispatch.EmptyPlan)
    assert not fresh_plans


# ---- binding: a plan launching the compiled kernel directly ------------------------------------------------------
def _stand_in_kernel(x_ptr, w_ptr, b_ptr, y_ptr, SCALE, TAG, OFFSET=0.5):
    """What the stand-in kernel computes: the convolution, times SCALE, plus OFFSET (TAG is a constexpr)."""
    y_ptr.copy_(torch.nn.functional.conv2d(x_ptr, w_ptr, b_ptr, padding=1) * SCALE + OFFSET)


class _Compiled:
    """Stands in for triton's CompiledKernel: records every launch its launcher gets."""

    def __init__(self):
        self.launches = []
        self.function, self.packed_metadata = "cufunction", ("packed", "metadata")

    def run(self, gx, gy, gz, stream, function, packed, metadata, enter, leave, *args):
        self.launches.append(((gx, gy, gz), stream, function, packed, metadata, enter, leave, args))
        _stand_in_kernel(*args)

    def launch_metadata(self, grid, stream, *args):
        return ("metadata", grid, stream)


class _JitFunction:
    """Stands in for triton's JITFunction: ``fn[grid](...)`` runs, ``warmup`` returns the compiled kernel."""

    def __init__(self):
        self.fn, self.__name__ = _stand_in_kernel, "_stand_in_kernel"
        self.compiled = _Compiled()
        self.jit_calls = []

    def __getitem__(self, grid):
        def run(*args, num_warps, num_stages, **constexprs):
            self.jit_calls.append(
                (grid, args, {**constexprs, "num_warps": num_warps, "num_stages": num_stages})
            )
            _stand_in_kernel(*args, **constexprs)

        return run

    def warmup(self, *args, grid, **kwargs):
        return self.compiled


class _StandInTemplate(ConvTemplate):
    """One launch of ``fn`` (none without it); the prepared weight is a copy, or the weight itself."""

    def __init__(self, fn, copy_weight=True):
        self.fn, self.copy_weight, self.name = fn, copy_weight, "stand_in"

    def supports(self, problem):
        return Support.yes()

    def schedules(self, problem):
        return [Schedule.make()]

    def heuristic_schedule(self, problem):
        return Schedule.make()

    def prepare_weight(self, weight, problem, schedule):
        return weight.clone() if self.copy_weight else weight

    def launches(self, problem, schedule):
        if self.fn is None:
            return []
        args = (TensorArg("input", "fp32"), TensorArg("weight", "fp32"), TensorArg("bias", "fp32"),
                TensorArg("output", "fp32"), ScalarArg("SCALE", "fp32", 3.0))  # fmt: skip
        return [KernelLaunch(self.fn, args, (("TAG", 7),), (5, 2, 1), 4, 2)]


def test_bound_plan_launches_what_the_jit_would(fresh_plans, monkeypatch):
    fn = _JitFunction()
    monkeypatch.setattr(dispatch, "select_candidate", lambda problem, lookup=None: Candidate(
        _StandInTemplate(fn), Schedule.make()))  # fmt: skip
    monkeypatch.setattr(dispatch, "_current_device", lambda: None)  # a CPU plan's device index
    monkeypatch.setattr(dispatch, "_stream_getter", lambda: lambda index: 1234)
    monkeypatch.setattr(dispatch, "running_arch", lambda: None)
    x, w, b = _inputs()
    want = torch.nn.functional.conv2d(x, w, b, padding=1) * 3.0 + 0.5

    # First call: the JIT runs it, then the plan binds the compiled kernel.
    plan = dispatch.make_plan(x, w, b, P3)
    plan.bindable, plan.current_stream = True, dispatch._stream_getter()  # as on a GPU
    dispatch._PLANS[dispatch.signature_key(x, w, b, P3.as_op_args())] = plan
    torch.testing.assert_close(dispatch.run_convolution(x, w, b, P3), want)
    assert len(fn.jit_calls) == 1 and plan.bound and not fn.compiled.launches
    (grid, positional, kwargs), = fn.jit_calls  # fmt: skip
    assert (
        grid == (5, 2, 1) and kwargs == {"TAG": 7, "num_warps": 4, "num_stages": 2} and len(positional) == 5
    )

    # Repeat calls: the compiled kernel's launcher, with every parameter in declaration order (constexprs and
    # defaults included, as the JIT binds them), the tensors of this call, the current stream, no hooks.
    x2, _, b2 = _inputs(seed=3)
    out = dispatch.run_convolution(x2, w, b2, P3)
    torch.testing.assert_close(out, torch.nn.functional.conv2d(x2, w, b2, padding=1) * 3.0 + 0.5)
    assert len(fn.jit_calls) == 1
    ((grid, stream, function, packed, metadata, enter, leave, args),) = fn.compiled.launches
    assert (grid, stream, function, packed) == ((5, 2, 1), 1234, "cufunction", ("packed", "metadata"))
    assert (metadata, enter, leave) == (None, None, None)
    assert args[0] is x2 and args[2] is b2 and args[3] is out and args[4:] == (3.0, 7, 0.5)
    assert args[1] is plan.prepared_weight(w) and torch.equal(args[1], w)
    assert all(a is None for a in plan.launches[0].args[:4])  # the plan keeps no tensor of a call

    # An input that is not 16-byte aligned specialises differently: the JIT runs it.
    storage = torch.empty(x2.numel() + 1)
    unaligned = storage[1:].view_as(x2).copy_(x2)
    assert unaligned.data_ptr() % 16 != 0
    torch.testing.assert_close(dispatch.run_convolution(unaligned, w, b2, P3), out)
    assert len(fn.jit_calls) == 2 and len(fn.compiled.launches) == 1


def test_launch_hooks_are_passed_when_registered(monkeypatch):
    import triton

    assert dispatch._launch_hooks() == (None, None)
    seen = []
    hook = seen.append
    triton.knobs.runtime.launch_enter_hook.add(hook)
    try:
        enter, leave = dispatch._launch_hooks()
        assert enter is triton.knobs.runtime.launch_enter_hook and leave is None
        launch = dispatch._Launch(KernelLaunch(_JitFunction(), (), (), (1, 1, 1), 4, 2), ())
        compiled = _Compiled()
        launch.kernel, launch.launcher, launch.args = compiled, lambda *a: seen.append(a[6]), []
        launch.run_bound([], 99, enter, leave)
        assert seen == [("metadata", (1, 1, 1), 99)]
    finally:
        triton.knobs.runtime.launch_enter_hook.remove(hook)
