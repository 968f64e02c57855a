"""In-tree model zoo: convolution-heavy networks with random weights (no downloads); `build` also makes
torchvision's classification models (``tv:<name>``, `torchvision_models`).

Each entry builds an ``nn.Module`` in eval mode and names an example input shape. The models are written here
from their papers' layer tables, sized like the originals, and cover every convolution family the delegate
handles:

============== ======================================================= =========================================
name           what                                                    convolutions
============== ======================================================= =========================================
resnet50       ResNet-50 (bottleneck blocks 3-4-6-3), 224x224          7x7/2 stem, 1x1, 3x3, strided 1x1/3x3
resnet18       ResNet-18 (basic blocks 2-2-2-2), 224x224               7x7/2 stem, 3x3, strided 1x1 downsample
mobilenetv2    MobileNetV2 (inverted residuals, width 1.0), 224x224    depthwise 3x3 (stride 1/2), pointwise 1x1
unet           UNet, 4 levels, transposed-conv upsampling, 128x128     3x3, ConvTranspose2d 2x2/2, 1x1 head
wav2vec2       wav2vec2 feature encoder (7 conv layers, 512 ch), 1 s   1-D strided convs (k10/s5, k3/s2, k2/s2)
wavenet        WaveNet: 2 stacks of dilated causal convs (d=1..512)    1-D dilated, left-padded (causal), 1x1
video          R(2+1)D-style block + X3D-style depthwise 3-D block     3-D (1,3,3), (3,1,1), depthwise 3x3x3
demo           small mixed net (strided, 'same' depthwise, dilated,    one of each (the README demo)
               transposed, 1-D 'same' with even kernel)
============== ======================================================= =========================================

BatchNorm layers stay as modules; the delegate folds one that follows a forward convolution into that
convolution's weight and bias (`_passes/batch_norm_fold.py`) and runs any other as its batch-norm op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from . import torchvision_models
from .layer_tables import MOBILENETV2_STAGES

# ---- ResNet -----------------------------------------------------------------------------------------------


class _ResidualBlock(nn.Module):
    """A ResNet block's shortcut: the identity, or a strided 1x1 conv and BN (``down``) where the block changes
    the shape; `_join` adds it to the block's output and applies the final ReLU."""

    down: nn.Module | None

    @staticmethod
    def _projection(cin: int, out: int, stride: int) -> nn.Module | None:
        if stride == 1 and cin == out:
            return None
        return nn.Sequential(nn.Conv2d(cin, out, 1, stride, bias=False), nn.BatchNorm2d(out))

    def _join(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.relu(y + (x if self.down is None else self.down(x)))


class BasicBlock(_ResidualBlock):
    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.down = self._projection(cin, planes, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return self._join(x, self.bn2(self.conv2(y)))


class Bottleneck(_ResidualBlock):
    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        out = planes * 4
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)  # stride on the 3x3 (ResNet v1.5)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.down = self._projection(cin, out, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        return self._join(x, self.bn3(self.conv3(y)))


class ResNet(nn.Module):
    def __init__(
        self, block: type[BasicBlock] | type[Bottleneck], layers: list[int], num_classes: int = 1000
    ):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
        )
        stages: list[nn.Module] = []
        cin = 64
        for i, n in enumerate(layers):
            planes = 64 * 2**i
            blocks: list[nn.Module] = []
            for j in range(n):
                blocks.append(block(cin, planes, 2 if (j == 0 and i > 0) else 1))
                cin = planes * block.expansion
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stages(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


def resnet50() -> nn.Module:
    return ResNet(Bottleneck, [3, 4, 6, 3])


def resnet18() -> nn.Module:
    return ResNet(BasicBlock, [2, 2, 2, 2])


# ---- MobileNetV2 ------------------------------------------------------------------------------------------


def _conv_bn(cin: int, cout: int, k: int, stride: int, groups: int = 1, act: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    if act:
        layers.append(nn.ReLU6())
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(_conv_bn(cin, hidden, 1, 1))
        layers += [
            _conv_bn(hidden, hidden, 3, stride, groups=hidden),
            _conv_bn(hidden, cout, 1, 1, act=False),
        ]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


class MobileNetV2(nn.Module):
    SETTINGS = MOBILENETV2_STAGES  # (expansion t, channels c, repeats n, stride s)

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [_conv_bn(3, 32, 3, 2)]
        cin = 32
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(_conv_bn(cin, 1280, 1, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(y, 1))


# ---- UNet -------------------------------------------------------------------------------------------------


class _DoubleConv(nn.Sequential):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(
            nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(), nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU()
        )


class UNet(nn.Module):
    """The original UNet's shape (with 'same' padding), base width 32, ConvTranspose2d(2, stride 2) upsampling."""

    def __init__(self, cin: int = 3, classes: int = 2, base: int = 32, levels: int = 4) -> None:
        super().__init__()
        widths = [base * 2**i for i in range(levels + 1)]
        self.down = nn.ModuleList([_DoubleConv(cin, widths[0])])
        self.down.extend(_DoubleConv(widths[i], widths[i + 1]) for i in range(levels))
        self.up = nn.ModuleList(
            nn.ConvTranspose2d(widths[i + 1], widths[i], 2, stride=2) for i in reversed(range(levels))
        )
        self.merge = nn.ModuleList(_DoubleConv(2 * widths[i], widths[i]) for i in reversed(range(levels)))
        self.head = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        y = x
        for i, block in enumerate(self.down):
            if i > 0:
                y = F.max_pool2d(y, 2)
            y = block(y)
            skips.append(y)
        skips.pop()
        for up, merge in zip(self.up, self.merge, strict=True):
            y = merge(torch.cat([skips.pop(), up(y)], dim=1))
        return self.head(y)


# ---- wav2vec2 feature encoder -----------------------------------------------------------------------------


class Wav2Vec2FeatureEncoder(nn.Module):
    """wav2vec2's convolutional feature encoder: 7 x Conv1d(512, bias=False), GroupNorm on the first, GELU."""

    KERNELS = (10, 3, 3, 3, 3, 2, 2)
    STRIDES = (5, 2, 2, 2, 2, 2, 2)

    def __init__(self, dim: int = 512) -> None:
        super().__init__()
        self.convs = nn.ModuleList()
        cin = 1
        for k, s in zip(self.KERNELS, self.STRIDES, strict=True):
            self.convs.append(nn.Conv1d(cin, dim, k, s, bias=False))
            cin = dim
        self.norm = nn.GroupNorm(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, conv in enumerate(self.convs):
            x = conv(x)
            if i == 0:
                x = self.norm(x)
            x = F.gelu(x)
        return x


# ---- WaveNet ----------------------------------------------------------------------------------------------


class WaveNet(nn.Module):
    """Dilated causal Conv1d stacks (k=2, d=1..512) with gated activations, residual and skip 1x1 convs.

    Causality is a left zero pad (``F.pad(x, (d, 0))``), which plain ``to_edge`` spells ``constant_pad_nd`` +
    an unpadded convolution: the partitioner absorbs it into the convolution's ``padding_before``.
    """

    def __init__(self, channels: int = 64, skip: int = 128, stacks: int = 2, layers: int = 10) -> None:
        super().__init__()
        self.dilations = [2**i for _ in range(stacks) for i in range(layers)]
        self.inp = nn.Conv1d(1, channels, 2)
        self.filters = nn.ModuleList(nn.Conv1d(channels, 2 * channels, 2, dilation=d) for d in self.dilations)
        self.res = nn.ModuleList(nn.Conv1d(channels, channels, 1) for _ in self.dilations)
        self.skips = nn.ModuleList(nn.Conv1d(channels, skip, 1) for _ in self.dilations)
        self.out1 = nn.Conv1d(skip, skip, 1)
        self.out2 = nn.Conv1d(skip, 256, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(F.pad(x, (1, 0)))
        total: torch.Tensor | None = None
        for d, filt, res, skip in zip(self.dilations, self.filters, self.res, self.skips, strict=True):
            z = filt(F.pad(h, (d, 0)))
            a, b = z.chunk(2, dim=1)
            g = torch.tanh(a) * torch.sigmoid(b)
            h = h + res(g)
            s = skip(g)
            total = s if total is None else total + s
        assert total is not None
        return self.out2(F.relu(self.out1(F.relu(total))))


# ---- video ------------------------------------------------------------------------------------------------


class R2Plus1dBlock(nn.Module):
    """A (2+1)-D residual block: (1,3,3) spatial conv then (3,1,1) temporal conv, twice."""

    def __init__(self, cin: int, cout: int, mid: int, stride: int = 1) -> None:
        super().__init__()

        def conv21(a: int, b: int, s: int) -> nn.Sequential:
            return nn.Sequential(
                nn.Conv3d(a, mid, (1, 3, 3), (1, s, s), (0, 1, 1), bias=False),
                nn.BatchNorm3d(mid),
                nn.ReLU(),
                nn.Conv3d(mid, b, (3, 1, 1), (s, 1, 1), (1, 0, 0), bias=False),
            )

        self.c1 = conv21(cin, cout, stride)
        self.bn1 = nn.BatchNorm3d(cout)
        self.c2 = conv21(cout, cout, 1)
        self.bn2 = nn.BatchNorm3d(cout)
        self.down = nn.Conv3d(cin, cout, 1, stride, bias=False) if (stride != 1 or cin != cout) else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.c1(x)))
        y = self.bn2(self.c2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class X3DBlock(nn.Module):
    """X3D's bottleneck: 1x1x1 expand, depthwise 3x3x3, 1x1x1 project."""

    def __init__(self, c: int, expand: int = 4, stride: int = 1) -> None:
        super().__init__()
        h = c * expand
        self.a = nn.Conv3d(c, h, 1, bias=False)
        self.b = nn.Conv3d(h, h, 3, (1, stride, stride), 1, groups=h, bias=False)
        self.c = nn.Conv3d(h, c, 1, bias=False)
        self.bn = nn.BatchNorm3d(c)
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn(self.c(F.relu(self.b(F.relu(self.a(x))))))
        return F.relu(y + x) if self.stride == 1 else F.relu(y)


class VideoNet(nn.Module):
    """A small video backbone: (2+1)-D stem and blocks (R(2+1)D) followed by X3D-style depthwise blocks."""

    def __init__(self, num_classes: int = 400) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv3d(3, 45, (1, 7, 7), (1, 2, 2), (0, 3, 3), bias=False),
            nn.BatchNorm3d(45),
            nn.ReLU(),
            nn.Conv3d(45, 64, (3, 1, 1), 1, (1, 0, 0), bias=False),
            nn.BatchNorm3d(64),
            nn.ReLU(),
        )
        self.r21d = nn.Sequential(R2Plus1dBlock(64, 64, 144), R2Plus1dBlock(64, 128, 230, stride=2))
        self.x3d = nn.Sequential(X3DBlock(128), X3DBlock(128))
        self.fc = nn.Linear(128, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.x3d(self.r21d(self.stem(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool3d(y, 1), 1))


# ---- demo -------------------------------------------------------------------------------------------------


class DemoNet(nn.Module):
    """One convolution of each kind, small enough to export in seconds."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.dw = nn.Conv2d(16, 16, 5, padding="same", groups=16)
        self.dilated = nn.Conv2d(16, 16, 3, padding=2, dilation=2)
        self.up = nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1)
        self.head = nn.Conv1d(8, 4, 2, padding="same")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.up(F.relu(self.dilated(self.dw(F.relu(self.stem(x))))))
        return self.head(y.flatten(2))


# ---- registry ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ZooEntry:
    name: str
    build: Callable[[], nn.Module]
    input_shape: tuple[int, ...]
    description: str


ZOO: dict[str, ZooEntry] = {
    e.name: e
    for e in (
        ZooEntry("resnet50", resnet50, (1, 3, 224, 224), "ResNet-50 (bottleneck 3-4-6-3), 53 convs"),
        ZooEntry("resnet18", resnet18, (1, 3, 224, 224), "ResNet-18 (basic 2-2-2-2), 20 convs"),
        ZooEntry(
            "mobilenetv2", MobileNetV2, (1, 3, 224, 224), "MobileNetV2 1.0, depthwise + pointwise, 52 convs"
        ),
        ZooEntry("unet", UNet, (1, 3, 128, 128), "UNet, 4 levels, ConvTranspose2d upsampling, 23 convs"),
        ZooEntry(
            "wav2vec2", Wav2Vec2FeatureEncoder, (1, 1, 16000), "wav2vec2 feature encoder, 7 strided Conv1d"
        ),
        ZooEntry(
            "wavenet", WaveNet, (1, 1, 4000), "WaveNet, 2x10 dilated causal Conv1d + 1x1 convs, 63 convs"
        ),
        ZooEntry("video", VideoNet, (1, 3, 8, 112, 112), "R(2+1)D + X3D-style 3-D blocks, 17 convs"),
        ZooEntry(
            "demo", DemoNet, (1, 3, 32, 32), "one strided, depthwise 'same', dilated, transposed, 1-D conv"
        ),
    )
}


def build(
    name: str, dtype: torch.dtype = torch.float32, input_shape: tuple[int, ...] | None = None, seed: int = 0
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The model (eval mode, random weights from ``seed``, cast to ``dtype``) and one random example input.

    ``tv:<name>`` is torchvision's classification model ``name`` (`torchvision_models`), 224x224 by default.
    """
    if name.startswith(torchvision_models.PREFIX):
        model = torchvision_models.classification_model(name[len(torchvision_models.PREFIX) :], dtype, seed)
        gen = torch.Generator().manual_seed(seed)
        shape = tuple(input_shape) if input_shape is not None else torchvision_models.INPUT_SHAPE
        return model, (torch.randn(shape, generator=gen).to(dtype),)
    if name not in ZOO:
        raise KeyError(
            f"unknown zoo model {name!r}; choose from {sorted(ZOO)} or tv:<torchvision model>, e.g. "
            f"{', '.join(torchvision_models.PREFIX + m for m in torchvision_models.MODELS)}"
        )
    entry = ZOO[name]
    gen = torch.manual_seed(seed)
    model = entry.build().eval()
    # Non-trivial BatchNorm statistics so that numerics are not a near-identity after the convolutions.
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            assert m.running_mean is not None and m.running_var is not None
            m.running_mean.uniform_(-0.1, 0.1, generator=gen)
            m.running_var.uniform_(0.5, 1.5, generator=gen)
    model = model.to(dtype)
    shape = tuple(input_shape) if input_shape is not None else entry.input_shape
    example = torch.randn(shape, generator=gen).to(dtype)
    return model, (example,)


def count_convs(model: nn.Module) -> int:
    return sum(isinstance(m, nn.modules.conv._ConvNd) for m in model.modules())


__all__ = ["ZOO", "ZooEntry", "build", "count_convs"]
