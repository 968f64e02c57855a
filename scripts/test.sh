#!/usr/bin/env bash
# Installs everything and runs the whole CPU test suite (see README.md); arguments go to pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/scripts/setup_env.sh"
cd "$root"
bash scripts/build_runtime.sh  # C++ runtime + runner + test harnesses into build/
echo "test: running the test suite (pytest; every test has a time limit, pyproject.toml)"
python -m pytest -q "$@"
