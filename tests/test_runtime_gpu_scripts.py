"""The GPU scripts of the runtime (scripts/gpu_faults.py, gpu_sanitize.py, gpu_memory_cycles.py) end to end on a CPU.

Each script's ``main`` runs as it runs on the GPU machine, against a manifest in gpu_validate's layout,
with the runner on the fake driver and, for gpu_sanitize, a stand-in ``compute-sanitizer`` that runs the command
and prints the sanitizer's summary line. What only a GPU can tell (real faults, real sanitizer reports, real
device memory) is left to the GPU run; the plumbing, the classification and the verdicts are checked here.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import stat
import sys
from pathlib import Path

import numpy as np
import pytest
from runtime_helpers import ROOT, ensure_built, export_tiny

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def build() -> Path:
    return ensure_built()


@pytest.fixture()
def carried(tmp_path, monkeypatch, build):
    """A gpu_validate-style manifest holding the tiny export, the scripts importable, the fake driver on the
    library path of every runner they start."""
    exports = tmp_path / "exports"
    exports.mkdir()
    pte, _, _ = export_tiny(tmp_path)
    (exports / "tiny.pte").write_bytes(pte.read_bytes())
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    (exports / "tiny.input0.bin").write_bytes(x.tobytes())
    # The fake kernels compute nothing: the outputs come back as the zeroed staging buffer.
    (exports / "tiny.ref.bin").write_bytes(bytes(4 * 16 * 16 * 4))
    out = {"dtype": "float32", "offset_bytes": 0, "nbytes": 4 * 16 * 16 * 4, "shape": [1, 4, 16, 16]}
    io = {"dtype": "float32", "inputs": [{"file": "tiny.input0.bin"}],
          "reference": {"file": "tiny.ref.bin", "outputs": [out]}}  # fmt: skip
    (exports / "tiny.io.json").write_text(json.dumps(io))
    manifest = tmp_path / "manifest.json"
    entry = {"name": "tiny", "expect": "pass", "pte": "tiny.pte", "io": "tiny.io.json", "data_files": []}
    manifest.write_text(json.dumps({"set": "test", "entries": [entry]}))
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    gpu_validate = importlib.import_module("gpu_validate")
    monkeypatch.setattr(gpu_validate, "MANIFEST", manifest)
    monkeypatch.setattr(gpu_validate, "EXPORTS", exports)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(build / "fake_cuda"))
    monkeypatch.setenv("FAKE_CUDA_CC", "8.0")
    return tmp_path


def test_gpu_faults_main(carried, build, capsys) -> None:
    faults = importlib.import_module("gpu_faults")
    out = carried / "out"
    rc = faults.main(
        ["--out", str(out), "--count", "300", "--workers", "2", "--runner", str(build / "cuda_triton_runner")]
    )
    result = json.loads((out / "gpu_faults.json").read_text())
    assert rc == 0, faults.summary_line(result)
    assert result["runs"] == 300 and result["by_class"]["crash"] == result["by_class"]["hang"] == 0
    assert set(result["by_kind"]) == set(faults.KINDS) and all(
        sum(c.values()) == 60 for c in result["by_kind"].values()
    )
    assert "PASS" in capsys.readouterr().out and (out / "gpu_faults.md").exists()


def test_gpu_faults_classification() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    faults = importlib.import_module("gpu_faults")
    assert faults.classify(None, "") == "hang"
    assert faults.classify(-11, "") == "crash" and faults.classify(134, "") == "crash"
    assert (
        faults.classify(1, "launching k failed: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access)")
        == "gpu_fault"
    )
    assert faults.classify(1, "CudaTritonBackend init: malformed blob") == "clean_error"
    assert faults.classify(0, "") == "ran"


def test_gpu_sanitize_main(carried, build, tmp_path, monkeypatch, capsys) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "compute-sanitizer"
    # Drops the sanitizer's own flags (--tool X, --print-limit N, --leak-check full), runs the command.
    fake.write_text(
        "#!/usr/bin/env bash\n"
        'while [[ "$1" == --* ]]; do shift 2; done\n'
        '"$@"; rc=$?\n'
        'echo "========= ERROR SUMMARY: ${FAKE_SANITIZER_ERRORS:-0} errors"\n'
        "exit $rc\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    sanitize = importlib.import_module("gpu_sanitize")
    out = carried / "out"
    runner = ["--runner", str(build / "cuda_triton_runner")]
    assert sanitize.main(["--out", str(out), "--workers", "2", *runner]) == 0, (
        out / "gpu_sanitize.md"
    ).read_text()
    result = json.loads((out / "gpu_sanitize.json").read_text())
    assert [(r["tool"], r["errors"], r["rc"]) for r in result["results"]] == [
        (t, 0, 0) for t in sanitize.TOOLS
    ]
    monkeypatch.setenv("FAKE_SANITIZER_ERRORS", "3")
    assert sanitize.main(["--out", str(out), "--tools", "memcheck", *runner]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_gpu_memory_cycles_main(carried, build) -> None:
    cycles = importlib.import_module("gpu_memory_cycles")
    out = carried / "out"
    rc = cycles.main(["--out", str(out), "--cycles", "100", "--runner", str(build / "cuda_triton_runner")])
    result = json.loads((out / "gpu_memory_cycles.json").read_text())
    assert rc == 0, result
    (r,) = result["results"]
    assert r["program"] == "tiny" and r["device_growth_bytes"] == 0 and len(r["samples"]) == 11


def test_gpu_graph_bench_main(carried, build) -> None:
    bench = importlib.import_module("gpu_graph_bench")
    out = carried / "out"
    rc = bench.main(["--out", str(out), "--num-executions", "5", "--warmup", "1",
                     "--runner", str(build / "cuda_triton_runner")])  # fmt: skip
    result = json.loads((out / "gpu_graph_bench.json").read_text())
    assert rc == 0, (out / "gpu_graph_bench.md").read_text()
    (r,) = result["results"]
    assert set(r["modes"]) == {"direct", "graph_update"}  # host-planned: no separate staging mode
    graph = r["modes"]["graph_update"]
    assert (
        graph["graphs"] == graph["delegates"] == 1 and graph["vs_direct"]["equal"]
    )  # the model is one delegate
    assert r["modes"]["direct"]["graphs"] == 0 and "host_us_median" in graph
    assert (out / r["etdump"]).exists()


def test_gpu_faults_checks_the_cubins_of_the_gpus_arch(carried, build) -> None:
    """A corrupted cubin of another arch than the GPU's is never loaded: counted apart, not as unrefused."""
    faults = importlib.import_module("gpu_faults")
    gpu_validate = importlib.import_module("gpu_validate")
    programs = faults.programs_from_manifest(
        gpu_validate.EXPORTS, json.loads(gpu_validate.MANIFEST.read_text()), None
    )
    runner = build / "cuda_triton_runner"
    same = faults.run_corruptions(runner, programs, 15, workers=2, device_arch=80)
    other = faults.run_corruptions(runner, programs, 15, workers=2, device_arch=90)
    assert same["cubin_corruptions"] == 3 and same["other_arch_cubin_corruptions"] == 0 and same["ok"]
    assert other["cubin_corruptions"] == 0 and other["other_arch_cubin_corruptions"] == 3


