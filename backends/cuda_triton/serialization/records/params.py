"""A kind's ``params`` as data: its fields in the order docs/blob_format.md gives them, each with how it is
written and read back, so that one loop encodes every kind's fields and one reads them (`OpRecord.PARAMS`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..encoding import Reader, Writer, check


@dataclass(frozen=True)
class ParamField:
    """One field of a kind's ``params``: the record's attribute ``name``, how its value is written and read
    back."""

    name: str
    write: Callable[[Writer, Any], None]
    read: Callable[[Reader], Any]


def i64(name: str) -> ParamField:
    return ParamField(name, Writer.i64, Reader.i64)


def f64(name: str) -> ParamField:
    return ParamField(name, Writer.f64, Reader.f64)


def flag(name: str) -> ParamField:
    return ParamField(name, Writer.flag, lambda r: r.flag(name))


def dims(name: str, what: str) -> ParamField:
    """A list of sizes or dims (``Reader.dims``: each entry >= 0, at most MAX_RANK)."""
    return ParamField(name, Writer.i64s, lambda r: r.dims(what))


def ints(name: str, what: str) -> ParamField:
    """A list of signed integers (``Reader.ints``)."""
    return ParamField(name, Writer.i64s, lambda r: r.ints(what))


def f64s(name: str, what: str) -> ParamField:
    return ParamField(name, Writer.f64s, lambda r: r.f64s(what))


def string(name: str, what: str, limit: int) -> ParamField:
    return ParamField(name, Writer.string, lambda r: r.string(what, limit))


def code(name: str, table: dict[str, int], what: str) -> ParamField:
    """A name stored as its one-byte code in ``table`` (name -> code)."""
    return ParamField(name, lambda w, value: w.u8(table[value]), lambda r: read_code(r, table, what))


def read_code(params: Reader, table: dict[str, int], what: str) -> str:
    """The name behind a one-byte code of ``table`` (name -> code), read from ``params``."""
    code = params.u8()
    names = {c: name for name, c in table.items()}
    check(code in names, f"bad {what} code {code}")
    return names[code]


def write_params(w: Writer, fields: Sequence[ParamField], record: Any) -> None:
    """Writes ``record``'s ``fields`` in order."""
    for f in fields:
        f.write(w, getattr(record, f.name))


def read_params(r: Reader, fields: Sequence[ParamField]) -> dict[str, Any]:
    """The ``fields`` read in order, by name."""
    return {f.name: f.read(r) for f in fields}
