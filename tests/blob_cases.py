"""Well-formed delegate blobs for the blob-format tests: a chain of convolutions, and a program with a record of
every kind (every data-movement op, fused steps, epilogue inputs, views, scratch, a planned arena).

Layouts come from the Python shape rules, so both readers accept the blobs; cubins and constant bytes are fake
(the readers do not look inside them).
"""

from __future__ import annotations

import random

from cuda_triton.conv.layout import channels_last_strides, contiguous_strides, out_shape_and_stride
from cuda_triton.ops.data_movement import layout as dm
from cuda_triton.ops.pooling.layout import pool_out_sizes
from cuda_triton.serialization import (
    CatRecord,
    ConstantRecord,
    ConstantRef,
    ConvRecord,
    CopyRecord,
    DelegateBlob,
    ElementwiseRecord,
    FromInput,
    FromResult,
    FromStep,
    GemmRecord,
    KernelRecord,
    LaunchRecord,
    Literal,
    NormRecord,
    NullPtr,
    OpRecord,
    PadRecord,
    PermuteRecord,
    PoolingRecord,
    ReductionRecord,
    ReshapeRecord,
    Scalar,
    SliceRecord,
    SplitRecord,
    Step,
    UpsampleRecord,
    ValueRecord,
    ValueRef,
    plan_arena,
)

ELEMENT = {"fp16": 2, "bf16": 2, "fp32": 4}
PARAMS = ["ptr", "ptr", "ptr", "ptr", "i32", "i64", "fp32"]  # every fake kernel's signature


class _Program:
    """Builds a blob: values, constants, kernels and ops, with plausible launches for each op."""

    def __init__(self, rng: random.Random, archs: tuple[int, ...], dtype: str) -> None:
        self.rng, self.archs, self.dtype = rng, archs, dtype
        self.values: list[ValueRecord] = []
        self.constants: list[ConstantRecord] = []
        self.ops: list[OpRecord] = []
        self.kernels: list[KernelRecord] = []
        self.num_inputs = self.num_outputs = 0
        for arch in archs:
            for name in ("kernel_main", "kernel_aux"):
                self.kernels.append(
                    KernelRecord(
                        name=name,
                        arch=arch,
                        cubin=b"\x7fELF" + rng.randbytes(rng.randint(16, 64)),
                        num_warps=rng.choice([1, 2, 4, 8]),
                        num_ctas=rng.choice([1, 1, 2]),
                        shared=rng.choice([0, 1024, 65536]),
                        global_scratch_size=rng.choice([0, 0, 128]),
                        global_scratch_align=rng.choice([1, 128]),
                        param_types=list(PARAMS),
                    )
                )

    def value(
        self, kind: str, sizes: list[int], strides: list[int] | None = None, dtype: str | None = None
    ) -> int:
        index = 0
        if kind == "input":
            index, self.num_inputs = self.num_inputs, self.num_inputs + 1
        elif kind == "output":
            index, self.num_outputs = self.num_outputs, self.num_outputs + 1
        strides = contiguous_strides(sizes) if strides is None else strides
        self.values.append(ValueRecord(kind, index, dtype or self.dtype, list(sizes), list(strides)))
        return len(self.values) - 1

    def view(self, base: int, sizes: list[int], strides: list[int], offset: int = 0) -> int:
        self.values.append(ValueRecord.view(base, self.values[base].dtype, sizes, strides, offset))
        return len(self.values) - 1

    def constant(self, sizes: list[int]) -> int:
        n = 1
        for s in sizes:
            n *= s
        data = self.rng.randbytes(n * ELEMENT[self.dtype])
        self.constants.append(
            ConstantRecord.of_bytes(f"cuda_triton/c{len(self.constants)}", self.dtype, sizes, data)
        )
        return len(self.constants) - 1

    def add(self, op: OpRecord, scratch: list[int] = ()) -> None:
        """Appends ``op`` with one or two launches whose pointers are its outputs, inputs and ``scratch``."""
        ptrs: list[object] = [ValueRef(v) for v in op.results()]
        ptrs += [x for x in op.operands() if x is not None] + [ValueRef(v) for v in scratch]
        rng = self.rng
        for j in range(rng.randint(1, 2)):
            args = [*(ptrs[i] if i < len(ptrs) else NullPtr() for i in range(4))]
            args += [
                Scalar("i32", -rng.randint(0, 100)),
                Scalar("i64", rng.randint(0, 1 << 40)),
                Scalar("fp32", 0.5),
            ]
            kernels = {arch: 2 * a + j for a, arch in enumerate(self.archs)}
            op.launches.append(LaunchRecord(kernels, (rng.randint(1, 64), rng.randint(1, 4), 1), args))
        op.template, op.schedule = "test_template", f"S{len(self.ops)}"
        self.ops.append(op)

    def blob(self) -> DelegateBlob:
        blob = DelegateBlob("3.7.1", list(self.archs), self.num_inputs, self.num_outputs, self.values,
                            self.constants, self.kernels, self.ops)  # fmt: skip
        return plan_arena(blob, alignment=self.rng.choice([16, 64, 256]))


