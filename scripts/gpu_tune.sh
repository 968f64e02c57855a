#!/usr/bin/env bash
# One device call that (re)builds the shipped sm_90 tuning table (run on the GPU machine from the repo root):
#   device: bash scripts/gpu_tune.sh            (results in $OUT/tuning.tgz)
# The public suite is tuned over every schedule in fp16/bf16/fp32; the model layers of
# cuda_triton/tools/tuning_signatures.py (batch 1 and 8, contiguous then channels-last, fp16) over the --max-schedules
# schedules nearest each template's heuristic. The run stops cleanly at BUDGET_S and resumes from RESUME (an
# earlier sm90.log.jsonl) when given, so two calls can finish a table one call cannot.
# Here, afterwards: cp <files_at>/tuning/sm90.json backends/cuda_triton/conv/tuning/sm90.json (a whole table), or
# scripts/merge_tables.py to merge a partial run (e.g. PROBLEMS=public,set:slow-models DTYPES=fp16,bf16; the sets
# are in bench/tuning_layer_sets.txt).
set -u
export PYTHONPATH=backends PYTHONUNBUFFERED=1
o=/tmp/gpu_tune
rm -rf "$o"; mkdir -p "$o"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
resume=()
[ -n "${RESUME:-}" ] && resume=(--resume "$RESUME")
timeout "$(( ${BUDGET_S:-520} + 40 ))" python3 scripts/tune.py --out "$o/tuning" \
  --problems "${PROBLEMS:-public,models}" --dtypes "${DTYPES:-fp16,bf16,fp32}" --model-dtypes fp16 \
  --layouts contiguous,channels_last --batches 1,8 --max-schedules "${MAX_SCHEDULES:-3}" \
  --budget-s "${BUDGET_S:-520}" "${resume[@]}" > "$o/tune.log" 2>&1
echo "tune exit $?"
tail -n 40 "$o/tune.log"
tar czf "$OUT/tuning.tgz" -C "$o" .
ls -la "$OUT"
