#!/usr/bin/env bash
# One device call that checks and times everything (run on the GPU machine from the repo root):
#   python scripts/gpu_validate.py prepare --fresh          # here, first (fills .carry/gpu_validate)
#   device: bash scripts/gpu_session.sh   (carry .carry/gpu_validate; results in $OUT/session.tgz)
# Each step has its own time limit so one slow step cannot starve the others, and every step's output is
# packed at the end (the device tool returns at most 8 files). SKIP="layout bench" leaves steps out; T_<STEP>
# variables change their limits. Steps, in order: layout validate num_dw_tr num_gemm num_all num_box num_f16 dw1d
# [retune merge: RETUNE=...] [bench_warmup: BENCH_WARMUP=1] bench unseen [noise_*: NOISE=1] bench_heur.
set -u
export PYTHONPATH=backends PYTHONUNBUFFERED=1
o=/tmp/gpu_session
rm -rf "$o"; mkdir -p "$o"
# shellcheck source=steps.sh
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nvidia-smi -q -d PERFORMANCE,CLOCK > "$o/gpu_state_start.txt" 2>&1  # clocks and throttle reasons (timing noise)
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
gpu_step layout "${T_LAYOUT:-60}" python3 scripts/check_layout_gpu.py --out "$o/layout"
gpu_step validate "${T_VALIDATE:-200}" python3 scripts/gpu_validate.py run --out "$o/validate" --corruptions 20
gpu_step num_dw_tr "${T_NUM_DW_TR:-80}" python3 scripts/gpu_numerics.py --out "$o/num_dw_tr" --families depthwise,transposed --count 120 --time-limit 60
gpu_step num_gemm "${T_NUM_GEMM:-70}" python3 scripts/gpu_numerics.py --out "$o/num_gemm" --families gemm,implicit_gemm --count 100 --time-limit 50
# random shapes only (the schedule, split/copy, tail and F16 groups are num_gemm/num_dw_tr/num_f16's): with them
# all, the warm-up compiles ~1000 kernels and leaves time for a few dozen random cases
gpu_step num_all "${T_NUMALL:-100}" python3 scripts/gpu_numerics.py --out "$o/num_all" --families gemm,implicit_gemm,implicit_gemm_tma,implicit_gemm_box,depthwise,transposed --count "${NUM_COUNT:-220}" \
  --schedule-cases 0 --split-copy-cases 0 --f16-cases 0 --suite-cases none --time-limit "${NUM_LIMIT:-80}"
# the Gluon box template: random shapes of its domain, every schedule on a few of them, every TF32 one on fp32 cases
gpu_step num_box "${T_NUMBOX:-120}" python3 scripts/gpu_numerics.py --out "$o/num_box" --families implicit_gemm_box \
  --count "${BOX_COUNT:-80}" --schedule-cases "${BOX_SCHEDULE_CASES:-3}" --split-copy-cases 0 --f16-cases "${BOX_TF32_CASES:-3}" \
  --suite-cases none --time-limit 90
# every F16_MMA schedule (fp32 at TF32 precision on fp16 tensor cores) on fp32 cases far outside fp16's range
gpu_step num_f16 "${T_NUMF16:-120}" python3 scripts/gpu_numerics.py --out "$o/num_f16" --families implicit_gemm,transposed \
  --count 0 --suite-cases none --schedule-cases 0 --split-copy-cases 0 --f16-cases "${F16_CASES:-6}" --time-limit 90
# every depthwise schedule (direct and tensor-core band kernels) on 1-D depthwise rows, next to cuDNN
gpu_step dw1d "${T_DW1D:-75}" python3 scripts/tune.py --out "$o/dw1d" --problems set:depthwise-1d --templates depthwise \
  --jobs 16 --budget-s 55
# RETUNE=public (any tune.py --problems value): re-tune those convolutions over every schedule and merge them
# into the package table before the bench (the merged table comes back as sm90.merged.json)
if [ -n "${RETUNE:-}" ]; then
  gpu_step retune "${T_RETUNE:-200}" python3 scripts/tune.py --out "$o/retune" --problems "$RETUNE" \
    --dtypes "${RETUNE_DTYPES:-fp16,bf16,fp32}" --budget-s "${RETUNE_BUDGET:-170}" ${RETUNE_EXTRA:-}
  gpu_step merge 60 python3 scripts/merge_tables.py backends/cuda_triton/conv/tuning/sm90.json "$o/retune/sm90.json" \
    --out backends/cuda_triton/conv/tuning/sm90.json --note "${RETUNE_NOTE:-re-tuned by gpu_session.sh}" ${MERGE_EXTRA:-}
  cp backends/cuda_triton/conv/tuning/sm90.json "$o/sm90.merged.json"
fi
# BENCH_WARMUP=1: one suite pass without Inductor first, not the record (for checking whether the first minutes
# of a device call time slower than the rest)
if [ -n "${BENCH_WARMUP:-}" ]; then
  gpu_step bench_warmup "${T_BENCH_WARMUP:-120}" python3 scripts/bench_conv.py --out "$o/bench_warmup" --all-cases \
    --no-inductor --workers 15
fi
# ours with the shipped tuning table vs cuDNN vs Inductor (max-autotune, every dtype), then the heuristics alone
gpu_step bench "${T_BENCH:-400}" python3 scripts/bench_conv.py --out "$o/bench" --all-cases --workers 15 --md \
  --inductor-dtypes "${INDUCTOR_DTYPES:-float16,bfloat16,float32}" --inductor-timeout "${INDUCTOR_TIMEOUT:-30}" \
  ${BENCH_EXTRA:-}
# convolutions in neither the suite nor the table (the table's fallback and the heuristics), no Inductor
gpu_step unseen "${T_UNSEEN:-180}" python3 scripts/bench_conv.py --suite bench/unseen_suite.py --out "$o/unseen" \
  --all-cases --no-inductor --workers 15
# NOISE=1: the unseen suite in fp16 twice with bench_conv's default CUDA-graph timing and twice with longer graphs
# and a warm-up burn, each pair compared by scripts/compare_bench.py (which timing repeats itself better)
if [ -n "${NOISE:-}" ]; then
  for v in a1 a2 b1 b2; do
    case $v in a*) timing="";; b*) timing="--graph-ms 10 --graph-calls 1000 --warm-ms 50";; esac
    gpu_step "noise_$v" "${T_NOISE:-90}" python3 scripts/bench_conv.py --suite bench/unseen_suite.py --out "$o/noise_$v" \
      --all-cases --no-inductor --workers 15 --dtypes float16 $timing
  done
  gpu_step noise_cmp 30 sh -c "python3 scripts/compare_bench.py $o/noise_a1/bench.json $o/noise_a2/bench.json; \
    python3 scripts/compare_bench.py $o/noise_b1/bench.json $o/noise_b2/bench.json"
fi
CUDA_TRITON_TUNING=0 gpu_step bench_heur "${T_BENCH_HEUR:-120}" python3 scripts/bench_conv.py --out "$o/bench_heur" \
  --all-cases --no-inductor --workers 15 ${BENCH_HEUR_EXTRA:-}
nvidia-smi -q -d PERFORMANCE,CLOCK > "$o/gpu_state_end.txt" 2>&1
# files under 2 MB only (the device tool returns at most ~20 MB; runner outputs of big models are larger)
(cd "$o" && find . -type f -size -2M -print0 | tar czf "$OUT/session.tgz" --null -T -)
ls -la "$OUT"
