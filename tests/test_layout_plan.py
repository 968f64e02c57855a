"""The delegate's layout plan (`cuda_triton.preprocess.layout_plan`): channels-last intermediates through a CNN.

A small network with every family a CNN has between its convolutions (batch norm that no convolution folds,
relu, a residual add, max pooling, a squeeze-excitation multiply, nearest upsampling, cat, a 1x1 convolution and
a global mean feeding a linear layer) is exported with the plan on and off. On: every 4-D intermediate that a
convolution or a layout-keeping op writes is channels-last, the delegate outputs keep the layouts the program
records (a convolution reading a channels-last tensor writes an intermediate that a copy moves into the output),
and no permute or layout copy runs inside. Off: every value has the layout its node records. Both emulated
blobs match eager PyTorch in each dtype.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from ops_helpers import assert_one_delegate_matches_eager  # noqa: E402
from torch import nn  # noqa: E402

pytest.importorskip("executorch")
if os.environ.get("TRITON_INTERPRET") != "1":  # a GPU machine: the emulator needs the interpreter
    pytest.skip("needs TRITON_INTERPRET=1", allow_module_level=True)

from cuda_triton import CudaTritonOptions  # noqa: E402
from cuda_triton.ops.tensor_meta import channels_last_strides, contiguous_strides  # noqa: E402
from cuda_triton.partition.options import KEY_CHANNELS_LAST  # noqa: E402
from cuda_triton.preprocess.layout_plan import channels_last_like, same_addresses  # noqa: E402
from cuda_triton.serialization import ConvRecord, DataMovementRecord, ElementwiseRecord, NormRecord  # noqa: E402
from cuda_triton.serialization.blob import deserialize  # noqa: E402
from cuda_triton.tools import emulate_pte as E  # noqa: E402
from executorch.exir.lowered_backend_module import LoweredBackendModule  # noqa: E402

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TOL = {"fp32": 1e-4, "fp16": 2e-2, "bf16": 5e-2}


class SmallCnn(nn.Module):
    """Every op family a CNN puts between its convolutions, and two delegate outputs: a conv's and the logits."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.body = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.se = nn.Conv2d(8, 8, 1)
        self.expand = nn.Conv2d(16, 12, 1)
        self.head = nn.Conv2d(12, 4, 3, padding=1)
        self.fc = nn.Linear(12, 5)

    def forward(self, x):
        a = torch.relu(self.stem(x))
        b = self.bn(a)  # a batch norm after an elementwise op: no convolution folds it
        c = torch.relu(self.body(b)) + a  # residual
        d = nn.functional.max_pool2d(c, 2)
        scale = torch.sigmoid(self.se(d.mean((2, 3), keepdim=True)))
        e = d * scale  # squeeze-excitation multiply
        f = torch.cat([nn.functional.interpolate(e, scale_factor=2.0, mode="nearest"), c], 1)
        g = self.expand(f)
        logits = self.fc(g.mean((2, 3)))
        return self.head(g), logits


def _blob(model: nn.Module, example: tuple[torch.Tensor, ...], options: CudaTritonOptions):
    ep = E.lower(model, example, options=options)
    (lowered,) = [m for _, m in ep.graph_module.named_modules() if isinstance(m, LoweredBackendModule)]
    return deserialize(lowered.processed_bytes)


