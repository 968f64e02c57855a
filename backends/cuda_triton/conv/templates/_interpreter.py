"""Fixes for Triton's CPU interpreter (TRITON_INTERPRET=1), which the CPU checks of bf16 kernels rely on.

The interpreter keeps bf16 tensors as numpy uint16 and its ``tl.dot`` and float arithmetic (add, sub, mul, div,
fma) work on those raw bits as integers, so every bf16 matmul or bf16 sum it runs is garbage (relative errors
~1e10; Triton 3.7.1). `patch_interpreter_bf16_dot` widens bf16 operands to fp32 (exact: bf16 is the top half of
an fp32) before the interpreter's dot, and computes bf16 arithmetic in fp32 rounded once to nearest-even bf16, as
the GPU's bf16x2 instructions do. The tests and `cuda_triton.tools.emulate_blob` call it; kernels compiled for a
GPU are unaffected. The kernels that take bf16 dot operands also widen them themselves under the interpreter
(their DOT_FP32 constexpr, `dot_needs_fp32`), so they run right there with or without the patch.

`drop_discarded_overflow_checks` saves the interpreter the int32 overflow checks whose result it discards.
`patch_interpreter` applies both; the tests and the emulator call it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ...kernel.launch import interpreting


def patch_interpreter_bf16_dot() -> None:
    """Make the interpreter's ``tl.dot`` and float arithmetic read bf16 operands as numbers (idempotent; a no-op
    if the interpreter's builder is not there)."""
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

    def to_bf16(values: np.ndarray):
        """fp32 values rounded to nearest even bf16 (NaN stays NaN), as a bf16 handle."""
        bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        rounded = np.where(np.isnan(values), np.uint16(0x7FC0), rounded)
        return interpreter.TensorHandle(rounded, tl.bfloat16)

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return original(self, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    def arithmetic(original_op, fp32_op):
        def op(self, *args):
            if args[-1].dtype.scalar != tl.bfloat16:
                return original_op(self, *args)
            return to_bf16(fp32_op(*(widen(a).data for a in args)))

        return op

    create_dot._bf16_widened = True
    builder_cls.create_dot = create_dot
    for name, fp32_op in (
        ("create_fadd", np.add),
        ("create_fsub", np.subtract),
        ("create_fmul", np.multiply),
        ("create_fdiv", np.divide),
        ("create_precise_divf", np.divide),
        ("create_fma", lambda x, y, z: x * y + z),
    ):
        setattr(builder_cls, name, arithmetic(getattr(builder_cls, name), fp32_op))


def dot_needs_fp32(dtype: str) -> bool:
    """The DOT_FP32 constexpr of kernels whose ``tl.dot`` may take bf16 operands: True only while Triton's CPU
    interpreter runs them (kernels then widen bf16 operands to fp32 themselves), so compiled kernels always get
    False. Looked up per launch, so tests that build launches as an export does can patch ``interpreting``."""
    return dtype == "bfloat16" and interpreting()


def drop_discarded_overflow_checks() -> None:
    """Stop the interpreter computing int32 overflow checks that it then throws away (idempotent; a no-op without
    the interpreter or with Triton's debug option on). For every int32 add, sub and mul the interpreter redoes the
    operation in int64 and compares it with the int32 range to feed an assert, but its builder's options have debug
    off, and with debug off `tl.device_assert` does nothing: the work changes no result and takes a third of the
    time of an emulated network."""
    from triton.runtime import interpreter

    builder = getattr(interpreter, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if options is None or getattr(options, "debug", True) or not getattr(options, "sanitize_overflow", False):
        return
    builder.options = dataclasses.replace(options, sanitize_overflow=False)


def patch_interpreter() -> None:
    """Every fix of this module (idempotent): bf16 dots and arithmetic as numbers, no discarded overflow checks."""
    patch_interpreter_bf16_dot()
    drop_discarded_overflow_checks()
