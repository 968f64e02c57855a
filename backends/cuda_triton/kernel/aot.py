"""Ahead-of-time compilation of a `KernelLaunch` to a cubin, with no GPU.

``compile_launch(launch, arch)`` builds ``triton.compile(ASTSource(fn, signature, constexprs, attrs),
target=GPUTarget("cuda", arch, 32), options={num_warps, num_stages})`` from the launch's own argument list, so
the compiled kernel's parameters are exactly ``launch.args`` (then Triton's two trailing scratch pointers), and
checks that against the PTX ``.entry`` before returning. A Gluon kernel (``@gluon.jit``) is compiled from a
``GluonASTSource`` instead; a launch that carries one compiles it only for its archs and its Triton-language twin
for the others (`KernelLaunch.for_arch`). ``compile_cache_key(launch, arch)`` identifies the
generated code, so callers can compile each distinct kernel once. With ``pdl`` (sm_90 and later) the kernel is
built for programmatic dependent launch: its PTX waits for the kernel before it and Triton flags it
``launch_pdl`` (`cuda_triton.kernel.pdl`).

Specialisation hints (``tt.divisibility`` 16) are given where they are guaranteed: every pointer (PyTorch
allocations and ExecuTorch's NamedDataStore/planned buffers are at least 16-byte aligned; a null bias pointer is
too) and every integer argument whose static value is a multiple of 16 (shapes are static, so the kernel may
be specialised to them; the runtime passes these same values).

Works under ``TRITON_INTERPRET=1`` too (the test suite sets it on CPU machines): such kernels are compiled
in a child process without the variable (see `_compile_in_subprocess`).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib
import inspect
import os
import pickle
import re
import subprocess
import sys
import tempfile
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Any

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.experimental.gluon._runtime import GluonASTSource, GluonJITFunction
from triton.runtime.jit import JITFunction

from .launch import KernelLaunch, ScalarArg, Schedule, TensorArg
from .pdl import pdl_compiles, uses_pdl

# Triton signature type of each argument kind; "ptr" entries become "*<dtype>".
_SCALAR_SIG = {"i32": "i32", "i64": "i64", "fp32": "fp32"}
# PTX parameter type each ABI kind must have.
_PTX_TYPES = {
    "ptr": ("u64",),
    "i32": ("u32", "s32", "b32"),
    "i64": ("u64", "s64", "b64"),
    "fp32": ("f32", "b32"),
}
SCRATCH_POINTERS = (
    2  # global_scratch, profile_scratch: Triton appends both to every kernel (docs/blob_format.md)
)


class AotCompileError(RuntimeError):
    """A launch could not be compiled, or its compiled entry does not match its argument list."""


@dataclass(frozen=True)
class CompiledKernel:
    """A cubin and everything a launcher needs to call it (docs/blob_format.md, "What the runtime does with it")."""

    name: str
    arch: int
    cubin: bytes
    ptx: str
    num_warps: int
    num_ctas: int
    shared: int  # bytes of dynamic shared memory
    global_scratch_size: int
    global_scratch_align: int
    profile_scratch_size: int
    profile_scratch_align: int
    launch_cooperative_grid: bool
    launch_pdl: bool
    param_types: tuple[str, ...]  # "ptr"/"i32"/"i64"/"fp32", one per KernelLaunch.args entry
    triton_version: str


# ---- kernels -------------------------------------------------------------------------------------------------
def _is_jit(fn: Any) -> bool:
    return isinstance(fn, JITFunction)


def _python_fn(fn: Any) -> Any:
    """The plain Python function behind a JITFunction or an interpreter-mode InterpretedFunction."""
    inner = getattr(fn, "fn", None)
    if inner is None or not callable(inner):
        raise AotCompileError(f"{fn!r} is not a @triton.jit function")
    return inner


_DIGESTS: dict[Any, str] = {}  # plain Python function -> source_digest


def source_digest(fn: Any) -> str:
    """Digest of a kernel's source and of every @triton.jit function it calls, recursively.

    The same in JIT and interpreter mode, so keys computed under TRITON_INTERPRET=1 match real compiles.
    Memoized per function for the life of the process (as Triton memoizes ``JITFunction.cache_key``):
    ``inspect.getsource`` re-tokenizes the module each time, ~6 ms a kernel, on the export's critical path.
    """
    root = _python_fn(fn)
    digest = _DIGESTS.get(root)
    if digest is None:
        digest = _DIGESTS[root] = _source_digest(fn)
    return digest


def _source_digest(fn: Any) -> str:
    seen: dict[str, str] = {}

    def visit(f: Any) -> None:
        py = _python_fn(f)
        key = f"{py.__module__}.{py.__qualname__}"
        if key in seen:
            return
        seen[key] = inspect.getsource(py)
        for name in py.__code__.co_names:
            value = py.__globals__.get(name)
            if value is not None and hasattr(value, "fn") and hasattr(value, "arg_names"):
                visit(value)

    visit(fn)
    text = "\n".join(f"{k}\n{v}" for k, v in sorted(seen.items()))
    return hashlib.sha256(text.encode()).hexdigest()


# ---- signature ----------------------------------------------------------------------------------------------
def abi_types(launch: KernelLaunch) -> tuple[str, ...]:
    """ABI kind of each runtime argument: "ptr", "i32", "i64" or "fp32"."""
    out = []
    for a in launch.args:
        if isinstance(a, TensorArg):
            out.append("ptr")
        elif isinstance(a, ScalarArg) and a.type in _SCALAR_SIG:
            out.append(a.type)
        else:
            raise AotCompileError(f"{launch.name}: argument {a!r} has no AOT type")
    return tuple(out)


def _source_parts(launch: KernelLaunch) -> tuple[Any, dict[str, str], dict[tuple[int], Any], dict]:
    fn = launch.fn
    names = list(fn.arg_names)
    constexprs = dict(launch.constexprs)
    runtime_names = [n for n in names if n not in constexprs]
    if len(runtime_names) != len(launch.args):
        raise AotCompileError(
            f"{launch.name}: the kernel has {len(runtime_names)} runtime parameters {runtime_names} but the "
            f"launch lists {len(launch.args)} arguments"
        )
    unknown = set(constexprs) - set(names)
    if unknown:
        raise AotCompileError(f"{launch.name}: constexprs {sorted(unknown)} are not parameters of the kernel")
    signature: dict[str, str] = {}
    attrs: dict[tuple[int], list[list[Any]]] = {}
    args = iter(launch.args)
    for index, name in enumerate(names):
        if name in constexprs:
            signature[name] = "constexpr"
            continue
        a = next(args)
        if isinstance(a, TensorArg):
            signature[name] = "*" + a.dtype
            attrs[(index,)] = [["tt.divisibility", 16]]
        else:
            signature[name] = _SCALAR_SIG[a.type]
            if a.type in ("i32", "i64") and int(a.value) % 16 == 0:
                attrs[(index,)] = [["tt.divisibility", 16]]
    const_by_index = {(names.index(k),): v for k, v in constexprs.items()}
    return fn, signature, const_by_index, attrs


def compile_cache_key(launch: KernelLaunch, arch: int, pdl: bool = False) -> str:
    """A digest of everything that determines the generated code: equal keys give identical cubins (``pdl``:
    built for programmatic dependent launch, `cuda_triton.kernel.pdl`)."""
    fn, signature, constexprs, attrs = _source_parts(launch.for_arch(arch))
    text = repr(
        (
            triton.__version__,
            source_digest(fn),
            launch.name,
            sorted(signature.items()),
            sorted(constexprs.items()),
            sorted(attrs.items()),
            sorted(launch.compile_options().items()),
            int(arch),
            *(("programmatic dependent launch",) if uses_pdl(pdl, arch) else ()),
        )
    )
    return hashlib.sha256(text.encode()).hexdigest()


# ---- PTX check ----------------------------------------------------------------------------------------------
_ENTRY = re.compile(r"\.entry\s+([\w$]+)\s*\((.*?)\)", re.S)
_PARAM = re.compile(r"\.param\s+\.(\w+)")


def ptx_entry_params(ptx: str) -> tuple[str, list[str]]:
    """(entry name, PTX type of each parameter) of the single kernel in ``ptx``."""
    m = _ENTRY.search(ptx)
    if m is None:
        raise AotCompileError("no .entry in the compiled PTX")
    return m.group(1), _PARAM.findall(m.group(2))


def check_entry(launch: KernelLaunch, ptx: str, kinds: tuple[str, ...]) -> None:
    name, params = ptx_entry_params(ptx)
    expected = len(kinds) + SCRATCH_POINTERS
    if len(params) != expected:
        raise AotCompileError(
            f"{launch.name}: the PTX entry {name} has {len(params)} parameters, the launch needs {expected} "
            f"({len(kinds)} arguments + {SCRATCH_POINTERS} scratch pointers); PTX types: {params}"
        )
    for i, (kind, ptx_type) in enumerate(zip(kinds + ("ptr",) * SCRATCH_POINTERS, params, strict=True)):
        if ptx_type not in _PTX_TYPES[kind]:
            what = launch.args[i] if i < len(launch.args) else "scratch pointer"
            raise AotCompileError(
                f"{launch.name}: PTX parameter {i} of {name} is .{ptx_type}, but the launch's argument {what} is {kind}"
            )


# ---- compile ------------------------------------------------------------------------------------------------
def compile_launch(launch: KernelLaunch, arch: int, pdl: bool = False) -> CompiledKernel:
    """Compile ``launch`` for compute capability ``arch`` (80, 89, 90, ...) without a GPU; ``pdl``: for
    programmatic dependent launch where ``arch`` has it (`cuda_triton.kernel.pdl`)."""
    return compile_launches([launch], arch, pdl)[0]


@dataclass(frozen=True, kw_only=True)
class LaunchJob(ABC):
    """A compile job (`cuda_triton.conv.compile_pool.Job`) that rebuilds one launch where it runs, from a few
    picklable fields, and compiles it for ``arch``: launch ``launch_index`` of what its op launches under
    ``schedule``. A subclass names the op (a convolution template and problem, a kernel family and spec) and
    rebuilds its launches; these fields are keyword-only so that the subclass's own come first."""

    schedule: Schedule
    launch_index: int
    arch: int
    pdl: bool = False

    @abstractmethod
    def launches(self) -> list[KernelLaunch]:
        """Every launch of the job's op under ``schedule``."""

    def launch(self) -> KernelLaunch:
        return self.launches()[self.launch_index]

    def compile(self) -> CompiledKernel:
        return compile_launch(self.launch(), self.arch, self.pdl)


