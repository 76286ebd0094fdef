"""What ``lcm`` does differently on a PostgreSQL database (``--db postgresql://...`` or
``LCM_DATABASE_URL``): sizes from the server's catalogs, reopening by the URL that keeps the
password (``store.path`` never shows it), and backups by ``pg_dump`` (pg_backup.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..base.display import file_sizes
from ..storage.pg.secrets import scrub as scrubbed
from ..store import Store, is_url, redacted, writable_target

__all__ = ["backup", "is_url", "redacted", "scrubbed", "scrubbed_value", "sizes", "target_of"]


def scrubbed_value(value: Any) -> Any:
    """Every string inside a JSON-like value :func:`scrubbed` (an error's extra fields)."""
    if isinstance(value, str):
        return scrubbed(value)
    if isinstance(value, dict):
        return {k: scrubbed_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrubbed_value(v) for v in value]
    return value


def sizes(store: Store, facts: dict[str, Any]) -> dict[str, Any]:
    """A file's bytes (with its -wal and -shm), or a server's: this schema's tables and the database."""
    if not is_url(store.path):
        return file_sizes(store.path)
    by_table = store.database_sizes()["bytes_by_table"]
    return {
        "backend": "postgresql",
        "db": facts["schema_bytes"],
        "database_bytes": facts["database_bytes"],
        "bytes_by_table": by_table,
        "server_version": facts["server_version"],
        "pg_schema": facts["pg_schema"],
    }


def target_of(store: Store) -> str:
    """What reopens ``store`` writable: its file, or its URL with the password (``path`` has none)."""
    return writable_target(store)


def backup(store: Store, directory: Path) -> tuple[dict[str, Any], int]:
    """A server's database: ``pg_dump -Fc`` verified by ``pg_restore --list`` (exit 0), or, without
    pg_dump here, the exact command to run (exit 1: nothing was written)."""
    from ..maintenance import pg_backup  # lazy, like every verb's work

    done = pg_backup.dump(store, directory)  # lcm backup: named by the schema, not the URL's tag
    if not done.path:
        return {
            "status": "pg_dump not found",
            "run": done.command,
            "restore": done.restore,
            "hint": "install the PostgreSQL client tools (pg_dump, pg_restore) or run the command above",
        }, 1
    return {
        "status": "ok",
        "backup": done.path,
        "bytes": done.bytes,
        "seconds": done.seconds,
        "restore": done.restore,
    }, 0
