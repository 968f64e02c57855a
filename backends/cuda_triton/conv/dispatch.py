"""The CUDA body of ``triton::convolution``: one plan per call signature, then the plan's launches.

Everything that does not depend on the data is worked out on the first call of a signature and kept in a
`ConvPlan`: the output layout, the problem, the candidate, its scratch tensors, and each launch's grid and argument
list. The signature is what that work reads: sizes, strides, dtypes and devices of input, weight and bias; the
convolution's arguments; whether TF32 is allowed (``torch.backends.cudnn.allow_tf32``); a candidate forced with
``force_conv_candidate``. A repeat call is a dict lookup, the output and scratch allocations (scratch that must be
zero, split-K tile counters, is kept per stream instead: `ConvPlan`), the prepared weight's validity check and the
launches.

On a GPU a plan binds each launch to the kernel Triton's JIT compiled for it on the first call, and later calls
launch that kernel directly with the argument list the JIT would bind (`_Launch`): the JIT's per-call binding,
specialisation and cache lookup are skipped. That is only valid while the call specialises as the first did: the
plan's scalars are fixed, so what can differ is whether a data pointer is 16-byte aligned (Triton specialises on
it); the output and scratch tensors come from the caching allocator, and the input, prepared weight and bias are
checked on each call, any unaligned one taking the JIT's path. Under ``TRITON_INTERPRET=1`` (CPU tensors, tests)
there is no compiled kernel and every launch goes through the interpreter.

Prepared weights (the layout the kernels read, made by the template's ``prepare_weight``) are cached per plan and
weight tensor, valid while that very tensor is alive, unmodified (its version counter) and at the same address: the
caching allocator hands a freed weight's address to the next tensor, so an address alone could return a stale
weight. A change made behind autograd's back (``weight.data.copy_(...)``) does not bump the version and is not seen.

The tuning table is read when a plan is made: a table changed in-process afterwards (``CUDA_TRITON_TUNING_TABLE``,
``tuning.clear_cache``) applies to plans made after `clear_plans`.
"""

from __future__ import annotations

import inspect
import itertools
import warnings
import weakref
from collections.abc import Sequence
from typing import Any

import torch
import triton

from ..kernel.launch import KernelLaunch, TensorArg, interpreting, running_arch
from .op import canonical_params, output_layout, reference_in_layout
from .params import ConvParams
from .problem import ConvProblem
from .templates import Candidate, NoTemplateError, forced_candidate, select_candidate

_PLANS: dict[tuple, ConvPlan | EmptyPlan | AtenPlan] = {}
_PLAN_LIMIT = 1024
# (plan serial, id(weight)) -> (weakref to the weight, its version, its data_ptr, the prepared weight or None when
# it is the weight itself)
_WEIGHTS: dict[tuple[int, int], tuple[weakref.ref, int, int, torch.Tensor | None]] = {}
_WEIGHT_LIMIT = 256
_serials = itertools.count()
_warned: set[str] = set()
# The allocation of every output (tests poison it with NaN).
_empty_strided = torch.empty_strided


def tuning_lookup(problem: ConvProblem):
    """The shipped tuning table's choice for ``problem`` (None when it has none)."""
    try:
        from .tuning import lookup
    except ImportError:
        return None
    return lookup(problem)


def signature_key(
    input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, op_args: Sequence[Any]
) -> tuple:
    """Everything a plan depends on, as a hashable key (``op_args``: the op's arguments after the bias)."""
    stride, padding_before, padding_after, dilation, transposed, output_padding, groups = op_args
    forced = forced_candidate()
    return (
        input.shape, input.stride(), input.dtype, input.get_device(),
        weight.shape, weight.stride(), weight.dtype, weight.get_device(),
        None if bias is None else (bias.shape, bias.stride(), bias.dtype, bias.get_device()),
        tuple(stride), tuple(padding_before), tuple(padding_after), tuple(dilation), transposed,
        tuple(output_padding), groups,
        torch._C._get_cudnn_allow_tf32(),  # torch.backends.cudnn.allow_tf32, without its property's cost
        None if forced is None else (id(forced[0]), forced[1]),
    )  # fmt: skip


def convolution(
    input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, *op_args: Any
) -> torch.Tensor:
    """``triton::convolution`` on CUDA tensors (CPU tensors under ``TRITON_INTERPRET=1``); ``op_args`` are the op's
    stride, padding_before, padding_after, dilation, transposed, output_padding and groups."""
    key = signature_key(input, weight, bias, op_args)
    plan = _PLANS.get(key)
    if plan is None:
        plan = make_plan(input, weight, bias, canonical_params(weight, *op_args))
        if len(_PLANS) >= _PLAN_LIMIT:
            _PLANS.pop(next(iter(_PLANS)))
        _PLANS[key] = plan
    return plan.run(input, weight, bias)


def run_convolution(
    input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, p: ConvParams
) -> torch.Tensor:
    """`convolution` with a `ConvParams`."""
    return convolution(input, weight, bias, *p.as_op_args())


def plan_for(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, p: ConvParams):
    """The cached plan a call with these tensors and ``p`` runs (None before the first such call)."""
    return _PLANS.get(signature_key(input, weight, bias, p.as_op_args()))


