#!/usr/bin/env bash
# Device call: what rounding fp32 A tiles to TF32 costs, per public-suite fp32 case (run from the repo root):
#   device: bash scripts/gpu_tf32_modes.sh        (results in $OUT/tf32_modes.tgz)
# Tunes the public suite's fp32 (TF32) cases over every schedule once per CUDA_TRITON_TF32_ROUNDING mode
# ("0": tensor-core truncation, "bits": integer rounding, "cvt": cvt.rna.tf32.f32), so each mode gets its own
# best schedule, then prints best-time-per-case side by side (scripts/compare_tables.py). The "cvt" table is the
# one to merge into the shipped table when cvt is the default.
set -u
export PYTHONPATH=backends PYTHONUNBUFFERED=1
o=/tmp/gpu_tf32_modes
rm -rf "$o"; mkdir -p "$o"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for mode in ${MODES:-cvt bits 0}; do
  CUDA_TRITON_TF32_ROUNDING=$mode timeout "$(( ${BUDGET_S:-150} + 30 ))" python3 scripts/tune.py \
    --out "$o/$mode/sm90.json" --problems public --dtypes fp32 --budget-s "${BUDGET_S:-150}" \
    > "$o/$mode.log" 2>&1
  echo "mode $mode: exit $? $(tail -n 1 "$o/$mode.log")"
done
python3 scripts/compare_tables.py $(for m in ${MODES:-cvt bits 0}; do echo "$m=$o/$m/sm90.json"; done) \
  | tee "$o/compare.txt"
tar czf "$OUT/tf32_modes.tgz" -C "$o" .
