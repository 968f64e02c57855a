"""Fixes for Triton's CPU interpreter (TRITON_INTERPRET=1), which the CPU checks of bf16 kernels rely on.

The interpreter keeps bf16 tensors as numpy uint16 and its ``tl.dot`` multiplies those raw bits as integers, so
every bf16 matmul it runs is garbage (relative errors ~1e10; Triton 3.7.1). `patch_interpreter_bf16_dot` widens
bf16 operands to fp32 (exact: bf16 is the top half of an fp32) before the interpreter's dot. The tests and
`cuda_triton.tools.emulate_blob` call it; kernels compiled for a GPU are unaffected. The kernels that
take bf16 dot operands also widen them themselves under the interpreter (their DOT_FP32 constexpr,
`dot_needs_fp32`), so they run right there with or without the patch.
"""

from __future__ import annotations

import numpy as np

from ...kernel.launch import interpreting


def patch_interpreter_bf16_dot() -> None:
    """Make the interpreter's ``tl.dot`` read bf16 operands as numbers (idempotent; a no-op if the interpreter's
    builder is not there)."""
    import triton.language as tl
    from triton.runtime import interpreter

    builder = getattr(interpreter, "interpreter_builder", None)
    if builder is None:
        return
    builder_cls = type(builder)
    original = builder_cls.create_dot
    if getattr(original, "_bf16_widened", False):
        return

    def widen(handle):
        if handle.dtype.scalar == tl.bfloat16:
            bits = handle.data.astype(np.uint32) << 16
            return interpreter.TensorHandle(bits.view(np.float32), tl.float32)
        return handle

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return original(self, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    create_dot._bf16_widened = True
    builder_cls.create_dot = create_dot


def dot_needs_fp32(dtype: str) -> bool:
    """The DOT_FP32 constexpr of kernels whose ``tl.dot`` may take bf16 operands: True only while Triton's CPU
    interpreter runs them (kernels then widen bf16 operands to fp32 themselves), so compiled kernels always get
    False. Looked up per launch, so tests that build launches as an export does can patch ``interpreting``."""
    return dtype == "bfloat16" and interpreting()