def clear_plans() -> None:
    """Forget every plan and prepared weight."""
    _PLANS.clear()
    _WEIGHTS.clear()


def make_plan(
    input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, p: ConvParams
) -> ConvPlan | EmptyPlan | AtenPlan:
    sizes, strides = output_layout(input, weight, p)
    if 0 in sizes:
        return EmptyPlan(tuple(sizes), tuple(strides), input.dtype, input.device)
    allow_tf32 = torch.backends.cudnn.allow_tf32
    problem = ConvProblem.from_tensors(input, weight, bias, p, allow_tf32)
    try:
        candidate = select_candidate(problem, tuning_lookup)
    except NoTemplateError as e:
        # The eager op stays usable for calls no template covers (float64, ...); the planner never routes
        # such calls to the delegate, so this path exists only in PyTorch.
        sig = problem.signature() + problem.dtype
        if sig not in _warned:
            _warned.add(sig)
            warnings.warn(f"triton::convolution falls back to ATen: {e}", stacklevel=4)
        return AtenPlan(p)
    return ConvPlan(problem, candidate, tuple(sizes), tuple(strides), input.dtype, input.device)


class EmptyPlan:
    """A call with an empty output: nothing to compute."""

    def __init__(
        self, sizes: tuple[int, ...], strides: tuple[int, ...], dtype: torch.dtype, device: torch.device
    ):
        self.sizes, self.strides, self.dtype, self.device = sizes, strides, dtype, device

    def run(self, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return _empty_strided(self.sizes, self.strides, dtype=self.dtype, device=self.device)


class AtenPlan:
    """A call no template supports: ATen computes it."""

    def __init__(self, params: ConvParams) -> None:
        self.params = params

    def run(self, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return reference_in_layout(input, weight, bias, self.params)


class _Launch:
    """One `KernelLaunch` of a plan, and once bound, the compiled kernel with its argument list.

    ``args`` holds every parameter of the kernel in declaration order (constexprs too, defaults applied), as
    Triton's JIT passes them to a compiled kernel's launcher; ``slots`` pairs each tensor position with the index
    of its tensor in the plan's per-call tensor list (`ConvPlan.roles`), filled in on each call. A role the plan
    never binds (an optional one) stays None.
    """

    def __init__(self, launch: KernelLaunch, roles: Sequence[str]) -> None:
        self.launch = launch
        self.grid = launch.grid
        self.slots = tuple(
            (i, roles.index(a.role))
            for i, a in enumerate(launch.args)
            if isinstance(a, TensorArg) and a.role in roles
        )
        self.args: list[Any] = []
        self.kernel: Any = None
        self.launcher: Any = None
        self.function: Any = None
        self.packed_metadata: Any = None

    def bind(self, tensors: dict[str, torch.Tensor | None], arch: int | None) -> None:
        """Look up the kernel the JIT compiled for this launch on these tensors (it has just run them)."""
        launch = self.launch.for_arch(arch)
        positional = launch.resolve(tensors)
        constexprs = dict(launch.constexprs)
        kernel = launch.fn.warmup(*positional, grid=self.grid, **constexprs, **launch.compile_options())
        if hasattr(kernel, "result"):  # a compile future
            kernel = kernel.result()
        bound = inspect.signature(launch.fn.fn).bind(*positional, **constexprs)
        bound.apply_defaults()
        self.args = list(bound.arguments.values())
        for i, _ in self.slots:
            self.args[i] = None  # filled per call; the plan keeps no tensor alive
        self.launcher = kernel.run  # loads the module on first access
        self.function = kernel.function
        self.packed_metadata = kernel.packed_metadata
        self.kernel = kernel

    def run_bound(self, tensors: Sequence[torch.Tensor | None], stream: int, enter: Any, leave: Any) -> None:
        args = self.args.copy()
        for i, j in self.slots:
            args[i] = tensors[j]
        metadata = None if enter is None else self.kernel.launch_metadata(self.grid, stream, *args)
        gx, gy, gz = self.grid
        self.launcher(gx, gy, gz, stream, self.function, self.packed_metadata, metadata, enter, leave, *args)


def _current_device() -> int:
    # torch.cuda.current_device() without its lazy-init check: a plan is only bound after CUDA ran a kernel.
    return torch._C._cuda_getDevice()


def _stream_getter() -> Any:
    """Triton's ``device index -> current raw stream`` (what its JIT launches on)."""
    return triton.runtime.driver.active.get_current_stream


def _launch_hooks() -> tuple[Any, Any]:
    """Triton's launch enter/exit hooks (profilers), each None when nothing is registered."""
    runtime = triton.knobs.runtime
    enter, leave = runtime.launch_enter_hook, runtime.launch_exit_hook
    if enter is not None and getattr(enter, "calls", True) == []:
        enter = None
    if leave is not None and getattr(leave, "calls", True) == []:
        leave = None
    return enter, leave


class ConvPlan:
    """What one call signature needs: output layout, problem, candidate, scratch and launches.

    A call's tensors travel as one list in the order of ``roles``: input, prepared weight, bias, output, then
    the scratch tensors. Scratch the launches need zeroed (split-K tile counters) is also left zeroed by them, so
    a bound plan keeps one set per stream and reuses it: launches on one stream run in order, and each leaves the
    counters as it found them. While a stream is being captured into a CUDA graph, the call allocates fresh
    zeroed scratch instead (a set first made inside a capture would be zeroed only when the graph replays).
    """

    def __init__(
        self,
        problem: ConvProblem,
        candidate: Candidate,
        sizes: tuple[int, ...],
        strides: tuple[int, ...],
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        self.serial = next(_serials)
        self.problem = problem
        self.candidate = candidate
        self.sizes, self.strides, self.dtype, self.device = sizes, strides, dtype, device
        scratch = candidate.template.scratch(problem, candidate.schedule)
        self.scratch = tuple((t.role, t.sizes, getattr(torch, t.dtype), t.zeroed) for t in scratch)
        self.roles = ("input", "weight", "bias", "output", *(t.role for t in scratch))
        self.launches = [_Launch(launch, self.roles) for launch in candidate.launches(problem)]
        self.bound = False
        self.bindable = device.type == "cuda" and not interpreting()
        self.current_stream: Any = _stream_getter() if self.bindable else None
        self.zeroed_scratch: dict[int, dict[str, torch.Tensor]] = {}  # stream -> zeroed scratch kept zero

    def prepared_weight(self, weight: torch.Tensor) -> torch.Tensor:
        key = (self.serial, id(weight))
        hit = _WEIGHTS.get(key)
        if (
            hit is not None
            and hit[0]() is weight
            and hit[1] == weight._version
            and hit[2] == weight.data_ptr()
        ):
            return weight if hit[3] is None else hit[3]
        c = self.candidate
        prepared = c.template.prepare_weight(weight, self.problem, c.schedule)
        if len(_WEIGHTS) >= _WEIGHT_LIMIT:
            _WEIGHTS.pop(next(iter(_WEIGHTS)))
        forget = lambda _ref, key=key: _WEIGHTS.pop(key, None)  # the weight died: free what was made from it
        # A weight the kernels read as it is (prepare_weight returned it) is not held: the entry would keep it alive.
        kept = None if prepared is weight else prepared
        _WEIGHTS[key] = (weakref.ref(weight, forget), weight._version, weight.data_ptr(), kept)
        return prepared

    def run(self, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        out = _empty_strided(self.sizes, self.strides, dtype=self.dtype, device=self.device)
        prepared = self.prepared_weight(weight)
        aligned = (
            input.data_ptr() | prepared.data_ptr() | (0 if bias is None else bias.data_ptr())
        ) % 16 == 0
        tensors = [input, prepared, bias, out]
        if not self.bindable:  # CPU tensors under TRITON_INTERPRET=1
            tensors += [self._new_scratch(sizes, dtype, zeroed) for _, sizes, dtype, zeroed in self.scratch]
            self.launch_jit(tensors, aligned)
            return out
        index = self.device.index
        if _current_device() != index:  # matters on multi-GPU hosts
            with torch.cuda.device(index):
                self.launch_on(index, tensors, aligned)
        else:
            self.launch_on(index, tensors, aligned)
        return out

    def _new_scratch(self, sizes: tuple[int, ...], dtype: torch.dtype, zeroed: bool) -> torch.Tensor:
        alloc = torch.zeros if zeroed else torch.empty
        return alloc(sizes, dtype=dtype, device=self.device)

    def _kept_zeroed(self, stream: int) -> dict[str, torch.Tensor] | None:
        """This stream's zeroed scratch (made on first use; None while the stream is being captured)."""
        kept = self.zeroed_scratch.get(stream)
        if kept is None and not torch.cuda.is_current_stream_capturing():
            kept = {
                role: self._new_scratch(sizes, dtype, True)
                for role, sizes, dtype, zeroed in self.scratch
                if zeroed
            }
            self.zeroed_scratch[stream] = kept
        return kept

    def launch_on(self, index: int, tensors: list[torch.Tensor | None], aligned: bool) -> None:
        stream = self.current_stream(index)
        if self.scratch:
            kept = self._kept_zeroed(stream)
            for role, sizes, dtype, zeroed in self.scratch:
                reuse = zeroed and kept is not None
                tensors.append(kept[role] if reuse else self._new_scratch(sizes, dtype, zeroed))
        if self.bound and aligned:
            enter, leave = _launch_hooks()
            for launch in self.launches:
                launch.run_bound(tensors, stream, enter, leave)
            return
        self.launch_jit(tensors, aligned)

    def launch_jit(self, tensors: list[torch.Tensor | None], aligned: bool) -> None:
        """Launch through Triton's JIT; the first aligned call on a GPU then binds the compiled kernels."""
        by_role = dict(zip(self.roles, tensors, strict=True))
        for launch in self.launches:
            launch.launch.run(by_role)
        if self.bindable and aligned and not self.bound:
            arch = running_arch()
            for launch in self.launches:
                launch.bind(by_role, arch)
            self.bound = True
