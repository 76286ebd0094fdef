#!/usr/bin/env bash
# Install this checkout into Hermes: the plugin, its dependencies, the `lcm` command and the
# bundled skill, then check that Hermes' own Python really loads it.
#
#   ./scripts/install.sh                          -> $HERMES_HOME (default ~/.hermes)
#   HERMES_PROFILE=work ./scripts/install.sh      -> $HERMES_HOME/profiles/work
#   HERMES_PYTHON=/path/to/python ./scripts/install.sh   (when `hermes` is not on PATH)
#   ./scripts/install.sh --no-pip                 -> links only; stops with the command to run
#                                                    when Hermes' Python lacks a dependency
#
# 1. Links <home>/plugins/hermes-lcm -> this checkout and <home>/skills/hermes-lcm -> its skill.
#    Idempotent: links that already point here are left alone. A path that exists and points
#    anywhere else is a conflict: nothing is created and the script exits 1.
# 2. Finds Hermes' Python (HERMES_PYTHON, else the interpreter the `hermes` command runs with)
#    and, unless it already loads the plugin and has `lcm`, pip-installs this checkout into it,
#    editable: the dependencies, the entry point Hermes loads, and the `lcm` command.
# 3. Loads the plugin in that Python the way Hermes does; a failure is said with its fix, exit 1.
# It never edits config.yaml; it prints the two settings to add (or what in it is wrong).
set -euo pipefail

NO_PIP=0
for arg in "$@"; do
  case "$arg" in
    --no-pip) NO_PIP=1 ;;
    -h|--help) sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown option '$arg' (options: --no-pip, --help)" >&2; exit 2 ;;
  esac
done

die() { echo "install.sh: $*" >&2; exit "${2:-1}"; }

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
SKILL_SRC="$SRC/skills/hermes-lcm"
[ -f "$SRC/plugin.yaml" ] && [ -f "$SRC/__init__.py" ] && [ -f "$SRC/host/install.py" ] || die "$SRC does not look like a hermes-lcm checkout (no plugin.yaml)" 2
[ -f "$SKILL_SRC/SKILL.md" ] || die "bundled skill missing: $SKILL_SRC/SKILL.md" 2

