#!/usr/bin/env python3
"""Translate the output-layout rules (Python) into C++ headers under runtime/generated/.

    python scripts/gen_layout_header.py            # (re)write every header
    python scripts/gen_layout_header.py --check    # exit 1 when a checked-in header is stale

The rules: the convolution's (backends/cuda_triton/conv/layout.py -> conv_layout.h, namespace
``cuda_triton::layout``), each op family's (backends/cuda_triton/ops/<family>/shape.py -> <family>_shape.h,
namespace ``cuda_triton::layout::<family>``) and the blob's record checks, which call them
(backends/cuda_triton/serialization/checks/<kind>.py -> <kind>_checks.h, namespace
``cuda_triton::layout::<kind>_checks``). Every header includes layout_prelude.h, the checked-arithmetic and
Python-indexing helpers (namespace ``cuda_triton::layout::detail``). A family with a shape.py, and a check
module, are picked up without listing them here.

This is a real translator over the Python AST, for the small subset the rules are written in:

* module level: a docstring, ``from __future__`` imports, relative imports of functions and constants from another
  rule module (``from ...conv.layout import contiguous_strides``: called in that header's namespace),
  ``NAME = <int>`` constants, function definitions;
* parameters and returns annotated ``int``, ``bool``, ``list[int]`` or ``tuple[list[int], list[int]]``;
* statements: assignment to a name or a subscript, augmented assignment, ``if``/``elif``/``else``,
  ``for v in range(...)``, ``return``, ``raise ValueError("message")``, ``x.append(e)`` and docstrings;
* expressions: int/bool literals, names, ``+ - * // %``, unary ``-``/``not``, comparisons, ``and``/``or``,
  ``a if c else b``, ``xs[i]`` (negative indices as in Python), ``xs[a:b]``, ``pair[0]``/``pair[1]`` of a
  function's (list, list) result, list literals, ``[x] * n``,
  list ``+`` list, ``len(xs)``, ``list(xs)`` and calls of the module's own functions.

Anything else raises `TranslationError` naming the line, so a rule cannot silently drift from its C++ twin.
Semantics follow Python: ``//`` and ``%`` floor, out-of-range indices throw ``std::out_of_range``, arithmetic that
would overflow int64 throws ``std::overflow_error``, ``raise ValueError`` throws ``std::invalid_argument`` with the
same message (callers catch ``std::exception`` and report an error), and locals are hoisted so names assigned in
branches stay visible after them. The headers use GCC/Clang's ``__builtin_*_overflow``.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "backends" / "cuda_triton"
GENERATED = ROOT / "runtime" / "generated"
SOURCE = PACKAGE / "conv" / "layout.py"
HEADER = GENERATED / "conv_layout.h"
PRELUDE_HEADER = GENERATED / "layout_prelude.h"
NAMESPACE = "cuda_triton::layout"


@dataclass(frozen=True)
class Rule:
    source: Path
    header: Path
    namespace: str


def rules() -> list[Rule]:
    """The convolution rule, every op family's shape rule, then the blob's record checks (which call them)."""
    out = [Rule(SOURCE, HEADER, NAMESPACE)]
    for src in sorted((PACKAGE / "ops").glob("*/shape.py")):
        family = src.parent.name
        out.append(Rule(src, GENERATED / f"{family}_shape.h", f"{NAMESPACE}::{family}"))
    for src in sorted((PACKAGE / "serialization" / "checks").glob("*.py")):
        if src.name != "__init__.py":
            out.append(Rule(src, GENERATED / f"{src.stem}_checks.h", f"{NAMESPACE}::{src.stem}_checks"))
    return out


def rule_of(source: Path) -> Rule | None:
    for rule in rules():
        if rule.source.resolve() == source.resolve():
            return rule
    return None


INT, BOOL, LIST, PAIR = "int", "bool", "list", "pair"
CPP_TYPE = {
    INT: "int64_t",
    BOOL: "bool",
    LIST: "std::vector<int64_t>",
    PAIR: "std::pair<std::vector<int64_t>, std::vector<int64_t>>",
}


# Python names that would not compile (or would mean something else) in C++.
CPP_RESERVED = frozenset(
    """alignas alignof and and_eq asm auto bitand bitor bool break case catch char char16_t char32_t class compl
    const constexpr const_cast continue decltype default delete do double dynamic_cast else enum explicit export
    extern false float for friend goto if inline int long mutable namespace new noexcept not not_eq nullptr
    operator or or_eq private protected public register reinterpret_cast return short signed sizeof static
    static_assert static_cast struct switch template this thread_local throw true try typedef typeid typename
    union unsigned using virtual void volatile wchar_t while xor xor_eq detail std int64_t size_t""".split()
)


class TranslationError(Exception):
    pass


_source_name = SOURCE.name  # the file being translated, for error messages


def _fail(node: ast.AST, msg: str) -> TranslationError:
    return TranslationError(f"{_source_name}:{getattr(node, 'lineno', '?')}: {msg}")


def annotation_type(ann: ast.expr | None) -> str:
    if ann is None:
        raise TranslationError("missing type annotation")
    text = ast.unparse(ann).replace(" ", "")
    table = {
        "int": INT,
        "bool": BOOL,
        "list[int]": LIST,
        "tuple[list[int],list[int]]": PAIR,
    }
    if text not in table:
        raise _fail(ann, f"unsupported annotation {text!r}")
    return table[text]


@dataclass
class Function:
    name: str
    params: list[tuple[str, str]]
    ret: str
    node: ast.FunctionDef
    doc: str = ""
    mutated_params: set[str] = field(default_factory=set)


class FunctionTranslator:
    def __init__(
        self,
        fn: Function,
        functions: dict[str, Function],
        constants: dict[str, int],
        qualified: dict[str, str] | None = None,
    ) -> None:
        self.fn = fn
        self.functions = functions
        self.constants = constants
        self.qualified = qualified or {}  # imported name -> its C++ name in the other rule's namespace
        self.types: dict[str, str] = dict(fn.params)
        self.locals: dict[str, str] = {}
        self.loop_vars: set[str] = set()
        self.lines: list[str] = []

    # ---- types -------------------------------------------------------------------------------------------
    def type_of(self, e: ast.expr) -> str:
        if isinstance(e, ast.Constant):
            if isinstance(e.value, bool):
                return BOOL
            if isinstance(e.value, int):
                return INT
            raise _fail(e, f"unsupported constant {e.value!r}")
        if isinstance(e, ast.Name):
            if e.id in self.types:
                return self.types[e.id]
            if e.id in self.constants:
                return INT
            raise _fail(e, f"unknown name {e.id!r} (assign it before use)")
        if isinstance(e, ast.BinOp):
            lt, rt = self.type_of(e.left), self.type_of(e.right)
            if LIST in (lt, rt):
                return LIST
            return INT
        if isinstance(e, ast.UnaryOp):
            return BOOL if isinstance(e.op, ast.Not) else INT
        if isinstance(e, ast.Compare | ast.BoolOp):
            return BOOL
        if isinstance(e, ast.IfExp):
            return self.type_of(e.body)
        if isinstance(e, ast.List):
            return LIST
        if isinstance(e, ast.Subscript):
            if self.type_of(e.value) == PAIR:
                return LIST
            return LIST if isinstance(e.slice, ast.Slice) else INT
        if isinstance(e, ast.Tuple):
            return PAIR
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name):
            if e.func.id == "len":
                return INT
            if e.func.id == "list":
                return LIST
            if e.func.id in self.functions:
                return self.functions[e.func.id].ret
        raise _fail(e, f"unsupported expression {ast.unparse(e)!r}")

    def declare(self, name: str, t: str, node: ast.AST) -> None:
        if name in CPP_RESERVED:
            raise _fail(node, f"{name!r} is reserved in C++; rename it")
        known = self.types.get(name)
        if known is None:
            self.types[name] = t
            self.locals[name] = t
        elif known != t:
            raise _fail(node, f"{name!r} assigned a {t} but is a {known}")

    # ---- hoisting pass -----------------------------------------------------------------------------------
    def collect(self, body: list[ast.stmt]) -> None:
        for s in body:
            if isinstance(s, ast.Assign):
                for tgt in s.targets:
                    if isinstance(tgt, ast.Name):
                        if tgt.id in dict(self.fn.params):
                            self.fn.mutated_params.add(tgt.id)
                        self.declare(tgt.id, self.type_of(s.value), s)
                    elif isinstance(tgt, ast.Subscript) and isinstance(tgt.value, ast.Name):
                        if tgt.value.id in dict(self.fn.params):
                            self.fn.mutated_params.add(tgt.value.id)
                    else:
                        raise _fail(s, "only `name = ...` and `name[i] = ...` assignments are supported")
            elif isinstance(s, ast.AugAssign):
                if isinstance(s.target, ast.Name) and s.target.id in dict(self.fn.params):
                    self.fn.mutated_params.add(s.target.id)
            elif isinstance(s, ast.If):
                self.collect(s.body)
                self.collect(s.orelse)
            elif isinstance(s, ast.For):
                if not isinstance(s.target, ast.Name):
                    raise _fail(s, "for loops need a single name")
                if s.target.id in CPP_RESERVED:
                    raise _fail(s, f"{s.target.id!r} is reserved in C++; rename it")
                if s.target.id in self.types and self.types[s.target.id] != INT:
                    raise _fail(s, f"loop variable {s.target.id!r} reused with another type")
                self.types.setdefault(s.target.id, INT)
                self.loop_vars.add(s.target.id)
                self.collect(s.body)
            elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
                c = s.value
                if (
                    isinstance(c.func, ast.Attribute)
                    and c.func.attr == "append"
                    and isinstance(c.func.value, ast.Name)
                ):
                    if c.func.value.id in dict(self.fn.params):
                        self.fn.mutated_params.add(c.func.value.id)

    # ---- expressions -------------------------------------------------------------------------------------
    def expr(self, e: ast.expr) -> str:
        if isinstance(e, ast.Constant):
            if isinstance(e.value, bool):
                return "true" if e.value else "false"
            if isinstance(e.value, int):
                if not -(1 << 62) < e.value < (1 << 62):
                    raise _fail(e, "integer literal out of int64 range")
                return f"INT64_C({e.value})"
            raise _fail(e, f"unsupported constant {e.value!r}")
        if isinstance(e, ast.Name):
            if e.id in self.types:
                return e.id
            if e.id in self.constants:
                return self.qualified.get(e.id, e.id)
            raise _fail(e, f"unknown name {e.id!r}")
        if isinstance(e, ast.BinOp):
            lt, rt = self.type_of(e.left), self.type_of(e.right)
            if LIST in (lt, rt):
                if isinstance(e.op, ast.Add) and lt == LIST and rt == LIST:
                    return f"detail::concat({self.expr(e.left)}, {self.expr(e.right)})"
                if isinstance(e.op, ast.Mult):
                    lst, n = (e.left, e.right) if lt == LIST else (e.right, e.left)
                    if not (isinstance(lst, ast.List) and len(lst.elts) == 1) or self.type_of(n) != INT:
                        raise _fail(e, "list repetition must be `[x] * n`")
                    return f"detail::repeat({self.expr(lst.elts[0])}, {self.expr(n)})"
                raise _fail(e, f"unsupported list operation {ast.unparse(e)!r}")
            if lt == BOOL or rt == BOOL:
                raise _fail(e, "arithmetic on bools is not supported")
            a, b = self.expr(e.left), self.expr(e.right)
            if isinstance(e.op, ast.Add):
                return f"detail::add({a}, {b})"
            if isinstance(e.op, ast.Sub):
                return f"detail::sub({a}, {b})"
            if isinstance(e.op, ast.Mult):
                return f"detail::mul({a}, {b})"
            if isinstance(e.op, ast.FloorDiv):
                return f"detail::floordiv({a}, {b})"
            if isinstance(e.op, ast.Mod):
                return f"detail::pymod({a}, {b})"
            raise _fail(e, f"unsupported operator {type(e.op).__name__}")
        if isinstance(e, ast.UnaryOp):
            if isinstance(e.op, ast.Not):
                return f"(!{self.bool_expr(e.operand)})"
            if isinstance(e.op, ast.USub) and self.type_of(e.operand) == INT:
                if isinstance(e.operand, ast.Constant):
                    return f"(-{self.expr(e.operand)})"
                return f"detail::sub(INT64_C(0), {self.expr(e.operand)})"
            raise _fail(e, "unsupported unary operator")
        if isinstance(e, ast.BoolOp):
            op = " && " if isinstance(e.op, ast.And) else " || "
            return "(" + op.join(self.bool_expr(v) for v in e.values) + ")"
        if isinstance(e, ast.Compare):
            ops = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
            parts = []
            left = e.left
            for op, right in zip(e.ops, e.comparators, strict=True):
                if type(op) not in ops:
                    raise _fail(e, f"unsupported comparison {type(op).__name__}")
                if self.type_of(left) == LIST or self.type_of(right) == LIST:
                    if type(op) not in (ast.Eq, ast.NotEq):
                        raise _fail(e, "lists compare only with == / !=")
                parts.append(f"({self.expr(left)} {ops[type(op)]} {self.expr(right)})")
                left = right
            return parts[0] if len(parts) == 1 else "(" + " && ".join(parts) + ")"
        if isinstance(e, ast.IfExp):
            return f"({self.bool_expr(e.test)} ? {self.expr(e.body)} : {self.expr(e.orelse)})"
        if isinstance(e, ast.List):
            for x in e.elts:
                if self.type_of(x) != INT:
                    raise _fail(e, "list literals hold ints only")
            return "std::vector<int64_t>{" + ", ".join(self.expr(x) for x in e.elts) + "}"
        if isinstance(e, ast.Subscript):
            if self.type_of(e.value) == PAIR:
                # (sizes, strides)[0] / [1]: one half of a rule's result.
                if not (
                    isinstance(e.slice, ast.Constant)
                    and e.slice.value in (0, 1)
                    and type(e.slice.value) is int
                ):
                    raise _fail(e, "a (list, list) pair is indexed with 0 or 1 only")
                return f"({self.expr(e.value)}).{'first' if e.slice.value == 0 else 'second'}"
            if self.type_of(e.value) != LIST:
                raise _fail(e, "only lists can be subscripted")
            if isinstance(e.slice, ast.Slice):
                if e.slice.step is not None:
                    raise _fail(e, "slices with a step are not supported")
                lo = self.expr(e.slice.lower) if e.slice.lower is not None else "INT64_C(0)"
                if e.slice.upper is None:
                    return f"detail::slice_from({self.expr(e.value)}, {lo})"
                return f"detail::slice({self.expr(e.value)}, {lo}, {self.expr(e.slice.upper)})"
            return f"detail::at({self.expr(e.value)}, {self.expr(e.slice)})"
        if isinstance(e, ast.Tuple):
            if len(e.elts) != 2 or any(self.type_of(x) != LIST for x in e.elts):
                raise _fail(e, "only (list, list) tuples are supported")
            return f"{CPP_TYPE[PAIR]}{{{self.expr(e.elts[0])}, {self.expr(e.elts[1])}}}"
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name):
            if e.keywords:
                raise _fail(e, "keyword arguments are not supported")
            name = e.func.id
            if name == "len":
                (x,) = e.args
                return f"detail::len({self.expr(x)})"
            if name == "list":
                (x,) = e.args
                if self.type_of(x) != LIST:
                    raise _fail(e, "list() takes a list")
                return f"std::vector<int64_t>({self.expr(x)})"
            if name in self.functions:
                callee = self.functions[name]
                if len(e.args) != len(callee.params):
                    raise _fail(e, f"{name} takes {len(callee.params)} arguments, got {len(e.args)}")
                for (pname, ptype), a in zip(callee.params, e.args, strict=True):
                    if self.type_of(a) != ptype:
                        raise _fail(e, f"argument {pname} of {name} must be {ptype}, got {self.type_of(a)}")
                return f"{self.qualified.get(name, name)}(" + ", ".join(self.expr(a) for a in e.args) + ")"
        raise _fail(e, f"unsupported expression {ast.unparse(e)!r}")

    def bool_expr(self, e: ast.expr) -> str:
        t = self.type_of(e)
        if t != BOOL:
            raise _fail(e, f"condition must be a bool, got {t} (write an explicit comparison)")
        return self.expr(e)

    # ---- statements --------------------------------------------------------------------------------------
    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def stmts(self, body: list[ast.stmt], depth: int) -> None:
        for s in body:
            self.stmt(s, depth)

    def stmt(self, s: ast.stmt, depth: int) -> None:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return  # docstring
        if isinstance(s, ast.Assign):
            if len(s.targets) != 1:
                raise _fail(s, "chained assignment is not supported")
            tgt = s.targets[0]
            if isinstance(tgt, ast.Name):
                if self.type_of(s.value) != self.types[tgt.id]:
                    raise _fail(s, f"type mismatch assigning {tgt.id!r}")
                self.emit(depth, f"{tgt.id} = {self.expr(s.value)};")
                return
            assert isinstance(tgt, ast.Subscript)
            if isinstance(tgt.slice, ast.Slice) or self.type_of(s.value) != INT:
                raise _fail(s, "subscript assignment stores one int")
            self.emit(
                depth, f"detail::at({self.expr(tgt.value)}, {self.expr(tgt.slice)}) = {self.expr(s.value)};"
            )
            return
        if isinstance(s, ast.AugAssign):
            if not isinstance(s.target, ast.Name) or self.type_of(s.target) != INT:
                raise _fail(s, "augmented assignment only on int names")
            fake = ast.BinOp(left=ast.Name(id=s.target.id), op=s.op, right=s.value)
            ast.copy_location(fake, s)
            self.emit(depth, f"{s.target.id} = {self.expr(fake)};")
            return
        if isinstance(s, ast.If):
            self.emit(depth, f"if ({self.bool_expr(s.test)}) {{")
            self.stmts(s.body, depth + 1)
            orelse = s.orelse
            while len(orelse) == 1 and isinstance(orelse[0], ast.If):
                elif_ = orelse[0]
                self.emit(depth, f"}} else if ({self.bool_expr(elif_.test)}) {{")
                self.stmts(elif_.body, depth + 1)
                orelse = elif_.orelse
            if orelse:
                self.emit(depth, "} else {")
                self.stmts(orelse, depth + 1)
            self.emit(depth, "}")
            return
        if isinstance(s, ast.For):
            it = s.iter
            if s.orelse or not (
                isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
            ):
                raise _fail(s, "only `for v in range(...)` loops are supported")
            assert isinstance(s.target, ast.Name)
            args = it.args
            if not 1 <= len(args) <= 3 or any(self.type_of(a) != INT for a in args):
                raise _fail(s, "range() takes 1 to 3 ints")
            start = self.expr(args[0]) if len(args) >= 2 else "INT64_C(0)"
            stop = self.expr(args[1] if len(args) >= 2 else args[0])
            step_node = args[2] if len(args) == 3 else None
            v = s.target.id
            if step_node is None:
                cond, inc = f"{v} < stop_{v}_{depth}", f"++{v}"
            else:
                literal = step_node
                sign = 1
                if isinstance(literal, ast.UnaryOp) and isinstance(literal.op, ast.USub):
                    literal, sign = literal.operand, -1
                if not (
                    isinstance(literal, ast.Constant) and isinstance(literal.value, int) and literal.value
                ):
                    raise _fail(s, "range() step must be a non-zero integer literal")
                step = sign * literal.value
                cond = f"{v} {'<' if step > 0 else '>'} stop_{v}_{depth}"
                inc = f"{v} += INT64_C({step})"
            self.emit(depth, "{")
            self.emit(depth + 1, f"const int64_t stop_{v}_{depth} = {stop};")
            self.emit(depth + 1, f"for ({v} = {start}; {cond}; {inc}) {{")
            self.stmts(s.body, depth + 2)
            self.emit(depth + 1, "}")
            self.emit(depth, "}")
            return
        if isinstance(s, ast.Return):
            if s.value is None:
                raise _fail(s, "bare return is not supported")
            t = self.type_of(s.value)
            if t != self.fn.ret:
                raise _fail(s, f"returns a {t}, declared {self.fn.ret}")
            self.emit(depth, f"return {self.expr(s.value)};")
            return
        if isinstance(s, ast.Raise):
            self.emit(depth, f'throw std::invalid_argument("{raise_message(s)}");')
            return
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            c = s.value
            if (
                isinstance(c.func, ast.Attribute)
                and c.func.attr == "append"
                and isinstance(c.func.value, ast.Name)
                and self.type_of(c.func.value) == LIST
                and len(c.args) == 1
                and self.type_of(c.args[0]) == INT
            ):
                self.emit(depth, f"{c.func.value.id}.push_back({self.expr(c.args[0])});")
                return
        raise _fail(s, f"unsupported statement {ast.unparse(s).splitlines()[0]!r}")

    def translate(self) -> list[str]:
        body = self.fn.node.body
        self.collect(body)
        for name, t in self.locals.items():
            init = {INT: " = 0", BOOL: " = false", LIST: "", PAIR: ""}[t]
            self.emit(1, f"{CPP_TYPE[t]} {name}{init};")
        for v in sorted(self.loop_vars - set(self.locals) - {p for p, _ in self.fn.params}):
            self.emit(1, f"int64_t {v} = 0;")
        self.stmts(body, 1)
        return self.lines


def raise_message(s: ast.Raise) -> str:
    """The message of ``raise ValueError("...")`` (a plain printable-ASCII literal), escaped for C++."""
    exc = s.exc
    if not (
        s.cause is None
        and isinstance(exc, ast.Call)
        and isinstance(exc.func, ast.Name)
        and exc.func.id == "ValueError"
        and len(exc.args) == 1
        and not exc.keywords
        and isinstance(exc.args[0], ast.Constant)
        and isinstance(exc.args[0].value, str)
    ):
        raise _fail(s, 'only `raise ValueError("message")` with a literal message is supported')
    msg = exc.args[0].value
    if not all(" " <= ch <= "~" for ch in msg):
        raise _fail(s, "the message must be printable ASCII")
    return msg.replace("\\", "\\\\").replace('"', '\\"')


def signature(fn: Function) -> str:
    params = []
    for name, t in fn.params:
        if t in (LIST, PAIR) and name not in fn.mutated_params:
            params.append(f"const {CPP_TYPE[t]}& {name}")
        else:
            params.append(f"{CPP_TYPE[t]} {name}")
    return f"inline {CPP_TYPE[fn.ret]} {fn.name}({', '.join(params)})"


PRELUDE = """\
namespace detail {

// Python ints do not overflow; here every +, -, * is checked and throws instead of wrapping.
inline int64_t add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) {
    throw std::overflow_error("layout rule: integer overflow");
  }
  return r;
}

