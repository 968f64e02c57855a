#!/usr/bin/env bash
# Creates .venv (once) and installs the project with its pinned dependencies (pyproject.toml). Idempotent; sourced
# by the README's commands. Installs nothing when everything is already there. Each step it takes prints one line;
# the tools' own output goes to .venv/setup.log, whose tail is printed when a step fails.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mkdir -p .venv
setup_log="$root/.venv/setup.log"

# setup_step "what" command...: one progress line, the command's output appended to the log.
setup_step() {
  local what=$1
  shift
  echo "setup: $what"
  if ! "$@" >>"$setup_log" 2>&1; then
    echo "setup: failed: $what (last lines of $setup_log below)" >&2
    tail -n 40 "$setup_log" >&2
    return 1
  fi
}

if [ ! -x .venv/bin/python ]; then
  setup_step "creating the virtual environment .venv" python3 -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
stamp=.venv/.installed-$(sha1sum pyproject.toml | cut -c1-12)
if [ ! -f "$stamp" ]; then
  setup_step "upgrading pip" python -m pip install --upgrade pip
  setup_step "installing the pinned dependencies and the project (minutes the first time)" \
    python -m pip install -e ".[dev]"
  touch "$stamp"
fi
