"""The README's install as a new user does it: a fresh venv with only hermes-agent in it.

The venv is made from the base interpreter and filled, offline, from the wheels the test command
downloads (``.venv/wheelhouse``: hermes-agent 0.19.0 with its dependencies, hermes-lcm's runtime
dependencies and build backend). Hermes' own ``hermes chat -q`` then runs real turns against the
stub model. Before the install the plugin cannot load: Hermes says so on stderr and stores
nothing; after ``scripts/install.sh`` the first turn is in lcm.db and ``lcm`` is beside
``hermes``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from .harness import host_env, make_home, repo_root
from .stub_llm import StubLLM

pytestmark = pytest.mark.host

WHEELHOUSE = repo_root() / ".venv" / "wheelhouse"


def _wheelhouse() -> Path:
    if not any(WHEELHOUSE.glob("hermes_agent-*.whl")):
        reason = f"no hermes-agent wheel in {WHEELHOUSE}: scripts/test.sh downloads them at set-up"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip("!!! NOT TESTED: " + reason)
    return WHEELHOUSE


def _offline(env: dict[str, str]) -> dict[str, str]:
    """pip reads only the wheelhouse: no index, no network."""
    return {
        **env,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(WHEELHOUSE),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with hermes-agent 0.19.0 and nothing of hermes-lcm (made once for this module)."""
    _wheelhouse()
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "hermes-agent==0.19.0"],
        capture_output=True,
        text=True,
        timeout=900,
        env=_offline(dict(os.environ)),
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    return venv


def _user_env(hh, venv: Path) -> dict[str, str]:
    env = host_env(hh)
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = (
        f"{venv / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin"  # the user's shell: Hermes' venv on PATH
    )
    return _offline(env)


def _chat(
    venv: Path, env: dict[str, str], cwd: Path, text: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "hermes"), "chat", "-q", text],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def test_readme_install_in_a_fresh_hermes_venv_stores_the_first_turn(tmp_path, fresh_venv):
    venv = fresh_venv
    python = venv / "bin" / "python"
    lacks = subprocess.run(
        [str(python), "-c", "import regex"], capture_output=True, text=True, timeout=60
    )
    assert lacks.returncode != 0, "the fresh venv must have only hermes-agent (no regex)"

    with StubLLM() as stub:
        hh = make_home(tmp_path, stub)
        (hh.home / "plugins" / "hermes-lcm").unlink()  # install.sh makes the link, not the harness
        env = _user_env(hh, venv)

        # The old README route: only the links, and Hermes' Python lacks our dependencies.
        links = subprocess.run(
            ["bash", str(repo_root() / "scripts" / "install.sh"), "--no-pip"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            cwd=tmp_path,
        )
        assert links.returncode == 1, links.stdout + links.stderr
        assert "cannot load the plugin" in links.stderr and "regex" in links.stderr
        assert f"{python} -m pip install -e {repo_root()}" in links.stderr  # the exact command

        broken = _chat(venv, env, tmp_path, "first words before the install")
        assert broken.returncode == 0, broken.stderr[-3000:]
        assert "hermes-lcm: plugin installed but not loaded" in broken.stderr
        assert "No module named" in broken.stderr and "pip install -e" in broken.stderr
        assert not hh.lcm_db.exists()

        # lcm doctor (this venv's, as the user has none yet) names the broken install and its fix
        doctor = subprocess.run(
            [sys.executable, "-m", "hermes_lcm.cli.main", "doctor", "--format", "json"],
            capture_output=True,
            text=True,
            env={**env, "HERMES_PYTHON": str(python)},
            timeout=300,
            cwd=tmp_path,
        )
        report = json.loads(doctor.stdout)
        host = next(c for c in report["checks"] if c["name"] == "host")
        assert host["status"] == "fail" and "plugin installed but not loaded" in host["detail"], (
            host
        )
        assert (
            "regex" in host["detail"]
            and host["command"] == f"{python} -m pip install -e {repo_root()}"
        )
        assert doctor.returncode == 3 and report["status"] == "fail"

        # The README's install: one command gives the plugin, its dependencies and `lcm`.
        done = subprocess.run(
            ["bash", str(repo_root() / "scripts" / "install.sh")],
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "ok: Hermes' Python loads the plugin" in done.stdout
        assert "selects hermes-lcm" in done.stdout, done.stdout  # make_home wrote the two settings
        assert (venv / "bin" / "lcm").is_file() and "ok: lcm command" in done.stdout
        assert "Package would be ignored" not in done.stdout + done.stderr

        first = _chat(venv, env, tmp_path, "remember the pelican named Quillfeather")
        assert first.returncode == 0, first.stderr[-3000:]
        assert "not loaded" not in first.stderr and "not in use" not in first.stderr
        assert hh.lcm_db.exists()
        con = sqlite3.connect(f"file:{hh.lcm_db}?mode=ro", uri=True)
        try:
            users = [r[0] for r in con.execute("SELECT content FROM messages WHERE role = 'user'")]
        finally:
            con.close()
        assert any("Quillfeather" in u for u in users), users

        status = subprocess.run(
            [str(venv / "bin" / "lcm"), "doctor", "--format", "json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            cwd=tmp_path,
        )
        checked = json.loads(status.stdout)
        host = next(c for c in checked["checks"] if c["name"] == "host")
        assert host["status"] == "ok" and "loads the plugin" in host["detail"], host


def test_a_config_that_does_not_select_the_engine_is_said_at_startup_and_by_doctor(
    tmp_path, fresh_venv
):
    venv = fresh_venv
    with StubLLM() as stub:
        hh = make_home(tmp_path, stub, engine_name="lcmm")  # the typo a user makes
        env = _user_env(hh, venv)
        done = subprocess.run(
            ["bash", str(repo_root() / "scripts" / "install.sh")],
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert (
            "context.engine 'lcmm' names no registered engine (did you mean 'lcm'?)" in done.stdout
        )

        chat = _chat(venv, env, tmp_path, "hello")
        assert chat.returncode == 0, chat.stderr[-3000:]
        assert (
            "hermes-lcm: loaded but not in use: context.engine 'lcmm' names no registered engine"
            in chat.stderr
        )
        assert not hh.lcm_db.exists()

        doctor = subprocess.run(
            [str(venv / "bin" / "lcm"), "doctor", "--format", "json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            cwd=tmp_path,
        )
        report = json.loads(doctor.stdout)
        host = next(c for c in report["checks"] if c["name"] == "host")
        assert host["status"] == "warn" and "'lcmm' names no registered engine" in host["detail"], (
            host
        )
