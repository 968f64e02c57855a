"""The draft of a delegate blob: value and constant tables, and per op its launches with compile keys.

Kernels are not compiled while drafting: each launch carries its compile key per arch, and the jobs to compile
are collected for the whole export (`kernels.compile_all`); `assemble` then writes the blob.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import Node

from ..kernel.launch import KernelLaunch, ScratchTensor
from ..partition.options import CudaTritonOptions
from ..serialization import MAX_NAME, ConstantRecord, OpRecord, ValueRecord
from ..utils.graph import tensor_val

BLOB_DTYPES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32", torch.float64: "fp64"}
# The blob dtype of a torch dtype's name (the names `ScratchTensor` and `TensorMeta` use).
BLOB_DTYPE_NAMES = {
    "float16": "fp16",
    "bfloat16": "bf16",
    "float32": "fp32",
    "float64": "fp64",
    "int32": "int32",
}

KEY_PREFIX = "cuda_triton/"


class CudaTritonPreprocessError(RuntimeError):
    """A delegated subgraph the preprocess cannot turn into a blob (names the node and why)."""


@dataclass
class DraftLaunch:
    launch: KernelLaunch
    keys: dict[int, str]  # arch -> compile key
    args: list[Any]


@dataclass
class DraftOp:
    record: OpRecord
    launches: list[DraftLaunch]


@dataclass
class Draft:
    options: CudaTritonOptions
    values: list[ValueRecord] = field(default_factory=list)
    constants: list[ConstantRecord] = field(default_factory=list)
    constant_data: list[bytes] = field(default_factory=list)
    constant_index: dict[str, int] = field(default_factory=dict)
    ops: list[DraftOp] = field(default_factory=list)
    num_inputs: int = 0
    num_outputs: int = 0
    tuned_ops: int = 0
    templates: dict[str, int] = field(default_factory=dict)


def describe(node: Node) -> str:
    from ..conv.node_source import describe_node

    return describe_node(node)


@contextlib.contextmanager
def node_errors(node: Node) -> Iterator[None]:
    """Turns the ValueError a spec constructor or a family's launches raise into the export error naming ``node``."""
    try:
        yield
    except ValueError as e:
        raise CudaTritonPreprocessError(f"{describe(node)}: {e}") from e


def profiling_name(node: Node, covered: list[Node | None]) -> str:
    """An op record's profiling name: the node, then the edge ops the record computes (``conv2d: aten.convolution.
    default+aten._native_batch_norm_legit_no_training.default``)."""
    ops = "+".join(str(getattr(n.target, "__name__", n.target)) for n in covered if n is not None)
    return "".join(ch if " " <= ch <= "~" else "?" for ch in f"{node.name}: {ops}")[:MAX_NAME]


def blob_dtype(t: torch.Tensor, what: str) -> str:
    if t.dtype not in BLOB_DTYPES:
        raise CudaTritonPreprocessError(f"{what} has dtype {t.dtype}, which the delegate does not handle")
    return BLOB_DTYPES[t.dtype]


def tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().contiguous().cpu()
    return t.reshape(-1).view(torch.uint8).numpy().tobytes()


def add_constant(draft: Draft, t: torch.Tensor, what: str) -> int:
    data = tensor_bytes(t)
    dtype = blob_dtype(t, what)
    digest = hashlib.sha256(f"{dtype}{list(t.shape)}".encode() + data).hexdigest()[:40]
    key = KEY_PREFIX + digest
    hit = draft.constant_index.get(key)
    if hit is not None:
        return hit
    draft.constant_index[key] = len(draft.constants)
    draft.constants.append(ConstantRecord.of_bytes(key, dtype, [int(s) for s in t.shape], data))
    draft.constant_data.append(data)
    return len(draft.constants) - 1


def contiguous_strides(sizes: tuple[int, ...]) -> list[int]:
    strides, running = [], 1
    for s in reversed(sizes):
        strides.append(running)
        running *= s
    return strides[::-1]


def scratch_value(t: ScratchTensor) -> ValueRecord:
    """The value record of a scratch tensor (dense, contiguous): an intermediate in the arena, or with ``zeroed`` a
    state value, in the state buffer the runtime zeroes once at init and the tensor's launches leave all zero (the
    arena's bytes are reused by other values and never initialised)."""
    dtype = BLOB_DTYPE_NAMES.get(t.dtype)
    if dtype is None:
        raise CudaTritonPreprocessError(
            f"scratch tensor {t.role!r} has dtype {t.dtype}, which no blob value has"
        )
    kind = "state" if t.zeroed else "intermediate"
    return ValueRecord(kind, 0, dtype, [int(s) for s in t.sizes], contiguous_strides(tuple(t.sizes)))


def value_record(kind: str, index: int, node: Node) -> ValueRecord:
    v = tensor_val(node)
    return ValueRecord(kind, index, blob_dtype(v, f"node '{node.name}'"), [int(s) for s in v.shape],
                       [int(s) for s in v.stride()])  # fmt: skip


__all__ = [
    "BLOB_DTYPES",
    "BLOB_DTYPE_NAMES",
    "KEY_PREFIX",
    "CudaTritonPreprocessError",
    "Draft",
    "DraftLaunch",
    "DraftOp",
    "add_constant",
    "contiguous_strides",
    "describe",
    "node_errors",
    "scratch_value",
    "tensor_bytes",
    "value_record",
]
