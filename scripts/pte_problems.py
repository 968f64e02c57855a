#!/usr/bin/env python
"""Write the convolution problems of exported .pte files as a JSON list that ``tune.py --problems json:`` reads.

    PYTHONPATH=backends python scripts/pte_problems.py exports/a.pte exports/b.pte --out build/problems.json
    # GPU machine (no executorch needed there): tune exactly what those programs ask the tuning table for
    PYTHONPATH=backends python scripts/tune.py --out $OUT/t --problems json:build/problems.json

The problems are read back from each program's delegate blobs (`pin_table.pte_problems`), so they are the
convolutions as the delegate runs them, in the layouts the export planned (channels-last intermediates), which
the networks' layer tables of ``tune.py --problems models`` only approximate. Each problem is written once.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))

from pin_table import pte_problems  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pte", type=Path, nargs="+")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    from cuda_triton.conv.tuning_keys import problem_spec

    # The spec leaves out what a tuning entry does not key on (a fused epilogue), so convolutions that differ
    # only there are one problem.
    specs: dict[str, dict] = {}
    for path in args.pte:
        if not path.exists():
            raise SystemExit(f"{path}: no such file")
        found = [problem_spec(p) for p in pte_problems(path)]
        before = len(specs)
        specs.update((json.dumps(s, sort_keys=True), s) for s in found)
        print(f"{path}: {len(found)} convolutions, {len(specs) - before} new")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("[\n" + ",\n".join(json.dumps(s) for s in specs.values()) + "\n]\n")
    print(f"wrote {args.out}: {len(specs)} problems")
    return 0


if __name__ == "__main__":
    sys.exit(main())
