"""Programmatic dependent launch (PDL): a kernel's launch overlaps the tail of the kernel before it.

In a CUDA graph of many short kernels (a network at batch 1), much of the time between two kernels is the
second one's launch: its blocks are scheduled only once the first has finished and flushed its writes. A kernel
launched with the programmatic-stream-serialization attribute may instead be scheduled as soon as every block of
the kernel before it has signalled (``griddepcontrol.launch_dependents``); its blocks then wait at
``griddepcontrol.wait`` until that kernel has completed and its memory is visible (PTX ISA, "griddepcontrol";
sm_90 and later).

So a kernel compiled for PDL must wait before it touches global memory, which our kernels do not do themselves:
`wait_for_prior_grids` rewrites a kernel's PTX so that its first two instructions are the wait and then the
signal. Waiting first keeps every read and write of the kernel after the previous kernel's completion (so a
kernel may overwrite a buffer its predecessor read), and signalling only after the wait lets the next kernel be
scheduled while this one runs, never before this one's own predecessor is done. Completion is transitive along
the stream, so a kernel also sees the writes of every kernel before its predecessor.

The rewrite runs as a stage of Triton's own pipeline (`pdl_stages_hook`, installed for one compile at a time by
`cuda_triton.kernel.aot`), between the PTX it generates and its ``ptxas`` run, and Triton is asked for
``launch_pdl`` so that the kernel's metadata, the blob's kernel flags and the runtime's launch attribute agree.
Interpreted kernels and sm_80 cubins are never rewritten.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

PDL_MIN_ARCH = 90
WAIT = "griddepcontrol.wait;"
SIGNAL = "griddepcontrol.launch_dependents;"
# Versions the rewrite inside Triton's compile cache key: a change of what is inserted must not hit old entries.
_HOOK_KEY = "cuda_triton-pdl-wait-then-signal-1"
_DECLARATION = re.compile(r"\s*(\.reg|\.shared|\.local)\b")


class PtxRewriteError(ValueError):
    """The PTX does not have the shape the PDL rewrite expects (one ``.entry`` with a body)."""


def uses_pdl(requested: bool, arch: int) -> bool:
    """Whether a kernel compiled for ``arch`` is built for PDL when the program asks for it."""
    return requested and int(arch) >= PDL_MIN_ARCH


def wait_for_prior_grids(ptx: str) -> str:
    """``ptx`` with the PDL wait and signal as the first instructions of its single kernel (after the body's
    register and memory declarations, which PTX wants before any instruction)."""
    lines = ptx.splitlines(keepends=True)
    entries = [i for i, line in enumerate(lines) if ".entry" in line and not line.lstrip().startswith("//")]
    if len(entries) != 1:
        raise PtxRewriteError(f"PDL rewrite: expected one .entry in the PTX, found {len(entries)}")
    try:
        body = next(i for i in range(entries[0], len(lines)) if lines[i].strip() == "{")
    except StopIteration:
        raise PtxRewriteError("PDL rewrite: the kernel's .entry has no body") from None
    at = body + 1
    while at < len(lines) and (not lines[at].strip() or _DECLARATION.match(lines[at])):
        at += 1
    if at == len(lines) or lines[at].strip() == "}":
        raise PtxRewriteError("PDL rewrite: the kernel's body has no instruction")
    return "".join([*lines[:at], f"\t{WAIT}\n", f"\t{SIGNAL}\n", *lines[at:]])


def pdl_stages_hook(*args: Any) -> Any:
    """Triton's ``add_stages_inspection_hook``: called bare, the text it adds to the compile cache key; called
    with ``(backend, stages, options, language, capability)``, it puts `wait_for_prior_grids` after the PTX
    stage of compiles that ask for ``launch_pdl``."""
    if not args:
        return _HOOK_KEY, _HOOK_KEY
    _backend, stages, options, _language, _capability = args
    if getattr(options, "launch_pdl", False) and "ptx" in stages:
        make_ptx: Callable[[Any, dict], str] = stages["ptx"]
        stages["ptx"] = lambda src, metadata: wait_for_prior_grids(make_ptx(src, metadata))
    return None


_hook_lock = threading.Lock()


@contextmanager
def pdl_compiles() -> Iterator[None]:
    """Install `pdl_stages_hook` in Triton for the compiles inside the block (one block at a time: the hook is a
    process-wide setting)."""
    import triton

    runtime = triton.knobs.runtime
    with _hook_lock:
        previous = runtime.add_stages_inspection_hook
        runtime.add_stages_inspection_hook = pdl_stages_hook
        try:
            yield
        finally:
            runtime.add_stages_inspection_hook = previous


__all__ = [
    "PDL_MIN_ARCH",
    "PtxRewriteError",
    "pdl_compiles",
    "pdl_stages_hook",
    "uses_pdl",
    "wait_for_prior_grids",
]
