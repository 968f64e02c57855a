"""The convolution lists of bench/: benchmark suites and named sets of convolutions for tuning.

* ``bench/public_suite.py``: the public benchmark suite (``PUBLIC``, a list of ``Case``), timed by
  scripts/bench_conv.py and always tuned over every schedule by scripts/tune.py;
* ``bench/unseen_suite.py``: convolutions in neither the suite nor the tuning table (same ``Case`` type), for
  measuring what the table's fallback and the heuristics do with shapes nobody tuned;
* a problems file (``json:PATH``, written by scripts/pte_problems.py): the convolutions of exported programs, as
  suite cases (`load_cases`), so scripts/bench_conv.py can time a model's own layers;
* ``bench/tuning_layer_sets.txt``: named sets of convolutions to re-tune together (``tune.py --problems
  set:NAME``), one a line: set name, dtype, layout, ``ConvProblem.signature()``.

These files live in the repository, not in the package: the tools that read them run from a checkout.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
PUBLIC_SUITE = REPO / "bench" / "public_suite.py"
UNSEEN_SUITE = REPO / "bench" / "unseen_suite.py"
LAYER_SETS = REPO / "bench" / "tuning_layer_sets.txt"


def _suite_module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("public_suite", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load the suite from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["public_suite"] = module  # dataclasses need the module registered
    spec.loader.exec_module(module)
    return module


def load_suite(path: Path = PUBLIC_SUITE) -> list[Any]:
    """The ``PUBLIC`` list of a suite file (its ``Case`` objects: name, N, C, K, spatial, kernel, ...)."""
    return list(_suite_module(path).PUBLIC)


def problem_cases(path: Path) -> list[Any]:
    """The convolutions of a problems file (``scripts/pte_problems.py --out``: the distinct convolutions of exported
    programs) as the public suite's ``Case`` objects, named by their signature; the input's layout gives
    ``channels_last``."""
    from cuda_triton.conv.templates.geometry import CHANNELS_LAST, dense_layout
    from cuda_triton.conv.tuning_keys import problem_from_spec

    case_type = _suite_module(PUBLIC_SUITE).Case
    cases = []
    for spec in json.loads(path.read_text()):
        p = problem_from_spec(spec)
        k = p.weight_size[1] * p.groups if p.transposed else p.weight_size[0]
        cases.append(
            case_type(
                name=p.signature(), N=p.batch, C=p.in_channels, spatial=tuple(p.in_spatial), K=k,
                kernel=tuple(p.kernel), stride=tuple(p.params.stride), pad_before=tuple(p.params.padding_before),
                pad_after=tuple(p.params.padding_after), dilation=tuple(p.params.dilation), groups=p.groups,
                transposed=p.transposed, output_padding=tuple(p.params.output_padding),
                channels_last=dense_layout(p.input_size, p.input_stride, prefer=CHANNELS_LAST) == CHANNELS_LAST,
            )
        )  # fmt: skip
    return cases


def load_cases(suite: str) -> list[Any]:
    """The cases of ``suite``: a suite file's ``PUBLIC`` list, or with ``json:PATH`` a problems file's
    convolutions (`problem_cases`)."""
    if suite.startswith("json:"):
        return problem_cases(Path(suite[len("json:") :]))
    return load_suite(Path(suite))


def layer_set(name: str, path: Path = LAYER_SETS) -> list[dict[str, str]]:
    """The convolutions of one named set: ``{"signature", "dtype", "layout"}`` each (scripts/tune.py's json
    item form)."""
    items, names = [], set()
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 4:
            raise ValueError(f"{path}:{n}: expected 'set dtype layout signature', got {line!r}")
        names.add(fields[0])
        if fields[0] == name:
            items.append({"dtype": fields[1], "layout": fields[2], "signature": fields[3]})
    if not items:
        raise ValueError(f"no convolution set {name!r} in {path} (sets: {', '.join(sorted(names))})")
    return items