def test_bench_models_report_merges_runs(tmp_path, monkeypatch) -> None:
    """`bench_models.py report` over several runs (one per device carry): their rows in order, each with its run's
    date and its ETDump's path, a later row of a program replacing an earlier one; runs of different GPUs are
    refused."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    bench_models = importlib.import_module("bench_models")
    paths = []
    for i, gpu in enumerate(("H100", "H100", "H200")):
        run = tmp_path / f"run{i}"
        run.mkdir()
        row = {"name": f"m{i}", "etdump": f"m{i}.etdp", "ok": True}
        (run / "bench_models.json").write_text(json.dumps({"date": f"d{i}", "gpu": gpu, "rows": [row]}))
        paths.append(str(run / "bench_models.json"))
    merged = bench_models.merge_runs(paths[:2])
    assert [r["name"] for r in merged["rows"]] == ["m0", "m1"] and merged["date"] == "d0, d1"
    assert (
        merged["rows"][1]["etdump"] == str(tmp_path / "run1" / "m1.etdp")
        and merged["rows"][1]["run_date"] == "d1"
    )
    with pytest.raises(SystemExit, match="different GPUs"):
        bench_models.merge_runs(paths)
    again = tmp_path / "run3"  # a later run of program m0 replaces the earlier row
    again.mkdir()
    row = {"name": "m0", "etdump": "m0.etdp", "ok": False}
    (again / "bench_models.json").write_text(json.dumps({"date": "d3", "gpu": "H100", "rows": [row]}))
    merged = bench_models.merge_runs([*paths[:2], str(again / "bench_models.json")])
    assert [(r["name"], r["run_date"]) for r in merged["rows"]] == [("m1", "d1"), ("m0", "d3")]
    assert merged["date"] == "d1, d3"


def test_bench_models_io_modes_and_variants(monkeypatch) -> None:
    """Programs keep their I/O in device memory by default (``--device-io``); ``--variant NAME:--io=MODE ...``
    is the same program with another I/O mode (its I/O flags replaced, its other flags kept); other variants add
    their flags to the base's; an unknown mode is refused."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    bench_models = importlib.import_module("bench_models")
    variants = [bench_models.parse_variant("host:--io=host --no-fuse-prologues"),
                bench_models.parse_variant("copy:--io=boundary"),
                bench_models.parse_variant("pdl:--programmatic-launch")]  # fmt: skip
    rows = {e[0]: e[3] for e in bench_models.entries(["demo"], ["fp16"], [1], "device", variants)}
    assert rows["demo_fp16_b1"][-1] == "--device-io"
    assert not any(f.startswith(("--device", "--io")) for f in rows["demo_fp16_b1_host"])
    assert rows["demo_fp16_b1_host"][-1] == "--no-fuse-prologues"
    assert (
        rows["demo_fp16_b1_copy"][-1] == "--device-memory" and "--device-io" not in rows["demo_fp16_b1_copy"]
    )
    assert rows["demo_fp16_b1_pdl"] == (*rows["demo_fp16_b1"], "--programmatic-launch")
    boundary = {e[0]: e[3] for e in bench_models.entries(["demo"], ["fp16"], [1], "boundary")}
    assert boundary["demo_fp16_b1"][-1] == "--device-memory"
    with pytest.raises(argparse.ArgumentTypeError, match="I/O modes"):
        bench_models.parse_variant("x:--io=pinned")
    row = {"model": "tv:convnext_tiny", "dtype": "float16", "batch": 32}
    labels = [bench_models.model_label({**row, "name": n}) for n in ("tv_convnext_tiny_fp16_b32", "tv_convnext_tiny_fp16_b32_fold")]  # fmt: skip
    assert labels == ["tv:convnext_tiny", "tv:convnext_tiny (fold)"]


