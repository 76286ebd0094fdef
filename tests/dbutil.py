"""Read-only looks at a database file from tests, independent of the store layer."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path


def query_ro(db: Path, sql: str, args: tuple = ()) -> list[tuple]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
