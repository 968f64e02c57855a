"""The CUDA-graph timing harness of scripts/tune.py and scripts/bench_conv.py.

GPU time per call is the median over replays of a CUDA graph that holds many back-to-back calls, so the host's
launch overhead (several microseconds a launch) is excluded for every contender. A graph's call count is sized
twice: from a few eager calls (host-bound, so it over-estimates the GPU time per call), then from one replay of
the graph built with that count, recaptured larger when the replay ran under half the wanted time. The second
step matters: a first call that compiles, loads a module or autotunes (cuDNN's benchmark mode) inflates the
eager estimate, and a graph of one or two calls then times the replay's own launch latency, 5-10 us, as if the
kernel took it. Where a graph cannot be captured, the same number of eager calls is timed instead.

Two regimes use it:

* `time_rotating` (the tuner): the calls rotate through copies of the operands, enough copies to overflow L2
  (cold L2, the same for every schedule and for cuDNN), and a candidate whose eager estimate is far behind the
  best one so far is not timed precisely;
* `time_side_by_side` (the benchmark): contenders on one set of operands (warm L2, as a network's layers run
  back to back), replayed in interleaved rounds after a warm-up burn, so drift of the GPU's clocks during a case
  affects all of them alike.

Depends on torch only.
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

# The side stream graphs are captured on, one per device (made on first use).
_CAPTURE_STREAMS: dict[int, torch.cuda.Stream] = {}


def _capture_stream() -> torch.cuda.Stream:
    device = torch.cuda.current_device()
    if device not in _CAPTURE_STREAMS:
        _CAPTURE_STREAMS[device] = torch.cuda.Stream()
    return _CAPTURE_STREAMS[device]


def elapsed_ms(run: Callable[[], Any]) -> float:
    """GPU time of one ``run()`` in milliseconds (CUDA events on the current stream)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def eager_us(fn: Callable[[int], Any], calls: int, nrot: int = 1) -> float:
    """Microseconds per call of ``calls`` eager calls ``fn(i % nrot)`` (host launch overhead included)."""

    def run() -> None:
        for i in range(calls):
            fn(i % nrot)

    return elapsed_ms(run) * 1e3 / calls


def capture_graph(fn: Callable[[int], Any], calls: int, nrot: int = 1) -> torch.cuda.CUDAGraph:
    """A CUDA graph of ``calls`` calls ``fn(i % nrot)``, captured on a side stream after one warm-up call there,
    and replayed once (untimed) before it is returned.

    Uses capture_begin/capture_end rather than ``torch.cuda.graph``, whose gc.collect and empty_cache per
    capture would dominate a tuning run's thousands of captures.
    """
    stream = _capture_stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        fn(0)
        graph.capture_begin()
        try:
            for i in range(calls):
                fn(i % nrot)
        finally:
            graph.capture_end()
    torch.cuda.current_stream().wait_stream(stream)
    graph.replay()
    return graph


@dataclass
class Timed:
    """What one timed ``run()`` does: ``calls`` calls, replayed from a graph or (``graph`` False) eagerly."""

    run: Callable[[], Any]
    calls: int
    graph: bool
    capture_error: str = ""  # why there is no graph (the exception's type name)


def sized_runner(
    fn: Callable[[int], Any], per_call_us: float, target_us: float, max_calls: int, nrot: int = 1
) -> Timed:
    """A graph of about ``target_us`` of GPU work: ``target_us / per_call_us`` calls (at least ``nrot``, at most
    ``max_calls``), recaptured with the count its own replay implies when that replay ran under half of
    ``target_us``. Eager calls of the same count where capture fails."""
    calls = max(nrot, min(max_calls, math.ceil(target_us / max(per_call_us, 1.0))))
    try:
        graph = capture_graph(fn, calls, nrot)
        replay_us = elapsed_ms(graph.replay) * 1e3
        if replay_us < 0.5 * target_us and calls < max_calls:
            calls = max(nrot, min(max_calls, math.ceil(calls * target_us / max(replay_us, 1.0))))
            del graph
            graph = capture_graph(fn, calls, nrot)
        return Timed(graph.replay, calls, True)
    except Exception as e:  # capture not possible: eager calls
        torch.cuda.synchronize()

        def run() -> None:
            for i in range(calls):
                fn(i % nrot)

        return Timed(run, calls, False, type(e).__name__)