def _conv(p: _Program, x: int, cout: int, k: int, kind: str = "intermediate", steps: list[Step] | None = None,
          extras: list[ValueRef | ConstantRef] | None = None) -> int:  # fmt: skip
    """A stride-1 'same' 2-D conv of value ``x`` (weight, optional bias, optional epilogue); returns its output."""
    xs = p.values[x]
    ws = [cout, xs.sizes[1], k, k]
    pad = k // 2
    sizes, strides = out_shape_and_stride(
        xs.sizes, xs.strides, ws, contiguous_strides(ws), [1, 1], [pad, pad], [pad, pad], [1, 1], False, [0, 0], 1,
        False,
    )  # fmt: skip
    weight = p.constant(ws)
    bias = p.constant([cout]) if p.rng.random() < 0.6 else None
    y = p.value(kind, sizes, strides)
    scratch = [p.value("intermediate", [4, sizes[1]], dtype="fp32")] if p.rng.random() < 0.4 else []
    p.add(
        ConvRecord(
            stride=[1, 1],
            padding_before=[pad, pad],
            padding_after=[pad, pad],
            dilation=[1, 1],
            transposed=False,
            output_padding=[0, 0],
            groups=1,
            input=x,
            weight=weight,
            bias=bias,
            output=y,
            weight_sizes=ws,
            weight_strides=contiguous_strides(ws),
            epilogue=steps or [],
            epilogue_inputs=extras or [],
            name="aten.convolution",
        ),  # fmt: skip
        scratch,
    )
    return y


def conv_chain_blob(
    rng: random.Random, n_ops: int = 2, archs: tuple[int, ...] = (80, 90), dtype: str = "fp32"
) -> DelegateBlob:
    """A chain of 2-D convs input -> (intermediate ->)* output, some with scratch tensors."""
    p = _Program(rng, archs, dtype)
    sizes = [rng.randint(1, 3), rng.randint(1, 8), rng.randint(4, 16), rng.randint(4, 16)]
    x = p.value("input", sizes, channels_last_strides(sizes) if rng.random() < 0.5 else None)
    for o in range(n_ops):
        x = _conv(p, x, rng.randint(1, 8), rng.choice([1, 3]), "output" if o == n_ops - 1 else "intermediate")
    return p.blob()


