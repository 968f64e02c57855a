# Verbatim copy of /work/shared/bench/public_suite.py (the project's public benchmark suite), so that
# scripts/bench_conv.py finds it on the GPU machine. Data, not our code: keep it identical to the source.
"""Public benchmark suite: convolution layers from real networks, inference-sized.

Each Case gives the layer's geometry; pad_before/pad_after are per spatial dim. channels_last says which
memory format the input and weight come in. flops() counts multiply-adds as 2.
Use it from the project's benchmark script to compare against cuDNN (PyTorch eager, cudnn.benchmark=True,
fp32 with PyTorch's default TF32 for convolutions) and Inductor, on the GPU, in one run.
"""

from dataclasses import dataclass
from typing import Tuple


@dataclass(frozen=True)
class Case:
    name: str
    N: int
    C: int
    spatial: Tuple[int, ...]
    K: int
    kernel: Tuple[int, ...]
    stride: Tuple[int, ...]
    pad_before: Tuple[int, ...]
    pad_after: Tuple[int, ...]
    dilation: Tuple[int, ...]
    groups: int = 1
    transposed: bool = False
    output_padding: Tuple[int, ...] = ()
    channels_last: bool = True

    @property
    def dims(self):
        return len(self.spatial)

    def out_spatial(self):
        out = []
        for i in range(self.dims):
            L, k, s, d = self.spatial[i], self.kernel[i], self.stride[i], self.dilation[i]
            pb, pa = self.pad_before[i], self.pad_after[i]
            if not self.transposed:
                out.append((L + pb + pa - d * (k - 1) - 1) // s + 1)
            else:
                op = self.output_padding[i] if self.output_padding else 0
                out.append((L - 1) * s - pb - pa + d * (k - 1) + 1 + op)
        return tuple(out)

    def flops(self):
        import math
        out = self.out_spatial()
        if not self.transposed:
            return 2 * self.N * self.K * math.prod(out) * (self.C // self.groups) * math.prod(self.kernel)
        # transposed: each input element scatters K/groups * kernel outputs
        return 2 * self.N * self.C * math.prod(self.spatial) * (self.K // self.groups) * math.prod(self.kernel)


def c2(name, N, C, H, W, K, k, s=1, p=None, d=1, g=1, cl=True):
    p = (k // 2) * d if p is None else p
    return Case(name, N, C, (H, W), K, (k, k), (s, s), (p, p), (p, p), (d, d), g, channels_last=cl)


def c1(name, N, C, L, K, k, s=1, pb=0, pa=0, d=1, g=1, cl=False):
    return Case(name, N, C, (L,), K, (k,), (s,), (pb,), (pa,), (d,), g, channels_last=cl)


def c3(name, N, C, T, H, W, K, k, s=1, p=None, g=1, cl=True):
    kt, kh, kw = k if isinstance(k, tuple) else (k, k, k)
    st = s if isinstance(s, tuple) else (s, s, s)
    p = tuple(x // 2 for x in (kt, kh, kw)) if p is None else p
    return Case(name, N, C, (T, H, W), K, (kt, kh, kw), st, p, p, (1, 1, 1), g, channels_last=cl)


def t2(name, N, C, H, W, K, k, s, p, op=0, cl=True):
    return Case(name, N, C, (H, W), K, (k, k), (s, s), (p, p), (p, p), (1, 1), 1, True, (op, op), channels_last=cl)


def t1(name, N, C, L, K, k, s, p, op=0):
    return Case(name, N, C, (L,), K, (k,), (s,), (p,), (p,), (1,), 1, True, (op,), channels_last=False)



PUBLIC = [
    # ResNet-18 @224, batch 1 and 32
    c2("r18.stem7x7s2.b1", 1, 3, 224, 224, 64, 7, s=2),
    c2("r18.l1.3x3.b1", 1, 64, 56, 56, 64, 3),
    c2("r18.l2.3x3s2.b32", 32, 64, 56, 56, 128, 3, s=2),
    c2("r18.l3.3x3.b32", 32, 256, 14, 14, 256, 3),
    c2("r18.down1x1s2.b32", 32, 128, 28, 28, 256, 1, s=2, p=0),
    # VGG, patchify stem (ViT / ConvNeXt), EfficientNet and ConvNeXt depthwise
    c2("vgg.3x3.256", 8, 256, 56, 56, 256, 3),
    Case("convnext.patch4", 8, 3, (224, 224), 96, (4, 4), (4, 4), (0, 0), (0, 0), (1, 1)),
    Case("vit.patch16", 8, 3, (224, 224), 768, (16, 16), (16, 16), (0, 0), (0, 0), (1, 1)),
    c2("effnet.dw5x5", 8, 240, 28, 28, 240, 5, g=240),
    c2("convnext.dw7x7", 8, 96, 56, 56, 96, 7, g=96),
    c2("regnet.g8.3x3", 8, 224, 28, 28, 224, 3, g=28),
    # dilated (DeepLab output stride 8), 'same' with an even kernel
    c2("deeplab.d2", 4, 512, 65, 65, 512, 3, d=2),
    c2("deeplab.d4", 4, 1024, 65, 65, 256, 3, d=4),
    Case("same.k2", 8, 128, (32, 32), 128, (2, 2), (1, 1), (0, 0), (1, 1), (1, 1)),
    # transposed 2-D: UNet decoder, FCN upsampling
    t2("unet.up2x2.128", 4, 128, 128, 128, 64, 2, 2, 0),
    t2("fcn.up4x4s2", 8, 64, 64, 64, 64, 4, 2, 1),
    t2("gan.3x3s2op1", 8, 128, 32, 32, 64, 3, 2, 1, op=1),
    # 1-D: EnCodec, TCN dilated causal, Conformer depthwise 'same', Demucs transposed
    c1("encodec.k7", 4, 32, 24000, 64, 7, pb=3, pa=3),
    c1("encodec.down.k8s4", 4, 128, 6000, 256, 8, s=4, pb=2, pa=2),
    c1("tcn.causal.d8", 8, 64, 4096, 64, 3, pb=16, pa=0, d=8),
    c1("conformer.dw15", 8, 512, 500, 512, 15, pb=7, pa=7, g=512),
    c1("same.k6.1d", 8, 256, 2000, 256, 6, pb=2, pa=3),
    t1("demucs.up8s4", 4, 256, 1500, 128, 8, 4, 2),
    # 3-D: X3D depthwise, SlowFast temporal, 3-D UNet transposed
    c3("x3d.dw3x3x3", 4, 96, 16, 28, 28, 96, 3, g=96),
    c3("slowfast.t3x1x1", 4, 64, 8, 56, 56, 64, (3, 1, 1)),
    Case("unet3d.up2", 2, 128, (16, 32, 32), 64, (2, 2, 2), (2, 2, 2), (0, 0, 0), (0, 0, 0), (1, 1, 1), 1, True, (0, 0, 0)),
]
