#!/usr/bin/env bash
# Creates .venv (once) and installs the project with its pinned dependencies (pyproject.toml). Idempotent; sourced
# by the README's commands. Installs nothing when everything is already there. Each step it takes prints one line;
# the tools' own output goes to .venv/setup.log, whose tail is printed when a step fails.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mkdir -p .venv
setup_log="$root/.venv/setup.log"

# shellcheck source=steps.sh
. "$root/scripts/steps.sh"

if [ ! -x .venv/bin/python ]; then
  run_step "$setup_log" "creating the virtual environment .venv" python3 -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
stamp=.venv/.installed-$(sha1sum pyproject.toml | cut -c1-12)
if [ ! -f "$stamp" ]; then
  run_step "$setup_log" "upgrading pip" python -m pip install --upgrade pip
  run_step "$setup_log" "installing the pinned dependencies and the project (minutes the first time)" \
    python -m pip install -e ".[dev]"
  touch "$stamp"
fi
# torchvision's model definitions for the tests that export torchvision models (tests/torchvision_support.py says
# why it is installed apart from the venv, without its dependencies).
tv_stamp=.tv/.installed-0.28.0
if [ ! -f "$tv_stamp" ]; then
  run_step "$setup_log" "installing torchvision's model definitions into .tv/ (for the tests)" \
    python -m pip install --target .tv --no-deps --upgrade torchvision==0.28.0 pillow
  touch "$tv_stamp"
fi
