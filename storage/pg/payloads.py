"""Payload bytes in the database, for a fleet (``payloads.PayloadGuard`` with ``blobs``).

On SQLite the payload guard and the large-output step keep content-addressed files beside the
database file; hosts sharing a PostgreSQL database share no directory, so there the bytes live in
a ``payloads`` table (ref, bytes, created_at) and ``lcm_expand`` on one host reads what another
host wrote. The table is created by the first write (under the database's write lock, so two
hosts create it once); a database that never held a payload has none, and reads find nothing.
"""

from __future__ import annotations

import time

from ..connection import SqliteConnection
from ..sidecar import savepoint

_TABLE = (
    "CREATE TABLE IF NOT EXISTS payloads(ref text PRIMARY KEY, bytes bytea NOT NULL, "
    "created_at double precision NOT NULL)"
)


class PgPayloadQueries(SqliteConnection):
    """Content-addressed payload rows: written once, read by ref, listed and deleted by gc."""

    def _has_payloads(self) -> bool:
        with self.read() as db:
            return db.execute("SELECT to_regclass('payloads') IS NOT NULL").fetchone()[0] is True

    def payload_put(self, ref: str, data: bytes) -> None:
        """Store ``data`` under ``ref`` unless it is there (same ref, same bytes: content-addressed).
        The ingest calls this inside its own write: a savepoint keeps a refused row (a full disk)
        from aborting that transaction, so the message is still stored inline, as on SQLite."""
        with self.write() as db, savepoint(db, "lcm_payload"):
            db.execute(_TABLE)
            db.execute(
                "INSERT INTO payloads(ref, bytes, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                (ref, data, time.time()),
            )

    def payload_get(self, ref: str) -> bytes | None:
        if not self._has_payloads():
            return None
        with self.read() as db:
            row = db.execute("SELECT bytes FROM payloads WHERE ref=?", (ref,)).fetchone()
        return None if row is None else bytes(row[0])

    def payload_list(self) -> list[tuple[str, int, float]]:
        """(ref, bytes, created_at) of every stored payload, by ref."""
        if not self._has_payloads():
            return []
        with self.read() as db:
            rows = db.execute(
                "SELECT ref, octet_length(bytes), created_at FROM payloads ORDER BY ref"
            ).fetchall()
        return [(str(r[0]), int(r[1]), float(r[2])) for r in rows]

    def payload_delete(self, ref: str, older_than: float | None = None) -> int:
        """Delete ``ref`` (only if created before ``older_than`` when given); its byte count, 0 if kept."""
        if not self._has_payloads():
            return 0
        with self.write() as db:
            row = db.execute(
                "DELETE FROM payloads WHERE ref=? AND (?::float8 IS NULL OR created_at < ?) "
                "RETURNING octet_length(bytes)",
                (ref, older_than, older_than),
            ).fetchone()
        return 0 if row is None else int(row[0])
