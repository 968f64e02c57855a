"""The tuning table's lookup, as the op and preprocess use it: the table for an arch, loaded once per path with the
environment, and the (template, schedule) it answers for a convolution. The entries and their matching rule are
`cuda_triton.conv.tuning_table` (the file format and the nearest-signature fallback are described there).

Environment: ``CUDA_TRITON_TUNING_TABLE=<path>`` replaces the shipped table; ``CUDA_TRITON_TUNING=0`` disables
tables altogether (lookup returns None). A table named explicitly that is missing or malformed raises
`TuningTableError`; a missing shipped table is an empty table.

This module never imports executorch, and loads the template families only when a lookup needs them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

from ..kernel.launch import Schedule
from .problem import ConvProblem
from .tuning_entry import TuningEntry, TuningTableError
from .tuning_table import (
    COMPATIBLE_PRECISIONS,
    DEFAULT_ARCH,
    MAX_DISTANCE,
    MAX_NEIGHBOURS,
    MIN_NEIGHBOUR_GAIN,
    PRECISION_PENALTY,
    TABLE_FORMAT,
    TABLE_VERSION,
    Match,
    TuningTable,
    parse_table,
    read_table,
    template_or_none,
)

ENV_TABLE = "CUDA_TRITON_TUNING_TABLE"
ENV_ENABLE = "CUDA_TRITON_TUNING"
SHIPPED_DIR = Path(__file__).resolve().parent / "tuning"


def shipped_table_path(arch: int = DEFAULT_ARCH) -> Path:
    return SHIPPED_DIR / f"sm{arch}.json"


# ---- loading with the environment, cached -------------------------------------------------------------------
_loaded: dict[tuple[str, int], TuningTable] = {}
_load_lock = threading.Lock()


def tuning_enabled() -> bool:
    return os.environ.get(ENV_ENABLE, "1").strip().lower() not in ("0", "false", "off", "no")


def load_table(path: str | os.PathLike[str] | None = None, arch: int = DEFAULT_ARCH) -> TuningTable:
    """The table at ``path``; by default ``$CUDA_TRITON_TUNING_TABLE``, else the shipped ``tuning/sm{arch}.json``.

    Loaded once per path (cached). A path given here or in the environment must exist; a missing shipped table
    is an empty table. Raises `TuningTableError` for a malformed table.
    """
    explicit = path is not None or bool(os.environ.get(ENV_TABLE))
    chosen = Path(path) if path is not None else Path(os.environ.get(ENV_TABLE) or shipped_table_path(arch))
    ck = (str(chosen), int(arch))
    with _load_lock:
        hit = _loaded.get(ck)
        if hit is not None:
            return hit
        if not explicit and not chosen.exists():
            table = TuningTable([], int(arch), {}, str(chosen))
        else:
            table = read_table(chosen)
        _loaded[ck] = table
        return table


def clear_cache() -> None:
    """Forget loaded tables (tests; after writing a table in-process)."""
    with _load_lock:
        _loaded.clear()


def lookup_match(
    problem: ConvProblem,
    arch: int = DEFAULT_ARCH,
    table: TuningTable | None = None,
    max_distance: float = MAX_DISTANCE,
) -> Match | None:
    """Like `lookup`, with the entry and distance behind the answer (planner and reports use the timings)."""
    if not tuning_enabled():
        return None
    t = table if table is not None else load_table(arch=arch)
    if not t.entries:
        return None
    return t.match(problem, arch, max_distance)


def lookup(
    problem: ConvProblem, arch: int = DEFAULT_ARCH, table: TuningTable | None = None
) -> tuple[str, Schedule] | None:
    """(template name, schedule) for ``problem`` from the tuning table, or None to let the heuristics decide."""
    m = lookup_match(problem, arch, table)
    return None if m is None else (m.template, m.schedule)


def entry_problems(entries: Iterable[TuningEntry]) -> list[ConvProblem]:
    return [e.problem for e in entries]


def validate_table(table: TuningTable) -> list[str]:
    """What is wrong with a parsed table against the registered templates (empty when it is usable).

    Every entry must name an existing template that supports its problem and offers its schedule for it.
    Compiling the entries is left to the caller (`cuda_triton.kernel.aot.compile_launch`), since it is slow.
    """
    from .templates import get_template

    problems: list[str] = []
    for e in table.entries:
        where = f"{table.source}: {e.precision} {e.layout} {e.signature}"
        template = template_or_none(get_template, e.template)
        if template is None:
            problems.append(f"{where}: no template named {e.template!r}")
            continue
        verdict = template.supports(e.problem)
        if not verdict:
            problems.append(f"{where}: {e.template} does not support it: {verdict.reason}")
            continue
        if e.schedule not in template.schedules(e.problem):
            problems.append(f"{where}: {e.template} does not offer schedule {e.schedule.key()} for it")
    return problems


__all__ = [
    "COMPATIBLE_PRECISIONS",
    "DEFAULT_ARCH",
    "ENV_ENABLE",
    "ENV_TABLE",
    "MAX_DISTANCE",
    "MAX_NEIGHBOURS",
    "MIN_NEIGHBOUR_GAIN",
    "PRECISION_PENALTY",
    "Match",
    "TABLE_FORMAT",
    "TABLE_VERSION",
    "TuningEntry",
    "TuningTable",
    "TuningTableError",
    "clear_cache",
    "load_table",
    "lookup",
    "lookup_match",
    "parse_table",
    "read_table",
    "shipped_table_path",
    "tuning_enabled",
    "validate_table",
]
