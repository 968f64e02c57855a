#!/usr/bin/env python
"""Whole-model latency on a GPU: the C++ runner against PyTorch eager (cuDNN) and torch.compile (CUDA graphs).

Three steps, two machines:

    # here (CPU, executorch installed): export every (model, dtype, batch) and fill .carry/gpu_validate
    python scripts/bench_models.py prepare --models tv:mobilenet_v3_large,tv:efficientnet_b0 --dtypes fp16 \\
        --batches 1,32

    # there (GPU; device tool with carry [".carry/gpu_validate"]): build the runner, check and time everything
    PYTHONPATH=backends python scripts/bench_models.py run --out $OUT

    # here again: the table and the plot for docs/
    python scripts/bench_models.py report $OUT/bench_models.json [more runs ...] --out docs/bench/models

Models are names of `cuda_triton.models.zoo.build` (the in-tree zoo, or ``tv:<name>`` for torchvision's
classification models), with random weights from seed 0 on both machines. ``--io`` picks how programs meet their
inputs and outputs: ``device`` (default; ``export_pte.py --device-io``) keeps them in device memory, as the eager
and compiled models get an input already on the GPU, so nothing is copied per execution and the runner times each
execution to the end of its GPU work; ``boundary`` (``--device-memory``) plans the delegate's I/O on the GPU with
ExecuTorch's host<->device copies at the program boundary, which the runner's latency then includes (from
page-locked host memory); ``host`` plans it in host memory (the delegate stages it). ``--variant NAME:FLAGS``
exports each program once more with extra export_pte.py flags, named ``..._NAME`` (e.g.
``pdl:--programmatic-launch``, ``unfused:--no-fuse-prologues``, or an I/O mode as ``copy:--io=boundary``), so one
run times both sides of a change.

`run`, for every program: the runner's median over ``--num-executions`` (its outputs checked against the CPU
reference with scripts/gpu_validate.py's thresholds), PyTorch eager's and torch.compile's (``mode=
"reduce-overhead"``: CUDA graphs) medians on the same model, timed with CUDA events around each forward in the
same process. Writes ``$OUT/bench_models.json`` and ``.md``; exits 1 when a program fails its check.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_validate as gv  # noqa: E402  (the carry, the runner build, the output check)

SET = "bench_models"
DEVICE_COMMAND = "PYTHONPATH=backends python scripts/bench_models.py run --out $OUT"
# --io: the export_pte.py flags of each way a program meets its inputs and outputs
IO_FLAGS = {"device": ("--device-io",), "boundary": ("--device-memory",), "host": ()}
IO_VARIANT = "--io="  # a --variant's flag naming another I/O mode (this script's, not export_pte.py's)
IO_NOTE = {
    "device": "inputs and outputs stay in device memory, no copy per execution",
    "boundary": "device-planned, the input's host-to-device copy included in the runner's latency",
    "host": "host-planned, the delegate stages its inputs and outputs",
}
DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


# ---- prepare (CPU machine) ----------------------------------------------------------------------------------
def default_shape(model: str) -> tuple[int, ...]:
    from cuda_triton.models import torchvision_models, zoo

    if model.startswith(torchvision_models.PREFIX):
        return torchvision_models.INPUT_SHAPE
    if model not in zoo.ZOO:
        raise SystemExit(f"unknown model {model!r}: a zoo name ({', '.join(sorted(zoo.ZOO))}) or tv:<name>")
    return tuple(zoo.ZOO[model].input_shape)


def entry_name(model: str, dtype: str, batch: int) -> str:
    return f"{model.replace('tv:', 'tv_')}_{dtype}_b{batch}"


def parse_variant(text: str) -> tuple[str, tuple[str, ...]]:
    """``NAME:FLAGS`` (``--variant``): a name for the entries and the export_pte.py flags they add."""
    name, sep, flags = text.partition(":")
    if not sep or not name.isidentifier() or not flags.split():
        raise argparse.ArgumentTypeError(
            f"--variant takes NAME:FLAGS, e.g. pdl:--programmatic-launch, not {text!r}"
        )
    for flag in flags.split():
        if flag.startswith(IO_VARIANT) and flag[len(IO_VARIANT) :] not in IO_FLAGS:
            raise argparse.ArgumentTypeError(f"{flag}: the I/O modes are {', '.join(IO_FLAGS)}")
    return name, tuple(flags.split())


def entries(
    models: list[str],
    dtypes: list[str],
    batches: list[int],
    io: str,
    variants: Sequence[tuple[str, tuple[str, ...]]] = (),
) -> list[gv.Entry]:
    out: list[gv.Entry] = []
    for model in models:
        shape = default_shape(model)
        for dtype in dtypes:
            for batch in batches:
                base = ("--input-shape", ",".join(map(str, (batch, *shape[1:]))))
                name = entry_name(model, dtype, batch)
                out.append((name, model, dtype, (*base, *IO_FLAGS[io]), "pass"))
                for variant, extra in variants:
                    # `--io=MODE` replaces the base's I/O flags.
                    modes = [f[len(IO_VARIANT) :] for f in extra if f.startswith(IO_VARIANT)]
                    rest = tuple(f for f in extra if not f.startswith(IO_VARIANT))
                    io_flags = IO_FLAGS[modes[-1] if modes else io]
                    out.append((f"{name}_{variant}", model, dtype, (*base, *io_flags, *rest), "pass"))
    return out


def prepare(args: argparse.Namespace) -> int:
    gv.SETS[SET] = entries(args.models, args.dtypes, args.batches, args.io, args.variant)
    gv.DEVICE_COMMAND = DEVICE_COMMAND
    rc = gv.prepare(
        argparse.Namespace(set=SET, archs=args.archs, only=args.only, fresh=args.fresh), finish=False
    )
    if rc == 0:
        tile_large_batches()
        gv.finish_carry()
    return rc


def tile_large_batches() -> None:
    """Carry a batch-B program's input and reference as its batch-1 sibling's, repeated B times (`materialize`).

    The models run in eval mode, so every sample of a batch is computed alone: repeating one sample gives the
    reference of the batch. That keeps a batch-32 224x224 input (9.6 MB in fp16) out of the carry.
    """
    manifest = json.loads(gv.MANIFEST.read_text())
    names = {e["name"] for e in manifest["entries"]}
    for e in manifest["entries"]:
        io_path = gv.EXPORTS / e["io"]
        io = json.loads(io_path.read_text())
        batch = io["inputs"][0]["shape"][0]
        single = e["name"].rsplit("_b", 1)[0] + "_b1"
        if batch == 1 or single not in names or len(io["inputs"]) != 1:
            continue
        for f in (io["inputs"][0]["file"], io["reference"]["file"]):
            (gv.EXPORTS / f).unlink()
        io["tiled_from"] = {"io": f"{single}.io.json", "times": batch}
        io_path.write_text(json.dumps(io, indent=1) + "\n")
        print(f"[prepare] {e['name']}: input and reference are {single}'s, repeated {batch} times")


def materialize(io: dict[str, Any]) -> None:
    """Write a tiled program's input and reference files from its batch-1 sibling's (`tile_large_batches`)."""
    tiled = io.get("tiled_from")
    if not tiled:
        return
    single = json.loads((gv.EXPORTS / tiled["io"]).read_text())
    for mine, theirs in ((io["inputs"][0], single["inputs"][0]), (io["reference"], single["reference"])):
        target = gv.EXPORTS / mine["file"]
        if not target.exists():
            target.write_bytes((gv.EXPORTS / theirs["file"]).read_bytes() * tiled["times"])


def io_mode(flags: Sequence[str]) -> str:
    """The ``--io`` mode of a program exported with these export_pte.py flags."""
    return next((mode for mode, f in IO_FLAGS.items() if f and f[0] in flags), "host")


# ---- run (GPU machine) --------------------------------------------------------------------------------------
def _cuda_median_ms(fn: Any, x: Any, n: int, warmup: int) -> float:
    import torch

    for _ in range(warmup):
        fn(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(x)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def torch_times(model_name: str, io: dict[str, Any], n: int) -> dict[str, Any]:
    """PyTorch eager (cuDNN, ``cudnn.benchmark``) and torch.compile(mode="reduce-overhead") medians in ms."""
    import torch
    from cuda_triton.models.zoo import build

    dt = gv._torch_dtype(io["dtype"])
    torch.backends.cudnn.benchmark = True
    tf32 = bool(io.get("allow_tf32", True))
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    model, example = build(model_name, dt, tuple(io["inputs"][0]["shape"]), seed=0)
    model = model.cuda()
    x = example[0].cuda()
    res: dict[str, Any] = {}
    with torch.no_grad():
        res["eager_ms"] = _cuda_median_ms(model, x, n, 10)
        t0 = time.perf_counter()
        try:
            compiled = torch.compile(model, mode="reduce-overhead")
            res["compiled_ms"] = _cuda_median_ms(compiled, x, n, 5)
        except Exception as e:  # report, keep going
            res["compile_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        res["compile_s"] = round(time.perf_counter() - t0, 1)
    torch._dynamo.reset()
    return res


def run(args: argparse.Namespace) -> int:
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not gv.MANIFEST.exists():
        print(f"{gv.MANIFEST} not found: run `python scripts/bench_models.py prepare` here", file=sys.stderr)
        return 2
    gv.join_carry()
    manifest = json.loads(gv.MANIFEST.read_text())
    import torch

    gpu = torch.cuda.get_device_name(0)
    log: list[str] = []
    runner = gv.build_runner(log)
    rows: list[dict[str, Any]] = []
    torch_rows: dict[tuple, dict[str, Any]] = {}
    chosen = [
        e for e in manifest["entries"] if not args.only or any(fnmatch(e["name"], p) for p in args.only)
    ]
    if not chosen:
        print(f"no program of {gv.MANIFEST} matches --only {' '.join(args.only)}", file=sys.stderr)
        return 2
    for entry in chosen:
        io = json.loads((gv.EXPORTS / entry["io"]).read_text())
        materialize(io)
        lat, out_file, info = gv.run_runner(runner, entry, io, out_dir, args.num_executions, args.warmup)
        check = gv.compare(out_file, io) if info.get("rc") == 0 else {"ok": False, "error": "runner failed"}
        row: dict[str, Any] = {
            "name": entry["name"], "model": entry["model"], "dtype": entry["dtype"],
            "batch": io["inputs"][0]["shape"][0], "ok": bool(check["ok"]), "check": check,
            "runner_ms": lat["median_ms"] if lat else None, "runner": info, "io": io_mode(entry.get("flags", [])),
        }  # fmt: skip
        if args.etdump and info.get("rc") == 0:
            row["etdump"] = profile_run(runner, entry, io, out_dir)
        # The same model, dtype and shape exported several ways (``--variant``) is timed in PyTorch once.
        torch_key = (entry["model"], io["dtype"], tuple(io["inputs"][0]["shape"]))
        if torch_key not in torch_rows:
            torch_rows[torch_key] = torch_times(entry["model"], io, args.num_executions)
        row.update(torch_rows[torch_key])
        for ref in ("eager_ms", "compiled_ms"):
            if row.get(ref) and row["runner_ms"]:
                row[f"speedup_vs_{ref[:-3]}"] = row[ref] / row["runner_ms"]
        print(
            f"[bench] {'ok ' if row['ok'] else 'BAD'} {entry['name']}: runner {row['runner_ms']} ms, eager "
            f"{row.get('eager_ms', float('nan')):.3f} ms, compiled {row.get('compiled_ms', float('nan')):.3f} ms, "
            f"err/max {check.get('rel_to_max', float('nan')):.2e}",
            flush=True,
        )
        if not row["ok"]:
            print(info.get("stderr_tail", "")[-1500:], flush=True)
        rows.append(row)
    summary = {
        "date": gv._now(), "gpu": gpu, "torch": torch.__version__,
        "command": DEVICE_COMMAND + (" --etdump" if args.etdump else ""),
        "exported": manifest.get("created"), "num_executions": args.num_executions, "rows": rows,
    }  # fmt: skip
    (out_dir / "bench_models.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out_dir / "bench_models.md").write_text(markdown(summary))
    print(markdown(summary))
    return 0 if all(r["ok"] for r in rows) else 1


def profile_run(runner: Path, entry: dict[str, Any], io: dict[str, Any], out_dir: Path) -> str | None:
    """A second, profiled run of the program (`--etdump`): 20 executions with the per-op CUDA events the delegate
    records in the ETDump (which adds a little host time, so the timed run above is kept apart). Returns the
    ETDump's file name in ``out_dir`` (read with ExecuTorch's Inspector by `report`), None when the run failed."""
    etdp = out_dir / f"{entry['name']}.etdp"
    cmd = [str(runner), "--model_path", str(gv.EXPORTS / entry["pte"]),
           "--inputs", ",".join(str(gv.EXPORTS / i["file"]) for i in io["inputs"]),
           "--num_executions", "20", "--warmup", "5", "--etdump_path", str(etdp)]  # fmt: skip
    for f in entry.get("data_files", []):
        cmd += ["--data_path", str(gv.EXPORTS / f)]
    r = gv._sh(cmd, timeout=300)
    return etdp.name if r.returncode == 0 and etdp.exists() else None


def delegate_gpu_ms(etdump_path: Path) -> tuple[float | None, float | None]:
    """(the delegates' GPU time, ExecuTorch's host-side input copy) per execution in ms, medians over the profiled
    executions, from an ETDump (`scripts/etdump_ops.py`); Nones where the file or executorch is missing."""
    try:
        import etdump_ops
    except ImportError:
        return None, None
    if not etdump_path.exists():
        return None, None
    try:
        delegates, host = etdump_ops.breakdown(str(etdump_path))
    except ImportError:
        return None, None
    gpu = sum(d.delegate.median_us for d in delegates) / 1e3 if delegates else None
    copies = [t.median_us for t in host if "h2d" in t.name.lower()]
    return gpu, (sum(copies) / 1e3 if copies else None)


# ---- report (either machine) --------------------------------------------------------------------------------
def model_label(row: dict[str, Any]) -> str:
    """The row's model, with its ``--variant`` name when the program is one (``video (host)``)."""
    name, model = row.get("name", ""), row["model"]
    short = {long: short for short, long in DTYPES.items()}.get(row["dtype"], row["dtype"])
    base = entry_name(model, short, row["batch"])
    variant = name[len(base) + 1 :] if name.startswith(base + "_") else ""
    return f"{model} ({variant})" if variant else model


