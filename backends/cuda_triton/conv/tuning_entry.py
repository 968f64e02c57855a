"""One tuning-table entry (`cuda_triton.conv.tuning`): the measured best (template, schedule) for one convolution,
and its JSON form (the ``entries`` of a table file, `cuda_triton.conv.tuning_table`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..kernel.launch import Schedule
from .problem import ConvProblem
from .tuning_keys import PRECISIONS, layout_key, precision_key, problem_from_spec, problem_spec


class TuningTableError(ValueError):
    """A tuning table that cannot be used: missing when named explicitly, not JSON, wrong format or version."""


@dataclass(frozen=True)
class TuningEntry:
    arch: int
    precision: str
    layout: str
    signature: str
    template: str
    schedule: Schedule
    time_us: float
    cudnn_us: float | None
    heuristic_us: float | None
    problem: ConvProblem

    @property
    def key(self) -> tuple[int, str, str, str]:
        return (self.arch, self.precision, self.layout, self.signature)

    @property
    def speedup_over_cudnn(self) -> float | None:
        return None if not self.cudnn_us else self.cudnn_us / self.time_us

    def to_json(self) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "precision": self.precision,
            "layout": self.layout,
            "signature": self.signature,
            "template": self.template,
            "schedule": self.schedule.as_dict(),
            "time_us": round(self.time_us, 3),
            "cudnn_us": None if self.cudnn_us is None else round(self.cudnn_us, 3),
            "heuristic_us": None if self.heuristic_us is None else round(self.heuristic_us, 3),
            "problem": problem_spec(self.problem),
        }

    @staticmethod
    def from_problem(
        problem: ConvProblem,
        arch: int,
        template: str,
        schedule: Schedule,
        time_us: float,
        cudnn_us: float | None = None,
        heuristic_us: float | None = None,
    ) -> TuningEntry:
        return TuningEntry(
            int(arch),
            precision_key(problem),
            layout_key(problem),
            problem.signature(),
            template,
            schedule,
            float(time_us),
            None if cudnn_us is None else float(cudnn_us),
            None if heuristic_us is None else float(heuristic_us),
            problem,
        )


def entry_from_json(raw: Any, index: int, where: str) -> TuningEntry:
    def bad(msg: str) -> TuningTableError:
        return TuningTableError(f"{where}: entry {index}: {msg}")

    if not isinstance(raw, dict):
        raise bad("not an object")
    for name in ("arch", "precision", "layout", "signature", "template", "schedule", "time_us", "problem"):
        if name not in raw:
            raise bad(f"missing field {name!r}")
    if raw["precision"] not in PRECISIONS:
        raise bad(f"precision {raw['precision']!r} is not one of {PRECISIONS}")
    sched = raw["schedule"]
    if not isinstance(sched, dict) or not all(
        isinstance(k, str) and isinstance(v, int) for k, v in sched.items()
    ):
        raise bad("schedule must be an object of integer values")
    try:
        problem = problem_from_spec(raw["problem"])
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise bad(f"problem cannot be rebuilt: {type(e).__name__}: {e}") from e
    entry = TuningEntry(
        arch=int(raw["arch"]),
        precision=str(raw["precision"]),
        layout=str(raw["layout"]),
        signature=str(raw["signature"]),
        template=str(raw["template"]),
        schedule=Schedule.from_dict(sched),
        time_us=float(raw["time_us"]),
        cudnn_us=None if raw.get("cudnn_us") is None else float(raw["cudnn_us"]),
        heuristic_us=None if raw.get("heuristic_us") is None else float(raw["heuristic_us"]),
        problem=problem,
    )
    derived = (precision_key(problem), layout_key(problem), problem.signature())
    if derived != (entry.precision, entry.layout, entry.signature):
        raise bad(f"key {entry.key[1:]} does not match its problem, which gives {derived}")
    if not (entry.time_us > 0 and math.isfinite(entry.time_us)):
        raise bad(f"time_us must be a positive number, got {raw['time_us']!r}")
    return entry