def time_rotating(
    fn: Callable[[int], Any],
    nrot: int,
    target_ms: float = 0.5,
    repeats: int = 7,
    max_calls: int = 2000,
    prune: float | None = None,
    best_est: float | None = None,
) -> tuple[float, str, float]:
    """Median microseconds per call of ``fn(i)``, ``i`` the rotation index: (time, method, eager estimate).

    ``method`` is "graph", "eager (<why no graph>)", "eager-pruned" (the estimate was over ``prune`` times
    ``best_est`` and over 50 us, so host-bound small kernels are never pruned: the estimate is the time) or
    "cpu" (no GPU: wall time of a few calls, for smoke tests only).
    """
    if not torch.cuda.is_available():
        fn(0)
        samples = []
        for i in range(3):
            t0 = time.perf_counter()
            fn(i % nrot)
            samples.append((time.perf_counter() - t0) * 1e6)
        med = statistics.median(samples)
        return med, "cpu", med

    for i in range(nrot):  # warm up every rotation once
        fn(i)
    n_est = max(nrot, 3)
    est = eager_us(fn, n_est, nrot)
    if prune is not None and best_est is not None and est > prune * best_est and est > 50:
        # Confirm before pruning: right after an in-process compile (a first launch of 0.3 s) the idle GPU has
        # clocked down, and a first estimate can read 20x the kernel's time.
        est = min(
            est, eager_us(fn, max(n_est, math.ceil(20e3 / est)), nrot)
        )  # ~20 ms of calls: clocks back up
        if est > prune * best_est and est > 50:
            return est, "eager-pruned", est
    timed = sized_runner(fn, est, target_ms * 1e3, max_calls, nrot)
    samples = [elapsed_ms(timed.run) * 1e3 / timed.calls for _ in range(repeats)]
    method = "graph" if timed.graph else f"eager ({timed.capture_error})"
    return statistics.median(samples), method, est


def burn(runs: list[Callable[[], Any]], ms: float) -> None:
    """Replay the runs in turn for ``ms`` (the GPU clocks up before the timed replays)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    while True:
        for run in runs:
            run()
        end.record()
        end.synchronize()
        if start.elapsed_time(end) >= ms:
            return


def time_side_by_side(
    fns: dict[str, Callable[[], Any]],
    reps: int = 30,
    target_ms: float = 2.0,
    max_calls: int = 500,
    warm_ms: float = 20.0,
) -> dict[str, tuple[float, Timed]]:
    """Median GPU time per call (us) of each contender, with how it was run, measured in interleaved rounds.

    Each contender's graph holds about ``target_ms`` of calls, at most ``max_calls`` (each call of an op that
    allocates its output takes it from the graph's pool, so the cap bounds that memory). After a ``warm_ms`` burn,
    each of the ``reps`` rounds replays every contender's graph once.
    """
    runners = {}
    for name, fn in fns.items():
        torch.cuda.synchronize()
        fn()  # lazy loads and autotuning happen here, not in the estimate
        torch.cuda.synchronize()
        per_call = eager_us(lambda _i, f=fn: f(), 3)
        runners[name] = sized_runner(lambda _i, f=fn: f(), per_call, target_ms * 1e3, max_calls)
    if warm_ms > 0:
        burn([t.run for t in runners.values()], warm_ms)
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(reps):
        for name, timed in runners.items():
            times[name].append(elapsed_ms(timed.run) * 1e3 / timed.calls)
    return {name: (statistics.median(times[name]), runners[name]) for name in fns}


def time_gpu_us(fn: Callable[[], Any], reps: int = 30, **options: Any) -> tuple[float, Timed]:
    """`time_side_by_side` with one contender."""
    return time_side_by_side({"fn": fn}, reps, **options)["fn"]


_GPU_STATE_FIELDS = (
    "clocks.sm",
    "clocks.mem",
    "temperature.gpu",
    "power.draw",
    "clocks_throttle_reasons.active",
)


def gpu_state() -> dict[str, str]:
    """The GPU's clocks, temperature, power and active throttle reasons now (nvidia-smi), and the host's load:
    recorded beside a case's times, they tell a clock or load effect from a change of code (the GPU fields are
    absent where nvidia-smi is missing or slow)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(_GPU_STATE_FIELDS)}", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        out = ""
    state = dict(zip(_GPU_STATE_FIELDS, (v.strip() for v in out.split(",")), strict=False)) if out else {}
    state["host.loadavg1"] = f"{os.getloadavg()[0]:.1f}"
    return state
