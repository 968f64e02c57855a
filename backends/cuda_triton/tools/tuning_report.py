"""scripts/tune.py's outputs: the tuning table from the per-convolution log, the run summary, the dry-run plan.

The log (``<table>.log.jsonl``, one `ProblemResult` a line) is the record; the table (the ``cuda_triton.conv.tuning``
format) is rebuilt from it, so a run cut short by a kill still yields a table (``tune.py --rebuild``). The summary
(``<table>.md``) gives the speed-up over cuDNN per precision, the heuristic against the tuned best, every
convolution's choice, a leave-one-out view of the table's nearest-neighbour fallback, and the candidates that
failed their numerics check. Depends on torch and cuda_triton.conv only.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from .tuning_measure import LOG_VERSION, candidate_schedules, schedule_limit


def read_logs(paths: list[Path]) -> dict[str, dict[str, Any]]:
    records: dict[str, dict[str, Any]] = {}
    for path in paths:
        if not path.exists():
            continue
        for n, line in enumerate(path.read_text().splitlines()):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                print(f"{path}:{n + 1}: skipping a truncated line", file=sys.stderr, flush=True)
                continue
            if rec.get("log_version") != LOG_VERSION:
                continue
            records[json.dumps(rec["key"])] = rec
    return records


def build_table(records: dict[str, dict[str, Any]], arch: int, meta: dict[str, Any]):
    from cuda_triton.conv.templates.base import Schedule
    from cuda_triton.conv.tuning import TuningEntry, TuningTable
    from cuda_triton.conv.tuning_keys import problem_from_spec

    entries = []
    for rec in records.values():
        best = rec.get("best")
        if not best or rec["key"][0] != arch:
            continue
        h = rec.get("heuristic") or {}
        entries.append(
            TuningEntry.from_problem(
                problem_from_spec(rec["problem"]),
                arch,
                best["template"],
                Schedule.from_dict(best["schedule"]),
                best["time_us"],
                rec.get("cudnn_us"),
                h.get("time_us"),
            )
        )
    return TuningTable(entries, arch, meta)


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def table_meta(records: dict[str, dict[str, Any]], command: str) -> dict[str, Any]:
    """Provenance of a table: the measuring runs' device/timing/versions (joined when they differ)."""
    meta: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    }
    for name in ("device", "timing", "torch", "triton"):
        values = sorted({str(r.get("run", {}).get(name, "unknown")) for r in records.values()})
        meta[name] = " + ".join(values) if values else "none"
    meta["commands"] = sorted({str(r.get("run", {}).get("command", "unknown")) for r in records.values()})
    meta["written_by"] = command
    meta["convolutions_measured"] = len(records)
    return meta


def generalisation_report(records: dict[str, dict[str, Any]]) -> list[str]:
    """Leave-one-out: for each measured convolution, the time of what lookup would pick were it not in the
    table (its nearest neighbour's schedule, else the heuristic), against the tuned best and the heuristic."""
    from cuda_triton.conv.tuning_keys import problem_from_spec

    arch_of = {r["key"][0] for r in records.values()}
    if len(arch_of) != 1:
        return []
    arch = arch_of.pop()
    try:
        table = build_table(records, arch, {})
    except Exception as e:  # a summary must not stop a run
        return ["", f"(generalisation report unavailable: {type(e).__name__}: {e})"]
    by_prec: dict[str, list[tuple[float, float, bool]]] = {}
    for rec in records.values():
        best, heur = rec.get("best"), rec.get("heuristic") or {}
        if not best or not heur.get("time_us"):
            continue
        times = {
            (c["template"], json.dumps(c["schedule"], sort_keys=True)): c["time_us"]
            for c in rec["candidates"]
            if c.get("time_us") is not None and not c.get("error") and c.get("method") != "eager-pruned"
        }
        m = table.nearest(problem_from_spec(rec["problem"]), arch)
        t_fallback = heur["time_us"]
        used = False
        if m is not None:
            t = times.get((m.template, json.dumps(m.schedule.as_dict(), sort_keys=True)))
            if t is not None:  # (a pruned or failed schedule has no time: count the heuristic's)
                t_fallback, used = t, True
        by_prec.setdefault(rec["key"][1], []).append(
            (t_fallback / best["time_us"], heur["time_us"] / best["time_us"], used)
        )
    if not by_prec:
        return []
    out = [
        "",
        "Generalisation (leave-one-out): each convolution looked up as if it were not in the table.",
        "",
        "| precision | convs | neighbour used | geomean lookup/tuned | geomean heuristic/tuned | worst lookup/tuned |",
        "|---|---|---|---|---|---|",
    ]
    for prec, rows in sorted(by_prec.items()):
        g1 = _geomean([r[0] for r in rows])
        g2 = _geomean([r[1] for r in rows])
        out.append(
            f"| {prec} | {len(rows)} | {sum(r[2] for r in rows)} | {g1:.3f} | {g2:.3f} | {max(r[0] for r in rows):.2f} |"
        )
    return out


