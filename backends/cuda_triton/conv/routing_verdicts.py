"""The routing planner's template gate (`cuda_triton.conv.routing`): which registered template runs a concrete
problem, with its schedules and why the others decline, cached per problem for one template registry."""

from __future__ import annotations

from dataclasses import dataclass

from .problem import ConvProblem
from .templates import ConvTemplate, Schedule, heuristic_template, registered_templates, support_report


@dataclass(frozen=True)
class Verdict:
    template: str | None
    worth: bool
    schedules: tuple[Schedule, ...]
    unsupported: tuple[tuple[str, str], ...]
    error: str | None = None


def evaluate(problem: ConvProblem) -> Verdict:
    try:
        report = [(t, v) for t, v in support_report(problem)]
    except Exception:  # a template raised: judge them one by one so one bug does not hide the others
        report = []
        for t in registered_templates():
            try:
                report.append((t, t.supports(problem)))
            except Exception as e:
                report.append((t, Unsupported(f"supports() raised {type(e).__name__}: {e}")))
    unsupported = tuple((t.name, v.reason) for t, v in report if not v)
    supporting = [t for t, v in report if v]
    try:  # the template the op runs without a table entry: a claiming one first (`heuristic_template`)
        chosen = heuristic_template(supporting, problem)
    except Exception as e:
        return Verdict(None, False, (), unsupported, f"choosing a template failed while planning: {e!r}")
    if chosen is None:
        return Verdict(None, False, (), unsupported)
    try:
        heuristic = chosen.heuristic_schedule(problem)
        rest = [s for s in chosen.schedules(problem) if s != heuristic]
        worth = bool(chosen.worth_routing(problem))
    except Exception as e:
        return Verdict(
            chosen.name, False, (), unsupported, f"template '{chosen.name}' failed while planning: {e!r}"
        )
    return Verdict(chosen.name, worth, (heuristic, *rest), unsupported)


@dataclass(frozen=True)
class Unsupported:
    reason: str

    def __bool__(self) -> bool:
        return False


@dataclass(frozen=True)
class Stage:
    """Outcome of the layout, dtype and template gates for one concrete call (what `VerdictCache` stores)."""

    refusal: str | None
    problem: ConvProblem | None
    verdict: Verdict | None


class VerdictCache:
    """Gate outcomes per concrete call (layouts, dtypes, params), valid for one template registry.

    Templates are stateless and `ConvProblem` holds everything their verdicts depend on, so one process-wide
    cache serves every `plan` call (the partitioner plans node by node). It is dropped when the registry
    changes (tests swap it) and when it grows past ``limit`` entries; `clear_cache` drops it by hand.
    """

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self.registry: tuple[ConvTemplate, ...] = ()
        self.stages: dict[tuple, Stage] = {}
        self.verdicts: dict[ConvProblem, Verdict] = {}

    def check_registry(self) -> None:
        registry = tuple(registered_templates())
        if len(registry) != len(self.registry) or any(
            a is not b for a, b in zip(registry, self.registry, strict=True)
        ):
            self.registry = registry
            self.clear()

    def clear(self) -> None:
        self.stages = {}
        self.verdicts = {}

    def stage(self, key: tuple) -> Stage | None:
        return self.stages.get(key)

    def store(self, key: tuple, stage: Stage) -> Stage:
        if len(self.stages) >= self.limit:
            self.clear()
        self.stages[key] = stage
        return stage

    def verdict(self, problem: ConvProblem) -> Verdict:
        hit = self.verdicts.get(problem)
        if hit is None:
            hit = self.verdicts[problem] = evaluate(problem)
        return hit