def every_kind_blob(
    rng: random.Random, archs: tuple[int, ...] = (80, 90), dtype: str = "fp32"
) -> DelegateBlob:
    """A small CNN-shaped program with a record of every kind and every data-movement op, views and two outputs."""
    p = _Program(rng, archs, dtype)
    n, c, h, w = rng.randint(1, 2), rng.randint(2, 4) * 2, rng.randint(6, 10), rng.randint(6, 10)
    x = p.value("input", [n, c, h, w], channels_last_strides([n, c, h, w]))
    relu = [Step("relu", [FromResult()])]
    # conv + fused residual-free epilogue with a per-channel constant (bias, then relu, then a scale)
    scale = p.constant([c, 1, 1])
    y1 = _conv(
        p, x, c, 3, steps=[*relu, Step("mul", [FromStep(0), FromInput(0)])], extras=[ConstantRef(scale)]
    )
    # max pool 3x3 s2 p1
    ceil = rng.random() < 0.5
    ps = pool_out_sizes(0, p.values[y1].sizes, [3, 3], [2, 2], [1, 1], [1, 1], [], ceil, False, 0)
    y2 = p.value("intermediate", ps, channels_last_strides(ps))
    p.add(PoolingRecord(op="max", input=y1, output=y2, kernel=[3, 3], stride=[2, 2], padding=[1, 1],
                        dilation=[1, 1], ceil_mode=ceil, name="aten.max_pool2d_with_indices"))  # fmt: skip
    # batch norm with its four constants, epilogue relu
    bn = [ConstantRef(p.constant([c])) for _ in range(4)]
    y3 = p.value("intermediate", ps, channels_last_strides(ps))
    p.add(NormRecord(op="batch_norm", input=y2, output=y3, dim=1, eps=1e-5, weight=bn[0], bias=bn[1], mean=bn[2],
                     var=bn[3], epilogue=relu, name="aten._native_batch_norm_legit_no_training"))  # fmt: skip
    # elementwise: sigmoid(y3) * y2 + per-channel constant
    shift = p.constant([c, 1, 1])
    y4 = p.value("intermediate", ps)
    steps = [Step("sigmoid", [FromInput(0)]), Step("mul", [FromStep(0), FromInput(1)]),
             Step("add", [FromStep(1), FromInput(2)]), Step("clamp", [FromStep(2), Literal(-6.0), Literal(6.0)])]  # fmt: skip
    p.add(ElementwiseRecord(inputs=[ValueRef(y3), ValueRef(y2), ConstantRef(shift)], steps=steps, output=y4,
                            name="aten.sigmoid+aten.mul+aten.add+aten.clamp"))  # fmt: skip
    # global average pool as a reduction over (H, W), then a view (N, C) for the GEMM
    y5 = p.value("intermediate", [ps[0], ps[1]])
    p.add(ReductionRecord(op="mean", dims=[2, 3], keepdim=False, input=y4, output=y5, name="aten.mean.dim"))
    k = rng.randint(1, 6)
    wb = p.constant([k, c])  # stored (N, K): the kernel's prepared layout
    bias = p.constant([k])
    out0 = p.value("output", [ps[0], k])
    p.add(GemmRecord(a=y5, b=ConstantRef(wb), bias=ConstantRef(bias), output=out0, b_sizes=[c, k],
                     epilogue=[Step("gelu", [FromResult()])], name="aten.addmm"))  # fmt: skip
    # data movement on y4 (contiguous N, C, h, w)
    hh, ww = ps[2], ps[3]
    y6 = p.value("intermediate", [ps[0], hh, ww, c])
    p.add(PermuteRecord(input=y4, output=y6, perm=[0, 2, 3, 1], name="aten.permute_copy"))
    y7 = p.value("intermediate", [ps[0], hh * ww * c])
    p.add(ReshapeRecord(input=y6, output=y7, name="aten.view_copy"))
    y8 = p.value("intermediate", [ps[0], hh * ww * c], dtype="fp16" if dtype != "fp16" else "fp32")
    p.add(CopyRecord(input=y7, output=y8, name="aten._to_dim_order_copy"))
    half = c // 2
    parts = [
        p.value("intermediate", [ps[0], half, hh, ww]),
        p.value("intermediate", [ps[0], c - half, hh, ww]),
    ]
    p.add(SplitRecord(input=y4, outputs=parts, dim=1, name="aten.split_with_sizes_copy"))
    y9 = p.value("intermediate", dm.slice_out_sizes(ps, 3, 0, ww, 2))
    p.add(SliceRecord(input=y4, output=y9, dim=3, start=0, end=ww, step=2, name="aten.slice_copy"))
    before, after = [0, 0, 1, rng.randint(0, 1)], [0, 0, 1, 0]
    y10 = p.value("intermediate", dm.pad_out_sizes(0, ps, before, after))
    p.add(PadRecord(input=y4, output=y10, before=before, after=after, value=0.0, name="aten.constant_pad_nd"))
    up = [ps[2] * 2, ps[3] * 2]
    y11 = p.value("intermediate", [ps[0], half, *up])
    p.add(UpsampleRecord(input=parts[0], output=y11, output_size=up, mode="linear", align_corners=rng.random() < 0.5,
                         scales=[2.0, 2.0], name="aten.upsample_bilinear2d"))  # fmt: skip
    # the second output: cat of the two split parts written into one output, through a view of it for the first
    out1 = p.value("output", [ps[0], c, hh, ww])
    p.add(CatRecord(inputs=parts, output=out1, dim=1, name="aten.cat"))
    # a view of the output (its first channels) that an elementwise op writes in place
    first = p.view(out1, [ps[0], half, hh, ww], contiguous_strides([ps[0], c, hh, ww]), 0)
    p.add(ElementwiseRecord(inputs=[ValueRef(parts[0]), ValueRef(first)], output=first, name="aten.add",
                            steps=[Step("add", [FromInput(0), FromInput(1)])]))  # fmt: skip
    del y8, y9, y10
    return p.blob()
