#!/usr/bin/env bash
# Creates .venv (once) and installs the project with its pinned dependencies. Idempotent; sourced by the
# README's commands. Installs nothing when everything is already there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
stamp=.venv/.installed-$(cat pyproject.toml | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  python -m pip install -q --upgrade pip
  python -m pip install -q -e ".[dev]"
  touch "$stamp"
fi
