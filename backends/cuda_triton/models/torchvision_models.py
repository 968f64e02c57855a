"""torchvision's classification models with random weights, on any torch (``tv:<name>`` in `zoo.build`).

The torchvision wheel that matches the export machine's CPU torch is a CUDA build whose C extension does not
load there; its model definitions are pure Python, so defining the two operator schemas the extension would
register (``torchvision::nms``, ``torchvision::qnms``) before the import is enough (docs/platform_facts.md).
`scripts/setup_env.sh` installs it into the repository's ``.tv/`` (``pip install --target .tv --no-deps``);
``CUDA_TRITON_TORCHVISION`` names another such directory. On a machine whose torchvision loads normally (the
GPU machine), that one is used.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType

import torch

PREFIX = "tv:"
# The models the whole-model checks and benchmarks use (224x224 classification networks).
MODELS = ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny")
INPUT_SHAPE = (1, 3, 224, 224)

_LIBRARY: list[torch.library.Library] = []  # keeps the schema fragment alive


class TorchvisionUnavailable(ImportError):
    """torchvision cannot be imported here; the message says how to provide it."""


def import_torchvision() -> ModuleType:
    """The torchvision package, importing it with the schema stand-ins when its extension cannot load."""
    if "torchvision" in sys.modules:
        return sys.modules["torchvision"]
    repo = Path(__file__).resolve().parents[3]
    for candidate in (os.environ.get("CUDA_TRITON_TORCHVISION"), repo / ".tv"):
        if candidate and Path(candidate).is_dir() and str(candidate) not in sys.path:
            sys.path.append(str(candidate))
    try:
        import torchvision

        return torchvision
    except Exception:  # the extension did not load: define its schemas and try again
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
    if not _LIBRARY:
        try:
            lib = torch.library.Library("torchvision", "FRAGMENT")
            lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            _LIBRARY.append(lib)
        except RuntimeError:  # already defined by a loaded extension
            pass
    try:
        import torchvision
    except Exception as e:
        raise TorchvisionUnavailable(
            f"torchvision is not importable ({e}); run scripts/setup_env.sh (it installs it into .tv/) or set "
            "CUDA_TRITON_TORCHVISION to a `pip install --target` directory"
        ) from e
    return torchvision


def classification_model(name: str, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.nn.Module:
    """torchvision's ``name`` with random weights (``weights=None``, from ``seed``), eval mode, in ``dtype``.

    Batch norm statistics are drawn at random too, so a wrong fold shows in the numbers.
    """
    tv = import_torchvision()
    if not hasattr(tv.models, name):
        raise KeyError(f"torchvision has no model {name!r}")
    gen = torch.manual_seed(seed)
    model = getattr(tv.models, name)(weights=None).eval()
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            assert m.running_mean is not None and m.running_var is not None
            m.running_mean.uniform_(-0.1, 0.1, generator=gen)
            m.running_var.uniform_(0.5, 1.5, generator=gen)
    return model.to(dtype)


__all__ = [
    "INPUT_SHAPE",
    "MODELS",
    "PREFIX",
    "TorchvisionUnavailable",
    "classification_model",
    "import_torchvision",
]
