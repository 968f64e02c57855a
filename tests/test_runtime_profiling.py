"""Per-op GPU times in the runner's ETDump, read back with ExecuTorch's Inspector (scripts/etdump_ops.py).

On the fake driver every kernel takes FAKE_CUDA_KERNEL_NS on a fake GPU clock that its timing events read, so each
op's recorded time is known exactly: its number of launches times that. The delegate's own event spans its ops.
"""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest
from cuda_triton.serialization.blob import deserialize
from runtime_helpers import ROOT, ensure_built, export_tiny
from test_runtime_fake_driver import INPUT_SHAPE, _expected, _run

pytestmark = pytest.mark.timeout(900)
KERNEL_NS = 2500


@pytest.fixture(scope="module")
def build():
    return ensure_built()


@pytest.fixture(scope="module")
def host_planned(tmp_path_factory):
    return export_tiny(tmp_path_factory.mktemp("pte"))


def _etdump_ops():
    sys.path.insert(0, str(ROOT / "scripts"))
    return importlib.import_module("etdump_ops")


def _profiled_run(build, tmp_path, program, *flags):
    pte, blobs, _ = program
    x = np.random.default_rng(5).standard_normal(INPUT_SHAPE).astype(np.float32)
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    etdump = tmp_path / "run.etdp"
    r, log = _run(build, tmp_path, pte, _expected(blobs, 80)[1], cc="8.0",
                  extra_env={"FAKE_CUDA_KERNEL_NS": str(KERNEL_NS)},
                  args=("--inputs", str(tmp_path / "in.bin"), "--num_executions", "3", "--warmup", "1",
                        "--etdump_path", str(etdump), *flags))  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert etdump.exists()
    return etdump, log


def test_every_op_gpu_time_is_in_the_etdump(build, tmp_path, host_planned, capsys) -> None:
    etdump, log = _profiled_run(build, tmp_path, host_planned)
    script = _etdump_ops()
    delegates, host = script.breakdown(str(etdump))
    _, blobs, _ = host_planned
    assert len(delegates) == len(blobs)
    for profile, blob_bytes in zip(delegates, blobs, strict=True):
        blob = deserialize(blob_bytes)
        assert [op.name for op in profile.ops] == [f"op{i} {op.name}" for i, op in enumerate(blob.ops)]
        for timed, op in zip(profile.ops, blob.ops, strict=True):
            assert timed.runs == 4  # the warmup and the 3 timed executions
            assert timed.median_us == pytest.approx(len(op.launches) * KERNEL_NS / 1e3, abs=0.01)
            assert timed.metadata == f"{op.KIND_NAME} {op.template} {op.schedule}"
        assert profile.delegate.median_us >= sum(t.median_us for t in profile.ops) - 0.01
    assert any(h.name == "Method::execute" for h in host) and any(h.name == "DELEGATE_CALL" for h in host)
    # Timed launches go one by one (events between the ops), not through the graph.
    assert all(
        not line.endswith("via=graph") for line in log.read_text().splitlines() if line.startswith("LAUNCH")
    )
    kinds = script.by_kind(delegates)
    assert sum(n for _, n, _ in kinds) == sum(len(p.ops) for p in delegates)
    assert sum(us for _, _, us in kinds) == pytest.approx(sum(t.median_us for p in delegates for t in p.ops))
    assert [us for _, _, us in kinds] == sorted((us for _, _, us in kinds), reverse=True)
    assert script.main([str(etdump)]) == 0
    out = capsys.readouterr().out
    assert "CudaTritonBackend#" in out and f"{KERNEL_NS / 1e3:.1f} us" in out and "By op kind" in out


def test_no_op_profile_keeps_the_graph_and_etdumps_the_host_events(build, tmp_path, host_planned) -> None:
    etdump, log = _profiled_run(build, tmp_path, host_planned, "--no_op_profile")
    delegates, host = _etdump_ops().breakdown(str(etdump))
    assert delegates == [] and any(h.name == "DELEGATE_CALL" for h in host)
    launches = [line for line in log.read_text().splitlines() if line.startswith("LAUNCH")]
    assert launches and all(line.endswith("via=graph") for line in launches)


def test_convolutions_against_cudnn(build, tmp_path, host_planned, capsys) -> None:
    """`--pte` names each convolution op's problem; `--cudnn` sets a bench run's cuDNN time for it beside the op's
    time in the run."""
    import json

    from cuda_triton.serialization.blob import ConvRecord
    from cuda_triton.tools.emulate_blob import derive_launches

    etdump, _ = _profiled_run(build, tmp_path, host_planned)
    pte, blobs, _ = host_planned
    script = _etdump_ops()
    signatures = script.conv_signatures(str(pte))
    expected = {}
    for n, blob_bytes in enumerate(blobs):
        blob = deserialize(blob_bytes)
        for i, op in enumerate(blob.ops):
            if isinstance(op, ConvRecord):
                problem, _ = derive_launches(blob, op, allow_tf32=True)
                expected[(f"CudaTritonBackend#{n}", f"op{i}")] = f"{problem.signature()}:{problem.dtype}"
    assert signatures == expected and expected
    cudnn_us = 4 * KERNEL_NS / 1e3  # four times each op's one launch: every speed-up is 4x
    cases = [
        {"case": {"name": sig.rsplit(":", 1)[0], "dtype": sig.rsplit(":", 1)[1]}, "cudnn_us": cudnn_us,
         "ours_us": 1.0}
        for sig in set(expected.values())
    ]  # fmt: skip
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"cases": cases}))
    delegates, _ = script.breakdown(str(etdump))
    rows = script.against_cudnn(delegates, signatures, [str(bench)])
    assert len(rows) == len(expected) and all(r["speedup"] == pytest.approx(4.0, rel=1e-3) for r in rows)
    assert script.main([str(etdump), "--pte", str(pte), "--cudnn", str(bench)]) == 0
    out = capsys.readouterr().out
    assert "Convolutions against cuDNN" in out and f"geomean 4.00x over {len(rows)} convolutions" in out