def carry_in(tmp_path, monkeypatch):
    """scripts/gpu_validate.py with its carry folders under ``tmp_path``: (module, carry, exports)."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    gv = importlib.import_module("gpu_validate")
    carry = tmp_path / ".carry" / "gpu_validate"
    exports = carry / "exports"
    exports.mkdir(parents=True)
    for name, value in (
        ("ROOT", tmp_path),
        ("CARRY", carry),
        ("EXPORTS", exports),
        ("MANIFEST", carry / "manifest.json"),
    ):
        monkeypatch.setattr(gv, name, value)
    return gv, carry, exports


def test_split_carry_round_trip(tmp_path, monkeypatch) -> None:
    """A carry above one device call's limit is cut into the main folder plus sibling folders, each within the
    limit; joining them back gives the original bytes, a second join is a no-op, and a missing sibling folder is
    a clear error naming it. A carry within the limit is not split."""
    gv, carry, exports = carry_in(tmp_path, monkeypatch)
    rng = np.random.default_rng(0)
    files = {"big.pte": rng.bytes(2500), "small.pte": rng.bytes(700), "x.io.json": b"{}"}
    for name, data in files.items():
        (exports / name).write_bytes(data)
    gv.MANIFEST.write_text(json.dumps({"entries": []}))
    limit = 1200
    parts = gv.split_carry(limit)
    assert len(parts) >= 2 and [p.name for p in parts][:2] == ["gpu_validate_part1", "gpu_validate_part2"]
    for folder in (carry, *parts):
        assert gv._dir_bytes(folder) <= limit
    assert (exports / "big.pte").stat().st_size < len(files["big.pte"])
    gv.join_carry()
    for name, data in files.items():
        assert (exports / name).read_bytes() == data
    gv.join_carry()  # already whole
    gv.split_carry(limit)
    import shutil

    shutil.rmtree(tmp_path / ".carry" / "gpu_validate_part2")
    with pytest.raises(SystemExit, match="gpu_validate_part2"):
        gv.join_carry()
    assert gv.split_carry(10**6) == [] and not list((tmp_path / ".carry").glob("gpu_validate_part*"))


def test_dedupe_carry_round_trip(tmp_path, monkeypatch) -> None:
    """Buffers a later program shares with an earlier one are carried once: cut out of the later file, put back
    by `join_carry` (also through a split), byte for byte; small buffers stay; a second join is a no-op; a rebuilt
    file that differs from the export is a clear error."""
    gv, carry, exports = carry_in(tmp_path, monkeypatch)
    rng = np.random.default_rng(1)
    weight, cubin, small = rng.bytes(9000), rng.bytes(5000), rng.bytes(100)
    buffers = {
        "a_b1.pte": [weight, cubin, small],
        "a_b32.pte": [cubin, weight, small],
        "a_b32_copy.pte": [weight, rng.bytes(6000)],
    }
    files = {}
    for name, parts in buffers.items():
        files[name] = b"".join(rng.bytes(300) + p for p in parts) + rng.bytes(50)
        (exports / name).write_bytes(files[name])
    gv.MANIFEST.write_text(json.dumps({"entries": []}))
    saved = gv.dedupe_carry(lambda path: buffers[path.name])
    assert saved == 2 * len(weight) + len(cubin)
    assert (exports / "a_b1.pte").read_bytes() == files["a_b1.pte"]  # the first holder keeps its copies
    assert (
        small in (exports / "a_b32.pte").read_bytes() and weight not in (exports / "a_b32.pte").read_bytes()
    )
    gv.split_carry(8000)
    gv.join_carry()
    for name, data in files.items():
        assert (exports / name).read_bytes() == data
    gv.join_carry()  # already whole
    gv.dedupe_carry(lambda path: buffers[path.name])
    kept = bytearray((exports / "a_b32.pte").read_bytes())  # not split: only its shared buffers are restored
    kept[10] ^= 1
    (exports / "a_b32.pte").write_bytes(bytes(kept))
    with pytest.raises(SystemExit, match="a_b32.pte: rebuilt from the shared named data"):
        gv.join_carry()


def test_dedupe_carry_finds_the_named_data_of_real_programs(tmp_path) -> None:
    """ExecuTorch's reader lists a .pte's named data: a host-planned and a device-planned export of one model hold
    the same weights and cubins, so the second keeps almost nothing of them."""
    sys.path.insert(0, str(ROOT / "scripts"))
    gv = importlib.import_module("gpu_validate")
    from runtime_helpers import export_tiny

    (tmp_path / "h").mkdir()
    (tmp_path / "d").mkdir()
    host, _, named = export_tiny(tmp_path / "h")
    device, _, _ = export_tiny(tmp_path / "d", device_memory=True)
    host_buffers, device_buffers = gv.named_data_buffers(host), gv.named_data_buffers(device)
    assert sorted(host_buffers) == sorted(device_buffers) == sorted(named.values())


def test_tune_gemm_lists_a_models_linear_layers(tmp_path) -> None:
    """`tune_gemm.py --dry-run`: convnext_tiny's linear layers at batch 2, each with the activation after it, and
    a schedule space for each (no GPU)."""
    from torchvision_support import torchvision_or_skip

    torchvision_or_skip()
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(ROOT / "backends")}
    cmd = [sys.executable, str(ROOT / "scripts" / "tune_gemm.py"), "--out", str(tmp_path), "--dry-run"]
    cmd += ["--models", "convnext_tiny", "--batches", "2"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, check=True).stdout
    lines = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    # 4 stages x (expand + GELU, project) + the classifier
    assert len(lines) == 9 and "convnext_tiny.b2.m6272k96n384+gelu" in lines
    assert "convnext_tiny.b2.m6272k384n96" in lines and "convnext_tiny.b2.m2k768n1000" in lines


def test_device_triton_cut_and_join(tmp_path, monkeypatch) -> None:
    """`device_triton.py`: a wheel cut into carried pieces is joined back byte for byte; a missing piece or a
    corrupted one is a clear error, never an install of wrong bytes."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    dt = importlib.import_module("device_triton")
    monkeypatch.setattr(dt, "ROOT", tmp_path)
    monkeypatch.setattr(dt, "CARRY", tmp_path / ".carry" / "device_triton")
    wheel = tmp_path / "triton-9.9.9-cp312-cp312-any.whl"
    wheel.write_bytes(np.random.default_rng(3).integers(0, 256, 2500, dtype=np.uint8).tobytes())
    pieces = dt.cut(wheel, limit=1000)
    assert [p.name for p in pieces] == ["device_triton_part1", "device_triton_part2", "device_triton_part3"]
    assert all((p / "piece").stat().st_size <= 1000 for p in pieces)
    joined = dt.join(tmp_path / "out")
    assert joined.read_bytes() == wheel.read_bytes()
    damaged = bytearray((pieces[1] / "piece").read_bytes())
    damaged[10] ^= 0xFF
    (pieces[1] / "piece").write_bytes(bytes(damaged))
    with pytest.raises(SystemExit, match="SHA-256"):
        dt.join(tmp_path / "out2")
    assert not (tmp_path / "out2" / wheel.name).exists()
    (pieces[2] / "piece").unlink()
    with pytest.raises(SystemExit, match="device_triton_part3"):
        dt.join(tmp_path / "out3")
