"""Load the C++ delegate runtime into this process, so `executorch.runtime.Runtime` runs CudaTritonBackend .pte files.

    from cuda_triton.runtime import load_backend
    load_backend()                      # finds build/libcuda_triton_backend.so (bash scripts/build_runtime.sh)
    from executorch.runtime import Runtime
    program = Runtime.get().load_program("model.pte")

The library registers ``CudaTritonBackend`` with ExecuTorch's backend registry when it is loaded; the Python
runtime's extension links the same ``libexecutorch.so``, so loading it before or after importing
``executorch.runtime`` both work. Loading is idempotent. Without a GPU the backend registers but reports
itself unavailable, and loading a method that uses it fails with a clear error (never a crash).
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

LIBRARY_NAME = "libcuda_triton_backend.so"
BUILD_COMMAND = "bash scripts/build_runtime.sh"
_REPO_ROOT = Path(__file__).resolve().parents[2]

_loaded: dict[str, ctypes.CDLL] = {}


class BackendLibraryNotFound(FileNotFoundError):
    pass


def default_library_path() -> Path:
    """``$CUDA_TRITON_BACKEND_LIB`` if set, else ``<repo>/build/libcuda_triton_backend.so``."""
    env = os.environ.get("CUDA_TRITON_BACKEND_LIB")
    if env:
        return Path(env)
    return _REPO_ROOT / "build" / LIBRARY_NAME


def load_backend(path: str | os.PathLike[str] | None = None) -> ctypes.CDLL:
    """Load (once) the backend library and return it; raises `BackendLibraryNotFound` with the build command."""
    lib_path = Path(path) if path is not None else default_library_path()
    key = str(lib_path.resolve()) if lib_path.exists() else str(lib_path)
    if key in _loaded:
        return _loaded[key]
    if not lib_path.exists():
        raise BackendLibraryNotFound(
            f"{lib_path} not found: build the CudaTritonBackend runtime first with `{BUILD_COMMAND}` "
            f"(from {_REPO_ROOT}), or set CUDA_TRITON_BACKEND_LIB to the library's path"
        )
    # executorch's Python extension must be loaded first so that libexecutorch.so is the same instance the
    # Runtime uses (it is, through the shared library's soname either way; importing here makes it explicit).
    import executorch.runtime  # noqa: F401

    lib = ctypes.CDLL(str(lib_path), mode=ctypes.RTLD_GLOBAL)
    lib.cuda_triton_backend_status.restype = ctypes.c_char_p
    lib.cuda_triton_backend_last_error.restype = ctypes.c_char_p
    lib.cuda_triton_backend_registered.restype = ctypes.c_int
    if not lib.cuda_triton_backend_registered():
        raise RuntimeError(f"{lib_path} loaded but CudaTritonBackend did not register: {status(lib)}")
    _loaded[key] = lib
    return lib


def status(lib: ctypes.CDLL | None = None) -> str:
    """``"ok"`` when the backend can run here, else why not (no driver, no device, ...)."""
    lib = lib if lib is not None else load_backend()
    return lib.cuda_triton_backend_status().decode()


def last_error(lib: ctypes.CDLL | None = None) -> str:
    """The last error the backend reported from init()/execute() ("" if none)."""
    lib = lib if lib is not None else load_backend()
    return lib.cuda_triton_backend_last_error().decode()


def registered_backends() -> list[str]:
    """Backend names in ExecuTorch's registry (as the Python runtime sees them)."""
    from executorch.runtime import Runtime

    return list(Runtime.get().backend_registry.registered_backend_names)
