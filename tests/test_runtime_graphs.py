"""CUDA graph execution of the delegates, on the fake driver: capture once, replay per execute, fall back cleanly.

The fake driver captures kernels and asynchronous copies into graphs (parameter values copied at capture, as the
real driver does), replays them, and rewrites kernel nodes; its log marks replayed launches ``via=graph``. Every
mode must launch exactly what direct launches do (kernel, grid, block, shared memory, cluster, every argument,
the bytes the arguments point at): host-planned programs, device-planned ones in both graph I/O modes (kernel
arguments rewritten in place, or fixed staging buffers), after a failed capture and after a failed update (both
fall back to direct launches with a log line), and with graphs turned off by the runtime option, the environment
or the compile spec. The GPU validation compares replays with direct launches numerically.
"""

from __future__ import annotations

import numpy as np
import pytest
from runtime_helpers import ensure_built, export_tiny
from test_runtime_fake_driver import INPUT_SHAPE, _check_launches, _expected, _parse_log, _run

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def build():
    return ensure_built()


@pytest.fixture(scope="module")
def host_planned(tmp_path_factory):
    return export_tiny(tmp_path_factory.mktemp("pte"), families=("conv",))  # two delegates


@pytest.fixture(scope="module")
def device_planned(tmp_path_factory):
    return export_tiny(tmp_path_factory.mktemp("pte_dev"), device_memory=True, families=("conv",))


@pytest.fixture()
def input_file(tmp_path):
    x = np.random.default_rng(3).standard_normal(INPUT_SHAPE).astype(np.float32)
    path = tmp_path / "in.bin"
    path.write_bytes(x.tobytes())
    return path, x.tobytes()


def _launch_rows(build, tmp_path, program, input_path, *args, extra_env=None):
    pte, blobs, _ = program
    r, log = _run(build, tmp_path, pte, _expected(blobs, 80)[1], cc="8.0", extra_env=extra_env,
                  args=("--inputs", str(input_path), "--num_executions", "3", "--warmup", "0",
                        "--output_file", str(tmp_path / "out.bin"), *args))  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    return r, log, _parse_log(log), (tmp_path / "out.bin").read_bytes()


def _masked(rows):
    return [(*row[:5], ["D" if p.startswith("D") else p for p in row[5]]) for row in rows]


@pytest.mark.parametrize("planned", ["host", "device"])
def test_graph_replays_launch_what_direct_launches_do(build, tmp_path, host_planned, device_planned, input_file,
                                                      planned) -> None:  # fmt: skip
    program = host_planned if planned == "host" else device_planned
    path, data = input_file
    _, blobs, _ = program
    r, log, direct, direct_out = _launch_rows(build, tmp_path, program, path, "--no_cuda_graph")
    assert "0 replay a CUDA graph, 2 launch directly" in r.stdout
    _check_launches(r, log, blobs, 80, 3, data, graph=False, device_planned=planned == "device")
    modes = ["update", "staging"] if planned == "device" else ["update"]
    for mode in modes:
        r, log, replayed, out = _launch_rows(build, tmp_path, program, path, "--cuda_graph_io", mode)
        assert f"2 replay a CUDA graph ({mode}), 0 launch directly" in r.stdout, r.stdout
        _check_launches(r, log, blobs, 80, 3, data, graph=True, device_planned=planned == "device")
        # Same kernels, configurations and arguments (device addresses compared as such: outputs are fixed staging
        # buffers in one mode, ExecuTorch's arena in the other; _check_launches checks the input's bytes).
        assert _masked(replayed) == _masked(direct), mode
        if planned == "host":  # the same staging buffer comes back (the fake kernels compute nothing)
            assert out == direct_out
        lines = log.read_text().splitlines()
        assert (
            lines.count("CAPTURE ok 3" if planned == "host" else "CAPTURE ok 1") == 2
        )  # captured once, at init
        assert lines.count("GRAPH_LAUNCH") == 3 * 2  # one replay per delegate call
        updates = [line for line in lines if line.startswith("GRAPH_UPDATE")]
        # In place, the device-planned arena's addresses are set into the kernel nodes once (they do not move).
        assert len(updates) == (2 if (planned, mode) == ("device", "update") else 0), updates


def test_a_failed_capture_falls_back_to_direct_launches(build, tmp_path, host_planned, input_file) -> None:
    path, data = input_file
    _, blobs, _ = host_planned
    r, log, rows, _ = _launch_rows(
        build, tmp_path, host_planned, path, extra_env={"FAKE_CUDA_CAPTURE_FAIL": "1"}
    )
    assert r.stderr.count("could not be captured as a CUDA graph") == 2, r.stderr[-2000:]
    assert "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED" in r.stderr
    assert "0 replay a CUDA graph, 2 launch directly" in r.stdout
    # The failed capture is the only failing call (the log's FAIL lines): strip it, then check the launches.
    log.write_text(
        "\n".join(line for line in log.read_text().splitlines() if not line.startswith("FAIL cuStreamEnd"))
    )
    _check_launches(r, log, blobs, 80, 3, data, graph=False)


def test_a_failed_update_falls_back_to_direct_launches(build, tmp_path, device_planned, input_file) -> None:
    path, data = input_file
    _, blobs, _ = device_planned
    r, log, rows, _ = _launch_rows(build, tmp_path, device_planned, path, "--cuda_graph_io", "update",
                                   extra_env={"FAKE_CUDA_GRAPH_UPDATE_FAIL": "1"})  # fmt: skip
    assert r.stderr.count("cannot take new tensor addresses") == 2, r.stderr[-2000:]
    assert "0 replay a CUDA graph, 2 launch directly" in r.stdout or "launch directly" in r.stdout
    log.write_text(
        "\n".join(line for line in log.read_text().splitlines() if not line.startswith("FAIL cuGraphExec"))
    )
    _check_launches(r, log, blobs, 80, 3, data, graph=False, device_planned=True)


def test_graphs_turned_off_by_the_environment(build, tmp_path, host_planned, input_file) -> None:
    path, data = input_file
    _, blobs, _ = host_planned
    r, log, _, _ = _launch_rows(
        build, tmp_path, host_planned, path, extra_env={"CUDA_TRITON_CUDA_GRAPH": "0"}
    )
    assert "0 replay a CUDA graph, 2 launch directly" in r.stdout
    _check_launches(r, log, blobs, 80, 3, data, graph=False)
    assert "CAPTURE" not in log.read_text()


def test_graphs_turned_off_by_the_compile_spec(build, tmp_path_factory, tmp_path, input_file) -> None:
    program = export_tiny(
        tmp_path_factory.mktemp("pte_nograph"), extra_specs=(("cuda_graph", b"0"),), families=("conv",)
    )
    path, data = input_file
    r, log, _, _ = _launch_rows(build, tmp_path, program, path)
    assert "0 replay a CUDA graph, 2 launch directly" in r.stdout
    _check_launches(r, log, program[1], 80, 3, data, graph=False)


def test_a_bad_graph_io_option_is_a_clean_error(build, tmp_path, host_planned) -> None:
    pte, blobs, _ = host_planned
    r, _ = _run(build, tmp_path, pte, _expected(blobs, 80)[1], cc="8.0", args=("--cuda_graph_io", "sideways"))
    assert r.returncode == 1 and "--cuda_graph_io must be update or staging" in r.stderr
