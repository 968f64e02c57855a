"""Convolutions that are in neither the public suite nor the shipped tuning table: how the op does on shapes
it has never been tuned for (the table's nearest-neighbour fallback and the templates' heuristics).

    PYTHONPATH=backends python scripts/bench_conv.py --suite bench/unseen_suite.py --all-cases --no-inductor ...

Layers of networks the table does not cover (ResNet-50/101, ResNeXt, YOLO, ASPP, HRNet, MobileNetV3, wav2vec2,
Whisper, HiFi-GAN, DCGAN, I3D, ...) at batch sizes the table does not hold (2, 4, 16). The Case type and its
helpers come from the public suite file beside this one (one definition).
"""

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location("_suite_defs", Path(__file__).with_name("public_suite.py"))
_defs = importlib.util.module_from_spec(_spec)
sys.modules["_suite_defs"] = _defs  # dataclasses need the module registered
_spec.loader.exec_module(_defs)
Case, c1, c2, c3, t1, t2 = _defs.Case, _defs.c1, _defs.c2, _defs.c3, _defs.t1, _defs.t2

PUBLIC = [
    # 2-D forward: ResNet-50/101, ResNeXt, YOLO, ASPP, UNet, HRNet, VGG, NCHW inputs, asymmetric 'same'
    c2("u.r50.l1.1x1.b4", 4, 64, 56, 56, 256, 1, p=0),
    c2("u.r50.l2.3x3s2.b4", 4, 128, 56, 56, 128, 3, s=2),
    c2("u.r50.l4.3x3.b2", 2, 512, 7, 7, 512, 3),
    c2("u.r50.l4.1x1.b2", 2, 2048, 7, 7, 512, 1, p=0),
    c2("u.r101.l3.3x3.b16", 16, 256, 14, 14, 256, 3),
    c2("u.resnext.g32", 4, 256, 28, 28, 256, 3, g=32),
    c2("u.yolo.3x3s2.b2", 2, 128, 80, 80, 256, 3, s=2),
    c2("u.yolo.1x1.b2", 2, 512, 20, 20, 256, 1, p=0),
    c2("u.unet.enc.b2", 2, 64, 256, 256, 64, 3),
    c2("u.aspp.d12", 2, 256, 33, 33, 256, 3, d=12),
    c2("u.aspp.d6.nchw", 2, 2048, 33, 33, 256, 3, d=6, cl=False),
    c2("u.mbv2.stem.b16", 16, 3, 224, 224, 32, 3, s=2),
    c2("u.effnet.expand.b16", 16, 40, 28, 28, 240, 1, p=0),
    c2("u.vgg.3x3.512", 4, 512, 28, 28, 512, 3),
    c2("u.nchw.3x3", 4, 128, 64, 64, 128, 3, cl=False),
    Case("u.same.k4", 4, 64, (48, 48), 64, (4, 4), (1, 1), (1, 1), (2, 2), (1, 1)),
    c2("u.hrnet.3x3", 8, 32, 64, 48, 32, 3),
    # depthwise: MobileNetV2/V3, ConvNeXt, strided NCHW
    c2("u.mbv3.dw3x3s2", 16, 72, 56, 56, 72, 3, s=2, g=72),
    c2("u.mbv2.dw3x3.b4", 4, 144, 56, 56, 144, 3, g=144),
    c2("u.convnext.dw7x7.384", 2, 384, 28, 28, 384, 7, g=384),
    c2("u.dw5x5s2.nchw", 8, 240, 28, 28, 240, 5, s=2, g=240, cl=False),
    # 1-D: wav2vec2 feature encoder, Whisper, HiFi-GAN resblock, TCN, Conformer, ConvNeXt-1D
    c1("u.w2v2.conv0", 4, 1, 16000, 512, 10, s=5),
    c1("u.w2v2.conv1", 4, 512, 3199, 512, 3, s=2),
    c1("u.hifigan.res.d3", 2, 256, 8192, 256, 3, pb=3, pa=3, d=3),
    c1("u.whisper.conv2", 2, 384, 3000, 384, 3, s=2, pb=1, pa=1),
    c1("u.tcn.d16", 4, 128, 2048, 128, 3, pb=32, pa=0, d=16),
    c1("u.conformer.dw31", 4, 256, 400, 256, 31, pb=15, pa=15, g=256),
    c1("u.convnext1d.dw7", 8, 384, 1000, 384, 7, pb=3, pa=3, g=384),
    # transposed: UNet, DCGAN, NCHW k3s2, HiFi-GAN and EnCodec upsamplers
    t2("u.unet.up2x2.256", 2, 256, 64, 64, 128, 2, 2, 0),
    t2("u.dcgan.4x4s2", 16, 256, 8, 8, 128, 4, 2, 1),
    t2("u.k3s2op1.nchw", 4, 64, 64, 64, 32, 3, 2, 1, op=1, cl=False),
    t1("u.hifigan.up16s8", 2, 512, 200, 256, 16, 8, 4),
    t1("u.encodec.up8s4", 4, 256, 400, 128, 8, 4, 2),
    # 3-D: I3D, R(2+1)D spatial, strided depthwise, 3-D transposed
    c3("u.i3d.3x3x3", 2, 64, 8, 56, 56, 64, 3),
    c3("u.r2p1d.1x3x3", 4, 64, 8, 56, 56, 144, (1, 3, 3)),
    c3("u.x3d.dw.s2", 4, 96, 16, 28, 28, 96, 3, s=(1, 2, 2), g=96),
    Case("u.up3d.2", 2, 64, (8, 32, 32), 32, (2, 2, 2), (2, 2, 2), (0, 0, 0), (0, 0, 0), (1, 1, 1), 1, True, (0, 0, 0)),
]
