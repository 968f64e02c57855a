#!/usr/bin/env bash
# Builds the C++ runtime (libcuda_triton_backend.so, cuda_triton_runner, test harnesses) into build/.
# Idempotent: configures once, then `cmake --build`. Uses .venv's cmake and ninja when present.
#   bash scripts/build_runtime.sh [extra cmake -D options for the first configure]
# Environment: BUILD_DIR (default build), EXECUTORCH_PREFIX (default: the installed executorch package),
#              CUDA_INCLUDE_DIR (default: triton wheel's cuda.h).
# Prints one line per step; CMake's output goes to <build>/build_runtime.log, whose tail is printed on failure.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="${BUILD_DIR:-build}"
py="${PYTHON:-}"
if [[ -z "$py" ]]; then
  if [[ -x .venv/bin/python ]]; then py=.venv/bin/python; else py=python3; fi
fi
cmake_bin=cmake
if [[ -x .venv/bin/cmake ]]; then cmake_bin=.venv/bin/cmake; fi
if [[ -x .venv/bin/ninja ]]; then export PATH="$root/.venv/bin:$PATH"; fi

mkdir -p "$build"
# One build at a time per build folder: the test suite's workers (pytest-xdist) may each call this script.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$build/.build_runtime.lock"
  flock 9
fi
log="$(cd "$build" && pwd)/build_runtime.log"
: >"$log"

# shellcheck source=steps.sh
. "$root/scripts/steps.sh"

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  prefix="${EXECUTORCH_PREFIX:-}"
  if [[ -z "$prefix" ]]; then
    prefix="$("$py" -c 'import executorch; print(list(executorch.__path__)[0])')"
  fi
  cuda_inc="${CUDA_INCLUDE_DIR:-}"
  if [[ -z "$cuda_inc" ]]; then
    cuda_inc="$("$py" -c 'import triton, os; print(os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "include"))' 2>/dev/null || true)"
  fi
  gen=()
  if command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
  run_step "$log" "configuring $build/ (CMake)" "$cmake_bin" -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" ${cuda_inc:+-DCUDA_INCLUDE_DIR="$cuda_inc"} "$@"
fi
run_step "$log" "building the C++ runtime, runner and test harnesses" \
  "$cmake_bin" --build "$build" -j "$(nproc 2>/dev/null || echo 2)"
echo "build_runtime: built $build/libcuda_triton_backend.so $build/cuda_triton_runner"
