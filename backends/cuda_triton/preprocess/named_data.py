"""Reading a lowered delegate back: its named data and its blob, as the runtime sees them."""

from __future__ import annotations

from typing import Any

from ..serialization.blob import DelegateBlob, deserialize


def named_data_of(lowered: Any) -> dict[str, bytes]:
    """key -> bytes of a `LoweredBackendModule`'s named data (in the .pte and under every external tag)."""
    out: dict[str, bytes] = {}
    nd = lowered.named_data_store_output
    if nd is None:
        return out
    entries = dict(nd.pte_data)
    for per_file in nd.external_data.values():
        entries.update(per_file)
    for key, entry in entries.items():
        buf = nd.buffers[entry.buffer_index]
        out[key] = bytes(buf.buffer) if hasattr(buf, "buffer") else bytes(buf)
    return out


def read_lowered(lowered: Any) -> DelegateBlob:
    """A lowered module's blob, read back with its cubins taken from its named data (as the runtime does)."""
    return deserialize(bytes(lowered.processed_bytes), named_data_of(lowered))


__all__ = ["named_data_of", "read_lowered"]