def _model(dtype: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = SmallCnn().eval().to(DTYPES[dtype])
    with torch.no_grad():  # statistics that are not the identity
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    return model, (torch.randn(2, 3, 8, 8, dtype=DTYPES[dtype]),)


def test_channels_last_like_and_same_addresses() -> None:
    cl, nchw = channels_last_strides((2, 8, 4, 4)), contiguous_strides((2, 8, 4, 4))
    vec = ((2, 8, 1, 1), (8, 1, 1, 1))  # both contiguous and channels-last: decides nothing
    assert channels_last_like((2, 8, 4, 4), [((2, 8, 4, 4), cl), vec]) == cl
    assert channels_last_like((2, 8, 4, 4), [((2, 8, 4, 4), nchw)]) is None
    assert channels_last_like((2, 8, 4, 4), [((2, 8, 4, 4), cl), ((2, 8, 4, 4), nchw)]) is None
    assert channels_last_like((2, 8, 4, 4), [vec]) is None
    assert channels_last_like((2, 8, 4), [((2, 8, 4), (32, 4, 1))]) is None  # (N, C, L) storage
    assert channels_last_like((2, 8, 4), [((2, 8, 4), (32, 1, 8))]) == (32, 1, 8)  # (N, L, C): a 1-D map
    # a channel half of an (N, L, 2C) map (``chunk`` along dim 1): channels-last ordered though not dense
    assert channels_last_like((2, 8, 4), [((2, 8, 4), (64, 1, 16)), ((2, 8, 4), (64, 1, 16))]) == (32, 1, 8)
    assert channels_last_like((2, 8, 4, 4), [((2, 8, 4, 4), (256, 1, 64, 16))]) == cl
    assert channels_last_like((2, 8, 4), [((2, 8, 4), (64, 8, 1))]) is None  # a slice of an (N, C, L) map
    assert channels_last_like((2, 8, 4), [((2, 8, 4), (32, 1, 4))]) is None  # overlapping
    assert same_addresses([2, 8, 1, 1], [8, 1, 1, 1], [8, 1, 8, 8])
    assert not same_addresses([2, 8, 4, 4], list(cl), list(nchw))


def test_the_option_is_a_compile_spec() -> None:
    off = CudaTritonOptions(channels_last=False)
    specs = {s.key: bytes(s.value) for s in off.compile_specs()}
    assert specs[KEY_CHANNELS_LAST] == b"0"
    assert CudaTritonOptions.from_compile_specs(off.compile_specs()).channels_last is False
    assert CudaTritonOptions().channels_last is True


@pytest.mark.timeout(600)
def test_intermediates_are_channels_last_and_outputs_keep_their_layout() -> None:
    model, example = _model("fp32")
    blob = _blob(model, example, CudaTritonOptions())
    images = [v for v in blob.values if v.kind == "intermediate" and len(v.sizes) == 4 and v.sizes[2] > 1]
    assert images and all(v.strides == list(channels_last_strides(v.sizes)) for v in images), [
        (v.sizes, v.strides) for v in images
    ]
    outputs = sorted((v.sizes, v.strides) for v in blob.values if v.kind == "output")
    assert outputs == sorted((list(t.shape), list(t.stride())) for t in model(*example))
    # No layout copies inside: the data movement is the upsample and the cat, the only copy the one into the
    # head's output.
    moves = [type(op).__name__ for op in blob.ops if isinstance(op, DataMovementRecord)]
    assert moves == ["UpsampleRecord", "CatRecord"]
    (head_conv,) = [op for op in blob.ops if isinstance(op, ConvRecord) and op.weight_sizes[0] == 4]
    copies = [
        op for op in blob.ops if isinstance(op, ElementwiseRecord) and op.inputs[0].value == head_conv.output
    ]
    assert len(copies) == 1 and blob.values[copies[0].output].kind == "output"


@pytest.mark.timeout(600)
def test_with_the_plan_off_every_value_has_its_recorded_layout() -> None:
    model, example = _model("fp32")
    blob = _blob(model, example, CudaTritonOptions(channels_last=False))
    images = [v for v in blob.values if v.kind == "intermediate" and len(v.sizes) == 4 and v.sizes[2] > 1]
    assert images and all(v.strides == list(contiguous_strides(v.sizes)) for v in images)
    assert not any(isinstance(op, ElementwiseRecord) and len(op.steps) == 1 and op.steps[0].op == "copy"
                   for op in blob.ops)  # fmt: skip


@pytest.mark.timeout(900)
@pytest.mark.parametrize("channels_last", [True, False])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_emulated_blob_matches_eager(dtype: str, channels_last: bool) -> None:
    model, example = _model(dtype)
    options = CudaTritonOptions(allow_tf32=False, channels_last=channels_last)
    assert_one_delegate_matches_eager(model, example, options, TOL[dtype] * 5)


class AudioEncoder(nn.Module):
    """wav2vec2's feature encoder in small: 1-D convolutions, a group norm and GELUs, the last GELU the output."""

    def __init__(self) -> None:
        super().__init__()
        self.c0 = nn.Conv1d(1, 16, 10, 5, bias=False)
        self.norm = nn.GroupNorm(16, 16)
        self.c1 = nn.Conv1d(16, 16, 3, 2, bias=False)
        self.c2 = nn.Conv1d(16, 16, 2, 2, bias=False)

    def forward(self, x):
        x = nn.functional.gelu(self.norm(self.c0(x)))
        return nn.functional.gelu(self.c2(nn.functional.gelu(self.c1(x))))


@pytest.mark.timeout(600)
def test_one_d_maps_are_stored_length_major_and_the_output_is_written_in_place() -> None:
    """Between 1-D convolutions every map is stored (N, L, C), so no convolution copies its input to that layout
    first; the last one, whose fused GELU writes the delegate output, keeps its recorded weight and writes the
    program's (N, C, L) output itself (a 1-D output layout follows the weight alone): no copy record. The group
    norm (one channel a group over 599 samples stored (N, L, C)) splits its rows into chunks (two launches) and
    computes the GELU after it in its epilogue: no elementwise kernel is left."""
    torch.manual_seed(0)
    model, example = AudioEncoder().eval(), (torch.randn(2, 1, 3000),)
    blob = _blob(model, example, CudaTritonOptions())
    # the model's 16-channel maps (the group norm's [chunks, rows, 2] statistics are intermediates too)
    maps = [v for v in blob.values if v.kind == "intermediate" and len(v.sizes) == 3 and v.sizes[1] == 16]
    assert maps and all(v.strides == list(channels_last_strides(v.sizes)) for v in maps), [
        (v.sizes, v.strides) for v in maps
    ]
    convs = [op for op in blob.ops if isinstance(op, ConvRecord)]
    assert len(convs) == 3 and "CL_COPY1" not in " ".join(op.schedule for op in convs)
    assert blob.values[convs[-1].output].kind == "output" and convs[-1].epilogue
    assert not any(isinstance(op, ElementwiseRecord) and op.steps[0].op == "copy" for op in blob.ops)
    (norm,) = [op for op in blob.ops if isinstance(op, NormRecord)]
    assert len(norm.launches) == 2 and norm.epilogue  # the GELU after it runs in its epilogue
    assert not any(isinstance(op, ElementwiseRecord) for op in blob.ops)
    assert_one_delegate_matches_eager(model, example, CudaTritonOptions(), 1e-3)  # fp32 on TF32
