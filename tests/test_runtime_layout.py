"""The generated C++ layout headers (runtime/generated/) are current, and conv_layout.h agrees with the Python rule
(the op families' rules are compared through the blob readers, tests/test_blob_format.py)."""

from __future__ import annotations

import random
import subprocess
import sys

from cuda_triton.conv.layout import out_shape_and_stride
from runtime_helpers import ROOT, ensure_built

NUM_CASES = 12000


def test_header_is_current() -> None:
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_layout_header.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr


def test_check_detects_stale_header(tmp_path) -> None:
    stale = tmp_path / "conv_layout.h"
    stale.write_text((ROOT / "runtime" / "generated" / "conv_layout.h").read_text() + "// edited\n")
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_layout_header.py"), "--check", "--header", str(stale)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "stale" in r.stderr


def test_translator_rejects_unsupported_python(tmp_path) -> None:
    src = tmp_path / "layout.py"
    src.write_text("def f(x: int) -> int:\n    return max(x, 1)\n")
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_layout_header.py"), "--source", str(src), "--header",
         str(tmp_path / "h.h")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 2 and "layout.py:2" in r.stderr


def test_translator_raises_value_errors_as_invalid_argument(tmp_path) -> None:
    """``raise ValueError("...")`` becomes a throw of std::invalid_argument (the readers report it); any other raise
    is refused."""
    src = tmp_path / "layout.py"
    src.write_text(
        'def f(x: int) -> int:\n    if x < 0:\n        raise ValueError("negative")\n    return x\n'
    )
    header = tmp_path / "h.h"
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_layout_header.py"), "--source", str(src), "--header", str(header)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert 'throw std::invalid_argument("negative");' in header.read_text()
    src.write_text("def f(x: int) -> int:\n    raise ValueError(str(x))\n")
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_layout_header.py"), "--source", str(src), "--header", str(header)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 2 and "layout.py:2" in r.stderr


def _strides(rng: random.Random, sizes: list[int]) -> list[int]:
    """Contiguous, channels-last, a random permutation, or random strides (ambiguous size-1 dims included)."""
    rank = len(sizes)
    kind = rng.random()
    if kind < 0.1:
        return [rng.randint(0, 50) for _ in sizes]
    if kind < 0.4 or rank < 3:
        order = list(range(rank))
    elif kind < 0.75:
        order = [0, *range(2, rank), 1]
    else:
        order = list(range(rank))
        rng.shuffle(order)
    strides = [0] * rank
    running = 1
    for d in reversed(order):
        strides[d] = running
        running *= max(sizes[d], 1)
    return strides


def _case(rng: random.Random) -> tuple:
    spatial = rng.choice([1, 2, 2, 3])
    transposed = rng.random() < 0.3
    groups = rng.choice([1, 1, 1, 2, 3])
    n = rng.choice([0, 1, 1, 2, 3]) if rng.random() < 0.1 else rng.choice([1, 2])
    cin = groups * rng.choice([1, 1, 2, 3]) if rng.random() > 0.03 else 0
    cout = groups * rng.choice([1, 2, 4])
    k = [rng.randint(1, 4) for _ in range(spatial)]
    stride = [rng.randint(1, 3) for _ in range(spatial)]
    dilation = [rng.randint(1, 3) for _ in range(spatial)]
    pb = [rng.randint(0, 3) for _ in range(spatial)]
    pa = [rng.randint(0, 3) for _ in range(spatial)]
    op = [rng.randint(0, 3) if (transposed or rng.random() < 0.05) else 0 for _ in range(spatial)]
    spatial_in = [rng.choice([1, 2, rng.randint(1, 12)]) for _ in range(spatial)]
    batched = rng.random() < 0.85
    in_sizes = ([n] if batched else []) + [cin, *spatial_in]
    w_sizes = [cin, cout // groups, *k] if transposed else [cout, max(cin // groups, 0), *k]
    return (
        in_sizes, _strides(rng, in_sizes), w_sizes, _strides(rng, w_sizes), stride, pb, pa, dilation, transposed,
        op, groups, rng.random() < 0.05,
    )  # fmt: skip


def _line(c: tuple) -> str:
    in_s, in_st, w_s, w_st, stride, pb, pa, dil, transposed, op, groups, f64 = c
    parts = [len(in_s), *in_s, *in_st, len(w_s), *w_s, *w_st, len(stride), *stride, *pb, *pa, *dil, *op]
    parts += [int(transposed), groups, int(f64)]
    return " ".join(map(str, parts))


def test_cpp_header_matches_python_rule() -> None:
    exe = ensure_built() / "layout_harness"
    rng = random.Random(1234)
    cases = [_case(rng) for _ in range(NUM_CASES)]
    r = subprocess.run(
        [str(exe)],
        input="\n".join(_line(c) for c in cases) + "\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(cases)
    mismatches = []
    kinds = {"channels_last": 0, "contiguous": 0, "error": 0}
    for c, got in zip(cases, lines, strict=True):
        try:
            sizes, strides = out_shape_and_stride(*c)
            want = " ".join(map(str, ["OK", len(sizes), *sizes, *strides]))
            kinds["channels_last" if len(strides) >= 2 and strides[-1] != 1 else "contiguous"] += 1
        except (IndexError, ZeroDivisionError):
            want = "ERR"
            kinds["error"] += 1
        if (got.split(" ")[0] if want == "ERR" else got) != want:
            mismatches.append((c, want, got))
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[0]}"
    assert kinds["channels_last"] > 1000 and kinds["contiguous"] > 1000
