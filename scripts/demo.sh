#!/usr/bin/env bash
# The project's main job: set up, then run the demo (see README.md).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/scripts/setup_env.sh"
cd "$root"
python scripts/demo.py "$@"