BASE="${HERMES_HOME:-$HOME/.hermes}"
PROFILE="${HERMES_PROFILE:-}"
if [ -n "$PROFILE" ] && [ "$PROFILE" != "default" ] && [ "$(basename "$BASE")" != "$PROFILE" ]; then
  case "$PROFILE" in */*|.*) die "HERMES_PROFILE '$PROFILE' is not a profile name" 2 ;; esac
  TARGET_HOME="$BASE/profiles/$PROFILE"
else
  TARGET_HOME="$BASE"
fi
PLUGIN_LINK="$TARGET_HOME/plugins/hermes-lcm"
SKILL_LINK="$TARGET_HOME/skills/hermes-lcm"

# real directory a path resolves to ("" if it does not resolve to a directory)
resolved() { (cd -P "$1" 2>/dev/null && pwd -P) || true; }

# state of one link path: "create", "ok" or "conflict:<reason>"
state() {
  local link="$1" want="$2"
  if [ ! -e "$link" ] && [ ! -L "$link" ]; then echo create; return; fi
  if [ "$(resolved "$link")" = "$want" ]; then echo ok; return; fi
  if [ -L "$link" ]; then
    echo "conflict:symlink to $(readlink "$link")"
  elif [ -d "$link" ]; then
    echo "conflict:an existing directory"
  else
    echo "conflict:an existing file"
  fi
}

plugin_state="$(state "$PLUGIN_LINK" "$SRC")"
skill_state="$(state "$SKILL_LINK" "$SKILL_SRC")"
conflicts=0
for pair in "$PLUGIN_LINK|$plugin_state|$SRC" "$SKILL_LINK|$skill_state|$SKILL_SRC"; do
  IFS='|' read -r link st want <<<"$pair"
  case "$st" in
    conflict:*)
      echo "install.sh: refusing: $link is ${st#conflict:}, not a link to $want." >&2
      echo "            Move it aside (or remove it) and run install.sh again." >&2
      conflicts=1 ;;
  esac
done
[ "$conflicts" -eq 0 ] || exit 1

link_one() {
  local link="$1" want="$2" st="$3" what="$4"
  if [ "$st" = ok ]; then
    echo "ok: $what already installed: $link -> $want"
  else
    mkdir -p "$(dirname "$link")"
    ln -s "$want" "$link"
    echo "linked $what: $link -> $want"
  fi
}
link_one "$PLUGIN_LINK" "$SRC" "$plugin_state" "plugin"
link_one "$SKILL_LINK" "$SKILL_SRC" "$skill_state" "skill"

# --- Hermes' Python ----------------------------------------------------------------------------
PY="${HERMES_PYTHON:-}"
HERMES_CMD="$(command -v hermes || true)"
if [ -z "$PY" ] && [ -n "$HERMES_CMD" ]; then
  line1="$(head -n 1 "$HERMES_CMD" 2>/dev/null || true)"
  case "$line1" in
    '#!'*/sh|'#!'*/sh\ *) PY="$(sed -n "2s/^'''exec' \([^ ]*\) .*/\1/p" "$HERMES_CMD")" ;;  # pip's long-path form
    '#!'*) PY="${line1#\#!}"; PY="${PY%% *}" ;;
  esac
fi
if [ -z "$PY" ] || [ ! -x "$PY" ]; then
  echo >&2
  echo "install.sh: cannot find Hermes' Python (${PY:+$PY is not executable}${PY:-no \`hermes\` command on PATH})." >&2
  echo "            The links are in place, but nothing checked that Hermes can load the plugin. Run:" >&2
  echo "              HERMES_PYTHON=/path/to/hermes/venv/bin/python $0" >&2
  exit 1
fi
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
  || die "Hermes' Python $PY is older than 3.11 (or does not run): hermes-lcm needs 3.11 or newer"
BIN="$(dirname "$PY")"
FIX="$(printf '%q -m pip install -e %q' "$PY" "$SRC")"

probe() { "$PY" "$SRC/host/install.py" probe --plugin-dir "$PLUGIN_LINK" 2>/dev/null | tail -n 1; }
field() {
  "$PY" -c 'import json, sys; v = json.loads(sys.argv[1]).get(sys.argv[2])
print(",".join(v) if isinstance(v, list) else ("" if v is None else v))' "$1" "$2"
}

report="$(probe)"
[ -n "$report" ] || die "$PY could not run the install check ($SRC/host/install.py)"
if [ "$(field "$report" ok)" = True ] && [ -x "$BIN/lcm" ]; then
  echo "ok: Hermes' Python loads the plugin: $PY"
elif [ "$NO_PIP" = 1 ]; then
  if [ "$(field "$report" ok)" != True ]; then
    echo >&2
    echo "install.sh: Hermes' Python cannot load the plugin: $(field "$report" reason)" >&2
    missing="$(field "$report" missing)"
    [ -z "$missing" ] || echo "            it lacks: ${missing//,/, }" >&2
    echo "            Install the checkout (its dependencies and the lcm command) into it:" >&2
    echo "              $FIX" >&2
    exit 1
  fi
  echo "ok: Hermes' Python loads the plugin: $PY (it has no lcm command: $FIX adds it)"
else
  echo "installing this checkout into Hermes' Python (editable: the dependencies and the lcm command): $PY"
  log="$(mktemp)"
  # pip's output (setuptools' notes on editable installs) is shown only when the install fails
  if "$PY" -m pip --version >/dev/null 2>&1; then
    "$PY" -m pip install -q -e "$SRC" >"$log" 2>&1 \
      || { cat "$log" >&2; rm -f "$log"; die "pip could not install into $PY; fix what pip said above, then run: $FIX"; }
  elif command -v uv >/dev/null 2>&1; then
    uv pip install -q --python "$PY" -e "$SRC" >"$log" 2>&1 \
      || { cat "$log" >&2; rm -f "$log"; die "uv could not install into $PY; fix what it said above, then run install.sh again"; }
  else
    rm -f "$log"
    die "$PY has no pip (and there is no uv): run \`$PY -m ensurepip\`, then: $FIX"
  fi
  rm -f "$log"
  report="$(probe)"
  [ "$(field "$report" ok)" = True ] \
    || die "after the install, Hermes' Python still cannot load the plugin: $(field "$report" reason)"
  echo "ok: Hermes' Python loads the plugin ($(field "$report" route))"
fi

# --- the lcm command ---------------------------------------------------------------------------
if [ -x "$BIN/lcm" ]; then
  on_path="$(command -v lcm || true)"
  hermes_dir="$(dirname "${HERMES_CMD:-$BIN/hermes}")"
  if [ "$on_path" = "$BIN/lcm" ]; then
    echo "ok: lcm command: $BIN/lcm"
  elif [ -z "$on_path" ] && [ "$hermes_dir" != "$BIN" ] && [ -w "$hermes_dir" ] && [ ! -e "$hermes_dir/lcm" ]; then
    ln -s "$BIN/lcm" "$hermes_dir/lcm"
    echo "linked the lcm command beside hermes: $hermes_dir/lcm -> $BIN/lcm"
  elif [ -z "$on_path" ]; then
    echo "note: the lcm command is $BIN/lcm, not on PATH: call it by that path, or add $BIN to PATH"
  else
    echo "note: \`lcm\` on PATH is $on_path; the one for this Hermes is $BIN/lcm"
  fi
fi

# --- config.yaml -------------------------------------------------------------------------------
problems="$("$PY" "$SRC/host/install.py" config "$TARGET_HOME" --engines "$(field "$report" engines)" 2>/dev/null || true)"
if [ -z "$problems" ]; then
  echo "ok: $TARGET_HOME/config.yaml selects hermes-lcm (restart Hermes if it is running)"
  exit 0
fi
echo
echo "$TARGET_HOME/config.yaml does not select hermes-lcm yet:"
printf '%s\n' "$problems" | sed 's/^/  - /'
cat <<MSG

Add these two settings to $TARGET_HOME/config.yaml (install.sh never edits it):

  plugins:
    enabled: [hermes-lcm]     # plugins.enabled must include hermes-lcm
  context:
    engine: lcm               # context.engine: lcm

Then restart Hermes and check: hermes plugins list   (hermes-lcm enabled), then lcm doctor
MSG
