#!/usr/bin/env python
"""Print tuning tables side by side: the best measured time per convolution in each, and cuDNN's.

    python scripts/compare_tables.py shipped=backends/cuda_triton/conv/tuning/sm90.json new=/tmp/t/sm90.json

Rows are (precision, layout, signature); each column is one table's ``time_us`` with its speed-up over the
first table's ``cudnn_us``; a footer gives the geometric mean of each table's speed-up over cuDNN on the rows
every table has. Works on any tables scripts/tune.py wrote (e.g. two runs with different settings).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path


def load(path: str) -> dict[tuple[str, str, str], dict]:
    data = json.loads(Path(path).read_text())
    return {(e["precision"], e["layout"], e["signature"]): e for e in data["entries"]}


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if not argv or any("=" not in a for a in argv):
        print(__doc__)
        return 2
    names = [a.split("=", 1)[0] for a in argv]
    tables = [load(a.split("=", 1)[1]) for a in argv]
    common = sorted(set.intersection(*(set(t) for t in tables)))
    head = f"{'precision':9s} {'signature':58s} {'cuDNN':>8s} " + " ".join(f"{n:>16s}" for n in names)
    print(head)
    logs = [0.0] * len(tables)
    for key in common:
        cudnn = tables[0][key].get("cudnn_us") or float("nan")
        cells = []
        for i, t in enumerate(tables):
            us = t[key]["time_us"]
            logs[i] += math.log(cudnn / us)
            cells.append(f"{us:8.1f} ({cudnn / us:4.2f}x)")
        print(f"{key[0]:9s} {key[2][:58]:58s} {cudnn:8.1f} " + " ".join(cells))
    n = max(1, len(common))
    print(f"geomean vs cuDNN over {len(common)} rows: " + ", ".join(
        f"{name} {math.exp(s / n):.3f}x" for name, s in zip(names, logs, strict=True)))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
