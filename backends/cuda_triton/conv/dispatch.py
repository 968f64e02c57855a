"""The CUDA body of ``triton::convolution``: pick a candidate, prepare its weight once, launch."""

from __future__ import annotations

import contextlib
import warnings
import weakref
from collections import OrderedDict

import torch

from .op import output_layout, reference_in_layout
from .params import ConvParams
from .problem import ConvProblem
from .templates import Candidate, NoTemplateError, select_candidate

# Prepared weights, so the eager op pays the layout transform once per weight, as the AOT path does at export.
# An entry is valid only while the very tensor it was made from is alive and unmodified: the caching allocator
# hands a freed weight's address to the next tensor, so an address alone would return a stale weight.
_WEIGHT_CACHE: OrderedDict[tuple, tuple[weakref.ref, int, torch.Tensor]] = OrderedDict()
_WEIGHT_CACHE_SIZE = 256
_warned: set[str] = set()


def tuning_lookup(problem: ConvProblem):
    """The shipped tuning table's choice for ``problem`` (None when it has none)."""
    try:
        from .tuning import lookup
    except ImportError:
        return None
    return lookup(problem)


def prepared_weight(candidate: Candidate, weight: torch.Tensor, problem: ConvProblem) -> torch.Tensor:
    # allow_tf32 is part of the key: fp32 weights prepared for TF32 are rounded (templates/_tf32.py).
    key = (
        id(weight), weight.data_ptr(), candidate.template.name, candidate.schedule, problem.signature(),
        problem.allow_tf32,
    )  # fmt: skip
    hit = _WEIGHT_CACHE.get(key)
    if hit is not None and hit[0]() is weight and hit[1] == weight._version:
        _WEIGHT_CACHE.move_to_end(key)
        return hit[2]
    prepared = candidate.template.prepare_weight(weight, problem, candidate.schedule)
    _WEIGHT_CACHE[key] = (weakref.ref(weight), weight._version, prepared)
    _WEIGHT_CACHE.move_to_end(key)
    if len(_WEIGHT_CACHE) > _WEIGHT_CACHE_SIZE:
        _WEIGHT_CACHE.popitem(last=False)
    return prepared


def run_convolution(
    input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, p: ConvParams
) -> torch.Tensor:
    sizes, strides = output_layout(input, weight, p)
    problem = ConvProblem.from_tensors(input, weight, bias, p)
    try:
        candidate = select_candidate(problem, tuning_lookup)
    except NoTemplateError as e:
        # The eager op stays usable for calls no template covers (float64, ...); the planner never routes
        # such calls to the delegate, so this path exists only in PyTorch.
        sig = problem.signature() + problem.dtype
        if sig not in _warned:
            _warned.add(sig)
            warnings.warn(f"triton::convolution falls back to ATen: {e}", stacklevel=3)
        return reference_in_layout(input, weight, bias, p)

    out = torch.empty_strided(sizes, strides, dtype=input.dtype, device=input.device)
    if out.numel() == 0:
        return out
    batched_in = input.unsqueeze(0) if input.dim() == weight.dim() - 1 else input
    batched_out = out.unsqueeze(0) if out.dim() == weight.dim() - 1 else out
    tensors = {
        "input": batched_in,
        "weight": prepared_weight(candidate, weight, problem),
        "bias": bias,
        "output": batched_out,
        **candidate.allocate_scratch(problem, input.device),
    }
    # The device guard matters on multi-GPU hosts; CPU tensors only reach here under TRITON_INTERPRET=1.
    guard = torch.cuda.device(input.device) if input.is_cuda else contextlib.nullcontext()
    with guard:
        for launch in candidate.launches(problem):
            launch.run(tensors)
    return out