def write_summary(path: Path, records: dict[str, dict[str, Any]], meta: dict[str, Any]) -> None:
    lines = [
        "# Tuning run summary",
        "",
        f"- date: {meta.get('date')}; device: {meta.get('device')}; timing: {meta.get('timing')}",
        f"- torch {meta.get('torch')}, triton {meta.get('triton')}; commands: {meta.get('commands')}",
        "",
    ]
    by_prec: dict[str, list[dict[str, Any]]] = {}
    for rec in records.values():
        by_prec.setdefault(rec["key"][1], []).append(rec)
    lines += [
        "| precision | convs | tuned | geomean cuDNN/tuned | geomean heuristic/tuned | < 0.8x cuDNN |",
        "|---|---|---|---|---|---|",
    ]
    for prec, recs in sorted(by_prec.items()):
        tuned = [r for r in recs if r.get("best")]
        sp = [r["cudnn_us"] / r["best"]["time_us"] for r in tuned if r.get("cudnn_us")]
        hr = [
            r["heuristic"]["time_us"] / r["best"]["time_us"]
            for r in tuned
            if r.get("heuristic") and r["heuristic"].get("time_us")
        ]
        g1, g2 = _geomean(sp), _geomean(hr)
        slow = sum(1 for s in sp if s < 0.8)
        lines.append(
            f"| {prec} | {len(recs)} | {len(tuned)} | {'-' if g1 is None else f'{g1:.2f}x'} | "
            f"{'-' if g2 is None else f'{g2:.3f}'} | {slow} |"
        )
    lines += [
        "",
        "| precision | layout | signature | sources | template | schedule | us | cuDNN us | speed-up | heuristic us |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for rec in sorted(records.values(), key=lambda r: r["key"]):
        b = rec.get("best")
        cud = rec.get("cudnn_us")
        h = (rec.get("heuristic") or {}).get("time_us")
        if b:
            sched = "_".join(f"{k}{v}" for k, v in sorted(b["schedule"].items()))
            sp = f"{cud / b['time_us']:.2f}x" if cud else "-"
            lines.append(
                f"| {rec['key'][1]} | {rec['key'][2]} | `{rec['key'][3]}` | {', '.join(rec['sources'][:3])} | "
                f"{b['template']} | {sched} | {b['time_us']:.1f} | {'-' if cud is None else f'{cud:.1f}'} | {sp} | "
                f"{'-' if h is None else f'{h:.1f}'} |"
            )
        else:
            lines.append(
                f"| {rec['key'][1]} | {rec['key'][2]} | `{rec['key'][3]}` | {', '.join(rec['sources'][:3])} | none | - | - | - | - | - |"
            )
    lines += generalisation_report(records)
    firsts = sorted(
        c["first_run_s"] for rec in records.values() for c in rec.get("candidates", []) if "first_run_s" in c
    )
    if firsts:
        slow = sum(1 for f in firsts if f > 0.5)
        lines += [
            "",
            f"First launches: median {firsts[len(firsts) // 2]:.3f} s; {slow} of {len(firsts)} took > 0.5 s "
            "(compiled in the measuring process; on a GPU run, compiles the precompile workers missed).",
        ]
    failures = [
        (rec["key"], c)
        for rec in records.values()
        for c in rec.get("candidates", [])
        if c.get("error", "").startswith("numerics")
    ]
    if failures:
        lines += ["", f"## Candidates that failed numerics ({len(failures)})", ""]
        for key, c in failures[:200]:
            lines.append(f"- {key[1]} {key[2]} `{key[3]}` {c['template']} {c['schedule']}: {c['error']}")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, path)


def print_plan(
    todo: list[tuple[str, Any, list[str]]],
    max_schedules: int | None = None,
    templates: set[str] | None = None,
) -> None:
    """Convolutions, candidates and distinct kernels (what compiling costs) per source, without a GPU."""
    from cuda_triton.conv.templates import registered_templates

    rows: dict[str, list[int]] = {}
    kernels: set[Any] = set()
    for _, problem, sources in todo:
        row = rows.setdefault(sources[0].split(":")[0] + ":" + problem.dtype, [0, 0, 0])
        row[0] += 1
        for t in registered_templates():
            if (templates is not None and t.name not in templates) or not t.supports(problem):
                continue
            for sched in candidate_schedules(t, problem, schedule_limit(sources, max_schedules)):
                row[1] += 1
                for launch in t.launches(problem, sched):
                    k = (
                        launch.name,
                        launch.constexprs,
                        tuple(launch.compile_options().items()),
                        problem.dtype,
                    )
                    if k not in kernels:
                        kernels.add(k)
                        row[2] += 1
    print(f"{'source:dtype':28s} {'convs':>6s} {'candidates':>10s} {'new kernels':>11s}")
    for name, (n, c, k) in rows.items():
        print(f"{name:28s} {n:6d} {c:10d} {k:11d}")
    print(f"{'total':28s} {len(todo):6d} {sum(r[1] for r in rows.values()):10d} {len(kernels):11d}")