inline int64_t sub(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) {
    throw std::overflow_error("layout rule: integer overflow");
  }
  return r;
}

inline int64_t mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) {
    throw std::overflow_error("layout rule: integer overflow");
  }
  return r;
}

// Python's floor division and modulo.
inline int64_t floordiv(int64_t a, int64_t b) {
  if (b == 0) {
    throw std::domain_error("layout rule: division by zero");
  }
  if (a == INT64_MIN && b == -1) {
    throw std::overflow_error("layout rule: integer overflow");
  }
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) {
    --q;
  }
  return q;
}

inline int64_t pymod(int64_t a, int64_t b) {
  return sub(a, mul(floordiv(a, b), b));
}

inline int64_t len(const std::vector<int64_t>& v) {
  return static_cast<int64_t>(v.size());
}

// Python indexing: negative indices count from the end; out of range throws.
inline size_t checked_index(size_t size, int64_t i) {
  const int64_t n = static_cast<int64_t>(size);
  if (i < 0) {
    i += n;
  }
  if (i < 0 || i >= n) {
    throw std::out_of_range("layout rule: list index out of range");
  }
  return static_cast<size_t>(i);
}

inline int64_t& at(std::vector<int64_t>& v, int64_t i) {
  return v[checked_index(v.size(), i)];
}

