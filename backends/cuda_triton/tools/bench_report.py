"""The report of scripts/bench_conv.py: per-case table, family summaries, the plot and the markdown table.

A run's ``bench.json`` holds ``meta`` and one record per case (``case``, ``label``, ``target``, ``ours_us``,
``cudnn_us``, ``heuristic_us``, ``inductor_us``, ``best_us``, ``floor_us``, ``template``, ``schedule``, ``table``,
...); `render` writes ``bench.txt``, ``speedup.png`` (when matplotlib is present) and, optionally,
``performance.md`` from it, so a stored run re-renders without a GPU (``bench_conv.py --from-json``).
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from .conv_cases import DTYPES, Case


def is_target(case: Case) -> bool:
    """Forward, non-depthwise cases: the set the per-dtype summary covers (each family has its own line)."""
    depthwise = case["groups"] > 1 and case["groups"] == case["C"]
    return not case["transposed"] and not depthwise


def gmean(xs: list[float]) -> float:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def family_of(case: Case) -> str:
    if case["transposed"]:
        return "transposed"
    return "forward" if is_target(case) else "depthwise"


def family_summary(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (family, dtype) and for the whole suite per dtype: geometric-mean and minimum speed-up over cuDNN."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for fam in ("forward", "depthwise", "transposed", "all"):
        for dtype in DTYPES:
            sel = [
                r
                for r in rows
                if r["case"]["dtype"] == dtype
                and (fam == "all" or family_of(r["case"]) == fam)
                and r.get("ours_us")
                and r.get("cudnn_us")
            ]
            if not sel:
                continue
            sp = {r["case"]["name"]: r["cudnn_us"] / r["ours_us"] for r in sel}
            worst = min(sp, key=sp.__getitem__)
            out[(fam, dtype)] = {
                "gmean": gmean(list(sp.values())),
                "min": sp[worst],
                "min_case": worst,
                "below_0.8": sorted(f"{k} {v:.2f}" for k, v in sp.items() if v < 0.8),
                "gmean_heuristic": gmean(
                    [r["cudnn_us"] / r["heuristic_us"] for r in sel if r.get("heuristic_us")]
                ),
                "n": len(sel),
            }
    return out


def fmt_us(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}"


def fmt_x(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def against_table(rows: list[dict]) -> dict[str, Any] | None:
    """This run's times over `tune.py`'s for the cases that ran the table's own schedule: ours near 1.0x says the
    run is steady; ours well above it with cuDNN near 1.0x is this run's noise; cuDNN below 1.0x is its gain from
    a warm L2 (the tuner rotates operands)."""
    pairs = [
        (r["label"], r["ours_us"] / r["table"]["us"], r["cudnn_us"] / r["table"]["cudnn_us"])
        for r in rows
        if r.get("table") and r.get("ours_us") and r.get("cudnn_us") and r["table"].get("cudnn_us")
        and (r["table"]["template"], r["table"]["schedule"]) == (r.get("template"), r.get("schedule"))
    ]  # fmt: skip
    if not pairs:
        return None
    worst = max(pairs, key=lambda p: p[1])
    return {
        "n": len(pairs),
        "ours_gmean": math.exp(statistics.fmean(math.log(p[1]) for p in pairs)),
        "cudnn_gmean": math.exp(statistics.fmean(math.log(p[2]) for p in pairs)),
        "ours_worst": worst[1],
        "ours_worst_case": worst[0],
    }


def render(results: dict[str, Any], out: Path, md: bool) -> str:
    rows = results["cases"]
    lines = [
        f"{'case':24} {'dtype':9} {'ours':>8} {'tuned':>8} {'cuDNN':>8} {'Induct':>8} {'floor':>7} "
        f"{'x cuDNN':>7} {'tuned x':>7} {'ind x':>6} ok  template"
    ]
    summary: dict[str, dict[str, float]] = {}
    for r in rows:
        c = r["case"]
        ours, cud, ind, best = r.get("ours_us"), r.get("cudnn_us"), r.get("inductor_us"), r.get("best_us")
        sp = cud / ours if ours else None
        spb = cud / best if best else None
        spi = cud / ind if ind else None
        ok = r.get("ours_check", {}).get("ok")
        lines.append(
            f"{c['name']:24} {c['dtype']:9} {fmt_us(ours):>8} {fmt_us(best):>8} {fmt_us(cud):>8} {fmt_us(ind):>8} "
            f"{r['floor_us']:7.1f} {fmt_x(sp):>7} {fmt_x(spb):>7} {fmt_x(spi):>6} "
            f"{'yes' if ok else ('n/a' if ok is None else 'NO'):3} {r.get('template', '-')}"
        )
    for dtype in DTYPES:
        sel = [r for r in rows if r["case"]["dtype"] == dtype and r["target"]]
        if not sel:
            continue
        sp = [r["cudnn_us"] / r["ours_us"] for r in sel if r.get("ours_us")]
        spb = [r["cudnn_us"] / r["best_us"] for r in sel if r.get("best_us")]
        spi = [r["cudnn_us"] / r["inductor_us"] for r in sel if r.get("inductor_us")]
        sph = [r["cudnn_us"] / r["heuristic_us"] for r in sel if r.get("heuristic_us")]
        summary[dtype] = {
            "gmean_speedup_heuristic": gmean(sph),
            "gmean_speedup_ours": gmean(sp),
            "gmean_speedup_tuned": gmean(spb),
            "min_speedup_ours": min(sp) if sp else float("nan"),
            "gmean_speedup_inductor": gmean(spi),
            "inductor_cases": len(spi),
            "cases": len(sel),
        }
    lines.append("")
    lines.append("Geometric-mean speed-up over cuDNN, forward non-depthwise cases:")
    for dtype, s in summary.items():
        lines.append(
            f"  {dtype:9} ours {s['gmean_speedup_ours']:.2f}x (min {s['min_speedup_ours']:.2f}x), heuristic "
            f"{s.get('gmean_speedup_heuristic', float('nan')):.2f}x, tuned {s['gmean_speedup_tuned']:.2f}x, Inductor {s['gmean_speedup_inductor']:.2f}x on "
            f"{s['inductor_cases']}/{s['cases']} cases"
        )
    families = family_summary(rows)
    lines.append("")
    lines.append("By family (geometric mean / minimum speed-up over cuDNN; heuristic = tuning table off):")
    for (fam, dtype), f in families.items():
        lines.append(
            f"  {fam:10} {dtype:9} ours {f['gmean']:.2f}x (min {f['min']:.2f}x {f['min_case']}), heuristic "
            f"{f['gmean_heuristic']:.2f}x, n={f['n']}"
        )
    consistency = against_table(rows)
    if consistency:
        lines.append("")
        lines.append(
            f"Against tune.py on the table's schedule ({consistency['n']} cases): ours here / there "
            f"{consistency['ours_gmean']:.2f}x (worst {consistency['ours_worst']:.2f}x {consistency['ours_worst_case']}), "
            f"cuDNN here / there {consistency['cudnn_gmean']:.2f}x"
        )
    text = "\n".join(lines)
    results["summary"] = summary
    results["families"] = {f"{k[0]}/{k[1]}": v for k, v in families.items()}
    results["against_table"] = consistency
    (out / "bench.txt").write_text(text + "\n")
    plot(rows, out / "speedup.png")
    if md:
        (out / "performance.md").write_text(markdown(results))
    return text


# The plot's speed-up axis: Inductor's depthwise convs (0.001x) would squash everything else; they sit on its edge.
_PLOT_RANGE = (0.08, 150.0)


# Above this many cases a bar per case is unreadable: the plot ranks each family's speed-ups instead.
_MAX_BARS = 40


def plot(rows: list[dict], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return
    dtypes = [d for d in DTYPES if any(r["case"]["dtype"] == d for r in rows)]
    names = list(dict.fromkeys(r["case"]["name"] for r in rows))
    if len(names) > _MAX_BARS:
        _plot_ranked(rows, path, plt, matplotlib.ticker)
        return
    fig, ax = plt.subplots(figsize=(max(8, len(names) * 0.55), 4.5))
    width = 0.8 / max(1, len(dtypes))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, d in enumerate(dtypes):
        xs, ys, ind_x, ind_y, roof_x, roof_y = [], [], [], [], [], []
        for j, n in enumerate(names):
            r = next((r for r in rows if r["case"]["name"] == n and r["case"]["dtype"] == d), None)
            x = j + i * width
            xs.append(x)
            ys.append(r["cudnn_us"] / r["ours_us"] if r and r.get("ours_us") else 0.0)
            if r and r.get("inductor_us"):  # Inductor, where its Triton template compiles the case
                ind_x.append(x)  # (below the axis: drawn on its lower edge)
                ind_y.append(max(r["cudnn_us"] / r["inductor_us"], _PLOT_RANGE[0] * 1.05))
            if r and r.get("floor_us") and r["floor_us"] == r["floor_us"]:  # the roofline: the most possible
                roof_x.append(x)
                roof_y.append(r["cudnn_us"] / r["floor_us"])
        color = colors[i % len(colors)]
        ax.bar(xs, ys, width, label=f"ours, {d}", color=color)
        ax.scatter(ind_x, ind_y, marker="v", s=14, color=color, edgecolors="black", linewidths=0.4, zorder=3,
                   label=f"Inductor, {d}")  # fmt: skip
        ax.scatter(roof_x, roof_y, marker="_", s=40, color=color, zorder=3)
    ax.scatter([], [], marker="_", color="gray", label="roofline floor (cuDNN / floor)")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_ylim(*_PLOT_RANGE)
    ax.yaxis.set_major_locator(matplotlib.ticker.FixedLocator([0.1, 0.2, 0.5, 0.8, 1, 2, 5, 10, 20, 50, 100]))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%gx"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))])
    ax.set_xticklabels(names, rotation=70, ha="right", fontsize=7)
    ax.set_ylabel("speed-up over cuDNN (higher is better)")
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _plot_ranked(rows: list[dict], path: Path, plt: Any, ticker: Any) -> None:
    """Many cases (the convolutions of whole programs): per family and dtype, the speed-ups over cuDNN sorted, each
    case a step on a line from the worst to the best, so the share of cases below 1x reads off the x axis."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    groups: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if r.get("ours_us") and r.get("cudnn_us"):
            key = (family_of(r["case"]), r["case"]["dtype"])
            groups.setdefault(key, []).append(r["cudnn_us"] / r["ours_us"])
    for (fam, dtype), speedups in sorted(groups.items()):
        ys = sorted(speedups)
        xs = [(i + 0.5) / len(ys) for i in range(len(ys))]
        gmean = math.exp(sum(math.log(y) for y in ys) / len(ys))
        ax.step(xs, ys, where="mid", label=f"{fam}, {dtype}: {len(ys)} cases, geomean {gmean:.2f}x")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(ticker.FixedLocator([0.1, 0.2, 0.5, 0.8, 1, 1.5, 2, 3, 5, 10, 20]))
    ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%gx"))
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel("share of the family's cases, ranked by speed-up")
    ax.set_ylabel("speed-up over cuDNN (higher is better)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def markdown(results: dict[str, Any]) -> str:
    meta = results["meta"]
    out = [
        f"Date: {meta['date']}  ",
        f"GPU: {meta['gpu']} (torch {meta['torch']}, triton {meta['triton']})  ",
        f"Command: `{meta['command']}`",
        "",
        "| case | dtype | ours us | heuristic us | cuDNN us | Inductor us | floor us | ours x cuDNN "
        "| heuristic x cuDNN | Inductor x cuDNN | ours / floor | template |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results["cases"]:
        c = r["case"]
        ours, cud, heur = r.get("ours_us"), r.get("cudnn_us"), r.get("heuristic_us")
        ind = r.get("inductor_us")
        ind_s = fmt_us(ind) if ind is not None else f"n/a ({r.get('inductor_note', '')})"[:40]
        out.append(
            f"| {c['name']} | {c['dtype']} | {fmt_us(ours)} | {fmt_us(heur)} | {fmt_us(cud)} | {ind_s} | "
            f"{r['floor_us']:.1f} | {fmt_x(cud / ours if ours else None)} | {fmt_x(cud / heur if heur else None)} "
            f"| {fmt_x(cud / ind if ind else None)} | {fmt_x(ours / r['floor_us'] if ours else None)} "
            f"| {r.get('template', '-')} |"
        )
    out.append("")
    out.append(
        "| dtype | gmean ours x cuDNN | min ours x cuDNN | gmean heuristic x cuDNN | gmean Inductor x cuDNN (cases) |"
    )
    out.append("|---|---:|---:|---:|---:|")
    for dtype, s in results.get("summary", {}).items():
        out.append(
            f"| {dtype} | {s['gmean_speedup_ours']:.2f} | {s['min_speedup_ours']:.2f} | {s.get('gmean_speedup_heuristic', float('nan')):.2f} "
            f"| {s['gmean_speedup_inductor']:.2f} ({s['inductor_cases']}/{s['cases']}) |"
        )
    out += [
        "",
        "By family (ours with the tuning table; heuristic: table off):",
        "",
        "| family | dtype | n | gmean ours x cuDNN | min (case) | gmean heuristic x cuDNN | below 0.8x |",
        "|---|---|---:|---:|---|---:|---|",
    ]
    for key, f in results.get("families", {}).items():
        fam, dtype = key.split("/")
        out.append(
            f"| {fam} | {dtype} | {f['n']} | {f['gmean']:.2f} | {f['min']:.2f} ({f['min_case']}) | "
            f"{f['gmean_heuristic']:.2f} | {', '.join(f['below_0.8']) or '-'} |"
        )
    return "\n".join(out) + "\n"
