"""Convolution layers of common networks, as plain geometry (no torchvision, no downloads), for tuning.

Each network is a function returning its conv layers (duplicates included; `tuning_signatures.problems` removes
them) written from the papers' / reference implementations' layer tables at their usual inference resolution:

  resnet18, resnet50 (224x224), mobilenetv2, efficientnet_b0 (224, squeeze-excite 1x1 convs included),
  convnext_t (224), unet (256x256, transposed-conv decoder), deeplabv3 (ResNet-50, output stride 8, ASPP,
  512x512), wav2vec2 (feature encoder on 1 s of 16 kHz audio + the grouped positional conv), whisper (base and
  small encoder stems on 30 s of log-mel), hifigan (V1 generator on 100 mel frames), wavenet (2 stacks, dilations
  1..512, 1 s), r2plus1d (R(2+1)D-18, 16x112x112), x3d (X3D-M, 16x224x224).

`cuda_triton.tools.tuning_signatures` turns them into `ConvProblem`s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cuda_triton.models.layer_tables import EFFICIENTNET_B0_STAGES, MOBILENETV2_STAGES


@dataclass(frozen=True)
class Layer:
    """One convolution layer without its batch size: input (C, *spatial) -> K channels."""

    net: str
    C: int
    spatial: tuple[int, ...]
    K: int
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    pad_before: tuple[int, ...]
    pad_after: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int = 1
    transposed: bool = False
    output_padding: tuple[int, ...] = ()
    bias: bool = False

    def out_spatial(self) -> tuple[int, ...]:
        out = []
        for i, n in enumerate(self.spatial):
            span = self.dilation[i] * (self.kernel[i] - 1) + 1
            if self.transposed:
                op = self.output_padding[i] if self.output_padding else 0
                out.append((n - 1) * self.stride[i] - self.pad_before[i] - self.pad_after[i] + span + op)
            else:
                out.append((n + self.pad_before[i] + self.pad_after[i] - span) // self.stride[i] + 1)
        return tuple(out)


def _t(v: int | tuple[int, ...], n: int) -> tuple[int, ...]:
    return tuple(v) if isinstance(v, tuple) else (v,) * n


def conv(
    net: str,
    C: int,
    spatial: tuple[int, ...],
    K: int,
    k: int | tuple[int, ...],
    s: int | tuple[int, ...] = 1,
    p: int | tuple[int, ...] | None = None,
    d: int | tuple[int, ...] = 1,
    g: int = 1,
    bias: bool = False,
    pa: int | tuple[int, ...] | None = None,
) -> Layer:
    """A forward conv; ``p`` is the padding before (default: k//2 * d, 'same'-like), ``pa`` after (default p)."""
    n = len(spatial)
    kt, st, dt = _t(k, n), _t(s, n), _t(d, n)
    pb = tuple((kk // 2) * dd for kk, dd in zip(kt, dt, strict=True)) if p is None else _t(p, n)
    pat = pb if pa is None else _t(pa, n)
    return Layer(net, C, tuple(spatial), K, kt, st, pb, pat, dt, g, False, (), bias)


def tconv(
    net: str, C: int, spatial: tuple[int, ...], K: int, k: int, s: int, p: int, op: int = 0, bias: bool = True
) -> Layer:
    n = len(spatial)
    return Layer(
        net, C, tuple(spatial), K, (k,) * n, (s,) * n, (p,) * n, (p,) * n, (1,) * n, 1, True, (op,) * n, bias
    )


def _after(layer: Layer) -> tuple[int, ...]:
    return layer.out_spatial()


# ---- image classification -----------------------------------------------------------------------------------
def resnet18(hw: int = 224) -> list[Layer]:
    net = "resnet18"
    out = [conv(net, 3, (hw, hw), 64, 7, 2, 3)]
    x = (hw // 4, hw // 4)
    cin = 64
    for planes, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        c1 = conv(net, cin, x, planes, 3, stride, 1)
        y = _after(c1)
        out += [
            c1,
            conv(net, planes, y, planes, 3),
            conv(net, planes, y, planes, 3),
            conv(net, planes, y, planes, 3),
        ]
        if stride != 1 or cin != planes:
            out.append(conv(net, cin, x, planes, 1, stride, 0))
        cin, x = planes, y
    return out


def _bottleneck_stage(
    net: str,
    cin: int,
    x: tuple[int, ...],
    planes: int,
    blocks: int,
    stride: int,
    dilation: int = 1,
    first_dilation: int = 1,
) -> tuple[list[Layer], int, tuple[int, ...]]:
    out: list[Layer] = []
    width, cout = planes, planes * 4
    for b in range(blocks):
        s = stride if b == 0 else 1
        d = first_dilation if b == 0 else dilation
        c1 = conv(net, cin, x, width, 1, 1, 0)
        c2 = conv(net, width, x, width, 3, s, d, d)
        y = _after(c2)
        c3 = conv(net, width, y, cout, 1, 1, 0)
        out += [c1, c2, c3]
        if b == 0 and (s != 1 or cin != cout):
            out.append(conv(net, cin, x, cout, 1, s, 0))
        cin, x = cout, y
    return out, cin, x


def resnet50(hw: int = 224, net: str = "resnet50") -> list[Layer]:
    out = [conv(net, 3, (hw, hw), 64, 7, 2, 3)]
    cin, x = 64, (hw // 4, hw // 4)
    for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        layers, cin, x = _bottleneck_stage(net, cin, x, planes, blocks, stride)
        out += layers
    return out


def mobilenetv2(hw: int = 224) -> list[Layer]:
    net = "mobilenetv2"
    out = [conv(net, 3, (hw, hw), 32, 3, 2)]
    cin, x = 32, (hw // 2, hw // 2)
    for t, c, n, s in MOBILENETV2_STAGES:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            if t != 1:
                out.append(conv(net, cin, x, hidden, 1, 1, 0))
            dw = conv(net, hidden, x, hidden, 3, stride, g=hidden)
            y = _after(dw)
            out += [dw, conv(net, hidden, y, c, 1, 1, 0)]
            cin, x = c, y
    out.append(conv(net, cin, x, 1280, 1, 1, 0))
    return out


def efficientnet_b0(hw: int = 224) -> list[Layer]:
    net = "efficientnet_b0"
    out = [conv(net, 3, (hw, hw), 32, 3, 2)]
    cin, x = 32, (hw // 2, hw // 2)
    for e, k, s, c, n in EFFICIENTNET_B0_STAGES:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * e
            if e != 1:
                out.append(conv(net, cin, x, hidden, 1, 1, 0))
            dw = conv(net, hidden, x, hidden, k, stride, g=hidden)
            y = _after(dw)
            squeeze = max(1, cin // 4)
            out += [
                dw,
                conv(net, hidden, (1, 1), squeeze, 1, 1, 0, bias=True),  # squeeze-excite on the pooled tensor
                conv(net, squeeze, (1, 1), hidden, 1, 1, 0, bias=True),
                conv(net, hidden, y, c, 1, 1, 0),
            ]
            cin, x = c, y
    out.append(conv(net, cin, x, 1280, 1, 1, 0))
    return out


def convnext_t(hw: int = 224) -> list[Layer]:
    net = "convnext_t"
    out = [conv(net, 3, (hw, hw), 96, 4, 4, 0, bias=True)]
    x = (hw // 4, hw // 4)
    dims, depths = (96, 192, 384, 768), (3, 3, 9, 3)
    for i, (dim, depth) in enumerate(zip(dims, depths, strict=True)):
        if i:
            out.append(conv(net, dims[i - 1], x, dim, 2, 2, 0, bias=True))
            x = (x[0] // 2, x[1] // 2)
        out += [conv(net, dim, x, dim, 7, 1, 3, g=dim, bias=True)] * depth  # the MLP is Linear, not conv
    return out


# ---- dense prediction --------------------------------------------------------------------------------------
def unet(hw: int = 256, base: int = 64, classes: int = 2) -> list[Layer]:
    net = "unet"
    out: list[Layer] = []
    widths = [base * 2**i for i in range(5)]  # 64 .. 1024
    cin, x = 3, (hw, hw)
    for i, w in enumerate(widths):
        if i:
            x = (x[0] // 2, x[1] // 2)
        out += [conv(net, cin, x, w, 3), conv(net, w, x, w, 3)]
        cin = w
    for w in reversed(widths[:-1]):
        up = tconv(net, cin, x, w, 2, 2, 0)
        x = _after(up)
        out += [up, conv(net, 2 * w, x, w, 3), conv(net, w, x, w, 3)]
        cin = w
    out.append(conv(net, cin, x, classes, 1, 1, 0, bias=True))
    return out


def deeplabv3(hw: int = 512, classes: int = 21) -> list[Layer]:
    """ResNet-50 with strides of layers 3/4 replaced by dilation 2/4 (output stride 8), ASPP rates 12/24/36."""
    net = "deeplabv3"
    out = [conv(net, 3, (hw, hw), 64, 7, 2, 3)]
    cin, x = 64, (hw // 4, hw // 4)
    for planes, blocks, stride, dil, first in (
        (64, 3, 1, 1, 1),
        (128, 4, 2, 1, 1),
        (256, 6, 1, 2, 1),
        (512, 3, 1, 4, 2),
    ):
        layers, cin, x = _bottleneck_stage(net, cin, x, planes, blocks, stride, dil, first)
        out += layers
    out.append(conv(net, cin, x, 256, 1, 1, 0))
    out += [conv(net, cin, x, 256, 3, 1, r, r) for r in (12, 24, 36)]
    out.append(conv(net, cin, (1, 1), 256, 1, 1, 0))  # image pooling branch
    out.append(conv(net, 5 * 256, x, 256, 1, 1, 0))  # projection
    out.append(conv(net, 256, x, 256, 3))
    out.append(conv(net, 256, x, classes, 1, 1, 0, bias=True))
    return out


# ---- audio -----------------------------------------------------------------------------------------------
def wav2vec2(samples: int = 16000) -> list[Layer]:
    net = "wav2vec2"
    out: list[Layer] = []
    cin, x = 1, (samples,)
    for k, s in ((10, 5), (3, 2), (3, 2), (3, 2), (3, 2), (2, 2), (2, 2)):
        layer = conv(net, cin, x, 512, k, s, 0)
        out.append(layer)
        cin, x = 512, _after(layer)
    out.append(conv(net, 768, x, 768, 128, 1, 64, g=16, bias=True))  # positional conv embedding
    return out


def whisper(frames: int = 3000) -> list[Layer]:
    net = "whisper"
    out: list[Layer] = []
    for width in (512, 768):  # base, small
        out += [
            conv(net, 80, (frames,), width, 3, 1, 1, bias=True),
            conv(net, width, (frames,), width, 3, 2, 1, bias=True),
        ]
    return out


def hifigan(frames: int = 100) -> list[Layer]:
    """HiFi-GAN V1: upsample rates 8,8,2,2 (kernels 16,16,4,4), MRF kernels 3/7/11 with dilations 1/3/5."""
    net = "hifigan"
    out = [conv(net, 80, (frames,), 512, 7, 1, 3, bias=True)]
    c, x = 512, (frames,)
    for r, k in ((8, 16), (8, 16), (2, 4), (2, 4)):
        up = tconv(net, c, x, c // 2, k, r, (k - r) // 2)
        out.append(up)
        c, x = c // 2, _after(up)
        for kk in (3, 7, 11):
            for d in (1, 3, 5):
                out += [conv(net, c, x, c, kk, 1, d=d, bias=True), conv(net, c, x, c, kk, 1, bias=True)]
    out.append(conv(net, c, x, 1, 7, 1, 3, bias=True))
    return out


def wavenet(samples: int = 16000, residual: int = 64, skip: int = 256) -> list[Layer]:
    net = "wavenet"
    x = (samples,)
    out = [conv(net, 1, x, residual, 2, 1, 1, pa=0, bias=True)]  # causal input conv
    for _stack in range(2):
        for i in range(10):
            d = 2**i
            out += [
                # gated dilated causal conv
                conv(net, residual, x, 2 * residual, 2, 1, d, d, pa=0, bias=True),
                conv(net, residual, x, residual, 1, 1, 0, bias=True),
                conv(net, residual, x, skip, 1, 1, 0, bias=True),
            ]
    out += [conv(net, skip, x, skip, 1, 1, 0, bias=True), conv(net, skip, x, 256, 1, 1, 0, bias=True)]
    return out


# ---- video -----------------------------------------------------------------------------------------------
def r2plus1d(t: int = 16, hw: int = 112) -> list[Layer]:
    net = "r2plus1d"
    out = [conv(net, 3, (t, hw, hw), 45, (1, 7, 7), (1, 2, 2), (0, 3, 3))]
    x = (t, hw // 2, hw // 2)
    out.append(conv(net, 45, x, 64, (3, 1, 1), 1, (1, 0, 0)))
    cin = 64
    for planes, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        mid = (cin * planes * 27) // (cin * 9 + 3 * planes)
        for b in range(2):
            s = stride if b == 0 else 1
            ci = cin if b == 0 else planes
            a1 = conv(net, ci, x, mid, (1, 3, 3), (1, s, s), (0, 1, 1))
            y1 = _after(a1)
            a2 = conv(net, mid, y1, planes, (3, 1, 1), (s, 1, 1), (1, 0, 0))
            y = _after(a2)
            b1 = conv(net, planes, y, mid, (1, 3, 3), 1, (0, 1, 1))
            b2 = conv(net, mid, y, planes, (3, 1, 1), 1, (1, 0, 0))
            out += [a1, a2, b1, b2]
            if b == 0 and (s != 1 or cin != planes):
                out.append(conv(net, cin, x, planes, 1, s, 0))
            x = y
        cin = planes
    return out


def x3d(t: int = 16, hw: int = 224) -> list[Layer]:
    """X3D-M: widths 24/48/96/192, depths 3/5/11/7, bottleneck x2.25, depthwise 3x3x3."""
    net = "x3d"
    out = [conv(net, 3, (t, hw, hw), 24, (1, 3, 3), (1, 2, 2), (0, 1, 1))]
    x = (t, hw // 2, hw // 2)
    out.append(conv(net, 24, x, 24, (5, 1, 1), 1, (2, 0, 0), g=24))
    cin = 24
    for dim, depth in ((24, 3), (48, 5), (96, 11), (192, 7)):
        inner = int(2.25 * dim)
        for b in range(depth):
            s = 2 if b == 0 else 1
            ci = cin if b == 0 else dim
            dw = conv(net, inner, x, inner, 3, (1, s, s), 1, g=inner)
            y = _after(dw)
            out += [conv(net, ci, x, inner, 1, 1, 0), dw, conv(net, inner, y, dim, 1, 1, 0)]
            if b == 0:
                out.append(conv(net, ci, x, dim, 1, (1, s, s), 0))
            x = y
        cin = dim
    out.append(conv(net, cin, x, 432, 1, 1, 0))
    return out


NETWORKS: dict[str, Callable[[], list[Layer]]] = {
    "resnet18": resnet18,
    "resnet50": resnet50,
    "mobilenetv2": mobilenetv2,
    "efficientnet_b0": efficientnet_b0,
    "convnext_t": convnext_t,
    "unet": unet,
    "deeplabv3": deeplabv3,
    "wav2vec2": wav2vec2,
    "whisper": whisper,
    "hifigan": hifigan,
    "wavenet": wavenet,
    "r2plus1d": r2plus1d,
    "x3d": x3d,
}
