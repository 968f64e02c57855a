"""Programs whose inputs and outputs stay in GPU memory: no host<->device copy at the program's boundary.

A program exported with the ``target_device`` compile spec (`CudaTritonOptions.target_device`) keeps its
intermediates on the GPU, but ExecuTorch still inserts a host-to-device copy before the delegate for every program
input and a device-to-host copy after it for every output: the caller hands over host tensors and gets host tensors
back. For a batch-32 224x224 fp16 image that copy alone is about 0.2 ms. A caller whose data already lives on the
GPU (a camera pipeline, another model, a benchmark that compares against PyTorch given a CUDA input) skips both::

    from cuda_triton import CudaTritonOptions, CudaTritonPartitioner
    from cuda_triton.device_io import device_io_backend_config

    options = CudaTritonOptions(target_device="cuda:0")
    lowered = to_edge_transform_and_lower(ep, partitioner=[CudaTritonPartitioner(options)])
    program = lowered.to_executorch(device_io_backend_config())

At run time the caller then owns the I/O memory: it sets each input to a tensor in device memory
(``make_tensor_ptr(..., Device(DeviceType::CUDA, 0))``) and gives each output a device buffer
(``Method::set_output_data_ptr``). ExecuTorch reserves no memory for them, since it would otherwise reserve device
memory and fill it from the caller's pointer with a host memcpy. Nothing in ``execute()`` waits for the GPU then:
the caller synchronizes before it reads an output (``cuda_triton_backend_synchronize``). The runner does all of this
for such programs (docs/blob_format.md, "Program I/O").
"""

from __future__ import annotations

from typing import Any

from executorch.exir import ExecutorchBackendConfig
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.passes.propagate_device_config import PropagateDeviceConfig


def device_io_backend_config(**overrides: Any) -> ExecutorchBackendConfig:
    """The ``to_executorch`` config of a program with device-resident inputs and outputs; ``overrides`` are further
    `ExecutorchBackendConfig` fields (not the two this sets)."""
    for key in ("propagate_device_config", "memory_planning_pass"):
        if key in overrides:
            raise ValueError(f"device_io_backend_config sets {key} itself; pass the other fields only")
    return ExecutorchBackendConfig(
        propagate_device_config=PropagateDeviceConfig(
            skip_h2d_for_method_inputs=True, skip_d2h_for_method_outputs=True
        ),
        memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False, alloc_graph_output=False),
        **overrides,
    )
