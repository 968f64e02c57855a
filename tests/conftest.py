"""Test configuration: CPU machines run Triton kernels in the interpreter; `cuda` tests need a GPU."""

from __future__ import annotations

import os

# Must happen before any module defining @triton.jit kernels is imported.
try:
    import torch

    _HAS_GPU = torch.cuda.is_available()
except Exception:  # pragma: no cover
    _HAS_GPU = False
if not _HAS_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if _HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
