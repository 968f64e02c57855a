"""The tuning table: the shipped table is valid, lookup hits and generalises, bad tables fail clearly.

Lookup and the tuner's bookkeeping are exercised against a fake template (a registry monkeypatched to hold
it), whose "kernel" computes the convolution with ATen, so the tests do not depend on the real kernels.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import random
import sys
from pathlib import Path

import pytest
import torch
from cuda_triton.conv import templates as templates_mod
from cuda_triton.conv import tuning, tuning_keys
from cuda_triton.conv.op import reference_convolution
from cuda_triton.conv.params import ConvParams
from cuda_triton.conv.problem import ConvProblem
from cuda_triton.conv.templates.base import ConvTemplate
from cuda_triton.kernel.launch import KernelLaunch, Schedule, Support, TensorArg

ROOT = Path(__file__).resolve().parent.parent


# ---- helpers ------------------------------------------------------------------------------------------------
def dense_strides(sizes: tuple[int, ...], channels_last: bool) -> tuple[int, ...]:
    rank = len(sizes)
    order = [0, *range(2, rank), 1] if channels_last and rank > 3 else list(range(rank))
    strides = [0] * rank
    acc = 1
    for d in reversed(order):
        strides[d] = acc
        acc *= sizes[d]
    return tuple(strides)


def make_problem(
    n: int = 1,
    c: int = 16,
    k: int = 32,
    hw: tuple[int, ...] = (14, 14),
    kernel: int = 3,
    stride: int = 1,
    groups: int = 1,
    dtype: str = "float16",
    channels_last: bool = True,
    bias: bool = False,
    transposed: bool = False,
) -> ConvProblem:
    nd = len(hw)
    pad = kernel // 2
    params = ConvParams((stride,) * nd, (pad,) * nd, (pad,) * nd, (1,) * nd, transposed, (0,) * nd, groups)
    isize = (n, c, *hw)
    wsize = (c, k // groups, *(kernel,) * nd) if transposed else (k, c // groups, *(kernel,) * nd)
    return ConvProblem.from_shapes(
        isize,
        dense_strides(isize, channels_last),
        wsize,
        dense_strides(wsize, channels_last),
        bias,
        params,
        dtype,
        True,
    )


# A schedule whose "kernel" reports a lost CUDA context (test_tune_stops_on_a_lost_context_and_skips_the_culprit_on_resume).
CRASHING_BLOCK: list[int] = []


class _FakeKernel:
    """Stands in for a @triton.jit function: ``fn[grid](input, weight, bias, output, BLOCK=...)``."""

    __name__ = "fake_conv_kernel"

    def __init__(self, params: ConvParams, wrong: bool) -> None:
        self.params, self.wrong = params, wrong

    def __getitem__(self, grid):
        def launch(x, w, b, out, **kwargs):
            if kwargs.get("BLOCK") in CRASHING_BLOCK:
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
            y = reference_convolution(x.float(), w.float(), None if b is None else b.float(), self.params)
            out.copy_(y + (1.0 if self.wrong else 0.0))

        return launch


class FakeTemplate(ConvTemplate):
    """Forward convs; schedules BLOCK in 16/32/64 up to 2 * out_channels; BLOCK=64 computes a wrong result."""

    def __init__(self, name: str = "fake") -> None:
        self.name = name

    def supports(self, problem: ConvProblem) -> Support:
        return Support.no("transposed") if problem.transposed else Support.yes()

    def worth_routing(self, problem: ConvProblem) -> bool:
        return True

    def schedules(self, problem: ConvProblem) -> list[Schedule]:
        return [Schedule.make(4, 2, BLOCK=b) for b in (16, 32, 64) if b <= 2 * problem.out_channels]

    def heuristic_schedule(self, problem: ConvProblem) -> Schedule:
        return self.schedules(problem)[0]

    def launches(self, problem: ConvProblem, schedule: Schedule) -> list[KernelLaunch]:
        args = tuple(TensorArg(r, "fp32") for r in ("input", "weight", "bias", "output"))
        fn = _FakeKernel(problem.params, wrong=schedule["BLOCK"] == 64)
        return [KernelLaunch(fn, args, (("BLOCK", schedule["BLOCK"]),), (1, 1, 1), 4, 2)]


@pytest.fixture
def fake_registry(monkeypatch):
    monkeypatch.setattr(templates_mod, "_registry", [FakeTemplate()])
    monkeypatch.delenv(tuning.ENV_ENABLE, raising=False)
    monkeypatch.delenv(tuning.ENV_TABLE, raising=False)
    tuning.clear_cache()
    yield
    tuning.clear_cache()


def entry(
    problem: ConvProblem,
    block: int,
    template: str = "fake",
    time_us: float = 10.0,
    heuristic_us: float = 20.0,
) -> tuning.TuningEntry:
    return tuning.TuningEntry.from_problem(
        problem, 90, template, Schedule.make(4, 2, BLOCK=block), time_us, 12.0, heuristic_us
    )


# ---- the shipped table ------------------------------------------------------------------------------------
SHIPPED = tuning.shipped_table_path(90)


def check_table(table: tuning.TuningTable, compile_sample: int | None) -> None:
    """Valid against the registered templates; every entry is its own exact hit; entries compile.

    ``compile_sample=None`` compiles one entry of every distinct (template, schedule, dtype) in the table (the
    code a schedule generates differs between those; the geometry constexprs of one entry vs another of the same
    schedule only change constants); a number compiles a random sample of that size, one per template at least.
    """
    from cuda_triton.conv.templates import get_template
    from cuda_triton.kernel.aot import compile_launches

    assert tuning.validate_table(table) == []
    for e in table.entries:
        assert tuning.lookup(e.problem, e.arch, table) == (e.template, e.schedule)
    rng = random.Random(0)
    if compile_sample is None:
        distinct: dict[tuple, tuning.TuningEntry] = {}
        for e in table.entries:
            distinct.setdefault((e.arch, e.template, e.schedule, e.problem.dtype), e)
        sample = list(distinct.values())
    else:
        by_template: dict[str, list[tuning.TuningEntry]] = {}
        for e in table.entries:
            by_template.setdefault(e.template, []).append(e)
        sample = [rng.choice(v) for _, v in sorted(by_template.items())]
        rest = [e for e in table.entries if e not in sample]
        sample += rng.sample(rest, min(len(rest), max(0, compile_sample - len(sample))))
    for arch in sorted({e.arch for e in sample}):
        launches = [
            launch
            for e in sample
            if e.arch == arch
            for launch in get_template(e.template).launches(e.problem, e.schedule)
        ]
        compiled = compile_launches(launches, arch)  # one batch: one interpreter-free subprocess on CPU
        assert len(compiled) == len(launches) and all(c.cubin for c in compiled)


@pytest.mark.skipif(
    not SHIPPED.exists(), reason="no shipped tuning table (scripts/gpu_tune.sh generates it on the GPU)"
)
def test_shipped_table_is_valid_and_compiles():
    tuning.clear_cache()
    table = tuning.read_table(SHIPPED)
    assert len(table) > 0
    assert table.meta.get("timing") == "cuda-graph", "the shipped table must hold GPU measurements only"
    assert all(e.arch == 90 for e in table.entries)
    check_table(table, None)


def test_validation_with_the_real_templates(tmp_path):
    """The checks the shipped table gets, on a table of heuristic choices (and what they catch)."""
    from cuda_triton.conv.templates import registered_templates

    tuning.clear_cache()
    problems = [
        make_problem(c=64, k=64, hw=(28, 28)),
        make_problem(c=64, k=128, hw=(28, 28), kernel=1, dtype="bfloat16"),
        make_problem(c=96, k=96, hw=(14, 14), kernel=7, groups=96, channels_last=False, dtype="float32"),
    ]
    entries = []
    for p in problems:
        t = next(t for t in registered_templates() if t.supports(p))
        entries.append(tuning.TuningEntry.from_problem(p, 90, t.name, t.schedules(p)[0], 5.0, 6.0, 5.5))
    table = tuning.TuningTable(entries)
    path = tmp_path / "sm90.json"
    table.write(path)
    check_table(tuning.read_table(path), compile_sample=2)
    # An unknown template and a schedule that is not on offer are reported.
    bad = tuning.TuningTable(
        [
            tuning.TuningEntry.from_problem(problems[0], 90, "no_such_template", entries[0].schedule, 1.0),
            tuning.TuningEntry.from_problem(
                problems[1], 90, entries[1].template, Schedule.make(4, 2, BLOCK_M=3), 1.0
            ),
        ]
    )
    found = tuning.validate_table(bad)
    assert len(found) == 2 and "no template named" in found[0] and "does not offer" in found[1]


def test_default_table_loads():
    """Whatever ships (or an empty table when nothing does) loads through the default path."""
    tuning.clear_cache()
    table = tuning.load_table()
    assert isinstance(table, tuning.TuningTable)
    if not SHIPPED.exists():
        assert len(table) == 0


# ---- lookup -------------------------------------------------------------------------------------------------
def test_exact_hit(fake_registry):
    p = make_problem()
    table = tuning.TuningTable([entry(p, 32)])
    assert tuning.lookup(p, 90, table) == ("fake", Schedule.make(4, 2, BLOCK=32))
    m = tuning.lookup_match(p, 90, table)
    assert m is not None and m.exact and m.distance == 0.0
    # Another arch, precision or layout is not a hit.
    assert tuning.lookup(p, 80, table) is None
    assert tuning.lookup(make_problem(dtype="float32"), 90, table) is None
    assert tuning.lookup(make_problem(channels_last=False), 90, table) is None


def test_nearest_signature_fallback(fake_registry):
    near = make_problem(c=32, k=64, hw=(28, 28))
    far = make_problem(c=512, k=512, hw=(7, 7))
    table = tuning.TuningTable([entry(near, 32), entry(far, 16)])
    q = make_problem(c=32, k=64, hw=(24, 24), n=2)  # not in the table; closest to `near`
    m = tuning.lookup_match(q, 90, table)
    assert m is not None and not m.exact
    assert m.entry.signature == near.signature()
    assert math.isclose(m.distance, tuning_keys.signature_distance(q, near))
    assert tuning.lookup(q, 90, table) == ("fake", Schedule.make(4, 2, BLOCK=32))
    # `nearest` answers as if the problem were not in the table (the tuner's leave-one-out report).
    assert table.nearest(near, 90) is None  # `far` is the only other entry, beyond MAX_DISTANCE
    assert table.nearest(near, 90, max_distance=100).entry.signature == far.signature()
    assert tuning.lookup_match(near, 90, table).exact
    # Distance is symmetric, zero on itself, and infinite across structural classes.
    assert tuning_keys.signature_distance(q, near) == tuning_keys.signature_distance(near, q)
    assert tuning_keys.signature_distance(q, q) == 0.0
    assert tuning_keys.signature_distance(q, make_problem(hw=(14,))) == math.inf
    assert tuning_keys.signature_distance(q, make_problem(c=32, k=32, groups=32)) == math.inf


def test_fallback_only_where_tuning_beat_the_heuristic(fake_registry):
    near = make_problem(c=32, k=64, hw=(28, 28))
    q = make_problem(c=32, k=64, hw=(24, 24), n=2)
    gain = tuning.MIN_NEIGHBOUR_GAIN
    # Tuned 10 us vs heuristic 11 us on the neighbour: not worth borrowing, the heuristic decides.
    assert tuning.lookup(q, 90, tuning.TuningTable([entry(near, 32, heuristic_us=11.0)])) is None
    # No heuristic time recorded: not borrowed either.
    assert tuning.lookup(q, 90, tuning.TuningTable([entry(near, 32, heuristic_us=0.0)])) is None
    hit = tuning.lookup(q, 90, tuning.TuningTable([entry(near, 32, heuristic_us=10.0 * gain)]))
    assert hit == ("fake", Schedule.make(4, 2, BLOCK=32))
    # An exact hit is always used, whatever its gain.
    assert tuning.lookup(near, 90, tuning.TuningTable([entry(near, 32, heuristic_us=10.0)])) is not None


def test_fallback_needs_the_schedule_on_offer(fake_registry):
    big = make_problem(k=64)
    table = tuning.TuningTable([entry(big, 64)])
    # out_channels=16 offers BLOCK 16/32 only: the neighbour's BLOCK=64 is not on offer -> heuristics.
    q = make_problem(k=16)
    assert FakeTemplate().schedules(q) == [Schedule.make(4, 2, BLOCK=16), Schedule.make(4, 2, BLOCK=32)]
    assert tuning.lookup(q, 90, table) is None
    # A second, farther neighbour whose schedule is on offer is used instead.
    farther = make_problem(k=64, c=32)
    assert (
        tuning_keys.signature_distance(q, big)
        < tuning_keys.signature_distance(q, farther)
        <= tuning.MAX_DISTANCE
    )
    table2 = tuning.TuningTable([entry(big, 64), entry(farther, 16)])
    assert tuning.lookup(q, 90, table2) == ("fake", Schedule.make(4, 2, BLOCK=16))


def test_fallback_limits(fake_registry):
    p = make_problem(c=16, k=16, hw=(8, 8))
    table = tuning.TuningTable([entry(p, 16)])
    too_far = make_problem(c=1024, k=1024, hw=(128, 128), n=8)
    assert tuning_keys.signature_distance(too_far, p) > tuning.MAX_DISTANCE
    assert tuning.lookup(too_far, 90, table) is None
    # Depthwise problems never borrow a dense conv's schedule, nor 3-D from 2-D.
    assert tuning.lookup(make_problem(c=16, k=16, hw=(8, 8), groups=16), 90, table) is None
    assert tuning.lookup(make_problem(c=16, k=16, hw=(8, 8, 8)), 90, table) is None
    # A template that does not support the problem is not a neighbour.
    assert tuning.lookup(make_problem(c=16, k=16, hw=(8, 8), transposed=True), 90, table) is None
    # An entry naming a template that no longer exists is ignored, and so is an exact entry whose schedule the
    # template no longer offers (a stale table).
    stale = tuning.TuningTable([entry(p, 16, template="gone")])
    assert tuning.lookup(p, 90, stale) is None
    assert tuning.lookup(p, 90, tuning.TuningTable([entry(p, 128)])) is None


def test_half_precisions_stand_in_for_each_other(fake_registry):
    p16 = make_problem(dtype="float16")
    table = tuning.TuningTable([entry(p16, 32)])
    pb = make_problem(dtype="bfloat16")
    m = tuning.lookup_match(pb, 90, table)
    assert m is not None and not m.exact and m.distance == tuning.PRECISION_PENALTY
    assert tuning.lookup(make_problem(dtype="float32"), 90, table) is None  # tf32 is not a half precision


def test_lookup_is_cached(fake_registry, monkeypatch):
    p = make_problem(c=32, k=64, hw=(28, 28))
    table = tuning.TuningTable([entry(p, 32)])
    q = make_problem(c=32, k=64, hw=(24, 24))
    calls = []
    original = FakeTemplate.schedules

    def counting(self, problem):
        calls.append(problem)
        return original(self, problem)

    monkeypatch.setattr(FakeTemplate, "schedules", counting)
    first = tuning.lookup(q, 90, table)
    second = tuning.lookup(q, 90, table)
    assert first == second is not None and len(calls) == 1


# ---- loading, environment, malformed tables ---------------------------------------------------------------
def write(path: Path, data) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_round_trip_and_env_override(fake_registry, tmp_path, monkeypatch):
    p = make_problem(bias=True)
    table = tuning.TuningTable([entry(p, 32), entry(make_problem(c=64), 16)], meta={"timing": "test"})
    path = tmp_path / "t.json"
    table.write(path)
    back = tuning.read_table(path)
    assert [e.to_json() for e in back.entries] == [
        e.to_json() for e in tuning.TuningTable(table.entries).entries
    ]
    assert back.entries[0].problem in (p, make_problem(c=64))
    monkeypatch.setenv(tuning.ENV_TABLE, str(path))
    tuning.clear_cache()
    assert tuning.lookup(p) == ("fake", Schedule.make(4, 2, BLOCK=32))
    assert tuning.load_table() is tuning.load_table()  # loaded once
    monkeypatch.setenv(tuning.ENV_ENABLE, "0")
    assert tuning.lookup(p) is None
    assert tuning.lookup(p, 90, back) is None  # disabled means disabled, whatever the table


def test_missing_tables(fake_registry, tmp_path, monkeypatch):
    with pytest.raises(tuning.TuningTableError, match="does not exist"):
        tuning.load_table(tmp_path / "nope.json")
    monkeypatch.setenv(tuning.ENV_TABLE, str(tmp_path / "nope.json"))
    with pytest.raises(tuning.TuningTableError, match="does not exist"):
        tuning.lookup(make_problem())
    monkeypatch.delenv(tuning.ENV_TABLE)
    monkeypatch.setattr(tuning, "SHIPPED_DIR", tmp_path / "empty")
    tuning.clear_cache()
    assert len(tuning.load_table(arch=90)) == 0  # no shipped table: heuristics only, no error
    assert tuning.lookup(make_problem()) is None


def _good_table_json() -> dict:
    return tuning.TuningTable([entry(make_problem(), 32)]).to_json()


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: "{not json", "not valid JSON"),
        (lambda d: [1, 2], "JSON object"),
        (lambda d: {**d, "format": "something else"}, "not a tuning table"),
        (lambda d: {**d, "version": 99}, "version 99 is not supported"),
        (lambda d: {**d, "entries": {}}, "'entries' must be a list"),
        (
            lambda d: {**d, "entries": [{k: v for k, v in d["entries"][0].items() if k != "template"}]},
            "missing field 'template'",
        ),
        (lambda d: {**d, "entries": [{**d["entries"][0], "precision": "fp8"}]}, "precision"),
        (lambda d: {**d, "entries": [{**d["entries"][0], "schedule": {"BLOCK": "big"}}]}, "integer values"),
        (
            lambda d: {**d, "entries": [{**d["entries"][0], "signature": "n1_other"}]},
            "does not match its problem",
        ),
        (lambda d: {**d, "entries": [{**d["entries"][0], "time_us": -1}]}, "positive"),
        (
            lambda d: {**d, "entries": [{**d["entries"][0], "problem": {"input_size": [1]}}]},
            "cannot be rebuilt",
        ),
        (lambda d: {**d, "entries": d["entries"] * 2}, "duplicate entry"),
    ],
)
def test_malformed_tables_fail_clearly(fake_registry, tmp_path, mutate, message):
    path = write(tmp_path / "bad.json", mutate(_good_table_json()))
    with pytest.raises(tuning.TuningTableError, match=message) as info:
        tuning.load_table(path)
    assert str(path) in str(info.value)


# ---- the tuner, end to end on the CPU with the fake template ------------------------------------------------
def _load_tune_module():
    spec = importlib.util.spec_from_file_location("tune_script", ROOT / "scripts" / "tune.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tune_script"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="the CPU smoke path; the GPU path is scripts/tune.py itself"
)
def test_tune_script_writes_a_usable_table(fake_registry, tmp_path, capsys):
    tune = _load_tune_module()
    problems = [
        make_problem(c=8, k=32, hw=(6, 6), dtype="float32"),
        make_problem(c=4, k=8, hw=(5, 5), bias=True),
    ]
    # One as a problem spec, one as a signature string (expanded over --dtypes x --layouts).
    src = write(tmp_path / "problems.json", [tuning_keys.problem_spec(problems[0]), problems[1].signature()])
    out = tmp_path / "out"
    one = ["--dtypes", "fp16", "--layouts", "channels_last"]
    assert tune.main(["--out", str(out), "--problems", f"json:{src}", *one, "--dry-run"]) == 0
    assert "total" in capsys.readouterr().out and not out.exists()
    assert tune.main(["--out", str(out), "--problems", f"json:{src}", "--no-cudnn", *one]) == 0
    table = tuning.read_table(out / "sm90.json")
    assert len(table) == 2
    assert table.meta["timing"] == "cpu-interpreter"
    for p in problems:
        e = table.get(p, 90)
        assert e is not None and e.template == "fake"
        assert e.schedule["BLOCK"] != 64  # the wrong-result schedule is rejected by the numerics check
        assert e.heuristic_us is not None
    log = [json.loads(line) for line in (out / "sm90.log.jsonl").read_text().splitlines()]
    assert len(log) == 2
    wrong = [c for rec in log for c in rec["candidates"] if c["schedule"]["BLOCK"] == 64]
    assert wrong and all(c["error"].startswith("numerics") for c in wrong)
    summary = (out / "sm90.md").read_text()
    assert "Generalisation (leave-one-out)" in summary and "json:problems.json" in summary

    # A rerun resumes: nothing left to measure, the table is unchanged.
    assert tune.main(["--out", str(out), "--problems", f"json:{src}", "--no-cudnn", *one]) == 0
    assert "0 to go" in capsys.readouterr().err
    assert len((out / "sm90.log.jsonl").read_text().splitlines()) == 2
    # A budget of zero stops cleanly before measuring anything and still writes a table.
    out2 = tmp_path / "out2"
    assert tune.main(["--out", str(out2), "--problems", f"json:{src}", *one, "--budget-s", "0"]) == 0
    assert len(tuning.read_table(out2 / "sm90.json")) == 0
    # --resume from another run's log, then --rebuild from logs alone.
    out3 = tmp_path / "t3.json"
    assert (
        tune.main(
            ["--out", str(out3), "--problems", f"json:{src}", *one, "--resume", str(out / "sm90.log.jsonl")]
        )
        == 0
    )
    assert len(tuning.read_table(out3)) == 2
    assert "0 to go" in capsys.readouterr().err
    out4 = tmp_path / "t4.json"
    assert tune.main(["--out", str(out4), "--rebuild", str(out / "sm90.log.jsonl")]) == 0
    assert [e.key for e in tuning.read_table(out4).entries] == [e.key for e in table.entries]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU smoke path")
def test_tune_stops_on_a_lost_context_and_skips_the_culprit_on_resume(
    fake_registry, tmp_path, monkeypatch, capsys
):
    tune = _load_tune_module()
    monkeypatch.setattr(sys.modules[__name__], "CRASHING_BLOCK", [32])
    problems = [make_problem(c=8, k=32, hw=(6, 6)), make_problem(c=8, k=32, hw=(5, 5))]
    src = write(tmp_path / "problems.json", [tuning_keys.problem_spec(p) for p in problems])
    out = tmp_path / "out"
    argv = ["--out", str(out), "--problems", f"json:{src}", "--no-cudnn"]
    assert tune.main(argv) == 3
    assert "broke the CUDA context" in capsys.readouterr().err
    assert '"BLOCK": 32' in (out / "sm90.inflight").read_text()
    assert not (out / "sm90.log.jsonl").read_text().strip()  # nothing finished
    # The rerun skips that candidate: for the first problem only (its id names the problem).
    assert tune.main(argv) == 3
    log = [json.loads(line) for line in (out / "sm90.log.jsonl").read_text().splitlines()]
    assert len(log) == 1
    skipped = [c for c in log[0]["candidates"] if c["schedule"].get("BLOCK") == 32]
    assert skipped and skipped[0]["error"].startswith("crashed an earlier tuning run")
    assert log[0]["best"]["schedule"]["BLOCK"] == 16
    assert tune.main(argv) == 0
    assert len(tuning.read_table(out / "sm90.json")) == 2
    assert (out / "sm90.inflight").read_text() == ""


def test_problem_from_signature():
    for p in [
        make_problem(),
        make_problem(hw=(9,), kernel=5, stride=2, channels_last=False, bias=True),
        make_problem(c=8, k=8, hw=(4, 6, 6), groups=8, dtype="float32"),
        make_problem(c=16, k=8, hw=(7, 7), transposed=True, stride=2, channels_last=False),
    ]:
        layout = "channels_last" if p.input_layout == "channels_last" else "contiguous"
        assert tuning_keys.problem_from_signature(p.signature(), p.dtype, layout) == p
    with pytest.raises(ValueError, match="not a convolution signature"):
        tuning_keys.problem_from_signature("n1_c3_k8_in8x8_w3x3_s1x1_pb1x1_pa1x1_d1x1_g1")  # no bias field
    with pytest.raises(ValueError, match="not a convolution signature"):
        tuning_keys.problem_from_signature("resnet50")


def test_tuning_signatures_cover_the_networks():
    from cuda_triton.tools import tuning_networks as nets
    from cuda_triton.tools import tuning_signatures as ts

    want = {"resnet18", "resnet50", "mobilenetv2", "efficientnet_b0", "convnext_t", "unet", "deeplabv3", "wav2vec2",
            "whisper", "hifigan", "wavenet", "r2plus1d", "x3d"}  # fmt: skip
    assert want <= set(nets.NETWORKS)
    # Spot checks against the published layer tables.
    assert len(nets.resnet18()) == 20 and len(nets.resnet50()) == 53 and len(nets.mobilenetv2()) == 52
    macs = sum(
        la.K * math.prod(la.out_spatial()) * la.C // la.groups * math.prod(la.kernel)
        for la in nets.resnet50()
    )
    assert 4.0e9 < macs < 4.2e9  # ResNet-50: 4.1 GMACs
    pairs = ts.problems(["resnet18", "wav2vec2", "hifigan"], batches=(1, 8), dtypes=("fp16",))
    probs = [p for _, p in pairs]
    assert len(set(probs)) == len(probs)
    assert {p.batch for p in probs} == {1, 8}
    assert any(p.transposed for p in probs) and any(p.spatial_dims == 1 for p in probs)
    assert all(p.input_layout == "contiguous" for p in probs if p.spatial_dims == 1)
    assert {p.input_layout for p in probs if p.spatial_dims == 2} == {"channels_last", "contiguous"}
    # Every problem's spec round-trips through the table format.
    for p in probs[:50]:
        assert tuning_keys.problem_from_spec(tuning_keys.problem_spec(p)) == p


def test_no_executorch_import():
    """The tuning module runs on the GPU machine, which has no executorch."""
    code = (
        "import sys, cuda_triton.conv.tuning; assert not any(m.startswith('executorch') for m in sys.modules)"
    )
    import subprocess

    env = {**os.environ}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("has_bias", [True, False])
def test_compile_workers_specialise_as_the_tuner_runs(has_bias: bool, monkeypatch) -> None:
    """The tuner's compile workers (`tools.warmup.ScheduleWarmup`) pass each launch the arguments the measured run
    will (a None pointer where the run has no tensor: Triton specialises on it), for every template and schedule
    of a few problems, so the run hits the kernel the workers compiled."""
    from cuda_triton.tools.tuning_measure import Operands, schedule_runner, tuned_roles
    from cuda_triton.tools.warmup import warmup_args

    seen: list[list] = []
    monkeypatch.setattr(KernelLaunch, "run", lambda self, tensors: seen.append(self.resolve(tensors)))
    cases = [
        ((1, 8, 9, 9), (8, 1, 3, 3), ConvParams((1, 1), (1, 1), (1, 1), (1, 1), False, (0, 0), 8), True),
        ((2, 16, 7, 7), (32, 16, 3, 3), ConvParams((2, 2), (1, 1), (1, 1), (1, 1), False, (0, 0), 1), False),
        ((1, 64, 4), (64, 64, 3), ConvParams((1,), (1,), (1,), (1,), False, (0,), 1), False),
    ]
    for x_size, w_size, p, channels_last in cases:
        x = torch.randn(x_size, dtype=torch.float16)
        w = torch.randn(w_size, dtype=torch.float16)
        if channels_last:
            x, w = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
        b = torch.randn(w_size[0], dtype=torch.float16) if has_bias else None
        problem = ConvProblem.from_tensors(x, w, b, p, True)
        out = torch.empty_strided(problem.output_size, problem.output_stride, dtype=torch.float16)
        ops = Operands([x], [w], [b], [out], torch.empty(0), torch.empty(0), torch.empty(0))
        for template in templates_mod.registered_templates():
            if not template.supports(problem):
                continue
            for schedule in template.schedules(problem)[:6]:
                seen.clear()
                schedule_runner(template, problem, schedule, ops)(0)
                bound = tuned_roles(template, problem, schedule)
                expected = [
                    warmup_args(la, bound, torch.float16) for la in template.launches(problem, schedule)
                ]
                assert len(seen) == len(expected), (template.name, schedule.key())
                for run_args, warm_args in zip(seen, expected, strict=True):
                    for got, want in zip(run_args, warm_args, strict=True):
                        if isinstance(got, torch.Tensor):
                            assert want == got.dtype, (template.name, schedule.key())
                        else:
                            assert want == got, (template.name, schedule.key())
