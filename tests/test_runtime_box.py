"""The Gluon box implicit GEMM through export and the C++ runtime, on the fake driver (no GPU).

A fp16 model whose 3x3 conv a tuning table pins to ``implicit_gemm_box``, exported for sm_80 and sm_90: the blob
records one launch list (the channels-last copy, then the box kernel) with a different kernel per arch (the Gluon
kernel for sm_90, its Triton twin for sm_80). The runner, on a fake sm_90 and a fake sm_80 device, must launch
exactly what the blob records: kernel name, grid, block, the Gluon kernel's dynamic shared memory and the
global-scratch pointer its device-made TMA descriptors need. scripts/gpu_validate.py (set "box") runs the same
path on a GPU with numerics.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from cuda_triton.conv import ConvProblem
from cuda_triton.conv.params import ConvParams
from cuda_triton.serialization.blob import deserialize
from runtime_helpers import ensure_built
from test_runtime_fake_driver import _check_launches, _expected, _run

# The first runtime test builds the C++ runtime from a clean tree: 7+ minutes on a loaded 2-core machine.
pytestmark = pytest.mark.timeout(1200)

SHAPE = (1, 64, 16, 16)


class _Conv(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(64, 64, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


def _export(directory, ws: bool):
    from cuda_triton import CudaTritonOptions, CudaTritonPartitioner
    from cuda_triton.conv.templates import get_template
    from cuda_triton.conv.tuning import TuningEntry, TuningTable
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    x = torch.randn(SHAPE, dtype=torch.float16)
    model = _Conv().eval().to(torch.float16)
    params = ConvParams((1, 1), (1, 1), (1, 1), (1, 1), False, (0, 0), 1)
    problem = ConvProblem.from_tensors(x, model.conv.weight, model.conv.bias, params)
    template = get_template("implicit_gemm_box")
    schedule = template.heuristic_schedule(problem)
    if ws:
        schedule = next(s for s in template.schedules(problem) if dict(s.params).get("WS"))
    entry = TuningEntry.from_problem(problem, 90, template.name, schedule, 1.0)
    table = directory / "pin_box.json"
    TuningTable([entry], 90, {"timing": "pinned"}).write(table)

    ep = torch.export.export(model, (x,))
    options = CudaTritonOptions(archs=(80, 90), tuning_table=str(table))
    from cuda_triton.partition.config import configs_for

    # The convolution alone (the relu stays on the CPU): the blob holds the one box-template op under test.
    partitioner = CudaTritonPartitioner(options, configs=configs_for(["conv"]))
    lowered = to_edge_transform_and_lower(ep, partitioner=[partitioner])
    gm = lowered.exported_program().graph_module
    delegates = [
        getattr(gm, n.args[0].target)
        for n in gm.graph.nodes
        if n.op == "call_function" and "executorch_call_delegate" in str(n.target)
    ]
    assert delegates and all(isinstance(d, LoweredBackendModule) for d in delegates)
    blobs = [bytes(d.processed_bytes) for d in delegates]
    path = directory / "box.pte"
    path.write_bytes(lowered.to_executorch().buffer)
    return path, blobs


@pytest.fixture(scope="module")
def box_pte(tmp_path_factory):
    return _export(tmp_path_factory.mktemp("box"), ws=False)


@pytest.fixture(scope="module")
def box_ws_pte(tmp_path_factory):
    return _export(tmp_path_factory.mktemp("box_ws"), ws=True)


def test_blob_records_the_gluon_kernel_and_its_twin(box_pte) -> None:
    _, blobs = box_pte
    (blob,) = [deserialize(b) for b in blobs]
    (op,) = blob.ops
    assert op.template == "implicit_gemm_box"
    copy, main = op.launches
    names = {arch: blob.kernels[k].name for arch, k in main.kernels.items()}
    assert names == {90: "conv_box_kernel", 80: "conv_box_portable_kernel"}
    sm90 = blob.kernels[main.kernels[90]]
    assert sm90.global_scratch_size >= 256 and sm90.shared > 48 * 1024  # device-made descriptors, a TMA ring
    assert {blob.kernels[k].name for k in copy.kernels.values()} == {"to_channels_last_kernel"}


@pytest.mark.parametrize("cc, arch", [("9.0", 90), ("8.0", 80)])
def test_runtime_launches_the_recorded_kernels(box_pte, tmp_path, cc: str, arch: int) -> None:
    build = ensure_built()
    pte, blobs = box_pte
    _, counts = _expected(blobs, arch)
    x = np.random.default_rng(2).standard_normal(SHAPE).astype(np.float16)
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    r, log = _run(build, tmp_path, pte, counts, cc=cc,
                  args=("--inputs", str(tmp_path / "in.bin"), "--num_executions", "2", "--warmup", "0"))  # fmt: skip
    _check_launches(r, log, blobs, arch, 2, x.tobytes())


def test_runtime_launches_the_warp_specialised_kernel(box_ws_pte, tmp_path) -> None:
    """WS=1: the sm_90 kernel has a copy warpgroup beyond its schedule's warps; the blob records the compiled
    count and the runner launches that many threads."""
    build = ensure_built()
    pte, blobs = box_ws_pte
    (blob,) = [deserialize(b) for b in blobs]
    *_, main = blob.ops[0].launches
    assert blob.kernels[main.kernels[90]].num_warps == 8 and blob.kernels[main.kernels[80]].num_warps == 4
    _, counts = _expected(blobs, 90)
    x = np.random.default_rng(3).standard_normal(SHAPE).astype(np.float16)
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    r, log = _run(build, tmp_path, pte, counts, cc="9.0",
                  args=("--inputs", str(tmp_path / "in.bin"), "--num_executions", "1", "--warmup", "0"))  # fmt: skip
    _check_launches(r, log, blobs, 90, 1, x.tobytes())
