"""Which copy of hermes-lcm is running: status names the plugin's directory and, for a git
checkout, its commit, branch and local changes (read by git, or from .git without it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import hermes_lcm
from hermes_lcm.base import provenance
from hermes_lcm.base.provenance import plugin_identity

from .conftest import new_engine


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every reading asks again (status keeps one for a few seconds)."""
    monkeypatch.setattr(provenance, "CACHE_S", 0.0)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    assert shutil.which("git"), "these tests make a git checkout: git must be installed"
    repo = tmp_path / "hermes-lcm"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "feature")
    (repo / "plugin.yaml").write_text("name: hermes-lcm\n")
    _git(repo, "add", "plugin.yaml")
    _git(repo, "commit", "-q", "-m", "one")
    return repo


def test_a_checkout_reports_its_commit_branch_and_local_changes(checkout: Path) -> None:
    head = _git(checkout, "rev-parse", "HEAD")
    assert plugin_identity(checkout) == {
        "plugin_path": str(checkout),
        "git": {"commit": head, "branch": "feature", "dirty": False},
    }
    (checkout / "plugin.yaml").write_text("name: changed\n")
    assert plugin_identity(checkout)["git"]["dirty"] is True
    _git(checkout, "checkout", "-q", "--detach")
    assert plugin_identity(checkout)["git"]["branch"] is None


def test_without_git_the_commit_and_branch_come_from_dot_git(
    checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = _git(checkout, "rev-parse", "HEAD")
    _git(checkout, "pack-refs", "--all")  # the branch only in packed-refs
    monkeypatch.setenv("PATH", "")
    assert plugin_identity(checkout)["git"] == {
        "commit": head,
        "branch": "feature",
        "dirty": None,
    }


def test_an_install_that_is_no_checkout_says_so(tmp_path: Path) -> None:
    assert plugin_identity(tmp_path) == {"plugin_path": str(tmp_path), "git": None}


def test_lcm_status_names_the_running_copy(tmp_path: Path) -> None:
    engine = new_engine(tmp_path, 6000, "s1")
    status = json.loads(engine.handle_tool_call("lcm_status", {}))
    assert status["plugin_path"] == str(Path(hermes_lcm.__file__).resolve().parent)
    assert status["git"] == plugin_identity()["git"]


def test_a_fresh_process_reads_the_files_only(checkout: Path) -> None:
    """``lcm status`` (a fresh process) does not start git: the commit and branch from .git,
    whether the tree has local changes unknown."""
    head = _git(checkout, "rev-parse", "HEAD")
    (checkout / "plugin.yaml").write_text("name: changed\n")
    assert plugin_identity(checkout, ask_git=False)["git"] == {
        "commit": head,
        "branch": "feature",
        "dirty": None,
    }
