"""A real PostgreSQL server for the tests, on 127.0.0.1 only, started once per test run.

The binaries come from the ``pgserver`` wheel (PostgreSQL 16 with pgvector, pip-installed by
``scripts/test.sh`` through the ``test`` extra), else from the system's PostgreSQL. The server
runs from a fresh data directory with trust authentication on loopback, and stops when the run
ends. PostgreSQL refuses to run as root: as root it runs as ``nobody``.

Each test gets its own schema (``fresh_url``), so tests never see each other's rows and need no
database per test; the URL selects it through ``options=-csearch_path=...``.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import hashlib
import importlib.metadata
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path
from urllib.parse import quote

USER = "lcm"
_lock = threading.Lock()
_server: Server | None = None


class Unavailable(RuntimeError):
    """No PostgreSQL binaries here (the ``test`` extra was not installed)."""


def binaries() -> Path:
    """The directory holding initdb and pg_ctl."""
    # Located through its installed files, not imported (its import warns about XDG dirs), and not
    # by module name: a script with tests/ on sys.path (bench/) would find this very file as
    # "pgserver" and silently fall back to the system's PostgreSQL.
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        found = Path(
            str(importlib.metadata.distribution("pgserver").locate_file("pgserver/pginstall/bin"))
        )
        if (found / "pg_ctl").exists():
            return found
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(candidate, "pg_ctl").exists():
            return Path(candidate)
    raise Unavailable(
        "no PostgreSQL binaries: install the test extra (pgserver) or the system's postgresql"
    )


def reachable_by_nobody(bin_dir: Path) -> Path:
    """``bin_dir``, or a copy of its installation that ``nobody`` can reach. The wheel sits inside the
    checkout's .venv, and a checkout under a private directory (CI's clone in a 0700 temp dir, /root)
    cannot be entered by the account postgres runs as; the copy (bin, lib, share: ~30 MB) is made
    once per installation, world-readable, and reused by every server of the run."""
    probe = subprocess.run(
        ["runuser", "-u", "nobody", "--", "test", "-x", str(bin_dir / "initdb")],
        capture_output=True,
        timeout=30,
        check=False,
    )
    if probe.returncode == 0:
        return bin_dir
    install = (
        bin_dir.parent
    )  # .../pgserver/pginstall (its libraries: RPATH $ORIGIN/../../../pgserver.libs)
    package = install.parent.parent  # site-packages, or /usr/lib/postgresql for the system's build
    parts = [install.relative_to(package)] + (
        [Path("pgserver.libs")] if (package / "pgserver.libs").is_dir() else []
    )
    tag = hashlib.sha256(
        f"{install}:{(bin_dir / 'postgres').stat().st_mtime_ns}".encode()
    ).hexdigest()[:12]
    target = Path(tempfile.gettempdir()) / f"lcm-pginstall-{tag}"
    if not (target / parts[0] / "bin" / "initdb").exists():
        staging = Path(tempfile.mkdtemp(prefix="lcm-pginstall-"))
        for part in parts:
            shutil.copytree(package / part, staging / "tree" / part, symlinks=True)
        for path in [staging, *staging.rglob("*")]:
            if not path.is_symlink():
                path.chmod(
                    path.stat().st_mode | 0o555
                    if path.is_dir() or os.access(path, os.X_OK)
                    else path.stat().st_mode | 0o444
                )
        with contextlib.suppress(OSError):  # another process of the run made it first
            (staging / "tree").rename(target)
        shutil.rmtree(staging, ignore_errors=True)
    return target / parts[0] / "bin"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One postgres process on 127.0.0.1:``port`` from a throwaway data directory."""

    def __init__(self) -> None:
        self.bin = binaries()
        self.root = Path(tempfile.mkdtemp(prefix="lcm-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:  # postgres refuses root: run it as an unprivileged account
            self._as = ["runuser", "-u", "nobody", "--"]
            self.root.chmod(0o755)
            shutil.chown(self.root, "nobody")
            self.bin = reachable_by_nobody(self.bin)
        self._run(
            [
                "initdb",
                "-D",
                str(self.data),
                "-U",
                USER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ]
        )
        self.start()
        atexit.register(self.stop)

    def start(self) -> None:
        """Start the server on its data directory (again, after :meth:`halt`)."""
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self._run(
            [
                "pg_ctl",
                "-D",
                str(self.data),
                "-o",
                options,
                "-l",
                str(self.root / "log"),
                "-w",
                "start",
            ]
        )

    def halt(self) -> None:
        """Stop the server and keep its data (the machine is down; :meth:`start` brings it back)."""
        self._run(["pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop"])

    def _run(self, argv: list[str]) -> None:
        argv = [*self._as, str(self.bin / argv[0]), *argv[1:]]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode != 0:
            log = (
                (self.root / "log").read_text(errors="replace")[-2000:]
                if (self.root / "log").exists()
                else ""
            )
            raise RuntimeError(f"{' '.join(argv)} failed: {proc.stderr[-2000:]}\n{log}")

    def url(self, database: str = "postgres", schema: str | None = None) -> str:
        base = f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"
        return base + (f"?options={quote(f'-csearch_path={schema}')}" if schema else "")

    def restart(self) -> None:
        """Stop the server (every session ends, as when its machine restarts) and start it again."""
        self._run(
            [
                "pg_ctl",
                "-D",
                str(self.data),
                "-m",
                "fast",
                "-l",
                str(self.root / "log"),
                "-w",
                "restart",
            ]
        )

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._run(["pg_ctl", "-D", str(self.data), "-m", "immediate", "stop"])
        shutil.rmtree(self.root, ignore_errors=True)


def server() -> Server:
    global _server
    with _lock:
        if _server is None:
            _server = Server()
        return _server


def fresh_url() -> str:
    """A URL whose tables live in a new, empty schema of the shared test server."""
    import psycopg

    srv = server()
    name = "t_" + uuid.uuid4().hex[:16]
    with psycopg.connect(srv.url(), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    return srv.url(schema=name)
