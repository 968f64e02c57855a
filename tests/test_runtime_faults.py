"""CUDA failures at execute, on the fake driver: reported once, then every later execute fails cleanly.

A kernel fault (illegal address, ...) poisons the CUDA context for the whole process: the fake driver's
FAKE_CUDA_FAULT_AT_LAUNCH makes one kernel fault, after which every call on the context returns
CUDA_ERROR_ILLEGAL_ADDRESS as the real driver does. The delegate that saw it reports the error; every later
execute of any delegate on the device fails at once with a message that says the context is unusable. An error
that leaves the context usable (FAKE_CUDA_FAIL_LAUNCH) stops that delegate only.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest
from runtime_helpers import ROOT, ensure_built, export_tiny
from test_runtime_fake_driver import INPUT_SHAPE, _expected, _run

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def build():
    return ensure_built()


@pytest.fixture(scope="module")
def host_planned(tmp_path_factory):
    return export_tiny(tmp_path_factory.mktemp("pte"), families=("conv",))


def _execute_three_times(build, pte, counts: dict[str, int], **fake_env: str) -> list[str]:
    """Runs the program's method three times in one process (executorch.runtime); one line per execute:
    ``ok`` or ``failed | <the backend's last error>``."""
    code = textwrap.dedent(
        f"""
        import torch
        from cuda_triton.runtime import last_error, load_backend
        load_backend()
        from executorch.runtime import Runtime
        method = Runtime.get().load_program({str(pte)!r}).load_method("forward")
        for i in range(3):
            try:
                method.execute([torch.randn{INPUT_SHAPE}])
                print("RUN ok")
            except Exception:
                print("RUN failed |", last_error())
        """
    )
    env = dict(os.environ, LD_LIBRARY_PATH=str(build / "fake_cuda"), FAKE_CUDA_CC="8.0",
               FAKE_CUDA_PARAMS=",".join(f"{k}:{n}" for k, n in counts.items()), **fake_env)  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return [line[4:] for line in r.stdout.splitlines() if line.startswith("RUN ")]


def test_a_kernel_fault_makes_every_later_execute_fail_cleanly(build, host_planned) -> None:
    pte, blobs, _ = host_planned
    assert len(blobs) == 2  # conv | relu on the CPU | conv
    _, counts = _expected(blobs, 80)
    runs = _execute_three_times(build, pte, counts, FAKE_CUDA_FAULT_AT_LAUNCH="0")
    assert runs[0].startswith("failed") and "CUDA_ERROR_ILLEGAL_ADDRESS" in runs[0], runs
    for later in runs[1:]:
        assert (
            "the CUDA context of device 0 is unusable" in later and "CUDA_ERROR_ILLEGAL_ADDRESS" in later
        ), runs


def test_a_fault_in_one_delegate_stops_the_others(build, host_planned) -> None:
    """The second delegate faults; the next execute fails in the first one, which did nothing wrong."""
    pte, blobs, _ = host_planned
    expected, counts = _expected(blobs, 80)
    first_delegate_launches = sum(1 for row in expected if row[7] is expected[0][7])
    runs = _execute_three_times(build, pte, counts, FAKE_CUDA_FAULT_AT_LAUNCH=str(first_delegate_launches))
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in runs[0] and "unusable" not in runs[0], runs
    assert all("the CUDA context of device 0 is unusable" in later for later in runs[1:]), runs


def test_a_failed_launch_stops_its_delegate(build, host_planned) -> None:
    pte, blobs, _ = host_planned
    _, counts = _expected(blobs, 80)
    runs = _execute_three_times(build, pte, counts, FAKE_CUDA_FAIL_LAUNCH="0", CUDA_TRITON_CUDA_GRAPH="0")
    assert "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" in runs[0], runs
    for later in runs[1:]:
        assert "the CUDA context is unusable for this delegate" in later, runs
        assert "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" in later, runs


def test_a_program_larger_than_free_device_memory_fails_init_with_the_sizes(
    build, tmp_path, host_planned
) -> None:
    pte, blobs, _ = host_planned
    r, log = _run(build, tmp_path, pte, _expected(blobs, 80)[1], cc="8.0",
                  extra_env={"FAKE_CUDA_MEMORY_BYTES": "4096"}, args=("--num_executions", "1"))  # fmt: skip
    assert r.returncode == 1, r.stdout
    assert "out of device memory: this delegate needs" in r.stderr, r.stderr[-2000:]
    assert "weights" in r.stderr and "intermediates" in r.stderr and "free of 4.0 KiB" in r.stderr
    failed = (
        [line for line in log.read_text().splitlines() if line.startswith("FAIL")] if log.exists() else []
    )
    assert not failed, failed  # refused before any allocation was attempted


def test_load_destroy_cycles_leave_memory_flat(build, tmp_path, host_planned) -> None:
    """The runner's --load_cycles through scripts/gpu_memory_cycles.py's parser and verdict: on the fake driver
    (whose free memory is its size minus what is allocated) device memory returns to exactly where it was."""
    spec = importlib.util.spec_from_file_location(
        "gpu_memory_cycles", ROOT / "scripts" / "gpu_memory_cycles.py"
    )
    assert spec is not None and spec.loader is not None
    cycles_script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cycles_script)
    pte, blobs, _ = host_planned
    r, _ = _run(build, tmp_path, pte, _expected(blobs, 80)[1], cc="8.0",
                args=("--num_executions", "1", "--warmup", "0", "--load_cycles", "200"))  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    samples = cycles_script.parse_samples(r.stdout)
    assert [s[0] for s in samples] == [1, *range(20, 201, 20)]
    verdict = cycles_script.judge(samples, 200, device_slack=0, host_slack=1 << 20)
    assert verdict["ok"], verdict
    assert all(
        s[1] == 0 for s in samples
    )  # nothing of the program is left on the device after it is destroyed
