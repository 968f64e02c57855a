"""Convolution kernel families and the registry that orders them.

``TEMPLATE_MODULES`` lists the families in priority order: the first whose ``supports`` accepts a problem is
the one the op and the planner use, unless a later one claims it from measurements (``heuristic_claims``) or a
tuning table picks another that also supports it.
``force_conv_candidate`` pins one (template, schedule) pair, so tests can run every schedule.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from ...kernel.launch import KernelLaunch, Schedule, Support
from ..problem import ConvProblem
from .base import ConvTemplate

# Priority order: specialised families first, the general implicit GEMM last.
TEMPLATE_MODULES: tuple[str, ...] = (
    "depthwise",
    "transposed",
    "gemm",
    "implicit_gemm",
    "implicit_gemm_tma",  # after the general one: only a tuning table picks it (see its module docstring)
    "implicit_gemm_box",  # a tuning table (or its nearest signature) picks it, or its heuristic_claims rule
)

_registry: list[ConvTemplate] | None = None


class _ForcedCandidate(threading.local):
    # A class-level default: reading an unset attribute of a plain threading.local raises inside getattr, which
    # costs more than the rest of the eager op's signature key.
    value: tuple[ConvTemplate, Schedule | None] | None = None


_forced = _ForcedCandidate()


def registered_templates() -> list[ConvTemplate]:
    """Every template instance, in priority order (imported on first use)."""
    global _registry
    if _registry is None:
        found: list[ConvTemplate] = []
        for module_name in TEMPLATE_MODULES:
            module = importlib.import_module(f"{__name__}.{module_name}")
            found.extend(module.TEMPLATES)
        _registry = found
    return _registry


def get_template(name: str) -> ConvTemplate:
    for t in registered_templates():
        if t.name == name:
            return t
    raise KeyError(
        f"no convolution template named {name!r}; known: {[t.name for t in registered_templates()]}"
    )


@dataclass(frozen=True)
class Candidate:
    template: ConvTemplate
    schedule: Schedule

    def launches(self, problem: ConvProblem) -> list[KernelLaunch]:
        return self.template.launches(problem, self.schedule)

    def allocate_scratch(self, problem: ConvProblem, device: torch.device | str) -> dict[str, torch.Tensor]:
        return self.template.allocate_scratch(problem, self.schedule, device)


@contextlib.contextmanager
def force_conv_candidate(template: ConvTemplate | str, schedule: Schedule | None = None) -> Iterator[None]:
    """Pin the template (and optionally the schedule) every convolution in this thread uses.

    A pinned template that does not support a problem raises instead of falling back, so a test that forces
    a candidate really runs it.
    """
    t = get_template(template) if isinstance(template, str) else template
    previous = _forced.value
    _forced.value = (t, schedule)
    try:
        yield
    finally:
        _forced.value = previous


def forced_candidate() -> tuple[ConvTemplate, Schedule | None] | None:
    return _forced.value


def support_report(problem: ConvProblem) -> list[tuple[ConvTemplate, Support]]:
    """Each template's verdict on ``problem``, in priority order."""
    return [(t, t.supports(problem)) for t in registered_templates()]


class NoTemplateError(ValueError):
    """No registered template supports a convolution."""


def heuristic_template(supporting: list[ConvTemplate], problem: ConvProblem) -> ConvTemplate | None:
    """Of the templates that support ``problem`` (in priority order), the one its heuristics run: the first that
    claims it (`ConvTemplate.heuristic_claims`), else the first; None when there are none. The op, the planner
    and the tuner's "heuristic" column all choose through this."""
    return next((t for t in supporting if t.heuristic_claims(problem)), supporting[0] if supporting else None)


def select_candidate(problem: ConvProblem, tuning_lookup=None) -> Candidate:
    """The template and schedule that run ``problem``: forced > tuning table > the first supporting template that
    claims it (`ConvTemplate.heuristic_claims`) > the first supporting template.

    ``tuning_lookup(problem)`` may return ``(template_name, Schedule)`` or None.
    """
    forced = forced_candidate()
    if forced is not None:
        template, schedule = forced
        verdict = template.supports(problem)
        if not verdict:
            raise NoTemplateError(
                f"forced template {template.name!r} does not support this call: {verdict.reason}"
            )
        return Candidate(template, schedule or template.heuristic_schedule(problem))
    if tuning_lookup is not None:
        hit = tuning_lookup(problem)
        if hit is not None:
            name, schedule = hit
            template = get_template(name)
            if template.supports(problem):
                return Candidate(template, schedule)
    report = support_report(problem)
    template = heuristic_template([t for t, verdict in report if verdict], problem)
    if template is not None:
        return Candidate(template, template.heuristic_schedule(problem))
    reasons = [f"{t.name}: {verdict.reason}" for t, verdict in report]
    raise NoTemplateError("no convolution template supports this call (" + "; ".join(reasons) + ")")


__all__ = [
    "Candidate",
    "ConvTemplate",
    "KernelLaunch",
    "NoTemplateError",
    "Schedule",
    "Support",
    "TEMPLATE_MODULES",
    "force_conv_candidate",
    "forced_candidate",
    "get_template",
    "heuristic_template",
    "registered_templates",
    "select_candidate",
    "support_report",
]
