#!/usr/bin/env bash
# Install this checkout as the Hermes plugin "hermes-lcm" and expose its bundled skill.
#
#   ./scripts/install.sh                          -> $HERMES_HOME (default ~/.hermes)
#   HERMES_PROFILE=work ./scripts/install.sh      -> $HERMES_HOME/profiles/work
#
# Creates two symlinks:
#   <home>/plugins/hermes-lcm  -> this checkout
#   <home>/skills/hermes-lcm   -> this checkout's skills/hermes-lcm
# Idempotent: links that already point here are left alone. A path that exists and
# points anywhere else is a conflict: nothing is created and the script exits 1.
# It never edits config.yaml; it prints the two settings to add.
set -euo pipefail

die() { echo "install.sh: $*" >&2; exit "${2:-1}"; }

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
SKILL_SRC="$SRC/skills/hermes-lcm"
[ -f "$SRC/plugin.yaml" ] && [ -f "$SRC/__init__.py" ] || die "$SRC does not look like a hermes-lcm checkout (no plugin.yaml)" 2
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

cat <<MSG

Now add these two settings to $TARGET_HOME/config.yaml (install.sh never edits it):

  plugins:
    enabled: [hermes-lcm]     # plugins.enabled must include hermes-lcm
  context:
    engine: lcm               # context.engine: lcm

Then restart Hermes and check: hermes plugins list   (hermes-lcm enabled; context engine lcm)
MSG
