#!/usr/bin/env bash
# A/B timing of two code versions on the GPU, alternating runs of bench_conv.py in one device call:
#   git archive <commit> backends | tar -x -C ab/old      # here (ab/ travels with the working tree)
#   device: CASES=dw,conformer bash scripts/ab_code.sh    # results in $OUT/<version><i>/bench.json
# then `python scripts/compare_bench.py $OUT/old1/bench.json $OUT/new1/bench.json`.
set -u
export PYTHONUNBUFFERED=1
for run in new1 old1 new2 old2; do
  case $run in old*) pp=ab/old/backends;; *) pp=backends;; esac
  echo "=== $run $(date -u +%H:%M:%S)"
  PYTHONPATH=$pp timeout "${T_RUN:-100}" python3 scripts/bench_conv.py --suite "${SUITE:-bench/unseen_suite.py}" \
    --out "$OUT/$run" --all-cases --no-inductor --workers 15 --dtypes "${DTYPES:-float16,bfloat16}" \
    --cases "${CASES:-}" > "$OUT/$run.log" 2>&1
  echo "exit $?"; grep -E "^  all|^u\.|^[a-z]" "$OUT/$run.log" | grep -v "^warm" | tail -n 40 | cut -c1-80
done