inline int64_t at(const std::vector<int64_t>& v, int64_t i) {
  return v[checked_index(v.size(), i)];
}

inline std::vector<int64_t> concat(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out(a);
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

inline std::vector<int64_t> repeat(int64_t x, int64_t n) {
  if (n < 0) {
    n = 0;
  }
  if (n > (INT64_C(1) << 24)) {
    throw std::length_error("layout rule: list too long");
  }
  return std::vector<int64_t>(static_cast<size_t>(n), x);
}

// Python slice bounds: clamp after resolving negatives.
inline size_t slice_bound(size_t size, int64_t i) {
  const int64_t n = static_cast<int64_t>(size);
  if (i < 0) {
    i += n;
  }
  if (i < 0) {
    i = 0;
  }
  if (i > n) {
    i = n;
  }
  return static_cast<size_t>(i);
}

inline std::vector<int64_t> slice(const std::vector<int64_t>& v, int64_t lo, int64_t hi) {
  const size_t a = slice_bound(v.size(), lo);
  const size_t b = slice_bound(v.size(), hi);
  if (b <= a) {
    return {};
  }
  return std::vector<int64_t>(v.begin() + static_cast<std::ptrdiff_t>(a), v.begin() + static_cast<std::ptrdiff_t>(b));
}

inline std::vector<int64_t> slice_from(const std::vector<int64_t>& v, int64_t lo) {
  return slice(v, lo, static_cast<int64_t>(v.size()));
}

}  // namespace detail
"""


def comment_block(text: str, indent: str = "") -> list[str]:
    lines = [ln.rstrip() for ln in text.strip().splitlines()]
    return [f"{indent}// {ln}".rstrip() for ln in lines]


def parse_module(
    tree: ast.Module, source: Path | None
) -> tuple[dict[str, int], dict[str, Function], list[ast.ImportFrom]]:
    """A rule module's int constants, functions and imports of other rule modules."""
    constants: dict[str, int] = {}
    functions: dict[str, Function] = {}
    imports: list[ast.ImportFrom] = []
    for node in tree.body:
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if isinstance(node, ast.ImportFrom) and node.level >= 1 and source is not None:
            imports.append(node)
            continue
        if isinstance(node, ast.Assign):
            if (
                len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant)
                and type(node.value.value) is int
            ):
                constants[node.targets[0].id] = node.value.value
                continue
            raise _fail(node, "module-level assignments must be `NAME = <int>`")
        if isinstance(node, ast.FunctionDef):
            a = node.args
            if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs or node.decorator_list:
                raise _fail(node, f"{node.name}: only plain positional parameters are supported")
            params = [(p.arg, annotation_type(p.annotation)) for p in a.args]
            for p, _ in params:
                if p in CPP_RESERVED:
                    raise _fail(node, f"parameter {p!r} of {node.name} is reserved in C++; rename it")
            functions[node.name] = Function(
                node.name, params, annotation_type(node.returns), node, ast.get_docstring(node) or ""
            )
            continue
        raise _fail(node, f"unsupported module-level statement {ast.unparse(node).splitlines()[0]!r}")
    return constants, functions, imports


