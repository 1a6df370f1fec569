"""SQLite storage shared by the core and the feature modules.

Writes go through one connection guarded by a lock (the server is a single process). Reads
(`query`, `query_one`) of a file database take no lock: each thread reads through a connection of
its own, and SQLite's WAL lets readers run beside a writer (they see what was committed), so a
slow transaction never holds up a read — in particular none on the async event loop, where the
long polls run. A thread inside a transaction reads through the write connection (it sees its own
uncommitted writes). An in-memory database (one connection only) reads under the lock. Async code
writes with `run_transaction` (a worker thread), never on the event loop. Each component
registers its own ordered list of migrations with `Database.migrate(component, [...])`; applied
versions are recorded in the `schema_versions` table.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

import anyio

T = TypeVar("T")


class Database:
    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        if path != ":memory:":
            self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._conn.execute("PRAGMA busy_timeout=5000")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_versions ("
            " component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
        self._readers = threading.local()
        self._reader_connections: list[sqlite3.Connection] = []
        self._owner = threading.local()  # depth of this thread's open transactions
        self._closed = False

    def _reader(self) -> sqlite3.Connection | None:
        """This thread's read connection (None: read through the write connection, under the lock)."""
        if self.path == ":memory:" or getattr(self._owner, "depth", 0) > 0 or self._closed:
            return None
        conn = getattr(self._readers, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA busy_timeout=5000")
            conn.execute("PRAGMA query_only=ON")
            self._readers.conn = conn
            with self._lock:
                self._reader_connections.append(conn)
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """`with db.transaction() as conn:` - commits on success, rolls back on error."""
        with self._lock:
            self._owner.depth = getattr(self._owner, "depth", 0) + 1
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    yield self._conn
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                else:
                    self._conn.execute("COMMIT")
            finally:
                self._owner.depth -= 1

    async def run_transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Runs `work(conn)` in one transaction on a worker thread: what async code does instead of
        `transaction()`, so that waiting for the write lock never blocks the event loop."""

        def run() -> T:
            with self.transaction() as conn:
                return work(conn)

        return await anyio.to_thread.run_sync(run)

    def query(self, sql: str, params: Sequence = ()) -> list[sqlite3.Row]:
        reader = self._reader()
        if reader is not None:
            return reader.execute(sql, params).fetchall()
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def query_one(self, sql: str, params: Sequence = ()) -> sqlite3.Row | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def migrate(self, component: str, migrations: Sequence[str]) -> None:
        """Apply the not yet applied statements (scripts) of `migrations`, in order."""
        with self._lock:
            row = self._conn.execute(
                "SELECT version FROM schema_versions WHERE component = ?", (component,)
            ).fetchone()
            current = row[0] if row else 0
            for version, script in enumerate(migrations, start=1):
                if version <= current:
                    continue
                with self.transaction() as conn:
                    for stmt in [s.strip() for s in script.split(";") if s.strip()]:
                        conn.execute(stmt)
                    conn.execute(
                        "INSERT INTO schema_versions(component, version) VALUES (?, ?)"
                        " ON CONFLICT(component) DO UPDATE SET version = excluded.version",
                        (component, version),
                    )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for conn in self._reader_connections:
                conn.close()
            self._conn.close()
