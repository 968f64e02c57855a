"""The routing planner's gates that need no template (`cuda_triton.conv.routing`, docs/routing.md): symbolic
shapes, the target device, ROCm, and the recorded output layout. Each answers a refusal reason or None."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from ..utils.conv import rule_layout
from .binding import ConvArgs
from .inductor import concrete_int
from .problem import layout_name


def is_symbolic(t: torch.Tensor) -> bool:
    return not all(concrete_int(s) for s in t.shape) or not all(concrete_int(s) for s in t.stride())


def fmt_list(xs: Iterable[Any]) -> str:
    return "[" + ", ".join(str(x) for x in xs) + "]"


@dataclass(frozen=True)
class Target:
    """The platform the caller plans for (see `plan`'s ``target_device`` and ``rocm``)."""

    device: torch.device | str | None  # None: each node's input device; "rocm" for a ROCm target
    rocm: bool | None  # None: ROCm when torch is a HIP build or the device names hip/rocm


def parse_target_device(target_device: str | bytes | torch.device | None) -> torch.device | str | None:
    if target_device is None:
        return None
    if isinstance(target_device, bytes):  # the CompileSpec spelling, b"cuda:0"
        target_device = target_device.decode()
    if isinstance(target_device, str) and target_device.split(":")[0].lower() == "rocm":
        return "rocm"
    return torch.device(target_device)


def device_gate(x: torch.Tensor, target: Target) -> tuple[str | None, bool]:
    """(refusal reason or None, whether the stated device is a ROCm device)."""
    if target.device is None:
        dev = x.device
        stated = f"the input is on '{dev}' (its recorded example value)"
        hint = (
            "; an export whose example inputs live on the CPU plans for CUDA with target_device='cuda' "
            "(or CudaTritonPartitioner's target device)"
        )
    else:
        dev = target.device
        stated = f"the target device is '{dev}'"
        hint = ""
    if isinstance(dev, str) or dev.type == "hip":  # "rocm" / "hip": a ROCm target
        return None, True
    if dev.type != "cuda":
        return f"{stated}, not a CUDA device: the delegate runs only on NVIDIA GPUs{hint}", False
    return None, False


def rocm_reason(is_rocm_device: bool, rocm: bool | None) -> str | None:
    if is_rocm_device:
        return "the target is a ROCm (HIP) device: the delegate ships NVIDIA cubins only"
    if rocm is True:
        return "planning for ROCm (rocm=True): the delegate ships NVIDIA cubins only"
    if rocm is None and getattr(torch.version, "hip", None):
        return (
            f"this torch is a ROCm (HIP {torch.version.hip}) build, so 'cuda' means an AMD GPU; the delegate ships "
            "NVIDIA cubins only (pass rocm=False when exporting on a ROCm machine for an NVIDIA target)"
        )
    return None


def layout_reason(args: ConvArgs, x: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> str | None:
    """Why the node's recorded output layout is not the one the delegate writes (the layout rule's), or None."""
    sizes, strides = rule_layout(x, w, args.params)
    rec_sizes = [int(s) for s in out.shape]
    rec_strides = [int(s) for s in out.stride()]
    same = rec_sizes == sizes and all(
        size <= 1 or a == b for size, a, b in zip(sizes, rec_strides, strides, strict=True)
    )
    if same:
        return None

    def name(sz: list[int], st: list[int]) -> str:
        if len(sz) == args.spatial_dims + 1:  # unbatched
            sz, st = [1, *sz], [sz[0] * st[0], *st]
        return layout_name(tuple(sz), tuple(st))

    return (
        f"the node records an output of sizes {fmt_list(rec_sizes)} strides {fmt_list(rec_strides)} "
        f"({name(rec_sizes, rec_strides)}), but the delegate writes the layout ATen's CUDA convolution returns, "
        f"sizes {fmt_list(sizes)} strides {fmt_list(strides)} ({name(sizes, strides)}), and ExecuTorch would read it "
        "with the recorded layout"
    )
