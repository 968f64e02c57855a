"""Well-formed delegate blobs for the blob-format tests: a chain of convolutions, and a program with a record of
every kind (every data-movement op, fused steps, epilogue inputs, views, scratch, state values, a planned arena and
state buffer).

Layouts come from the Python shape rules, so both readers accept the blobs; cubins and constant bytes are fake
(the readers do not look inside them).
"""

from __future__ import annotations

import random

from cuda_triton.conv.layout import channels_last_strides, contiguous_strides, out_shape_and_stride
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
from cuda_triton.serialization.checks import data_movement as dm
from cuda_triton.serialization.checks.pooling import pool_record_sizes
from cuda_triton.serialization.records.data_movement import PAD_MODES, UPSAMPLE_MODES

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
        data = self.rng.randbytes(max(n, 0) * ELEMENT[self.dtype])
        self.constants.append(
            ConstantRecord.of_bytes(f"cuda_triton/c{len(self.constants)}", self.dtype, sizes, data)
        )
        return len(self.constants) - 1

    def state(self, tiles: int) -> int:
        """A state value: ``tiles`` int32 counters (a split-K convolution's), placed by `plan_arena`."""
        self.values.append(ValueRecord("state", 0, "int32", [tiles], [1]))
        return len(self.values) - 1

    def add(self, op: OpRecord, scratch: list[int] = (), state: list[int] = ()) -> None:
        """Appends ``op`` with one or two launches whose pointers are its ``state`` values, outputs, inputs and
        ``scratch``."""
        ptrs: list[object] = [ValueRef(v) for v in state] + [ValueRef(v) for v in op.results()]
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
          extras: list[ValueRef | ConstantRef] | None = None, prologue: list[Step] | None = None,
          prologue_inputs: list[ValueRef | ConstantRef] | None = None, state: bool = False) -> int:  # fmt: skip
    """A stride-1 'same' 2-D conv of value ``x`` (weight, optional bias, optional epilogue and prologue, with
    ``state`` split-K tile counters in the state buffer); returns its output."""
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
    counters = [p.state(p.rng.randint(1, 40))] if state else []
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
            prologue=prologue or [],
            prologue_inputs=prologue_inputs or [],
            name="aten.convolution",
        ),  # fmt: skip
        scratch,
        counters,
    )
    return y


def conv_chain_blob(
    rng: random.Random, n_ops: int = 2, archs: tuple[int, ...] = (80, 90), dtype: str = "fp32"
) -> DelegateBlob:
    """A chain of 2-D convs input -> (intermediate ->)* output, some with scratch tensors, some with state."""
    p = _Program(rng, archs, dtype)
    sizes = [rng.randint(1, 3), rng.randint(1, 8), rng.randint(4, 16), rng.randint(4, 16)]
    x = p.value("input", sizes, channels_last_strides(sizes) if rng.random() < 0.5 else None)
    for o in range(n_ops):
        x = _conv(p, x, rng.randint(1, 8), rng.choice([1, 3]), "output" if o == n_ops - 1 else "intermediate",
                  state=rng.random() < 0.3)  # fmt: skip
    return p.blob()


