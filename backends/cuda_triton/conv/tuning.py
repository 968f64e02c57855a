"""The tuning table: measured best (template, schedule) per convolution, and the lookup the op and preprocess use.

Format (JSON, one file per GPU architecture; the shipped one is ``conv/tuning/sm90.json``)::

    {
      "format": "cuda_triton.conv.tuning",
      "version": 1,
      "arch": 90,                      # the table's default arch; every entry also names its own
      "meta": {...},                   # free-form provenance: device, torch/triton versions, command, date
      "entries": [
        {
          "arch": 90,
          "precision": "float16",      # float16 | bfloat16 | tf32 (fp32, TF32 allowed) | float32 (exact fp32)
          "layout": "channels_last",   # input layout, "->" output layout when they differ
          "signature": "n8_c64_...",   # ConvProblem.signature()
          "template": "implicit_gemm",
          "schedule": {"BLOCK_M": 128, ..., "num_warps": 4, "num_stages": 3},
          "time_us": 12.5,             # median, this schedule
          "cudnn_us": 15.0,            # median, ATen/cuDNN on the same inputs (null when not measured)
          "heuristic_us": 13.1,        # median, the schedule the heuristics pick (null when not measured)
          "problem": {...}             # what rebuilds the ConvProblem exactly (see `tuning_keys.problem_spec`)
        }, ...
      ]
    }

Key: (arch, precision, layout, signature). ``lookup`` answers an exact hit first (if its template still offers
that schedule for the problem: a stale entry is skipped); the entry of the same convolution with the other bias
setting counts as exact (a bias does not change the best schedule). Otherwise it generalises to the
nearest measured convolution of the same structural class (same spatial dims, transposed or not, depthwise or
not), precision and layout, whose template supports the new problem, by the distance `tuning_keys.signature_distance`
(a weighted L1 distance over log2 sizes, documented there; float16 and bfloat16 entries stand in for each
other at an extra distance of PRECISION_PENALTY, as their kernels have the same shape). It returns that
neighbour's schedule only if the template offers the same schedule for the new problem
(``template.schedules(problem)``) and agrees to run it there (``template.transfers_to``), and if tuning beat
the heuristic on that neighbour by MIN_NEIGHBOUR_GAIN,
trying up to MAX_NEIGHBOURS such neighbours nearest first; otherwise, and when nothing lies within
``MAX_DISTANCE``, it returns None so the template's own heuristic decides.

Environment: ``CUDA_TRITON_TUNING_TABLE=<path>`` replaces the shipped table; ``CUDA_TRITON_TUNING=0`` disables
tables altogether (lookup returns None). A table named explicitly that is missing or malformed raises
`TuningTableError`; a missing shipped table is an empty table.

This module never imports executorch, and loads the template families only when a lookup needs them.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..kernel.launch import Schedule
from .problem import ConvProblem
from .tuning_keys import (
    PRECISIONS,
    distance_features,
    distance_weights,
    layout_key,
    precision_key,
    problem_from_spec,
    problem_spec,
    structural_class,
    table_key,
)

TABLE_FORMAT = "cuda_triton.conv.tuning"
TABLE_VERSION = 1
DEFAULT_ARCH = 90
ENV_TABLE = "CUDA_TRITON_TUNING_TABLE"
ENV_ENABLE = "CUDA_TRITON_TUNING"
SHIPPED_DIR = Path(__file__).resolve().parent / "tuning"


# Nearest-signature fallback: neighbours farther than this are not trusted (see `tuning_keys.signature_distance`), and a
# neighbour's schedule is borrowed only where tuning beat the heuristic there by MIN_NEIGHBOUR_GAIN: elsewhere
# the heuristic generalises as well. Measured on an H200 over 37 convolutions x 3 dtypes in neither the suite nor
# the table (bench/unseen_suite.py, docs/performance.md): borrowing every neighbour within 6.0 gave 1.13x cuDNN
# (geomean), the heuristic alone 1.20x, this rule 1.21x.
MAX_DISTANCE = 3.0
MIN_NEIGHBOUR_GAIN = 1.3
# How many neighbours, nearest first, may be tried before giving up (each must offer its schedule).
MAX_NEIGHBOURS = 4
# Precisions whose kernels have the same shape (2-byte operands, fp32 accumulation): a float16 problem may borrow
# a bfloat16 neighbour's schedule and vice versa, at this extra distance.
COMPATIBLE_PRECISIONS = {"float16": ("bfloat16",), "bfloat16": ("float16",)}
PRECISION_PENALTY = 1.0


_MATCH_CACHE_LIMIT = 1 << 16


class TuningTableError(ValueError):
    """A tuning table that cannot be used: missing when named explicitly, not JSON, wrong format or version."""


def shipped_table_path(arch: int = DEFAULT_ARCH) -> Path:
    return SHIPPED_DIR / f"sm{arch}.json"


# ---- entries and tables -----------------------------------------------------------------------------------
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


def _entry_from_json(raw: Any, index: int, where: str) -> TuningEntry:
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


@dataclass(frozen=True)
class Match:
    """A lookup answer: the entry used, its distance (0 for an exact hit) and the schedule to run."""

    entry: TuningEntry
    distance: float
    exact: bool

    @property
    def template(self) -> str:
        return self.entry.template

    @property
    def schedule(self) -> Schedule:
        return self.entry.schedule


@dataclass
class TuningTable:
    entries: list[TuningEntry]
    arch: int = DEFAULT_ARCH
    meta: dict[str, Any] = field(default_factory=dict)
    source: str = "<memory>"

    def __post_init__(self) -> None:
        self._exact: dict[tuple[int, str, str, str], TuningEntry] = {}
        self._groups: dict[tuple, list[tuple[tuple[float, ...], TuningEntry]]] = {}
        for e in self.entries:
            if e.key in self._exact:
                raise TuningTableError(f"{self.source}: duplicate entry for {e.key}")
            self._exact[e.key] = e
            gkey = (e.arch, e.precision, e.layout, structural_class(e.problem))
            self._groups.setdefault(gkey, []).append((distance_features(e.problem), e))
        self._cache: dict[tuple[ConvProblem, int, float], Match | None] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, problem: ConvProblem, arch: int = DEFAULT_ARCH) -> TuningEntry | None:
        """The exact entry for ``problem`` (no fallback)."""
        return self._exact.get(table_key(problem, arch))

    def neighbours(self, problem: ConvProblem, arch: int = DEFAULT_ARCH) -> list[tuple[float, TuningEntry]]:
        """Entries of ``problem``'s arch/layout/structural class and precision (or a compatible one, farther by
        PRECISION_PENALTY), nearest first, exact hits included."""
        precision = precision_key(problem)
        f = distance_features(problem)
        w = distance_weights(problem.spatial_dims)
        scored: list[tuple[float, TuningEntry]] = []
        for prec in (precision, *COMPATIBLE_PRECISIONS.get(precision, ())):
            extra = 0.0 if prec == precision else PRECISION_PENALTY
            gkey = (int(arch), prec, layout_key(problem), structural_class(problem))
            for fe, e in self._groups.get(gkey, []):
                scored.append((extra + sum(wi * abs(x - y) for wi, x, y in zip(w, f, fe, strict=True)), e))
        scored.sort(key=lambda t: (t[0], t[1].precision, t[1].signature))
        return scored

    def match(
        self, problem: ConvProblem, arch: int = DEFAULT_ARCH, max_distance: float = MAX_DISTANCE
    ) -> Match | None:
        """The exact entry, else the nearest usable neighbour (see the module docstring); cached per problem
        (and per whether fp32 may run on fp16 tensor cores, which changes the schedules a template offers)."""
        from .templates._f16_mma import f16_mma_enabled

        ck = (problem, int(arch), float(max_distance), f16_mma_enabled())
        with self._lock:
            if ck in self._cache:
                return self._cache[ck]
        result = self._match(problem, int(arch), max_distance)
        with self._lock:
            if len(self._cache) >= _MATCH_CACHE_LIMIT:
                self._cache.clear()
            self._cache[ck] = result
        return result

    def nearest(
        self, problem: ConvProblem, arch: int = DEFAULT_ARCH, max_distance: float = MAX_DISTANCE
    ) -> Match | None:
        """The fallback alone, as if ``problem`` itself were not in the table (uncached; for evaluations)."""
        return self._match(problem, int(arch), max_distance, skip_exact=True)

    def _match(
        self, problem: ConvProblem, arch: int, max_distance: float, skip_exact: bool = False
    ) -> Match | None:
        from .templates import get_template

        offered: dict[str, set[Schedule] | None] = {}

        def on_offer(name: str) -> set[Schedule] | None:
            """The schedules template ``name`` offers for ``problem`` (None: unknown or unsupported)."""
            if name not in offered:
                template = _template_or_none(get_template, name)
                try:
                    ok = template is not None and bool(template.supports(problem))
                    offered[name] = set(template.schedules(problem)) if ok and template is not None else None
                except Exception:  # a template failing on this problem is not a candidate; the op decides
                    offered[name] = None
            return offered[name]

        exact = self.get(problem, arch)
        if exact is None:
            # A bias does not change which schedule is fastest (one add per output element in the epilogue),
            # but the key has it: a convolution that folded a batch norm has a bias its entry (measured on the
            # model's bias-free convolution) lacks. The entry for the other bias setting is an exact hit too.
            exact = self.get(replace(problem, has_bias=not problem.has_bias), arch)
        if exact is not None and not skip_exact:
            schedules = on_offer(exact.template)
            # A stale table (the template's tuning space changed since it was measured) falls through.
            if schedules is not None and exact.schedule in schedules:
                return Match(exact, 0.0, True)
        tried = 0
        for dist, e in self.neighbours(problem, arch):
            if e is exact:
                continue
            if dist > max_distance or tried >= MAX_NEIGHBOURS:
                break
            schedules = on_offer(e.template)
            if schedules is None:
                continue  # that family cannot run this problem: not a neighbour at all
            tried += 1
            if not e.heuristic_us or e.heuristic_us < MIN_NEIGHBOUR_GAIN * e.time_us:
                continue  # the heuristic was about as good there: it decides here too
            if e.schedule in schedules and get_template(e.template).transfers_to(e.schedule, problem):
                return Match(e, dist, False)
        return None

    # -- writing ----------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        ordered = sorted(self.entries, key=lambda e: e.key)
        return {
            "format": TABLE_FORMAT,
            "version": TABLE_VERSION,
            "arch": self.arch,
            "meta": self.meta,
            "entries": [e.to_json() for e in ordered],
        }

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write atomically (a reader never sees a half-written table)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        data = self.to_json()
        entries = data.pop("entries")
        head = json.dumps(data, indent=1)[:-2]  # without the closing brace
        body = ",\n".join("  " + json.dumps(e, separators=(",", ":")) for e in entries)
        text = head + ',\n "entries": [\n' + body + ("\n ]\n}\n" if entries else " ]\n}\n")
        tmp.write_text(text)
        os.replace(tmp, path)


def _template_or_none(get_template, name: str):
    try:
        return get_template(name)
    except KeyError:
        return None


def parse_table(data: Any, source: str = "<memory>") -> TuningTable:
    """Validate the JSON structure of a table and index it; raises `TuningTableError` naming what is wrong."""
    if not isinstance(data, dict):
        raise TuningTableError(f"{source}: a tuning table is a JSON object, got {type(data).__name__}")
    if data.get("format") != TABLE_FORMAT:
        raise TuningTableError(
            f"{source}: not a tuning table (format {data.get('format')!r}, want {TABLE_FORMAT!r})"
        )
    if data.get("version") != TABLE_VERSION:
        raise TuningTableError(
            f"{source}: tuning table version {data.get('version')!r} is not supported (this build reads "
            f"version {TABLE_VERSION}); regenerate it with scripts/tune.py"
        )
    raw_entries = data.get("entries")
    if not isinstance(raw_entries, list):
        raise TuningTableError(f"{source}: 'entries' must be a list")
    entries = [_entry_from_json(raw, i, source) for i, raw in enumerate(raw_entries)]
    meta = data.get("meta") or {}
    if not isinstance(meta, dict):
        raise TuningTableError(f"{source}: 'meta' must be an object")
    return TuningTable(entries, int(data.get("arch", DEFAULT_ARCH)), meta, source)


def read_table(path: str | os.PathLike[str]) -> TuningTable:
    """Read and validate one table file (no caching, no environment)."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError as e:
        raise TuningTableError(f"tuning table {path} does not exist") from e
    except OSError as e:
        raise TuningTableError(f"tuning table {path} cannot be read: {e}") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise TuningTableError(f"tuning table {path} is not valid JSON: {e}") from e
    return parse_table(data, str(path))


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
        template = _template_or_none(get_template, e.template)
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
    "DEFAULT_ARCH",
    "ENV_ENABLE",
    "ENV_TABLE",
    "MAX_DISTANCE",
    "MIN_NEIGHBOUR_GAIN",
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
