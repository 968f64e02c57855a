"""torchvision models on a CPU-only torch, for tests (no downloads: ``weights=None``).

The torchvision wheel that matches torch 2.13 is a CUDA build whose C extension does not load with the CPU
torch; its model definitions are pure Python, so defining the two operator schemas its extension would register
(``torchvision::nms``, ``torchvision::qnms``) before the import is enough (docs/partitioner.md). Where torchvision is
installed privately (``pip install --target <dir> --no-deps torchvision==0.28.0``), point
``CUDA_TRITON_TORCHVISION`` at that directory; the repository's ``.tv/`` is looked at too. Without it the tests
that need torchvision are skipped.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

_LIBRARY: list[torch.library.Library] = []  # keeps the schema fragment alive


def torchvision_or_skip() -> ModuleType:
    """The imported torchvision package, or a pytest skip saying how to provide it."""
    for candidate in (os.environ.get("CUDA_TRITON_TORCHVISION"), Path(__file__).resolve().parents[1] / ".tv"):
        if candidate and Path(candidate).is_dir() and str(candidate) not in sys.path:
            sys.path.append(str(candidate))
    if "torchvision" not in sys.modules and not _LIBRARY:
        try:
            lib = torch.library.Library("torchvision", "FRAGMENT")
            lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            _LIBRARY.append(lib)
        except RuntimeError:  # already defined (a real torchvision extension loaded)
            pass
    try:
        import torchvision
    except Exception as e:  # not installed, or it fails to import here
        pytest.skip(f"torchvision is not importable ({e}); set CUDA_TRITON_TORCHVISION to a --target install")
    return torchvision


def classification_model(name: str, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.nn.Module:
    """A torchvision classification model with random weights (``weights=None``), eval mode, in ``dtype``."""
    tv = torchvision_or_skip()
    torch.manual_seed(seed)
    model = getattr(tv.models, name)(weights=None).eval()
    gen = torch.Generator().manual_seed(seed)
    for m in model.modules():  # non-trivial batch norm statistics, so a wrong fold shows in the numbers
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            assert m.running_mean is not None and m.running_var is not None
            m.running_mean.uniform_(-0.1, 0.1, generator=gen)
            m.running_var.uniform_(0.5, 1.5, generator=gen)
    return model.to(dtype)


__all__ = ["classification_model", "torchvision_or_skip"]
