"""Placing intermediates in the delegate's device arena by lifetime, and state values in its state buffer
(docs/blob_format.md, "VALS").

`plan_arena` is the writer's planner; the readers only check the result (`validation._check_arena`,
`validation._check_state`), so a plan may also come from elsewhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .encoding import BlobError, span_bytes
from .validation import live_ranges

if TYPE_CHECKING:
    from .blob import DelegateBlob


def _round_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def plan_arena(blob: DelegateBlob, alignment: int | None = None) -> DelegateBlob:
    """Sets every intermediate's ``offset`` and the blob's ``arena_size``, every state value's ``offset`` and the
    blob's ``state_size`` (and ``arena_alignment`` when given); returns the blob.

    Intermediates whose live ranges (first to last op that uses them, views included) share an op get disjoint
    bytes; the others may reuse them. Largest first, each at the lowest aligned offset clear of the already placed
    ones it is live with (first fit), which keeps the arena close to the peak of live bytes for the chains and
    residual branches of CNNs.

    State values are live for the whole program: they get disjoint bytes of the state buffer, one after the other
    in value order, each at an aligned offset; ``state_size`` is the end of the last, rounded up to the alignment.
    """
    if alignment is not None:
        blob.arena_alignment = alignment
    align = blob.arena_alignment
    for v, vr in enumerate(blob.values):
        if vr.kind == "view" and not 0 <= vr.index < v:
            raise BlobError(f"value {v}: a view's base must be an earlier value, not {vr.index}")
    ranges = live_ranges(blob)
    spans = {v: span_bytes(vr.dtype, vr.sizes, vr.strides) for v, vr in enumerate(blob.values)}
    intermediates = [v for v, vr in enumerate(blob.values) if vr.kind == "intermediate"]
    placed: list[tuple[int, int, int, int]] = []  # (offset, end, first, last)
    size = 0
    for v in sorted(intermediates, key=lambda v: (-spans[v], v)):
        span = spans[v]
        first, last = ranges.get(v, (-1, -1))
        offset = 0
        if span > 0 and first >= 0:
            busy = sorted((lo, hi) for lo, hi, f, la in placed if f <= last and first <= la)
            for lo, hi in busy:
                if offset + span <= lo:
                    break
                offset = max(offset, _round_up(hi, align))
            placed.append((offset, offset + span, first, last))
        blob.values[v].offset = offset
        size = max(size, offset + span)
    blob.arena_size = _round_up(size, align)
    end = 0
    for vr in blob.values:
        if vr.kind == "state":
            vr.offset = _round_up(end, align)
            end = vr.offset + span_bytes(vr.dtype, vr.sizes, vr.strides)
    blob.state_size = _round_up(end, align)
    return blob
