"""Shared helpers of the C++ runtime tests: building the runtime once, and well-formed delegate blobs."""

from __future__ import annotations

import random
import struct
import subprocess
from pathlib import Path

from cuda_triton.conv.layout import out_shape_and_stride
from cuda_triton.serialization.blob import (
    ConstantRecord,
    ConstantRef,
    DelegateBlob,
    KernelRecord,
    LaunchRecord,
    NullPtr,
    OpRecord,
    Scalar,
    ValueRecord,
    ValueRef,
)

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
_built = False


def ensure_built() -> Path:
    """Runs scripts/build_runtime.sh once per test session (a no-op when build/ is current); returns build/."""
    global _built
    if not _built:
        r = subprocess.run(
            ["bash", str(ROOT / "scripts" / "build_runtime.sh")], capture_output=True, text=True
        )
        if r.returncode != 0:
            raise RuntimeError(f"scripts/build_runtime.sh failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
        _built = True
    return BUILD


def blob_stream(blobs: list[bytes]) -> bytes:
    """The (u64 length, bytes)* stream runtime/tests/blob_fuzz_harness reads on stdin."""
    return b"".join(struct.pack("<Q", len(b)) + b for b in blobs)


def _contiguous(sizes: list[int]) -> list[int]:
    strides = [1] * len(sizes)
    for i in range(len(sizes) - 2, -1, -1):
        strides[i] = strides[i + 1] * max(sizes[i + 1], 1)
    return strides


def _channels_last(sizes: list[int]) -> list[int]:
    strides = [0] * len(sizes)
    strides[1] = 1
    running = sizes[1]
    for i in range(len(sizes) - 1, 1, -1):
        strides[i] = running
        running *= sizes[i]
    strides[0] = running
    return strides


CONV_PARAMS = ["ptr", "ptr", "ptr", "ptr", "i32", "i32", "i64", "fp32"]


def conv_chain_blob(
    rng: random.Random, n_ops: int = 2, archs: tuple[int, ...] = (80, 90), dtype: str = "fp32"
) -> DelegateBlob:
    """A consistent blob: a chain of 2-D convs input -> (intermediate ->)* output, with plausible launches.

    Layouts come from the Python layout rule, so the C++ reader's layout check accepts them. Cubins are fake
    bytes (the reader does not look inside them).
    """
    elem = {"fp16": 2, "bf16": 2, "fp32": 4}[dtype]
    channels_last = rng.random() < 0.5
    n, c, h, w = rng.randint(1, 3), rng.randint(1, 8), rng.randint(4, 16), rng.randint(4, 16)
    sizes = [n, c, h, w]
    strides = _channels_last(sizes) if channels_last else _contiguous(sizes)
    values = [ValueRecord("input", 0, dtype, sizes, strides)]
    constants: list[ConstantRecord] = []
    kernels: list[KernelRecord] = []
    ops: list[OpRecord] = []
    for arch in archs:
        for name in ("conv_main", "conv_aux"):
            kernels.append(
                KernelRecord(
                    name=name,
                    arch=arch,
                    cubin=b"\x7fELF" + rng.randbytes(rng.randint(16, 64)),
                    num_warps=rng.choice([1, 2, 4, 8]),
                    num_ctas=rng.choice([1, 1, 2]),
                    shared=rng.choice([0, 1024, 65536]),
                    global_scratch_size=rng.choice([0, 0, 128]),
                    global_scratch_align=rng.choice([1, 128]),
                    param_types=list(CONV_PARAMS),
                )
            )
    for o in range(n_ops):
        cin = sizes[1]
        cout = rng.randint(1, 8)
        k = rng.choice([1, 3])
        ws = [cout, cin, k, k]
        wst = _contiguous(ws)
        key = f"cuda_triton/w{o}"
        constants.append(ConstantRecord(key, cout * cin * k * k * elem, dtype, ws))
        bias = None
        if rng.random() < 0.6:
            constants.append(ConstantRecord(f"cuda_triton/b{o}", cout * elem, dtype, [cout]))
            bias = len(constants) - 1
        weight = len(constants) - 1 - (1 if bias is not None else 0)
        pad = k // 2
        out_sizes, out_strides = out_shape_and_stride(
            sizes, strides, ws, wst, [1, 1], [pad, pad], [pad, pad], [1, 1], False, [0, 0], 1, False
        )
        last = o == n_ops - 1
        values.append(
            ValueRecord("output" if last else "intermediate", 0, dtype, list(out_sizes), list(out_strides))
        )
        launches = []
        for j in range(rng.randint(1, 2)):
            kmap = {arch: 2 * a + j for a, arch in enumerate(archs)}
            args = [
                ValueRef(len(values) - 2),
                ConstantRef(weight),
                ConstantRef(bias) if bias is not None else NullPtr(),
                ValueRef(len(values) - 1),
                Scalar("i32", out_sizes[2]),
                Scalar("i32", -rng.randint(0, 100)),
                Scalar("i64", rng.randint(0, 1 << 40)),
                Scalar("fp32", 0.5),
            ]
            launches.append(LaunchRecord(kmap, (rng.randint(1, 64), rng.randint(1, 4), 1), args))
        ops.append(
            OpRecord(
                stride=[1, 1],
                padding_before=[pad, pad],
                padding_after=[pad, pad],
                dilation=[1, 1],
                transposed=False,
                output_padding=[0, 0],
                groups=1,
                input=len(values) - 2,
                weight=weight,
                bias=bias,
                output=len(values) - 1,
                weight_sizes=ws,
                weight_strides=wst,
                template="test_template",
                schedule="BM64_w4",
                launches=launches,
            )  # fmt: skip
        )
        sizes, strides = list(out_sizes), list(out_strides)
    return DelegateBlob(
        triton_version="3.7.1",
        archs=list(archs),
        num_inputs=1,
        num_outputs=1,
        values=values,
        constants=constants,
        kernels=kernels,
        ops=ops,
    )


_tiny_cache: dict[tuple, tuple[Path, list[bytes], dict[str, bytes]]] = {}


def export_tiny(
    directory: Path,
    device_memory: bool = False,
    archs: tuple[int, ...] = (80,),
    external_tag: str | None = None,
    extra_specs: tuple[tuple[str, bytes], ...] = (),
) -> tuple[Path, list[bytes], dict[str, bytes]]:
    """A conv -> relu -> 1x1 conv model lowered with the real CudaTritonPartitioner; returns the .pte, the
    delegate blobs in execution order and the delegates' named data (key -> bytes: weights and cubins). With
    ``external_tag`` the weights go to ``<tag>.ptd`` beside the .pte; ``extra_specs`` are added to the compile
    specs. Cached per process (exports take a while on 2 cores)."""
    key = (device_memory, archs, external_tag, extra_specs)
    if key in _tiny_cache:
        return _tiny_cache[key]
    import torch
    from cuda_triton import CudaTritonOptions, CudaTritonPartitioner
    from cuda_triton.backend import named_data_of  # also registers the BackendDetails by name
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.c2 = torch.nn.Conv2d(8, 4, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.c2(torch.relu(self.c1(x)))

    torch.manual_seed(0)
    ep = torch.export.export(Tiny().eval(), (torch.randn(1, 3, 16, 16),))
    options = CudaTritonOptions(
        archs=archs,
        target_device="cuda:0" if device_memory else None,
        external_tag=external_tag,
        extra=extra_specs,
    )
    lowered = to_edge_transform_and_lower(ep, partitioner=[CudaTritonPartitioner(options)])
    gm = lowered.exported_program().graph_module
    blobs = []
    named: dict[str, bytes] = {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and "executorch_call_delegate" in str(node.target):
            mod = getattr(gm, node.args[0].target)
            assert isinstance(mod, LoweredBackendModule) and mod.backend_id == "CudaTritonBackend"
            blobs.append(bytes(mod.processed_bytes))
            named.update(named_data_of(mod))
    assert blobs, "nothing was delegated"
    stem = f"tiny{'_device' if device_memory else ''}_{'_'.join(map(str, archs))}{'_' + external_tag if external_tag else ''}"
    stem += "".join(f"_{k}{v.decode()}" for k, v in extra_specs)
    path = Path(directory) / f"{stem}.pte"
    program = lowered.to_executorch()
    path.write_bytes(program.buffer)
    if external_tag:
        program.write_tensor_data_to_file(str(directory))
    _tiny_cache[key] = (path, blobs, named)
    return path, blobs, named
