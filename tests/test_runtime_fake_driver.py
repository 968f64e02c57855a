"""init()/execute() of the C++ runtime on a CPU, against a fake libcuda.so.1 (runtime/tests/fake_libcuda.cpp).

The fake driver backs "device" memory with host memory and logs every launch instead of running it. That
checks, without a GPU, everything the runtime does around the kernels: arch selection, module loading, weight
upload, staging copies, the launch configuration (grid x num_ctas, block = 32 x num_warps, shared memory,
clusters) and every kernel argument against the blob, the trailing scratch pointers, the device-planned path
(ExecuTorch's CUDA arena through our DeviceAllocator), and the errors (wrong arch, out of memory, no device).
What it cannot check is the kernels' numerics: scripts/gpu_validate.py does that on a GPU.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from cuda_triton.serialization.blob import ConstantRef, NullPtr, Scalar, ValueRef, deserialize
from runtime_helpers import ensure_built, export_tiny, reseal_blobs

# The first runtime test builds the C++ runtime from a clean tree: 7+ minutes on a loaded 2-core machine.
pytestmark = pytest.mark.timeout(1200)

INPUT_SHAPE = (1, 3, 16, 16)
OUTPUT_SHAPE = (1, 4, 16, 16)


def _fnv16(data: bytes) -> str:
    h = 1469598103934665603
    for b in data[:16]:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"D{h:016x}"


def _slot(a) -> str:
    if isinstance(a, (ValueRef, ConstantRef)):
        return "D"
    if isinstance(a, NullPtr):
        return "N"
    assert isinstance(a, Scalar)
    if a.type == "i32":
        v = a.value & 0xFFFFFFFF
    elif a.type == "i64":
        v = a.value & 0xFFFFFFFFFFFFFFFF
    else:
        v = struct.unpack("<I", struct.pack("<f", a.value))[0]
    return "N" if v == 0 else f"X{v:016x}"


def _expected(blobs: list[bytes], arch: int) -> tuple[list[tuple], dict[str, int]]:
    """Per launch: (name, grid, block, shared, cluster, params) as the fake driver logs them."""
    out = []
    counts: dict[str, int] = {}
    for data in blobs:
        blob = deserialize(data)
        for op in blob.ops:
            for lr in op.launches:
                k = blob.kernels[lr.kernels[arch]]
                params = [_slot(a) for a in lr.args]
                params += ["D" if k.global_scratch_size else "N", "D" if k.profile_scratch_size else "N"]
                assert counts.setdefault(k.name, len(params)) == len(params)
                grid = f"{lr.grid[0] * k.num_ctas},{lr.grid[1]},{lr.grid[2]}"
                out.append((k.name, grid, f"{32 * k.num_warps},1,1", str(k.shared), str(k.num_ctas), params,
                            [a for a in lr.args], blob))  # fmt: skip
    return out, counts


def _parse_log(path) -> list[tuple]:
    rows = []
    for line in path.read_text().splitlines():
        if not line.startswith("LAUNCH "):  # fences, copies, synchronizations (see _check_launches)
            continue
        parts = dict(p.split("=", 1) for p in line.split()[2:])
        rows.append((line.split()[1], parts["grid"], parts["block"], parts["shared"], parts["cluster"],
                     parts["params"].split(",") if parts["params"] else []))  # fmt: skip
    return rows


def _run(build, tmp_path, pte, counts, cc="8.6", extra_env=None, args=()):
    log = tmp_path / "launches.log"
    if log.exists():
        log.unlink()
    env = dict(os.environ, LD_LIBRARY_PATH=str(build / "fake_cuda"), FAKE_CUDA_CC=cc, FAKE_CUDA_LOG=str(log),
               FAKE_CUDA_PARAMS=",".join(f"{k}:{n}" for k, n in counts.items()), **(extra_env or {}))  # fmt: skip
    r = subprocess.run([str(build / "cuda_triton_runner"), "--model_path", str(pte), *args], env=env,
                       capture_output=True, text=True, errors="replace", timeout=300)  # fmt: skip
    return r, log


@pytest.fixture(scope="module")
def build():
    return ensure_built()


@pytest.fixture(scope="module")
def host_planned(tmp_path_factory):
    return export_tiny(tmp_path_factory.mktemp("pte"))


@pytest.fixture(scope="module")
def device_planned(tmp_path_factory):
    return export_tiny(tmp_path_factory.mktemp("pte_dev"), device_memory=True)


def _after_pinned_h2d(lines: list[str], i: int) -> bool:
    return i > 0 and lines[i - 1].startswith("COPY HtoD") and lines[i - 1].endswith(" pinned")


def _check_launches(r, log, blobs, arch, executions, input_bytes, waits=0, graph=True, device_planned=False,
                    init_syncs=0):  # fmt: skip
    """The launches of ``executions`` runs, as the blobs record them, replayed from CUDA graphs (``graph``) or
    launched one by one; ``waits`` fences (cuStreamWaitEvent) open each delegate call (2, the legacy and per-thread
    default streams, when an input lives in device memory another stream wrote). One synchronization per delegate
    call: its own for a host-planned program; for a device-planned one none of its own, only the CUDA allocator's
    before each et_copy D2H (the delegates' work is ordered before it on the shared stream). ``init_syncs``: those
    of the delegates' init() (zeroing a state buffer)."""
    assert r.returncode == 0, r.stderr[-3000:]
    lines = log.read_text().splitlines()
    failed = [line for line in lines if line.startswith("FAIL")]
    assert not failed, f"driver calls failed (compute-sanitizer counts each as an error): {failed[:10]}"
    expected, _ = _expected(blobs, arch)
    rows = _parse_log(log)
    assert len(rows) == executions * len(expected)
    launches = [line for line in lines if line.startswith("LAUNCH ")]
    assert all(line.endswith(" via=graph") == graph for line in launches), launches[:4]
    delegates = len({id(row[7]) for row in expected})
    # The CUDA allocator waits for an H2D copy from page-locked memory (the runner pins device-planned I/O): those
    # waits are the copies', not the delegates'.
    syncs = [i for i, line in enumerate(lines) if line == "SYNC" and not _after_pinned_h2d(lines, i)]
    syncs = syncs[init_syncs : len(syncs) - delegates]  # the last ones: each delegate's destructor at exit
    assert len(syncs) == executions * delegates, lines
    if device_planned:  # every synchronization is the allocator's, right after its D2H copy
        assert all(lines[i - 1].startswith("COPY DtoH") and "via=graph" not in lines[i - 1] for i in syncs), (
            lines
        )
    kinds = [
        line.split()[0] for line in log.read_text().splitlines() if line.split()[0] in ("WAIT", "LAUNCH")
    ]
    per_run: list[str] = []
    for i, row in enumerate(expected):  # each delegate call fences once, before its first launch
        if i == 0 or row[7] is not expected[i - 1][7]:
            per_run += ["WAIT"] * waits
        per_run.append("LAUNCH")
    assert kinds == per_run * executions, " ".join(k[0] for k in kinds)
    for i, row in enumerate(rows):
        name, grid, block, shared, cluster, params, _, _ = expected[i % len(expected)]
        assert row[:5] == (name, grid, block, shared, cluster), (i, row, expected[i % len(expected)][:5])
        got = row[5]
        assert len(got) == len(params)
        for j, (g, want) in enumerate(zip(got, params, strict=True)):
            if want == "D":
                assert g.startswith("D"), (i, j, g)
            else:
                assert g == want, (i, j, g, want)
    # Arguments that reference the delegate input see its bytes in device memory (staged or planned).
    _assert_input_in_device_memory(rows, blobs, expected, input_bytes)


def _assert_input_in_device_memory(rows, blobs, expected, input_bytes: bytes) -> None:
    """The first launch's arguments that reference the delegate input point at its bytes in device memory."""
    first_blob = deserialize(blobs[0])
    refs = [j for j, a in enumerate(expected[0][6])
            if isinstance(a, ValueRef) and first_blob.values[a.value].kind == "input"]  # fmt: skip
    assert refs and all(rows[0][5][j] == _fnv16(input_bytes) for j in refs), (
        "the input did not reach the device"
    )


def _run_on_random_input(build, tmp_path, program, seed: int, cc: str, args=()):
    """The runner on ``program`` (a fixture's export) with a random input file; (result, log, input, blobs)."""
    pte, blobs, _ = program
    _, counts = _expected(blobs, 80)
    x = np.random.default_rng(seed).standard_normal(INPUT_SHAPE).astype(np.float32)
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    r, log = _run(build, tmp_path, pte, counts, cc=cc, args=("--inputs", str(tmp_path / "in.bin"), *args))
    return r, log, x, blobs


def test_host_planned_program_runs_on_fake_driver(build, tmp_path, host_planned) -> None:
    args = ("--num_executions", "3", "--warmup", "1", "--output_file", str(tmp_path / "out.bin"))
    r, log, x, blobs = _run_on_random_input(build, tmp_path, host_planned, 0, "8.6", args)
    _check_launches(r, log, blobs, 80, 4, x.tobytes())
    assert "latency over 3 executions" in r.stdout and "median" in r.stdout and "p90" in r.stdout
    assert (tmp_path / "out.bin").stat().st_size == int(np.prod(OUTPUT_SHAPE)) * 4


def test_device_planned_program_runs_on_fake_driver(build, tmp_path, device_planned) -> None:
    pte, blobs, _ = device_planned
    _, counts = _expected(blobs, 80)
    x = np.random.default_rng(1).standard_normal(INPUT_SHAPE).astype(np.float32)
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    r, log = _run(build, tmp_path, pte, counts, cc="8.0",
                  args=("--inputs", str(tmp_path / "in.bin"), "--num_executions", "2", "--warmup", "0"))  # fmt: skip
    _check_launches(r, log, blobs, 80, 2, x.tobytes(), device_planned=True)


@pytest.mark.parametrize("pin", [True, False])
def test_device_planned_io_is_page_locked(build, tmp_path, device_planned, pin: bool) -> None:
    """The runner page-locks the host tensors ExecuTorch's host<->device copies use (every copy then comes from
    pinned memory) and unpins them before the program's memory is freed; --no_pin_io leaves them pageable."""
    pte, blobs, _ = device_planned
    _, counts = _expected(blobs, 80)
    x = np.random.default_rng(2).standard_normal(INPUT_SHAPE).astype(np.float32)
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    args = ["--inputs", str(tmp_path / "in.bin"), "--num_executions", "2", "--warmup", "0"]
    r, log = _run(build, tmp_path, pte, counts, cc="8.0", args=(*args, *(() if pin else ("--no_pin_io",))))
    _check_launches(r, log, blobs, 80, 2, x.tobytes(), device_planned=True)
    lines = log.read_text().splitlines()
    pins = [int(line.split()[1]) for line in lines if line.startswith("PIN ")]
    unpins = [int(line.split()[1]) for line in lines if line.startswith("UNPIN ")]
    copies = [
        line for line in lines if line.startswith("COPY ") and "via=graph" not in line and "DtoD" not in line
    ]
    assert copies, lines
    if pin:
        # The memory plan may place the output over the input's dead bytes: the pins cover at least the larger.
        io_bytes = 4 * max(int(np.prod(INPUT_SHAPE)), int(np.prod(OUTPUT_SHAPE)))
        assert sum(pins) >= io_bytes and sorted(unpins) == sorted(pins), (pins, unpins)
        assert f"page-locked {sum(pins)} bytes of program I/O" in r.stdout
        assert all(line.endswith(" pinned") for line in copies), copies
        # Each H2D from pinned memory is waited for before the call returns (ExecuTorch may reuse its bytes).
        h2d = [i for i, line in enumerate(lines) if line.startswith("COPY HtoD") and "via=graph" not in line]
        assert h2d and all(lines[i + 1] == "SYNC" for i in h2d), lines
        assert lines.index(f"UNPIN {unpins[-1]}") > max(
            i for i, ln in enumerate(lines) if ln.startswith("COPY ")
        )
    else:
        assert not pins and not unpins and not any(line.endswith(" pinned") for line in copies)
        assert not any(_after_pinned_h2d(lines, i) for i in range(len(lines)))


@pytest.fixture(scope="module")
def device_io(tmp_path_factory):
    return export_tiny(tmp_path_factory.mktemp("pte_dev_io"), device_io=True)


def test_device_resident_io_copies_nothing_per_execution(build, tmp_path, device_io) -> None:
    """A program whose inputs and outputs stay in device memory (`cuda_triton.device_io`): the runner copies the
    input to device memory once and the output back once, after the timed runs; each execution replays the graph
    and is followed by one synchronization (the runner's: nothing in execute() waits for the GPU); the kernels read
    the input's bytes where the runner put them, and nothing is page-locked (there is no host side)."""
    args = ("--num_executions", "3", "--warmup", "1", "--output_file", str(tmp_path / "out.bin"))
    r, log, x, blobs = _run_on_random_input(build, tmp_path, device_io, 3, "8.0", args)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "device-resident I/O: 1 inputs copied to device memory once, 1 outputs left there" in r.stdout
    lines = log.read_text().splitlines()
    assert not [line for line in lines if line.startswith("FAIL")]
    copies = [line for line in lines if line.startswith("COPY ")]
    assert copies == [f"COPY HtoD {x.nbytes}", f"COPY DtoH {4 * int(np.prod(OUTPUT_SHAPE))}"], copies
    first_launch = min(i for i, line in enumerate(lines) if line.startswith(("LAUNCH", "GRAPH_LAUNCH")))
    assert lines.index(copies[0]) < first_launch and lines.index(copies[1]) > first_launch
    replays = [i for i, line in enumerate(lines) if line == "GRAPH_LAUNCH"]
    assert len(replays) == 4, lines
    ends = [*replays[1:], lines.index(copies[1])]
    assert all(lines[a:b].count("SYNC") == 1 for a, b in zip(replays, ends, strict=True)), lines
    assert not any(line.startswith(("PIN ", "UNPIN ")) for line in lines)
    assert (tmp_path / "out.bin").stat().st_size == 4 * int(np.prod(OUTPUT_SHAPE))
    # The kernels of the first (captured) execution read the input's bytes in the runner's device buffer.
    _assert_input_in_device_memory(_parse_log(log), blobs, _expected(blobs, 80)[0], x.tobytes())


def test_device_io_program_plans_no_memory_for_its_io(device_io) -> None:
    """The program's own input and output are CUDA tensors with no planned memory (the caller's), and nothing but
    the delegate runs; the config refuses to have its two fields overridden."""
    from cuda_triton.device_io import device_io_backend_config
    from executorch.exir._serialize import _deserialize_pte_binary
    from executorch.exir.schema import DeviceType

    pte, _, _ = device_io
    plan = _deserialize_pte_binary(pte.read_bytes()).program.execution_plan[0]
    for index in (*plan.inputs, *plan.outputs):
        tensor = plan.values[index].val
        assert tensor.allocation_info is None and tensor.extra_tensor_info.device_type == DeviceType.CUDA
    assert [op.name for op in plan.operators] == [] and len(plan.delegates) == 1
    with pytest.raises(ValueError, match="sets memory_planning_pass itself"):
        device_io_backend_config(memory_planning_pass=None)


def test_device_resident_io_survives_load_cycles(build, tmp_path, device_io) -> None:
    pte, blobs, _ = device_io
    _, counts = _expected(blobs, 80)
    r, _ = _run(build, tmp_path, pte, counts, cc="8.0", args=("--num_executions", "1", "--load_cycles", "2"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "load cycle 2:" in r.stdout


def test_device_resident_io_without_a_device_is_a_clean_error(build, tmp_path, device_io) -> None:
    pte, blobs, _ = device_io
    _, counts = _expected(blobs, 80)
    r, _ = _run(build, tmp_path, pte, counts, extra_env={"FAKE_CUDA_OOM_AFTER": "0"})
    assert r.returncode == 1 and "cuda_triton_runner: error:" in r.stderr, r.stderr[-2000:]
    assert "Segmentation" not in r.stderr and "Aborted" not in r.stderr


def test_wrong_arch_is_a_clean_error(build, tmp_path, host_planned) -> None:
    pte, blobs, _ = host_planned
    r, _ = _run(build, tmp_path, pte, _expected(blobs, 80)[1], cc="9.0")
    assert r.returncode == 1
    assert "cubins for sm_80 only" in r.stderr and "compute capability 9.0" in r.stderr
    r, _ = _run(build, tmp_path, pte, _expected(blobs, 80)[1], cc="7.5")
    assert r.returncode == 1 and "compute capability 7.5" in r.stderr


def test_programmatic_launch_reaches_the_sm90_launches_only(build, tmp_path_factory, tmp_path) -> None:
    """With the programmatic_launch compile spec, the sm_90 kernels are launched with programmatic stream
    serialization, direct and from the CUDA graph; the sm_80 kernels of the same program are not."""
    pte, blobs, _ = export_tiny(
        tmp_path_factory.mktemp("pte_pdl"), archs=(80, 90), extra_specs=(("programmatic_launch", b"1"),)
    )
    x = np.random.default_rng(2).standard_normal(INPUT_SHAPE).astype(np.float32)
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    args = ("--inputs", str(tmp_path / "in.bin"), "--num_executions", "2", "--warmup", "0")
    for cc, arch in (("9.0", 90), ("8.6", 80)):
        r, log = _run(build, tmp_path, pte, _expected(blobs, arch)[1], cc=cc, args=args)
        _check_launches(r, log, blobs, arch, 2, x.tobytes())
        launches = [line for line in log.read_text().splitlines() if line.startswith("LAUNCH ")]
        assert launches and all((" pdl=1" in line) == (arch == 90) for line in launches), launches[:2]


@pytest.mark.parametrize("after", [0, 1, 3, 5])
def test_out_of_memory_is_a_clean_error(build, tmp_path, host_planned, after: int) -> None:
    pte, blobs, _ = host_planned
    r, _ = _run(build, tmp_path, pte, _expected(blobs, 80)[1], extra_env={"FAKE_CUDA_OOM_AFTER": str(after)})
    assert r.returncode == 1, r.stdout
    assert "out of memory" in r.stderr or "OUT_OF_MEMORY" in r.stderr


def test_no_device_is_a_clean_error(build, tmp_path, host_planned) -> None:
    pte, blobs, _ = host_planned
    r, _ = _run(build, tmp_path, pte, _expected(blobs, 80)[1], extra_env={"FAKE_CUDA_DEVICES": "0"})
    assert r.returncode == 1 and "not available" in r.stderr and "cuInit" in r.stderr


def test_python_runtime_executes_with_the_delegate(build, host_planned) -> None:
    """executorch.runtime.Runtime runs the .pte through the backend the Python loader registered."""
    pte, blobs, _ = host_planned
    _, counts = _expected(blobs, 80)
    code = textwrap.dedent(
        f"""
        import torch
        from cuda_triton.runtime import load_backend, status
        load_backend()
        assert status() == "ok", status()
        from executorch.runtime import Runtime
        method = Runtime.get().load_program({str(pte)!r}).load_method("forward")
        out = method.execute([torch.randn{INPUT_SHAPE}])
        print("OUT", tuple(out[0].shape))
        """
    )
    env = dict(os.environ, LD_LIBRARY_PATH=str(build / "fake_cuda"), FAKE_CUDA_CC="8.0",
               FAKE_CUDA_PARAMS=",".join(f"{k}:{n}" for k, n in counts.items()))  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"OUT {OUTPUT_SHAPE}" in r.stdout


def test_external_weights_and_cubins_in_the_pte(build, tmp_path_factory, tmp_path) -> None:
    """Weights in a .ptd, cubins in the .pte: init() finds both through ExecuTorch's merged named data map."""
    d = tmp_path_factory.mktemp("pte_ext")
    pte, blobs, named = export_tiny(d, external_tag="tiny_w")
    ptd = d / "tiny_w.ptd"
    assert ptd.exists()
    cubins = [k.cubin for b in blobs for k in deserialize(b, named).kernels]
    assert cubins and all(
        c is not None and c in pte.read_bytes() and c not in ptd.read_bytes() for c in cubins
    )
    _, counts = _expected(blobs, 80)
    x = np.random.default_rng(2).standard_normal(INPUT_SHAPE).astype(np.float32)
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    r, log = _run(build, tmp_path, pte, counts, cc="8.0",
                  args=("--data_path", str(ptd), "--inputs", str(tmp_path / "in.bin"), "--num_executions", "1",
                        "--warmup", "0"))  # fmt: skip
    _check_launches(r, log, blobs, 80, 1, x.tobytes())
    r, _ = _run(build, tmp_path, pte, counts, cc="8.0", args=("--num_executions", "1", "--warmup", "0"))
    assert r.returncode == 1 and "--data_path" in r.stderr


def test_missing_cubin_is_a_clean_error(build, tmp_path, host_planned) -> None:
    """A blob whose cubin key is not in the named data: init() fails naming the key, nothing is loaded."""
    pte, blobs, _ = host_planned
    data = pte.read_bytes()
    kernel = deserialize(blobs[0]).kernels[0]
    at = data.find(blobs[0])
    k = data.find(kernel.cubin_key.encode(), at, at + len(blobs[0]))
    assert at >= 0 and k >= 0
    bad = bytearray(data)
    end = k + len(kernel.cubin_key)
    bad[end - 1] = ord("0") if bad[end - 1] != ord("0") else ord("1")  # another (absent) content address
    path = tmp_path / "missing_cubin.pte"
    path.write_bytes(reseal_blobs(bytes(bad)))
    r, log = _run(build, tmp_path, path, _expected(blobs, 80)[1], cc="8.0",
                  args=("--num_executions", "1", "--warmup", "0"))  # fmt: skip
    assert r.returncode == 1, r.stderr[-2000:]
    assert "is not in the program's named data" in r.stderr and "cubin cuda_triton/cubin/sm80/" in r.stderr
    assert not log.exists() or "LAUNCH" not in log.read_text()


@pytest.fixture(scope="module")
def with_state(tmp_path_factory):
    """The tiny model with split-K-like tile counters: every convolution template is made to declare a zeroed int32
    scratch tensor (`ScratchTensor.zeroed`) under the role of the third operand of a fused epilogue, which the
    model's convolutions do not use, so the preprocess records a state value and the launches take its address
    where they took a null pointer (same kernels, same parameters)."""
    from cuda_triton.conv.templates import registered_templates
    from cuda_triton.kernel.launch import ScratchTensor, TensorArg

    def declaring(template):
        scratch = template.scratch

        def with_counters(problem, schedule):
            roles = {
                a.role
                for la in template.launches(problem, schedule)
                for a in la.args
                if isinstance(a, TensorArg)
            }
            extra = [ScratchTensor("epilogue3", "int32", (37,), zeroed=True)] if "epilogue3" in roles else []
            return [*scratch(problem, schedule), *extra]

        return with_counters

    patch = pytest.MonkeyPatch()
    try:
        for template in registered_templates():
            patch.setattr(template, "scratch", declaring(template))
        return export_tiny(tmp_path_factory.mktemp("pte_state"), variant="state")
    finally:
        patch.undo()


def test_zeroed_scratch_tensors_become_state_values(with_state) -> None:
    """The preprocess records a scratch tensor as an intermediate (arena), a zeroed one as a state value (state
    buffer), dense, of the blob dtype of its torch dtype (int32: code 4)."""
    from cuda_triton.kernel.launch import TRITON_PTR_DTYPE, ScratchTensor
    from cuda_triton.preprocess.draft import CudaTritonPreprocessError, scratch_value

    counters = scratch_value(ScratchTensor("tile_counters", "int32", (3, 5), zeroed=True))
    assert (counters.kind, counters.index, counters.dtype, counters.sizes, counters.strides) == (
        "state", 0, "int32", [3, 5], [5, 1],
    )  # fmt: skip
    workspace = scratch_value(ScratchTensor("workspace", "float32", (2, 4)))
    assert (workspace.kind, workspace.dtype, workspace.strides) == ("intermediate", "fp32", [4, 1])
    assert TRITON_PTR_DTYPE["int32"] == "i32"  # what a kernel's TensorArg for the counters names
    with pytest.raises(CudaTritonPreprocessError, match="dtype int8"):
        scratch_value(ScratchTensor("flags", "int8", (4,), zeroed=True))
    _, blobs, _ = with_state  # the export: the convolutions' zeroed scratch tensors
    states = [vr for data in blobs for vr in deserialize(data).values if vr.kind == "state"]
    assert states and all(vr.dtype == "int32" and vr.sizes == [37] for vr in states)


def test_state_buffer_is_zeroed_once_at_init(build, tmp_path, with_state) -> None:
    """A blob's state values (kind 4) live in a buffer of their own that init() fills with zero bytes once, on the
    delegate's stream before any execute (and before the CUDA graph is captured): every launch, direct or replayed,
    gets a pointer into it whose bytes are zero, while fresh device memory (the arena) holds whatever it held. No
    execute zeroes it again: the launches leave it zero (docs/blob_format.md)."""
    pte, blobs, _ = with_state
    states = {}
    for data in blobs:
        blob = deserialize(data)
        states[id(data)] = [v for v, vr in enumerate(blob.values) if vr.kind == "state"]
        assert blob.state_size >= 4 * 37 * len(states[id(data)])
        assert all(
            any(ValueRef(v) in lr.args for op in blob.ops for lr in op.launches) for v in states[id(data)]
        )
    assert any(states.values()), "no state value was recorded"
    _, counts = _expected(blobs, 80)
    x = np.random.default_rng(3).standard_normal(INPUT_SHAPE).astype(np.float32)
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    args = ("--inputs", str(tmp_path / "in.bin"), "--num_executions", "3", "--warmup", "0")
    zero, fill = _fnv16(bytes(16)), _fnv16(bytes([0xA5] * 16))
    for graph in (True, False):
        env = {"FAKE_CUDA_ALLOC_FILL": str(0xA5), **({} if graph else {"CUDA_TRITON_CUDA_GRAPH": "0"})}
        r, log = _run(build, tmp_path, pte, counts, cc="8.0", extra_env=env, args=args)
        with_state_buffer = sum(1 for ids in states.values() if ids)
        _check_launches(r, log, blobs, 80, 3, x.tobytes(), graph=graph, init_syncs=with_state_buffer)
        lines = log.read_text().splitlines()
        memsets = [i for i, line in enumerate(lines) if line.startswith("MEMSET")]
        sizes = sorted(deserialize(d).state_size for d in blobs if deserialize(d).state_size)
        assert sorted(int(lines[i].split()[1]) for i in memsets) == sizes
        assert all(lines[i].split()[2] == "0" and lines[i + 1] == "SYNC" for i in memsets)
        first_launch = next(i for i, line in enumerate(lines) if line.startswith("LAUNCH "))
        assert max(memsets) < first_launch
        expected, _ = _expected(blobs, 80)
        rows = _parse_log(log)
        seen = {"state": 0, "arena": 0}
        for i, row in enumerate(rows):
            *_, launch_args, blob = expected[i % len(expected)]
            for j, a in enumerate(launch_args):
                if isinstance(a, ValueRef) and blob.values[a.value].kind == "state":
                    assert row[5][j] == zero, (i, j, row)
                    seen["state"] += 1
                elif isinstance(a, ValueRef) and blob.values[a.value].kind == "intermediate":
                    seen["arena"] += row[5][j] == fill  # never written (the fake runs no kernel)
        assert seen["state"] >= 3 and seen["arena"] > 0, seen


def test_a_failed_state_buffer_allocation_is_a_clean_error(build, tmp_path, with_state) -> None:
    """Whichever allocation runs out of memory (the state buffer's among them), init() fails with an error, never
    an abort, and nothing is launched."""
    pte, blobs, _ = with_state
    counts = _expected(blobs, 80)[1]
    for after in range(12):
        r, log = _run(build, tmp_path, pte, counts, extra_env={"FAKE_CUDA_OOM_AFTER": str(after)},
                      args=("--num_executions", "1", "--warmup", "0"))  # fmt: skip
        if r.returncode == 0:
            break
        assert r.returncode == 1, (after, r.returncode, r.stderr[-2000:])
        assert "out of memory" in r.stderr or "OUT_OF_MEMORY" in r.stderr
        assert not log.exists() or "LAUNCH" not in log.read_text()
    else:
        raise AssertionError("init() needs more than 12 allocations")