def resolve_import(node: ast.ImportFrom, source: Path) -> Rule:
    """The rule module a relative ``from ..x.y import f`` in ``source`` names (it must be one of `rules()`)."""
    base = source.parent
    for _ in range(node.level - 1):
        base = base.parent
    target = base.joinpath(*(node.module or "").split(".")).with_suffix(".py")
    rule = rule_of(target)
    if rule is None:
        raise _fail(node, f"imports {target.name} from {target.parent}, which is not a layout rule module")
    return rule


def generate(
    source_text: str,
    source_label: str = "backends/cuda_triton/conv/layout.py",
    namespace: str = NAMESPACE,
    source: Path | None = None,
) -> str:
    """The C++ header for one rule module's source text. ``source`` (its path) resolves relative imports of other
    rule modules: their functions and constants are called in their own headers' namespaces."""
    global _source_name
    _source_name = Path(source_label).name
    tree = ast.parse(source_text)
    constants, functions, imports = parse_module(tree, source)
    local = set(functions)
    local_constants = set(constants)
    qualified: dict[str, str] = {}
    includes: list[str] = []
    for node in imports:
        assert source is not None
        rule = resolve_import(node, source)
        their_constants, their_functions, _ = parse_module(ast.parse(rule.source.read_text()), rule.source)
        for alias in node.names:
            name = alias.name
            if alias.asname is not None:
                raise _fail(node, "imports cannot be renamed")
            if name in their_functions:
                functions[name] = their_functions[name]
            elif name in their_constants:
                constants[name] = their_constants[name]
            else:
                raise _fail(node, f"{name} is not a function or constant of {rule.source.name}")
            qualified[name] = f"::{rule.namespace}::{name}"
        includes.append(f'#include "generated/{rule.header.name}"')

    bodies: dict[str, list[str]] = {}
    for name in local:
        bodies[name] = FunctionTranslator(functions[name], functions, constants, qualified).translate()

    digest = hashlib.sha256(source_text.encode()).hexdigest()
    out = [
        f"// GENERATED by scripts/gen_layout_header.py from {source_label}. DO NOT EDIT.",
        "// Regenerate: python scripts/gen_layout_header.py   (CI runs it with --check)",
        f"// source sha256: {digest}",
        "//",
    ]
    module_doc = ast.get_docstring(tree) or ""
    out += comment_block(module_doc)
    out += [
        "",
        "#pragma once",
        "",
        "#include <cstddef>",
        "#include <cstdint>",
        "#include <stdexcept>",
        "#include <utility>",
        "#include <vector>",
        "",
        '#include "generated/layout_prelude.h"',
        *includes,
        "",
        "namespace " + namespace + " {",
        "",
    ]
    for name, value in constants.items():
        if name in local_constants:
            out.append(f"inline constexpr int64_t {name} = INT64_C({value});")
    out.append("")
    out.append("// Declarations (the Python functions may call each other in any order).")
    for fn in functions.values():
        if fn.name in local:
            out.append(signature(fn) + ";")
    out.append("")
    for fn in functions.values():
        if fn.name not in local:
            continue
        if fn.doc:
            out += comment_block(fn.doc)
        out.append(signature(fn) + " {")
        out += bodies[fn.name]
        out.append("}")
        out.append("")
    out.append("}  // namespace " + namespace)
    out.append("")
    return "\n".join(out)


