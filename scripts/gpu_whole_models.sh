#!/usr/bin/env bash
# One device call that checks and times the whole-model programs (run on the GPU machine from the repo root):
#   python scripts/bench_models.py prepare --models ... --batches 1,32          # here, first (.carry/gpu_validate)
#   python scripts/pte_problems.py <the .pte files> --out .carry/gpu_validate/problems.json   # optional, for tune
#   device: bash scripts/gpu_whole_models.sh   (carry .carry/gpu_validate; results in $OUT/whole_models.tgz)
#   here, afterwards: python scripts/bench_models.py report <unpacked>/models/bench_models.json --out docs/bench/models
# Steps, in order (SKIP="..." leaves some out, T_<STEP> changes a limit): models (runner vs eager vs torch.compile,
# outputs checked, an ETDump per program), pin (the largest-batch program with and without page-locked I/O),
# graph (CUDA graph replay vs direct launches, update vs staging I/O), epilogue (fused conv epilogues vs the plain
# conv), eager (the eager op against cuDNN), tune (the programs' convolutions, when problems.json was carried).
set -u
export PYTHONPATH=backends PYTHONUNBUFFERED=1
o=/tmp/gpu_whole_models
rm -rf "$o"; mkdir -p "$o"
# shellcheck source=steps.sh
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
carry=.carry/gpu_validate
# the results so far, after every step, so a call cut off at its time limit still returns what finished; files
# under 2 MB only (runner outputs of big models are larger)
pack() { (cd "$o" && find . -type f -size -2M -print0 | tar czf "$OUT/whole_models.tgz" --null -T -); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
# ONLY="tv_*_b32 demo_*": a part of the carried programs (one call's time limit may not fit them all)
read -ra only <<< "${ONLY:-}"
gpu_step models "${T_MODELS:-300}" python3 scripts/bench_models.py run --out "$o/models" --etdump \
  --num-executions "${EXECUTIONS:-100}" ${ONLY:+--only "${only[@]}"}
pack
# the input copy page-locked (the runner's default) and pageable: of the largest program, or of the programs
# whose names PIN_PROGRAMS lists (programs with boundary copies: `bench_models.py prepare --io boundary` or a
# `copy:--io=boundary` variant; device-I/O programs copy nothing) (e.g. PIN_PROGRAMS="wav2vec2_fp16_b1 video_fp32_b1")
pin_inputs=$(ls -S "$carry"/exports/*.input0.bin 2>/dev/null | head -1)
if [ -n "${PIN_PROGRAMS:-}" ]; then
  pin_inputs=$(for p in $PIN_PROGRAMS; do echo "$carry/exports/$p.input0.bin"; done)
fi
if [ -n "$pin_inputs" ] && [ -x build/gpu/cuda_triton_runner ]; then
  # shellcheck disable=SC2016,SC2086  # the loop is sh -c's own script; the inputs are its arguments
  gpu_step pin "${T_PIN:-60}" sh -c 'for input; do for f in "" --no_pin_io; do echo "== $input $f"
    build/gpu/cuda_triton_runner --model_path "${input%.input0.bin}.pte" --inputs "$input" --num_executions 200 \
      --warmup 20 $f | grep -E "latency|page-locked|host time"; done; done' sh $pin_inputs
  pack
fi
gpu_step graph "${T_GRAPH:-90}" python3 scripts/gpu_graph_bench.py --out "$o/graph" --num-executions 100 --warmup 10
pack
gpu_step epilogue "${T_EPILOGUE:-120}" python3 scripts/bench_conv_epilogue.py --out "$o/epilogue" \
  --dtypes "${EPILOGUE_DTYPES:-fp16}"
pack
gpu_step eager "${T_EAGER:-120}" python3 scripts/bench_eager_op.py --out "$o/eager" --dtypes "${EAGER_DTYPES:-float16}"
pack
if [ -f "$carry/problems.json" ]; then
  # the tuner measures what the export ships: its pinned Triton when scripts/device_triton.py installed it here
  tune_path=backends
  [ -f build/device-triton/triton/__init__.py ] && tune_path=build/device-triton:backends
  gpu_step tune "${T_TUNE:-300}" env PYTHONPATH="$tune_path" python3 scripts/tune.py --out "$o/tune" \
    --problems "json:$carry/problems.json" \
    --max-schedules "${MAX_SCHEDULES:-4}" --budget-s "$(( ${T_TUNE:-300} - 30 ))" --jobs 15
  pack
fi
ls -la "$OUT"