def compile_launches(launches: list[KernelLaunch], arch: int, pdl: bool = False) -> list[CompiledKernel]:
    """Compile several launches for one arch (each with its kernel for that arch, `KernelLaunch.for_arch`).

    Under TRITON_INTERPRET=1 they are compiled in one subprocess: the interpreter patches the language in-process.
    """
    launches = [launch.for_arch(arch) for launch in launches]
    if os.environ.get("TRITON_INTERPRET") != "1" and all(_is_jit(launch.fn) for launch in launches):
        return [_compile_here(launch, arch, pdl) for launch in launches]
    return _compile_in_subprocess(launches, arch, pdl)


def _compile_here(launch: KernelLaunch, arch: int, pdl: bool = False) -> CompiledKernel:
    fn, signature, constexprs, attrs = _source_parts(launch)
    kinds = abi_types(launch)
    source_type = GluonASTSource if isinstance(fn, GluonJITFunction) else ASTSource
    src = source_type(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    options = launch.compile_options()
    programmatic = uses_pdl(pdl, arch)
    if programmatic:
        options["launch_pdl"] = True
    try:
        with pdl_compiles() if programmatic else contextlib.nullcontext():
            compiled = triton.compile(src, target=GPUTarget("cuda", int(arch), 32), options=options)
    except Exception as e:  # the Triton compiler raises many types; name the kernel and the arch
        raise AotCompileError(
            f"{launch.name}: compiling for sm_{arch} failed: {type(e).__name__}: {e}"
        ) from e
    ptx = compiled.asm["ptx"]
    check_entry(launch, ptx, kinds)
    md = compiled.metadata

    def meta(key: str, default: Any) -> Any:
        return getattr(md, key, default)

    return CompiledKernel(
        name=md.name,
        arch=int(arch),
        cubin=bytes(compiled.asm["cubin"]),
        ptx=ptx,
        num_warps=int(md.num_warps),
        num_ctas=int(meta("num_ctas", 1)),
        shared=int(md.shared),
        global_scratch_size=int(meta("global_scratch_size", 0)),
        global_scratch_align=int(meta("global_scratch_align", 1)),
        profile_scratch_size=int(meta("profile_scratch_size", 0)),
        profile_scratch_align=int(meta("profile_scratch_align", 1)),
        launch_cooperative_grid=bool(meta("launch_cooperative_grid", False)),
        launch_pdl=bool(meta("launch_pdl", False)),
        param_types=kinds,
        triton_version=triton.__version__,
    )


# Under TRITON_INTERPRET=1 (CPU test runs) @triton.jit returns interpreter objects that triton.compile cannot
# take, and the interpreter patches triton.language in-process; a child process without the variable compiles
# instead, importing each kernel by module and name. Children are kept and reused (starting one costs seconds
# of imports): one per concurrent caller, never shared with a forked process.
def _launch_spec(launch: KernelLaunch) -> tuple[str, str, KernelLaunch]:
    """What a child rebuilds ``launch`` from: its kernel's module and name, and the launch without the kernel (the
    interpreter's stand-in does not pickle)."""
    py = _python_fn(launch.fn)
    return py.__module__, py.__name__, replace(launch, fn=None)


class _CompileServer:
    """A child process that compiles length-prefixed pickled requests from stdin, answering on stdout."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env.pop("TRITON_INTERPRET", None)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(self, payload: bytes) -> bytes:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(len(payload).to_bytes(8, "little") + payload)
            self.proc.stdin.flush()
            header = self.proc.stdout.read(8)
            size = int.from_bytes(header, "little") if len(header) == 8 else -1
            data = self.proc.stdout.read(size) if size >= 0 else b""
            if size < 0 or len(data) != size:
                raise EOFError("the compile subprocess closed its output")
            return data
        except (OSError, EOFError) as e:
            self.close()
            self.stderr.seek(0)
            tail = self.stderr.read().decode(errors="replace")[-4000:]
            raise AotCompileError(f"the AOT compile subprocess failed:\n{tail}") from e

    def close(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        if self.proc.poll() is None:
            self.proc.kill()


_idle_servers: list[_CompileServer] = []
_servers_lock = threading.Lock()
_servers_pid = os.getpid()


def _acquire_server() -> _CompileServer:
    global _idle_servers, _servers_pid
    with _servers_lock:
        if _servers_pid != os.getpid():  # forked: the parent's pipes are not ours
            _idle_servers, _servers_pid = [], os.getpid()
        while _idle_servers:
            server = _idle_servers.pop()
            if server.alive():
                return server
    return _CompileServer()


def _release_server(server: _CompileServer) -> None:
    with _servers_lock:
        if server.alive() and _servers_pid == os.getpid():
            _idle_servers.append(server)


@atexit.register
def _close_servers() -> None:
    with _servers_lock:
        if _servers_pid == os.getpid():
            for server in _idle_servers:
                server.close()
        _idle_servers.clear()


def _compile_in_subprocess(launches: list[KernelLaunch], arch: int, pdl: bool) -> list[CompiledKernel]:
    payload = pickle.dumps((int(arch), bool(pdl), [_launch_spec(launch) for launch in launches]))
    server = _acquire_server()
    results = pickle.loads(server.request(payload))
    _release_server(server)
    out: list[CompiledKernel] = []
    for result in results:
        if isinstance(result, str):
            raise AotCompileError(result)
        out.append(result)
    return out


def _compile_specs(
    arch: int, pdl: bool, specs: list[tuple[str, str, KernelLaunch]]
) -> list[CompiledKernel | str]:
    results: list[CompiledKernel | str] = []
    for module, name, launch in specs:
        try:
            fn = getattr(importlib.import_module(module), name)
            results.append(_compile_here(replace(launch, fn=fn), arch, pdl))
        except Exception as e:  # reported to the caller as an AotCompileError; the server keeps serving
            results.append(str(e) if isinstance(e, AotCompileError) else f"{type(e).__name__}: {e}")
    return results


def _serve() -> None:
    """The compile server's loop (``python -m cuda_triton.kernel.aot``); stray prints go to stderr."""
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    requests = sys.stdin.buffer
    while True:
        header = requests.read(8)
        if len(header) < 8:
            return
        arch, pdl, specs = pickle.loads(requests.read(int.from_bytes(header, "little")))
        data = pickle.dumps(_compile_specs(arch, pdl, specs))
        answers.write(len(data).to_bytes(8, "little") + data)
        answers.flush()


__all__ = [
    "AotCompileError",
    "CompiledKernel",
    "abi_types",
    "compile_cache_key",
    "compile_launch",
    "compile_launches",
    "ptx_entry_params",
    "source_digest",
]


if __name__ == "__main__":
    # Serve from the package's module (not this __main__ copy) so results unpickle as cuda_triton's classes.
    importlib.import_module(__spec__.name)._serve()
