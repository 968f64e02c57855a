"""The kernel families beyond convolution by name: their launches, their heuristic schedule, their compile job.

A family's spec (a frozen dataclass built from static metadata) and a `Schedule` are all it takes to rebuild its
launches, so `OpCompileJob` carries just those: it pickles into a compile worker, which calls the family's
``launches`` again and compiles one of them. Depends on torch and triton only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..kernel.aot import LaunchJob
from ..kernel.launch import KernelLaunch, Schedule, ScratchTensor


@dataclass(frozen=True)
class KernelFamily:
    """How a family turns (spec, schedule) into launches, which schedule it picks untuned, its scratch tensors."""

    name: str
    launches: Callable[[Any, Schedule], list[KernelLaunch]]
    heuristic: Callable[[Any], Schedule]
    scratch: Callable[[Any, Schedule], list[ScratchTensor]] | None = None

    def scratch_tensors(self, spec: Any, schedule: Schedule) -> list[ScratchTensor]:
        return [] if self.scratch is None else self.scratch(spec, schedule)


def _families() -> dict[str, KernelFamily]:
    from .data_movement.launches import heuristic_schedule as move_heuristic
    from .data_movement.launches import launches as move_launches
    from .elementwise.kernels import heuristic_schedule as ew_heuristic
    from .elementwise.launches import launches as ew_launches
    from .gemm.launches import heuristic_schedule as gemm_heuristic
    from .gemm.launches import launches as gemm_launches
    from .gemm.launches import scratch as gemm_scratch
    from .norm.launches import default_schedule as norm_heuristic
    from .norm.launches import launches as norm_launches
    from .norm.launches import scratch as norm_scratch
    from .pooling.kernels import heuristic_schedule as pool_heuristic
    from .pooling.launches import launches as pool_launches
    from .reduction.launches import launches as red_launches
    from .reduction.schedules import heuristic_schedule as red_heuristic
    from .reduction.schedules import scratch as red_scratch

    families = (
        KernelFamily("elementwise", ew_launches, lambda spec: ew_heuristic(spec.out.numel)),
        KernelFamily("reduction", red_launches, red_heuristic, red_scratch),
        KernelFamily("norm", norm_launches, norm_heuristic, norm_scratch),
        KernelFamily("pooling", pool_launches, pool_heuristic),
        KernelFamily("gemm", gemm_launches, gemm_heuristic, gemm_scratch),
        KernelFamily("data_movement", move_launches, move_heuristic),
    )
    return {f.name: f for f in families}


_FAMILIES: dict[str, KernelFamily] = {}


def kernel_family(name: str) -> KernelFamily:
    """The family called ``name`` (its modules are imported on first use)."""
    if not _FAMILIES:
        _FAMILIES.update(_families())
    family = _FAMILIES.get(name)
    if family is None:
        raise KeyError(f"no kernel family {name!r}; known: {sorted(_FAMILIES)}")
    return family


@dataclass(frozen=True)
class OpCompileJob(LaunchJob):
    """One launch of a family's op for one arch: everything a compile worker needs, all picklable."""

    family: str
    spec: Any

    def launches(self) -> list[KernelLaunch]:
        return kernel_family(self.family).launches(self.spec, self.schedule)


__all__ = ["KernelFamily", "OpCompileJob", "kernel_family"]