def _ms(v: Any) -> str:
    return "-" if v is None else f"{v:.3f}"


def markdown(s: dict[str, Any], plot: str | None = None) -> str:
    lines = [
        f"# Whole models: runner vs PyTorch eager vs torch.compile ({s['gpu']})",
        "",
        f"{s['date']}, torch {s['torch']}, medians of {s['num_executions']} forwards (CUDA events; input on the "
        f"GPU). Command: `{s['command']}` (programs exported {s.get('exported')}).",
        "",
        "| model | dtype | batch | I/O | runner ms | eager ms | compiled ms | vs eager | vs compiled | delegate GPU ms "
        "| input copy ms | execute host us | err/max |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in s["rows"]:
        ve, vc = r.get("speedup_vs_eager"), r.get("speedup_vs_compiled")
        lines.append(
            f"| {model_label(r)} | {r['dtype']} | {r['batch']} | {r.get('io', '-')} | {_ms(r['runner_ms'])} | "
            f"{_ms(r.get('eager_ms'))} | "
            f"{_ms(r.get('compiled_ms'))} | {'-' if ve is None else f'{ve:.2f}x'} | "
            f"{'-' if vc is None else f'{vc:.2f}x'} | {_ms(r.get('delegate_gpu_ms'))} | "
            f"{_ms(r.get('input_copy_ms'))} | {r.get('runner', {}).get('execute_host_us', '-')} | "
            f"{r['check'].get('rel_to_max', float('nan')):.1e}{'' if r['ok'] else ' WRONG'} |"
        )
    lines += [
        "",
        "I/O: how the runner's program meets its input and output; "
        + "; ".join(f"{mode}: {note}" for mode, note in IO_NOTE.items())
        + " (`bench_models.py prepare --io`). delegate GPU ms: the delegate's own GPU time per execution (CUDA events, from a profiled run's ETDump, "
        "`--etdump`; the event pair around every op adds time, so on small models it exceeds the unprofiled "
        "runner's latency); input copy ms: ExecuTorch's host-to-device copy of the input at the program boundary, which "
        "the runner's latency includes and the eager and compiled times do not; execute host us: the host time of one "
        "delegate execute (median; the CUDA graph's replay, no wait for the GPU).",
    ]
    if plot:
        lines += ["", f"![latency per model]({plot})"]
    return "\n".join(lines) + "\n"


def merge_runs(paths: list[str]) -> dict[str, Any]:
    """Several `run` results (one device call each, e.g. one per carry) as one: their rows in order, each row
    with its run's date (a row of an earlier merged report keeps its own) and its ETDump's path, a later run's
    row replacing an earlier one of the same program (name); the header fields of the first run,
    the dates of the runs that keep a row."""
    runs = [json.loads(Path(p).read_text()) for p in paths]
    gpus = {r["gpu"] for r in runs}
    if len(gpus) > 1:
        raise SystemExit(
            f"report: the runs are from different GPUs ({', '.join(sorted(gpus))}); report them apart"
        )
    by_program: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for path, run in zip(paths, runs, strict=True):
        for row in run["rows"]:
            if row.get("etdump"):
                row["etdump"] = str(Path(path).parent / row["etdump"])
            dated = {**row, "run_date": row.get("run_date", run["date"])}  # a merged report's own
            by_program.pop(row["name"], None)  # re-inserted last: the rows keep the runs' order
            by_program[row["name"]] = (dated, run)
    kept = [run for _, run in by_program.values()]
    merged = {**runs[0], "rows": [row for row, _ in by_program.values()]}
    merged["date"] = ", ".join(dict.fromkeys(r["date"] for r in kept))
    merged["exported"] = ", ".join(dict.fromkeys(str(r.get("exported")) for r in kept))
    return merged


def report(args: argparse.Namespace) -> int:
    s = merge_runs(args.json)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    png = out.with_suffix(".png")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = s["rows"]
    for r in rows:
        if r.get("etdump"):
            r["delegate_gpu_ms"], r["input_copy_ms"] = delegate_gpu_ms(Path(r["etdump"]))
    # One horizontal bar pair per program, sorted: the runner's speed-up over torch.compile and over eager on
    # a log axis, with 1x marked, reads better than three latency bars per program once there are dozens.
    rows_sorted = sorted(rows, key=lambda r: (r["model"], r["dtype"], r["batch"]))
    labels = [f"{model_label(r).replace('tv:', '')} {r['dtype']} b{r['batch']}" for r in rows_sorted]
    fig, ax = plt.subplots(figsize=(7, max(3.0, 0.28 * len(rows_sorted) + 1.2)))
    height = 0.4
    for k, (key, name) in enumerate(
        (
            ("speedup_vs_compiled", "vs torch.compile (reduce-overhead)"),
            ("speedup_vs_eager", "vs PyTorch eager"),
        )
    ):
        ax.barh(
            [i + (k - 0.5) * height for i in range(len(rows_sorted))],
            [r.get(key) or 0 for r in rows_sorted],
            height,
            label=name,
        )
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows_sorted)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("runner speed-up (median latency ratio, log; > 1: the runner is faster)")
    dates = sorted(r.get("run_date") or s["date"] for r in rows)
    span = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
    ax.set_title(f"{s['gpu']}, {span}", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    out.with_suffix(".md").write_text(markdown(s, png.name))
    out.with_suffix(".json").write_text(json.dumps(s, indent=1) + "\n")
    print(f"wrote {out.with_suffix('.md')}, {png}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="export the programs and fill .carry/gpu_validate (CPU machine)")
    p.add_argument(
        "--models", type=lambda s: s.split(","), default=["tv:mobilenet_v3_large", "tv:efficientnet_b0"]
    )
    p.add_argument("--dtypes", type=lambda s: s.split(","), default=["fp16"])
    p.add_argument("--batches", type=lambda s: [int(b) for b in s.split(",")], default=[1])
    p.add_argument("--archs", default="90")
    p.add_argument(
        "--io", choices=list(IO_FLAGS), default="device",
        help="; ".join(f"{mode}: {note}" for mode, note in IO_NOTE.items()) + " (default: device)",
    )  # fmt: skip
    p.add_argument(
        "--variant", action="append", type=parse_variant, default=[], metavar="NAME:FLAGS",
        help="also export each program with these export_pte.py flags, named <entry>_NAME (repeatable), e.g. "
        "pdl:--programmatic-launch, unfused:--no-fuse-prologues, or copy:--io=boundary (another I/O mode): an "
        "A/B in one device call",
    )  # fmt: skip
    p.add_argument("--fresh", action="store_true", help="re-export programs the export cache has")
    p.add_argument("--only", nargs="*", help="only these entry names (<model>_<dtype>_b<batch>, tv: as tv_)")
    r = sub.add_parser("run", help="check and time on the GPU machine")
    r.add_argument("--out", required=True)
    r.add_argument("--num-executions", type=int, default=100)
    r.add_argument("--warmup", type=int, default=10)
    r.add_argument(
        "--only",
        nargs="*",
        help="only the carried programs whose names match these patterns (fnmatch: tv_*_b32)",
    )
    r.add_argument(
        "--etdump", action="store_true", help="also a profiled run per program, its ETDump written to --out"
    )
    q = sub.add_parser("report", help="table and plot from a run's JSON")
    q.add_argument("json", nargs="+", help="bench_models.json of one or more `run`s on the same GPU")
    q.add_argument("--out", default="docs/bench/models", help="path stem of the .md/.png/.json written")
    args = ap.parse_args(argv)
    for d in getattr(args, "dtypes", []):
        if d not in DTYPES:
            raise SystemExit(f"--dtypes: {d!r} is not one of {sorted(DTYPES)}")
    return {"prepare": prepare, "run": run, "report": report}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
