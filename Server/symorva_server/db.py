"""SQLite storage shared by the core and the feature modules.

One connection guarded by a lock (the server is a single process). Each component
registers its own ordered list of migrations with `Database.migrate(component, [...])`;
applied versions are recorded in the `schema_versions` table.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager


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

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """`with db.transaction() as conn:` - commits on success, rolls back on error."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                self._conn.execute("COMMIT")

    def query(self, sql: str, params: Sequence = ()) -> list[sqlite3.Row]:
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
            self._conn.close()