def generate_prelude() -> str:
    """The helpers every generated header uses (checked arithmetic, Python indexing and slicing)."""
    out = [
        "// GENERATED by scripts/gen_layout_header.py. DO NOT EDIT.",
        "// Regenerate: python scripts/gen_layout_header.py   (CI runs it with --check)",
        "//",
        "// Python semantics for the translated layout rules: ints that do not silently overflow, floor division,",
        "// negative indices and clamped slices.",
        "",
        "#pragma once",
        "",
        "#include <cstddef>",
        "#include <cstdint>",
        "#include <stdexcept>",
        "#include <vector>",
        "",
        "namespace " + NAMESPACE + " {",
        "",
        PRELUDE,
        "}  // namespace " + NAMESPACE,
        "",
    ]
    return "\n".join(out)


def _label(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return path.name


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if a header is stale")
    ap.add_argument("--source", type=Path, help="translate only this rule (default: the convolution's)")
    ap.add_argument("--header", type=Path, help="the header for --source (default: conv_layout.h)")
    args = ap.parse_args(argv)
    if args.source is None and args.header is None:
        outputs = [(PRELUDE_HEADER, generate_prelude)]
        for rule in rules():
            outputs.append(
                (
                    rule.header,
                    lambda r=rule: generate(r.source.read_text(), _label(r.source), r.namespace, r.source),
                )
            )
    else:
        source = args.source or SOURCE
        rule = rule_of(source)
        namespace = rule.namespace if rule is not None else NAMESPACE
        outputs = [
            (args.header or HEADER, lambda: generate(source.read_text(), _label(source), namespace, source))
        ]
    texts: list[tuple[Path, str]] = []
    try:
        for header, make in outputs:
            texts.append((header, make()))
    except TranslationError as e:
        print(f"gen_layout_header: {e}", file=sys.stderr)
        return 2
    if args.check:
        stale = [h for h, text in texts if not h.exists() or h.read_text() != text]
        for h in stale:
            print(
                f"gen_layout_header: {h} is stale; run: python scripts/gen_layout_header.py", file=sys.stderr
            )
        if stale:
            return 1
        print(f"{len(texts)} generated headers are up to date")
        return 0
    for header, text in texts:
        header.parent.mkdir(parents=True, exist_ok=True)
        if not header.exists() or header.read_text() != text:
            header.write_text(text)
            print(f"wrote {header}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
