"""The tuning table (`cuda_triton.conv.tuning`): its entries indexed for the exact and the nearest-signature
lookup, and its file format.

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
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..kernel.launch import Schedule
from .problem import ConvProblem
from .tuning_entry import TuningEntry, TuningTableError, entry_from_json
from .tuning_keys import (
    distance_features,
    distance_weights,
    layout_key,
    precision_key,
    structural_class,
    table_key,
)

TABLE_FORMAT = "cuda_triton.conv.tuning"
TABLE_VERSION = 1
DEFAULT_ARCH = 90


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
                template = template_or_none(get_template, name)
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


def template_or_none(get_template, name: str):
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
    entries = [entry_from_json(raw, i, source) for i, raw in enumerate(raw_entries)]
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
