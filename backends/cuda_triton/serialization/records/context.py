"""What a record kind's `check` sees (`RecordContext`): the blob's values and constants, and the shape-rule runner
with the generated C++ rules' int64 arithmetic (`Int64`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..encoding import BlobError, check
from ..sections import ConstantRecord, ValueRecord
from .base import ConstantRef, ValueRef


class Int64(int):
    """An int whose +, -, *, // and % raise OverflowError outside int64, as the generated C++ rules' do: the Python
    reader runs a rule on these, so it accepts exactly what the C++ reader accepts."""

    def _checked(self, result: Any) -> Any:
        if result is NotImplemented or isinstance(result, bool) or not isinstance(result, int):
            return result
        if not -(1 << 63) <= result < (1 << 63):
            raise OverflowError("layout rule: integer overflow")
        return Int64(result)


# The int operators a rule uses, each re-wrapped to check its result (one definition instead of one method each).
_CHECKED_OPERATORS = (
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
    "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__neg__",
)  # fmt: skip


def _checked_operator(name: str) -> Callable[..., Any]:
    op = getattr(int, name)

    def checked(self: Int64, *other: Any) -> Any:
        return self._checked(op(self, *other))

    checked.__name__ = name
    return checked


for _name in _CHECKED_OPERATORS:
    setattr(Int64, _name, _checked_operator(_name))
del _name


def _int64_arg(a: Any) -> Any:
    if isinstance(a, bool) or not isinstance(a, int | list | tuple):
        return a
    if isinstance(a, int):
        return Int64(a)
    return [Int64(x) if isinstance(x, int) and not isinstance(x, bool) else x for x in a]


class RecordContext:
    """What a record kind's `check` sees: the blob's values and constants, and the rule runner."""

    def __init__(self, values: Sequence[ValueRecord], constants: Sequence[ConstantRecord]) -> None:
        self.values = values
        self.constants = constants

    def value(self, i: int) -> ValueRecord:
        return self.values[i]

    def sizes(self, operand: ValueRef | ConstantRef) -> list[int]:
        if isinstance(operand, ValueRef):
            return list(self.values[operand.value].sizes)
        return list(self.constants[operand.constant].sizes)

    def dtype(self, operand: ValueRef | ConstantRef) -> str:
        if isinstance(operand, ValueRef):
            return self.values[operand.value].dtype
        return self.constants[operand.constant].dtype

    @staticmethod
    def rule(where: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Runs a rule with int64 arithmetic (`Int64`), as its generated C++ twin does; its errors become
        BlobErrors naming ``where``."""
        try:
            return fn(*(_int64_arg(a) for a in args))
        except (ValueError, IndexError, ZeroDivisionError, OverflowError) as e:
            raise BlobError(f"{where}: {e}") from e

    def input_and_output(self, where: str, input: int, output: int) -> tuple[ValueRecord, ValueRecord]:
        """The input and output values of a kind whose output has its input's dtype (checked)."""
        inp, out = self.value(input), self.value(output)
        check(inp.dtype == out.dtype, f"{where}: input is {inp.dtype} but output is {out.dtype}")
        return inp, out

    def expect_sizes(self, where: str, what: str, got: list[int], want: list[int]) -> None:
        check(
            list(got) == list(want),
            f"{where}: the shape rule gives {what} sizes {want}, the plan records {got}",
        )
