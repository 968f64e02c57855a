"""A draft and its compiled kernels -> the delegate blob and its named data (weights, cubins)."""

from __future__ import annotations

import triton
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.backend.backend_details import PreprocessResult

from ..kernel.aot import CompiledKernel, abi_types
from ..serialization import (
    DelegateBlob,
    KernelRecord,
    LaunchRecord,
    OpRecord,
    named_cubins,
    plan_arena,
    serialize,
)
from .draft import CudaTritonPreprocessError, Draft
from .stats import PreprocessStats

CONSTANT_ALIGNMENT = 64
CUBIN_ALIGNMENT = 64


def assemble(
    draft: Draft, kernels: dict[str, CompiledKernel], stats: PreprocessStats, cubins_seen: set[str]
) -> PreprocessResult:
    """Write one draft's blob (each identical kernel once per arch) and its named data; add to ``stats``.

    ``cubins_seen`` holds the cubin keys already counted in this call (named data is merged by key across the
    partitions of a .pte, so a shared cubin is stored once).
    """
    options = draft.options
    table: list[KernelRecord] = []
    index_of: dict[tuple[int, str, bytes], int] = {}
    ops: list[OpRecord] = []
    for op in draft.ops:
        for lw in op.launches:
            per_arch: dict[int, int] = {}
            for arch, key in lw.keys.items():
                ck = kernels[key]
                expected = abi_types(lw.launch)
                if tuple(ck.param_types) != tuple(expected):
                    raise CudaTritonPreprocessError(
                        f"{lw.launch.name} (sm_{arch}): compiled parameters {ck.param_types} differ from the "
                        f"launch's {expected}"
                    )
                dedup = (ck.arch, ck.name, ck.cubin)
                if dedup not in index_of:
                    index_of[dedup] = len(table)
                    table.append(KernelRecord.from_compiled(ck))
                per_arch[arch] = index_of[dedup]
            g = tuple(int(v) for v in lw.launch.grid)
            op.record.launches.append(LaunchRecord(per_arch, (g[0], g[1], g[2]), lw.args))
        ops.append(op.record)

    blob = DelegateBlob(
        triton_version=triton.__version__,
        archs=list(options.archs),
        num_inputs=draft.num_inputs,
        num_outputs=draft.num_outputs,
        values=draft.values,
        constants=draft.constants,
        kernels=table,
        ops=ops,
    )
    data = serialize(plan_arena(blob))  # intermediates placed in one device arena by lifetime

    store = NamedDataStore()
    for rec, payload in zip(draft.constants, draft.constant_data, strict=True):
        store.add_named_data(rec.key, payload, CONSTANT_ALIGNMENT, options.external_tag)
    for key, cubin in named_cubins(blob).items():
        store.add_named_data(key, cubin, CUBIN_ALIGNMENT, None)
        if key not in cubins_seen:
            cubins_seen.add(key)
            stats.cubins_unique += 1
            stats.cubin_bytes += len(cubin)

    stats.partitions += 1
    stats.ops += len(ops)
    stats.launches += sum(len(o.launches) for o in ops)
    stats.kernels_in_blobs += len(table)
    stats.blob_bytes += len(data)
    stats.constant_bytes += sum(len(d) for d in draft.constant_data)
    stats.tuned_ops += draft.tuned_ops
    for k, v in draft.templates.items():
        stats.templates[k] = stats.templates.get(k, 0) + v
    info = {
        "ops": len(ops),
        "kernels": len(table),
        "blob_bytes": len(data),
        "templates": dict(draft.templates),
    }
    return PreprocessResult(
        processed_bytes=data, data_store_output=store.get_named_data_store_output(), _delegate_info_meta=info
    )


__all__ = ["CONSTANT_ALIGNMENT", "CUBIN_ALIGNMENT", "assemble"]