def every_kind_blob(
    rng: random.Random, archs: tuple[int, ...] = (80, 90), dtype: str = "fp32"
) -> DelegateBlob:
    """A small CNN-shaped program with a record of every kind and every data-movement op, views, two outputs and
    two convolutions with state values (split-K tile counters)."""
    p = _Program(rng, archs, dtype)
    n, c, h, w = rng.randint(1, 2), rng.randint(2, 4) * 2, rng.randint(6, 10), rng.randint(6, 10)
    x = p.value("input", [n, c, h, w], channels_last_strides([n, c, h, w]))
    relu = [Step("relu", [FromResult()])]
    # conv + fused residual-free epilogue with a per-channel constant (bias, then relu, then a scale)
    scale = p.constant([c, 1, 1])
    y1 = _conv(
        p, x, c, 3, steps=[*relu, Step("mul", [FromStep(0), FromInput(0)])], extras=[ConstantRef(scale)],
        state=True,
    )  # fmt: skip
    # max pool 3x3 s2 p1
    ceil = rng.random() < 0.5
    y1v = p.values[y1]
    ps = pool_record_sizes(0, y1v.sizes, y1v.strides, [3, 3], [2, 2], [1, 1], [1, 1], [], ceil, False, 0)
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
                     epilogue=[Step("gelu", [FromResult()])], name="aten.addmm", row_norm=True,
                     norm_eps=1e-6))  # fmt: skip
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
    y9 = p.value("intermediate", dm.slice_record_sizes(ps, 3, 0, ww, 2))
    p.add(SliceRecord(input=y4, output=y9, dim=3, start=0, end=ww, step=2, name="aten.slice_copy"))
    pad = [rng.randint(0, 1), 0, 1, 1]  # W before/after, H before/after
    y10 = p.value("intermediate", dm.pad_record_sizes(0, ps, contiguous_strides(ps), pad))
    p.add(PadRecord(input=y4, output=y10, pad=pad, value=0.0, name="aten.constant_pad_nd"))
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
    # squeeze-excitation: a 1x1 conv whose prologue scales y4 by the sigmoid of its per-(N, C) mean and a
    # per-channel constant, the scaled map never stored
    se = p.value("intermediate", [ps[0], c, 1, 1])
    p.add(ReductionRecord(op="mean", dims=[2, 3], keepdim=True, input=y4, output=se, name="aten.mean.dim"))
    gain = p.constant([c, 1, 1])
    prologue = [Step("sigmoid", [FromInput(0)]), Step("mul", [FromResult(), FromStep(0)]),
                Step("mul", [FromStep(1), FromInput(1)])]  # fmt: skip
    y12 = _conv(p, y4, c, 1, prologue=prologue, prologue_inputs=[ValueRef(se), ConstantRef(gain)], state=True)
    del y8, y9, y10, y12
    return p.blob()


# ---- random single-record programs, valid or not: the two readers' verdicts must agree ------------------------
def _maybe(rng: random.Random, p: float) -> bool:
    return rng.random() < p


def _sizes(rng: random.Random, rank: int, lo: int = 1, hi: int = 6) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(rank)]


def _perturb(rng: random.Random, sizes: list[int]) -> list[int]:
    """Usually ``sizes``; sometimes one entry off by one (the readers must then reject the record)."""
    sizes = list(sizes)
    if sizes and _maybe(rng, 0.15):
        i = rng.randrange(len(sizes))
        sizes[i] = max(0, sizes[i] + rng.choice([-1, 1]))
    return sizes


def _rule_or_random(rng: random.Random, rule, *args) -> list[int]:  # noqa: ANN001
    try:
        out = rule(*args)
    except (ValueError, IndexError, ZeroDivisionError):
        return _sizes(rng, rng.randint(1, 4))
    return _perturb(rng, out[0] if isinstance(out, tuple) else out)


def _ints(rng: random.Random, n: int, lo: int, hi: int) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(n)]


