"""Shared helpers of the C++ runtime tests: building the runtime once, the blob stream of the fuzz harness, a tiny
exported model."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

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


_tiny_cache: dict[tuple, tuple[Path, list[bytes], dict[str, bytes]]] = {}


def export_tiny(
    directory: Path,
    device_memory: bool = False,
    archs: tuple[int, ...] = (80,),
    external_tag: str | None = None,
    extra_specs: tuple[tuple[str, bytes], ...] = (),
    families: tuple[str, ...] | None = None,
    variant: str = "",
    device_io: bool = False,
) -> tuple[Path, list[bytes], dict[str, bytes]]:
    """A conv -> relu -> 1x1 conv model lowered with the real CudaTritonPartitioner; returns the .pte, the
    delegate blobs in execution order and the delegates' named data (key -> bytes: weights and cubins). With
    ``external_tag`` the weights go to ``<tag>.ptd`` beside the .pte; ``extra_specs`` are added to the compile
    specs. ``families`` limits the partitioner to those op families (``("conv",)``: the relu runs on the CPU
    between two delegates). ``variant`` names an export made under a test's patches, cached apart from the others.
    ``device_io``: device-planned with the program's inputs and outputs left in device memory
    (`cuda_triton.device_io`).
    Cached per process (exports take a while on 2 cores)."""
    device_memory = device_memory or device_io
    key = (device_memory, archs, external_tag, extra_specs, families, variant, device_io)
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
    from cuda_triton.partition.config import configs_for

    configs = None if families is None else configs_for(families)
    lowered = to_edge_transform_and_lower(ep, partitioner=[CudaTritonPartitioner(options, configs=configs)])
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
    stem += "" if families is None else "_" + "_".join(families)
    stem += f"_{variant}" if variant else ""
    stem += "_device_io" if device_io else ""
    path = Path(directory) / f"{stem}.pte"
    if device_io:
        from cuda_triton.device_io import device_io_backend_config

        program = lowered.to_executorch(device_io_backend_config())
    else:
        program = lowered.to_executorch()
    path.write_bytes(program.buffer)
    if external_tag:
        program.write_tensor_data_to_file(str(directory))
    _tiny_cache[key] = (path, blobs, named)
    return path, blobs, named


def reseal_blobs(pte: bytes) -> bytes:
    """``pte`` with every delegate blob inside it re-sealed (its header digest recomputed), for tests that edit
    a blob's fields in place and want the runtime's checks behind the digest to see the edit."""
    from cuda_triton.serialization.blob import FORMAT_VERSION, seal

    out = bytearray(pte)
    at = out.find(b"CTRB")
    while at >= 0:
        total = struct.unpack_from("<Q", out, at + 8)[0]
        if struct.unpack_from("<I", out, at + 4)[0] == FORMAT_VERSION and at + total <= len(out):
            out[at : at + total] = seal(bytes(out[at : at + total]))
        at = out.find(b"CTRB", at + 4)
    return bytes(out)
