#!/usr/bin/env python
"""Merge tuning tables: entries of later tables replace the base table's entries with the same key.

    PYTHONPATH=backends python scripts/merge_tables.py backends/cuda_triton/conv/tuning/sm90.json new/sm90.json \
        --out backends/cuda_triton/conv/tuning/sm90.json --note "fp32 re-tuned with cvt rounding, H200"

The key is (arch, precision, layout, signature), as the lookup uses it. Every table is read and validated by
`cuda_triton.conv.tuning.read_table` and the result is written by the same module's writer (the shipped format).
The merged table keeps the base's meta, with each merged table's meta appended under ``meta.merged`` (what was
measured where and why), so a shipped table says which run every entry came from.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))

from cuda_triton.conv.tuning import TuningTable, read_table  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("tables", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--note", default="", help="why these entries were re-measured")
    ap.add_argument(
        "--keep-faster",
        type=float,
        default=None,
        metavar="SLACK",
        help="replace an entry only if the new time is below the old one x (1 + SLACK): for partial re-tunes that "
        "tried fewer schedules than the run that measured the old entry (whose schedule is still offered)",
    )
    args = ap.parse_args()
    base = read_table(args.base)
    entries = {e.key: e for e in base.entries}
    meta = dict(base.meta)
    merged = list(meta.get("merged", []))
    for path in args.tables:
        table = read_table(path)
        if table.arch != base.arch:
            raise SystemExit(f"{path}: arch {table.arch} != base arch {base.arch}")
        replaced = kept = 0
        for e in table.entries:
            old = entries.get(e.key)
            if (
                old is not None
                and args.keep_faster is not None
                and old.time_us < e.time_us / (1 + args.keep_faster)
            ):
                kept += 1
                continue
            replaced += old is not None
            entries[e.key] = e
        if kept:
            print(f"{path}: kept {kept} old entries that were faster than the new ones")
        merged.append(
            {
                **table.meta,
                "note": args.note,
                "entries": len(table.entries),
                "replaced": replaced,
                "kept_old": kept,
            }
        )
        print(
            f"{path}: {len(table.entries)} entries, {replaced} replaced, {len(table.entries) - replaced - kept} new"
        )
    meta["merged"] = merged
    meta["convolutions_measured"] = len(entries)
    TuningTable(list(entries.values()), arch=base.arch, meta=meta).write(args.out)
    print(f"wrote {args.out}: {len(entries)} entries")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
