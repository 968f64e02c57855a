#!/usr/bin/env python
"""Measure every schedule of every template on a list of convolutions and write the tuning table (GPU).

    PYTHONPATH=backends python scripts/tune.py --out $OUT/tuning \\
        --problems public,models --dtypes fp16,bf16,fp32 --model-dtypes fp16 --batches 1,8 --budget-s 280

For each convolution it runs every schedule of every template whose ``supports`` accepts it: first once on a
NaN-poisoned output, checked element by element against ATen (fp32 reference without TF32, tolerance from the
dtype's rounding times sum |x||w|); then timed with CUDA events over a CUDA graph of back-to-back calls that
rotate through enough copies of input/weight/output to overflow L2 (median of several replays). ATen/cuDNN
(``cudnn.benchmark=True``) is timed the same way on the same inputs.

Output (``--out DIR`` writes ``DIR/sm<arch>.json``; ``--out FILE.json`` writes that file):
  * the table, ``cuda_triton.conv.tuning`` format, directly usable as ``backends/cuda_triton/conv/tuning/sm90.json``;
  * ``<table>.log.jsonl``: one line per convolution with every candidate's time or error (appended and fsynced
    as it goes; a rerun with the same --out, or ``--resume OLD.log.jsonl``, skips what is done);
  * ``<table>.md``: a summary (speed-up over cuDNN, heuristic vs tuned, failures).
The table is rewritten every 30 s and at the end (a budget stop or Ctrl-C ends cleanly with a complete table);
after a hard kill, ``--rebuild LOG...`` writes the table from the log without measuring anything.

Problem sources (``--problems``, comma-separated, in priority order): ``public`` (bench/public_suite.py, its own
batch sizes and layouts, every --dtypes), ``models`` (every network of cuda_triton.tools.tuning_signatures) or
``model:NAME`` (one of them; --model-dtypes, --batches, --layouts), ``zoo:NAME`` (a cuda_triton.models.zoo model
or ``tv:<name>``, its convs found by torch.export + cuda_triton.conv.binding), ``json:PATH`` (a list of signature strings, expanded
over --dtypes and --layouts; or problem specs; or a table or a log), ``set:NAME`` (a named set of
bench/tuning_layer_sets.txt, each convolution in its own dtype and layout).

Kernels are compiled ahead of the measurements by --jobs worker processes (they warm Triton's on-disk cache,
which the measuring process then hits). The measuring code is cuda_triton.tools.tuning_measure (timing:
cuda_triton.tools.timing), the outputs cuda_triton.tools.tuning_report. Without a GPU the script runs the kernels in the Triton interpreter and
times them on the CPU: only for smoke tests; such tables are marked ``meta.timing = "cpu-interpreter"``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

_T_START = time.monotonic()  # --budget-s counts from here (imports included)

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "backends") not in sys.path:
    sys.path.insert(0, str(ROOT / "backends"))

import torch  # noqa: E402


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class _Progress:
    """tqdm when importable, else a line every few seconds."""

    def __init__(self, total: int, desc: str) -> None:
        self.total, self.n, self.desc = total, 0, desc
        self._last = 0.0
        try:
            from tqdm import tqdm

            interval = 1.0 if sys.stderr.isatty() else 15.0  # a captured log stays short
            self._bar = tqdm(
                total=total, desc=desc, dynamic_ncols=True, file=sys.stderr, mininterval=interval
            )
        except ImportError:
            self._bar = None

    def update(self, postfix: str = "") -> None:
        self.n += 1
        if self._bar is not None:
            self._bar.set_postfix_str(postfix[:60], refresh=False)
            self._bar.update(1)
            return
        now = time.monotonic()
        if now - self._last > 5 or self.n == self.total:
            self._last = now
            _stderr(f"{self.desc}: {self.n}/{self.total} {postfix}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _csv(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--out", required=True, help="output directory (writes sm<arch>.json) or a .json table path"
    )
    ap.add_argument("--problems", default="public,models", help="comma-separated sources, in priority order")
    ap.add_argument(
        "--dtypes", type=_csv, default=["fp16", "bf16", "fp32"], help="for the public suite and json"
    )
    ap.add_argument("--model-dtypes", type=_csv, default=None, help="for models/zoo (default: --dtypes)")
    ap.add_argument("--batches", type=lambda s: [int(x) for x in _csv(s)], default=[1, 8])
    ap.add_argument(
        "--layouts",
        type=_csv,
        default=["contiguous", "channels_last"],
        help="2-D/3-D model layers, in priority order (exported models are contiguous unless converted)",
    )
    ap.add_argument("--bias", action="store_true", help="give public-suite convs a bias (default: none)")
    ap.add_argument(
        "--budget-s", type=float, default=None, help="stop cleanly this many seconds after the script started"
    )
    ap.add_argument("--jobs", type=int, default=None, help="compile worker processes (0: compile inline)")
    ap.add_argument(
        "--arch", type=int, default=None, help="table arch (default: the GPU's, 90 without a GPU)"
    )
    ap.add_argument("--resume", type=Path, nargs="*", default=[], help="earlier .log.jsonl files to reuse")
    ap.add_argument(
        "--rebuild", type=Path, nargs="*", default=None, help="only write the table from these logs"
    )
    ap.add_argument("--rep-ms", type=float, default=0.5, help="GPU time per timed graph replay")
    ap.add_argument("--repeats", type=int, default=7, help="timed replays per candidate (median)")
    ap.add_argument(
        "--prune", type=float, default=4.0, help="skip precise timing when the estimate is this x the best"
    )
    ap.add_argument(
        "--max-schedules",
        type=int,
        default=None,
        help="outside the public suite, try only this many schedules per template (nearest its heuristic)",
    )
    ap.add_argument(
        "--supported-by",
        default=None,
        help="measure only the convolutions this template supports (after adding or changing it)",
    )
    ap.add_argument(
        "--templates",
        type=_csv,
        default=None,
        help="measure only these templates' schedules (merge the result with --keep-faster: the table's other "
        "templates were not tried)",
    )
    ap.add_argument("--no-cudnn", action="store_true", help="do not time ATen/cuDNN")
    ap.add_argument("--limit", type=int, default=None, help="measure at most this many convolutions")
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would be measured (convs, candidates, kernels) and exit",
    )
    args = ap.parse_args(argv)
    if args.model_dtypes is None:
        args.model_dtypes = args.dtypes
    return args


class Outputs:
    """The table, its log, summary and inflight file; the table is rewritten at most every 30 s while measuring
    (the log is the per-convolution record; `--rebuild` turns a log into a table) and at the end."""

    def __init__(self, out: Path, arch: int, command: str) -> None:
        self.table = out if out.suffix == ".json" else out / f"sm{arch}.json"
        self.log = self.table.with_name(self.table.stem + ".log.jsonl")
        self.inflight = self.table.with_name(self.table.stem + ".inflight")
        self.summary = self.table.with_name(self.table.stem + ".md")
        self.arch, self.command = arch, command
        self._last = time.monotonic()

    def flush(self, records: dict[str, dict[str, Any]], final: bool = True) -> int:
        from cuda_triton.conv.tuning import clear_cache
        from cuda_triton.tools.tuning_report import build_table, table_meta, write_summary

        if not final and time.monotonic() - self._last < 30:
            return -1
        meta = table_meta(records, self.command)
        table = build_table(records, self.arch, meta)
        table.write(self.table)
        self._last = time.monotonic()
        if final:
            write_summary(self.summary, records, meta)
        clear_cache()
        return len(table)


def plan(
    args: argparse.Namespace, records: dict[str, Any]
) -> tuple[list[tuple[str, Any, list[str]]], set | None]:
    """The convolutions still to measure, (table key, problem, sources) each, and the templates to try."""
    from cuda_triton.conv.templates import get_template, registered_templates
    from cuda_triton.conv.tuning_keys import table_key
    from cuda_triton.tools.tuning_problems import collect_problems

    registered_templates()
    only = get_template(args.supported_by) if args.supported_by else None
    only_templates = None if args.templates is None else {get_template(n).name for n in args.templates}
    todo: list[tuple[str, Any, list[str]]] = []
    by_key: dict[str, int] = {}
    sources = collect_problems(
        args.problems, args.dtypes, args.model_dtypes, args.batches, args.layouts, args.bias
    )
    for source, problem in sources:
        key = json.dumps(list(table_key(problem, args.arch)))
        if key in records or (only is not None and not only.supports(problem)):
            continue
        if key in by_key:
            todo[by_key[key]][2].append(source)
            continue
        by_key[key] = len(todo)
        todo.append((key, problem, [source]))
    if args.limit is not None:
        todo = todo[: args.limit]
    return todo, only_templates


def make_env(args: argparse.Namespace, cuda: bool, outputs: Outputs):
    """The measuring settings; on a GPU also cuDNN's benchmark mode and Triton's scratch allocator."""
    import triton
    from cuda_triton.tools.tuning_measure import Env, read_inflight

    env = Env(
        device=torch.device("cuda" if cuda else "cpu"),
        cuda=cuda,
        arch=args.arch,
        l2_bytes=getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20) if cuda else 0,
        rep_ms=args.rep_ms,
        repeats=args.repeats,
        max_rotations=64,
        prune=args.prune,
    )
    env.inflight = outputs.inflight
    for old_log in [*args.resume, outputs.log]:
        env.skip |= read_inflight(old_log.with_name(old_log.name.replace(".log.jsonl", "") + ".inflight"))
    if env.skip:
        _stderr(f"skipping {len(env.skip)} candidate(s) that crashed an earlier run")
    if cuda:
        torch.backends.cudnn.benchmark = True
        if hasattr(triton, "set_allocator"):  # kernels with global scratch (device-side TMA descriptors)
            triton.set_allocator(
                lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda")
            )
    return env


def measure_all(
    todo, env, args, outputs: Outputs, records, run_info, only_templates
) -> tuple[int, str | None]:
    """Measure every convolution of ``todo`` in order, logging each; returns (measured, why it stopped)."""
    from cuda_triton.tools.tuning_measure import (
        BudgetExceeded,
        ContextLost,
        measure_problem,
        schedule_limit,
        warmup_jobs,
    )
    from cuda_triton.tools.warmup import Precompiler

    deadline = None if args.budget_s is None else _T_START + args.budget_s
    jobs = (
        args.jobs
        if args.jobs is not None
        else (min(16, max(1, (os.cpu_count() or 2) - 1)) if env.cuda else 0)
    )
    pre = Precompiler(jobs) if (env.cuda and jobs > 0 and todo) else None
    if pre is not None:
        for key, problem, sources in todo:
            pre.submit(key, warmup_jobs(problem, schedule_limit(sources, args.max_schedules), only_templates))

    def _terminate(signum, frame):  # `timeout` sends SIGTERM: stop like Ctrl-C, writing the table
        raise KeyboardInterrupt

    previous_sigterm = signal.signal(signal.SIGTERM, _terminate)
    bar = _Progress(len(todo), "tuning")
    stopped = None
    measured = 0
    try:
        with outputs.log.open("a") as log:
            for key, problem, sources in todo:
                if deadline is not None and time.monotonic() > deadline:
                    stopped = "budget"
                    break
                if pre is not None:
                    pre.wait(key, deadline)
                try:
                    res = measure_problem(
                        problem, sources, env, deadline, not args.no_cudnn, args.max_schedules, only_templates
                    )
                except BudgetExceeded:
                    stopped = "budget"
                    break
                except ContextLost as e:
                    _stderr(f"STOPPED: {e}")
                    _stderr(
                        f"rerun the same command (or --resume {outputs.log}) to continue without that candidate"
                    )
                    stopped = "CUDA context lost"
                    break
                outputs.inflight.write_text("")
                rec = res.to_json(run_info)
                log.write(json.dumps(rec) + "\n")
                log.flush()
                os.fsync(log.fileno())
                records[key] = rec
                measured += 1
                outputs.flush(records, final=False)
                b = rec["best"]
                sp = f" {rec['cudnn_us'] / b['time_us']:.2f}x" if b and rec["cudnn_us"] else ""
                bar.update(f"{rec['key'][1]} {problem.signature()[:30]}{sp}")
    except KeyboardInterrupt:
        stopped = "interrupt"
        outputs.inflight.write_text("")  # interrupted, not crashed: run that candidate again next time
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
        bar.close()
        if pre is not None:
            pre.shutdown()
    return measured, stopped


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cuda = torch.cuda.is_available()
    if not cuda:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before any kernel module is imported
    import triton
    from cuda_triton.tools.tuning_report import print_plan, read_logs

    if args.arch is None:
        major, minor = torch.cuda.get_device_capability() if cuda else (9, 0)
        args.arch = major * 10 + minor
    command = " ".join(["scripts/tune.py", *(argv if argv is not None else sys.argv[1:])])
    outputs = Outputs(Path(args.out), args.arch, command)
    if args.rebuild is not None:
        records = read_logs(list(args.rebuild))
        n = outputs.flush(records)
        print(f"wrote {outputs.table} ({n} entries from {len(records)} logged convolutions)")
        return 0

    records = read_logs([*args.resume, outputs.log])
    todo, only_templates = plan(args, records)
    if args.dry_run:
        print_plan(todo, args.max_schedules, only_templates)
        return 0
    outputs.table.parent.mkdir(parents=True, exist_ok=True)
    if args.resume:  # carry the resumed records into this run's log, so the new log is complete on its own
        with outputs.log.open("w") as f:
            for rec in records.values():
                f.write(json.dumps(rec) + "\n")
    _stderr(f"{len(records)} convolutions already measured, {len(todo)} to go -> {outputs.table}")

    t0 = time.monotonic()
    env = make_env(args, cuda, outputs)
    run_info = {
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "timing": "cuda-graph" if cuda else "cpu-interpreter",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "command": command,
    }
    measured, stopped = measure_all(todo, env, args, outputs, records, run_info, only_templates)
    n = outputs.flush(records)
    state = "complete" if stopped is None else f"stopped ({stopped}); rerun the same command to continue"
    print(
        f"{state}: measured {measured} convolutions in {time.monotonic() - t0:.0f} s; table {outputs.table} has {n} entries"
    )
    print(f"log {outputs.log}; summary {outputs.summary}")
    return 3 if stopped == "CUDA context lost" else 0


if __name__ == "__main__":
    sys.exit(main())