def random_record_blob(rng: random.Random, kind: int) -> DelegateBlob:
    """A one-record program of ``kind`` (a record-kind code) with random parameters, mostly but not always valid:
    encode it with `blob._encode` (no validation) and compare the readers."""
    from cuda_triton.serialization.checks.elementwise import broadcast_sizes
    from cuda_triton.serialization.checks.gemm import gemm_record_sizes
    from cuda_triton.serialization.checks.norm import norm_out_sizes
    from cuda_triton.serialization.checks.reduction import reduction_out_sizes

    p = _Program(rng, (90,), rng.choice(["fp32", "fp16"]))
    x_sizes = _sizes(rng, rng.randint(1, 5), 0 if _maybe(rng, 0.05) else 1)
    x = p.value("input", x_sizes)
    extras: list[ValueRef | ConstantRef] = []
    steps: list[Step] = []
    if kind != 6 and _maybe(rng, 0.3):
        steps = [Step("relu", [FromResult() if kind != 1 else FromInput(0)])]
        if _maybe(rng, 0.5):
            steps.append(Step("mul", [FromStep(rng.randint(0, 1)), Literal(2.0)]))
    rank = len(x_sizes)
    op: OpRecord
    if kind == 0:
        n = rng.randint(1, 3)
        x_sizes = _sizes(rng, n + rng.choice([1, 2, 2]), 1, 7)
        p.values[x] = ValueRecord("input", 0, p.dtype, x_sizes, contiguous_strides(x_sizes))
        cin = x_sizes[1] if len(x_sizes) == n + 2 else x_sizes[0]
        groups = rng.choice([1, 1, cin])
        transposed = _maybe(rng, 0.3)
        k = _ints(rng, n, 1, 3)
        ws = [cin, rng.randint(1, 3), *k] if transposed else [rng.randint(1, 3) * groups, cin // groups, *k]
        stride, dil = _ints(rng, n, 0 if _maybe(rng, 0.05) else 1, 2), _ints(rng, n, 1, 2)
        pb, pa, opad = (
            _ints(rng, n, 0, 2),
            _ints(rng, n, 0, 2),
            _ints(rng, n, 0, 1) if transposed else [0] * n,
        )
        out = _rule_or_random(rng, out_shape_and_stride, x_sizes, contiguous_strides(x_sizes), ws,
                              contiguous_strides(ws), stride, pb, pa, dil, transposed, opad, groups, False)  # fmt: skip
        try:
            strides = out_shape_and_stride(x_sizes, contiguous_strides(x_sizes), ws, contiguous_strides(ws), stride,
                                           pb, pa, dil, transposed, opad, groups, False)[1]  # fmt: skip
        except (ValueError, IndexError, ZeroDivisionError):
            strides = contiguous_strides(out)
        y = p.value("output", out, strides if len(strides) == len(out) else contiguous_strides(out))
        if _maybe(rng, 0.3):
            extras = [ConstantRef(p.constant([out[1] if len(out) > 1 else 1] + [1] * max(0, len(out) - 2)))]
            steps = [Step("add", [FromResult(), FromInput(0)])]
        op = ConvRecord(stride=stride, padding_before=pb, padding_after=pa, dilation=dil, transposed=transposed,
                        output_padding=opad, groups=groups, input=x, weight=p.constant(ws),
                        bias=p.constant([ws[0]]) if _maybe(rng, 0.5) else None, output=y, weight_sizes=ws,
                        weight_strides=contiguous_strides(ws), epilogue=steps, epilogue_inputs=extras)  # fmt: skip
    elif kind == 1:
        inputs: list[ValueRef | ConstantRef] = [ValueRef(x)]
        for _ in range(rng.randint(0, 2)):
            s = list(x_sizes[rng.randint(0, rank) :])
            s = [1 if _maybe(rng, 0.3) else d for d in s]
            if _maybe(rng, 0.1):
                s = _sizes(rng, len(s))
            inputs.append(ConstantRef(p.constant(s)) if _maybe(rng, 0.5) else ValueRef(p.value("input", s)))
        acc: list[int] = []
        try:
            for i in inputs:
                acc = broadcast_sizes(acc, p.values[i.value].sizes if isinstance(i, ValueRef) else
                                      p.constants[i.constant].sizes)  # fmt: skip
            out = _perturb(rng, acc)
        except ValueError:
            out = list(x_sizes)
        y = p.value("output", out)
        steps = [Step("add", [FromInput(rng.randint(0, len(inputs))), FromInput(0)])]
        if _maybe(rng, 0.2):
            steps.append(Step("neg", [rng.choice([FromStep(0), FromStep(1), FromResult()])]))
        op = ElementwiseRecord(inputs=inputs, steps=steps, output=y)
    elif kind == 2:
        dims = sorted(set(_ints(rng, rng.randint(1, rank), 0, rank - 1)))
        if _maybe(rng, 0.1):
            dims = dims[::-1] if len(dims) > 1 else [rank]
        keepdim = _maybe(rng, 0.5)
        y = p.value("output", _rule_or_random(rng, reduction_out_sizes, x_sizes, dims, keepdim))
        op = ReductionRecord(op=rng.choice(["sum", "mean", "amax"]), dims=dims, keepdim=keepdim, input=x, output=y,
                             epilogue=steps)  # fmt: skip
    elif kind == 3:
        code = rng.randint(0, 2)
        n = rng.randint(1, 3)
        x_sizes = _sizes(rng, n + rng.choice([1, 2]), 1, 9)
        p.values[x] = ValueRecord("input", 0, p.dtype, x_sizes, contiguous_strides(x_sizes))
        args: dict = {}
        if code < 2:
            kernel = _ints(rng, n, 1, 4)
            args = dict(kernel=kernel, stride=_ints(rng, n, 0 if _maybe(rng, 0.03) else 1, 3),
                        padding=[rng.randint(0, k // 2 + 1) for k in kernel],
                        dilation=[1] * n if code == 1 and not _maybe(rng, 0.1) else _ints(rng, n, 1, 2),
                        ceil_mode=_maybe(rng, 0.5), count_include_pad=code == 1 and _maybe(rng, 0.5),
                        divisor_override=rng.choice([0, 0, 2]) if code == 1 else 0)  # fmt: skip
        else:
            args = dict(output_size=_ints(rng, n, 0 if _maybe(rng, 0.05) else 1, 4))
        full = dict(kernel=[], stride=[], padding=[], dilation=[], output_size=[], ceil_mode=False,
                    count_include_pad=False, divisor_override=0) | args  # fmt: skip
        out = _rule_or_random(rng, pool_record_sizes, code, x_sizes, contiguous_strides(x_sizes), full["kernel"],
                              full["stride"], full["padding"], full["dilation"], full["output_size"], full["ceil_mode"],
                              full["count_include_pad"], full["divisor_override"])  # fmt: skip
        y = p.value("output", out)
        op = PoolingRecord(op=["max", "avg", "adaptive_avg"][code], input=x, output=y, epilogue=steps, **args)
    elif kind == 4:
        batched = _maybe(rng, 0.4)
        m, k, nn, bb = rng.randint(1, 5), rng.randint(1, 5), rng.randint(1, 5), rng.randint(1, 3)
        a_sizes = [bb, m, k] if batched else [m, k]
        b_sizes = [bb, k, nn] if batched and _maybe(rng, 0.5) else [k, nn]
        if _maybe(rng, 0.1):
            b_sizes = [k + 1, nn]
        p.values[x] = ValueRecord("input", 0, p.dtype, a_sizes, contiguous_strides(a_sizes))
        b = ValueRef(p.value("input", b_sizes)) if _maybe(rng, 0.4) else ConstantRef(p.constant([nn, k]))
        bias = rng.choice([None, ConstantRef(p.constant([nn])), ConstantRef(p.constant([nn + 1]))])
        y = p.value("output", _rule_or_random(rng, gemm_record_sizes, a_sizes, b_sizes))
        row_norm = _maybe(rng, 0.3)
        norm_eps = rng.choice([1e-6, 1e-5, -1.0, float("nan")]) if row_norm else rng.choice([0.0, 0.0, 1e-5])
        op = GemmRecord(a=x, b=b, bias=bias, output=y, b_sizes=b_sizes, alpha=rng.choice([1.0, 0.5, float("inf")]),
                        beta=1.0, epilogue=steps, row_norm=row_norm, norm_eps=norm_eps)  # fmt: skip
    elif kind == 5:
        code = rng.randint(0, 4)
        dim = 1 if code in (0, 2) and not _maybe(rng, 0.1) else rng.randint(-1, rank)
        groups = rng.choice([1, 2, 3]) if code == 2 else (0 if not _maybe(rng, 0.05) else 1)
        params = [ConstantRef(p.constant([x_sizes[1] if rank > 1 else 1])) if _maybe(rng, 0.6) else None
                  for _ in range(4)]  # fmt: skip
        y = p.value("output", _rule_or_random(rng, norm_out_sizes, code, x_sizes, dim, groups))
        name = ["batch_norm", "layer_norm", "group_norm", "softmax", "log_softmax"][code]
        op = NormRecord(op=name, input=x, output=y, dim=dim, groups=groups, eps=rng.choice([1e-5, 0.0, -1.0]),
                        weight=params[0], bias=params[1], mean=params[2], var=params[3], epilogue=steps)  # fmt: skip
    else:
        code = rng.randint(0, 7)
        if code == dm.COPY:
            op = CopyRecord(input=x, output=p.value("output", _perturb(rng, x_sizes), dtype="fp16"))
        elif code == dm.RESHAPE:
            total = 1
            for s in x_sizes:
                total *= s
            out = [total] if not _maybe(rng, 0.2) else [total + 1]
            op = ReshapeRecord(input=x, output=p.value("output", out))
        elif code == dm.PERMUTE:
            perm = list(range(rank))
            rng.shuffle(perm)
            if _maybe(rng, 0.1):
                perm[0] = perm[-1]
            op = PermuteRecord(input=x, output=p.value("output", _rule_or_random(rng, dm.permute_record_sizes, x_sizes,
                                                                                  perm)), perm=perm)  # fmt: skip
        elif code == dm.CAT:
            dim = rng.randint(0, rank - 1) if not _maybe(rng, 0.05) else rank
            parts = [x]
            for _ in range(rng.randint(0, 2)):
                s = list(x_sizes)
                if dim < rank:
                    s[dim] = rng.randint(1, 4)
                parts.append(p.value("input", _perturb(rng, s)))
            try:
                acc = dm.cat_record_sizes(rank, dim, [s for v in parts for s in p.values[v].sizes],
                                          [s for v in parts for s in p.values[v].strides])  # fmt: skip
            except (ValueError, IndexError):
                acc = list(x_sizes)
            op = CatRecord(inputs=parts, output=p.value("output", _perturb(rng, acc)), dim=dim)
        elif code == dm.SPLIT:
            dim = rng.randint(0, rank - 1)
            cut = rng.randint(0, x_sizes[dim])
            outs = []
            for size in (cut, x_sizes[dim] - cut):
                s = list(x_sizes)
                s[dim] = size
                outs.append(p.value("output", _perturb(rng, s)))
            op = SplitRecord(input=x, outputs=outs, dim=dim)
        elif code == dm.SLICE:
            dim = rng.randint(0, rank - 1)
            start = rng.randint(0, x_sizes[dim])
            end = rng.randint(start, x_sizes[dim] + (1 if _maybe(rng, 0.1) else 0))
            step = rng.randint(0 if _maybe(rng, 0.05) else 1, 3)
            out = _rule_or_random(rng, dm.slice_record_sizes, x_sizes, dim, start, end, step)
            op = SliceRecord(input=x, output=p.value("output", out), dim=dim, start=start, end=end, step=step)
        elif code == dm.PAD:
            mode = rng.choice(["constant", "reflect", "replicate", "circular"])
            pad = _ints(rng, 2 * rng.randint(0, rank), -1, 2)
            if _maybe(rng, 0.05):
                pad.append(1)
            if mode != "constant" and not _maybe(rng, 0.1):
                pad = [max(0, v) for v in pad]
            out = _rule_or_random(
                rng, dm.pad_record_sizes, PAD_MODES[mode], x_sizes, contiguous_strides(x_sizes), pad
            )
            op = PadRecord(input=x, output=p.value("output", out), pad=pad, mode=mode,
                           value=0.0 if mode != "constant" or _maybe(rng, 0.5) else -1.5)  # fmt: skip
        else:
            x_sizes = _sizes(rng, rng.randint(3, 5))
            p.values[x] = ValueRecord("input", 0, p.dtype, x_sizes, contiguous_strides(x_sizes))
            mode = rng.choice(["nearest", "nearest_exact", "linear", "cubic"])
            size = _ints(rng, len(x_sizes) - 2, 1, 8)
            align = _maybe(rng, 0.3)
            scales = [] if _maybe(rng, 0.5) else [rng.choice([2.0, 0.5, 0.0]) for _ in size]
            out = _rule_or_random(rng, dm.upsample_record_sizes, UPSAMPLE_MODES[mode], x_sizes, contiguous_strides(x_sizes), size,
                                  align, len(scales))  # fmt: skip
            op = UpsampleRecord(input=x, output=p.value("output", out), output_size=size, mode=mode,
                                align_corners=align, scales=scales)  # fmt: skip
    states = [
        p.state(rng.randint(0 if _maybe(rng, 0.05) else 1, 20)) for _ in range(rng.choice([0, 0, 1, 2]))
    ]
    p.add(op, state=states)
    blob = p.blob()
    if states and _maybe(rng, 0.5):
        _break_state(rng, blob, states)
    return blob


def _break_state(rng: random.Random, blob: DelegateBlob, states: list[int]) -> None:
    """One change to a planned blob's state values, valid or (mostly) not."""
    v = rng.choice(states)
    vr = blob.values[v]
    change = rng.randrange(9)
    if change == 0:  # misaligned
        vr.offset += rng.choice([4, 8, blob.arena_alignment])
    elif change == 1:  # past the state buffer
        blob.state_size = max(0, blob.state_size - rng.choice([4, 16, blob.arena_alignment]))
    elif change == 2:  # overlapping another state value
        vr.offset = blob.values[states[0]].offset
    elif change == 3:  # used by no launch
        for lr in blob.ops[0].launches:
            lr.args = [NullPtr() if a == ValueRef(v) else a for a in lr.args]
    elif change == 4:  # a view's base
        blob.values.append(ValueRecord.view(v, vr.dtype, [1], [1], 0))
    elif change == 5:  # not dense
        vr.strides = [rng.choice([0, 2])]
    elif change == 6:  # a record's input or output
        op = blob.ops[0]
        if hasattr(op, "input"):
            op.input = v
        elif hasattr(op, "output"):
            op.output = v
    elif change == 7:  # another index
        vr.index = 1
    else:  # a larger buffer than needed (valid)
        blob.state_size += 256
