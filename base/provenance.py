"""Which copy of hermes-lcm is running: the plugin's directory and, when it is a git checkout, its
commit, branch and whether it has local changes.

An operator with two installs (a clone under the Hermes plugins directory and a pip install), or
a checkout switched to a branch, learns from status which one the host loaded. ``git`` is asked
only when the directory is a checkout, with a short timeout; without git the commit and branch
are read from ``.git`` itself and ``dirty`` is None (unknown). A fresh process that must answer
fast (``lcm status``) reads the files only: starting git costs it more than the rest of its work.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

PLUGIN_DIR = Path(__file__).resolve().parents[1]
GIT_TIMEOUT_S = 2.0


# Status may be asked for often (a tool call, the view page, each /lcm status): git is asked at
# most once per directory in this many seconds.
CACHE_S = 10.0
_cache: dict[Path, tuple[float, dict[str, Any] | None]] = {}


def plugin_identity(directory: Path = PLUGIN_DIR, ask_git: bool = True) -> dict[str, Any]:
    """``{"plugin_path", "git": {"commit", "branch", "dirty"} | None}``; never raises.
    ``ask_git=False``: from ``.git``'s files only, ``dirty`` None."""
    if not ask_git:
        git_dir = directory / ".git"
        found = {**_from_files(git_dir), "dirty": None} if git_dir.exists() else None
        return {"plugin_path": str(directory), "git": found}
    now = time.monotonic()
    hit = _cache.get(directory)
    if hit is None or now - hit[0] >= CACHE_S:
        hit = (now, _git(directory) if (directory / ".git").exists() else None)
        _cache[directory] = hit
    return {"plugin_path": str(directory), "git": hit[1]}


def _git(directory: Path) -> dict[str, Any]:
    import subprocess  # lazily: a fresh process that reads the files only never pays for it

    try:
        done = subprocess.run(
            ["git", "-C", str(directory), "status", "--porcelain=v2", "--branch"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return {**_from_files(directory / ".git"), "dirty": None}
    if done.returncode != 0:
        return {**_from_files(directory / ".git"), "dirty": None}
    commit = branch = None
    dirty = False
    for line in done.stdout.splitlines():
        if line.startswith("# branch.oid "):
            oid = line.split()[-1]
            commit = None if oid == "(initial)" else oid
        elif line.startswith("# branch.head "):
            head = line.split(maxsplit=2)[-1]
            branch = None if head == "(detached)" else head
        elif line and not line.startswith("#"):
            dirty = True
    return {"commit": commit, "branch": branch, "dirty": dirty}


def _from_files(git_dir: Path) -> dict[str, Any]:
    """The commit and branch from ``.git/HEAD`` and its ref (loose or packed); a worktree's
    ``.git`` file is followed to its directory."""
    try:
        if git_dir.is_file():  # a worktree or submodule: "gitdir: <path>"
            target = git_dir.read_text(encoding="utf-8").strip().removeprefix("gitdir:").strip()
            git_dir = (git_dir.parent / target).resolve()
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref: "):
            return {"commit": head or None, "branch": None}
        ref = head[5:]
        common = git_dir
        if (git_dir / "commondir").is_file():
            common = (git_dir / (git_dir / "commondir").read_text().strip()).resolve()
        loose = common / ref
        if loose.is_file():
            commit: str | None = loose.read_text(encoding="utf-8").strip()
        else:
            packed = common / "packed-refs"
            lines = packed.read_text(encoding="utf-8").splitlines() if packed.is_file() else []
            commit = next((ln.split()[0] for ln in lines if ln.endswith(" " + ref)), None)
        return {"commit": commit, "branch": ref.removeprefix("refs/heads/")}
    except (OSError, ValueError):
        return {"commit": None, "branch": None}
