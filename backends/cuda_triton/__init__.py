"""executorch-cuda-triton: an ExecuTorch backend running convolutions as AOT-compiled Triton kernels.

``import cuda_triton`` registers ``torch.ops.triton.convolution`` and never imports executorch: the
ExecuTorch-facing names (`CudaTritonPartitioner`, `CudaTritonBackend`) load on first access.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import conv  # noqa: F401  (registers the op)

_LAZY = {
    "CudaTritonPartitioner": "cuda_triton.partition.partitioner",
    "CudaTritonBackend": "cuda_triton.backend",
    "CudaTritonOptions": "cuda_triton.partition.options",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'cuda_triton' has no attribute {name!r}")


__all__ = sorted(_LAZY) + ["conv"]
