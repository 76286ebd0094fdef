"""The data layer's own error types: services catch these, never a driver's exceptions.

Every SQLite error that leaves the data layer is one of these (see
``connection.SqliteConnection.read`` / ``write``), so another backend can raise
the same types for the same situations.
"""

from __future__ import annotations


class StoreError(Exception):
    """The database cannot be used as an hermes-lcm store."""


class ForeignDatabase(StoreError):
    """The file holds tables this program did not create (e.g. another LCM)."""


class NewerSchema(StoreError):
    """The file was written by a newer hermes-lcm; we refuse to touch it."""


class StoreFault(Exception):
    """A database operation failed (a broken or closed connection, a damaged file, ...)."""


class WriteFailed(StoreFault):
    """The store could not write (disk full, I/O error, read-only, locked past the timeout).

    Nothing of the failed transaction is stored. Callers that must not lose messages
    catch it to keep what was not stored (see ``LcmCore.compress``).
    """

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
