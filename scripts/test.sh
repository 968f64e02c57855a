#!/usr/bin/env bash
# Installs everything and runs the whole CPU test suite (see README.md); arguments go to pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/scripts/setup_env.sh"
cd "$root"
bash scripts/build_runtime.sh  # C++ runtime + runner + test harnesses into build/
echo "test: running the test suite (pytest; every test has a time limit, pyproject.toml)"
# One worker per core, at most 4 (a worker emulating a torchvision network holds up to 5 GB); the slowest tests
# are listed at the end so a suite that grows towards CI's time limit shows where the time goes. Arguments given
# to this script come last and override these (-n 0 runs in this process).
python -m pytest -q -n auto --maxprocesses 4 --durations 20 "$@"
