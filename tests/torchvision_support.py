"""torchvision models for tests (`cuda_triton.models.torchvision_models`), skipping the test where torchvision
cannot be imported."""

from __future__ import annotations

from types import ModuleType

import pytest
import torch
from cuda_triton.models import torchvision_models


def torchvision_or_skip() -> ModuleType:
    """The imported torchvision package, or a pytest skip saying how to provide it."""
    try:
        return torchvision_models.import_torchvision()
    except torchvision_models.TorchvisionUnavailable as e:
        pytest.skip(str(e))


def classification_model(name: str, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.nn.Module:
    """A torchvision classification model with random weights (``weights=None``), eval mode, in ``dtype``."""
    torchvision_or_skip()
    return torchvision_models.classification_model(name, dtype, seed)


__all__ = ["classification_model", "torchvision_or_skip"]
