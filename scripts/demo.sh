#!/usr/bin/env bash
# The main job: replay a long, realistic coding-agent session through hermes-lcm — offline, no API key.
#
#   scripts/demo.sh [--json] [--home DIR] [--threshold 0.2] [--every 15] ...
#
# From a fresh clone it sets itself up: creates .venv (Python >= 3.11) and installs this checkout
# into it (editable). Later runs skip the install unless pyproject.toml changed since the last one.
# Environment: PYTHON (interpreter to build the venv from), HERMES_LCM_VENV (venv path).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${HERMES_LCM_VENV:-$ROOT/.venv}"
STAMP="$VENV/.hermes-lcm-installed"

pick_python() {
  local candidate
  for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [[ -n "$candidate" ]] || continue
    if command -v "$candidate" >/dev/null 2>&1 \
        && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  echo "demo.sh: hermes-lcm needs Python >= 3.11; set PYTHON=/path/to/python3.11" >&2
  return 1
}

if [[ ! -x "$VENV/bin/python" ]]; then
  python="$(pick_python)"
  echo "demo.sh: creating $VENV with $python (first run only)" >&2
  "$python" -m venv "$VENV"
fi

if [[ ! -f "$STAMP" || "$ROOT/pyproject.toml" -nt "$STAMP" ]]; then
  echo "demo.sh: installing hermes-lcm into $VENV" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT"
  touch "$STAMP"
fi

exec "$VENV/bin/python" -m hermes_lcm.demo "$@"
