"""Idempotent retries: a request id is scored once, its reply kept for retries, within bounds.

A retry with the same id while the first attempt runs waits for it; after it, it gets the same
reply. Replies are kept in memory up to ``max_entries`` ids and ``max_bytes`` bytes, oldest
evicted first (a reply larger than ``max_bytes`` alone is not kept); the sizes are exported as
metrics. With a ``path`` the replies are also kept in an SQLite file, so that a retry after a
restart of the server is still answered from the first attempt; the file obeys the same bounds.
The file is read and written in a thread, never on the event loop, and each lookup or store
costs an index step, not a scan: its row count and bytes are counted as rows come and go, and
the oldest rows are found through an index on their time.

What this cannot cover: a request in flight when the server is killed was never answered, so
its retry is scored again (at-least-once). The reply carries the request id, so a client that
keeps what it got can drop a second answer.
"""
from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections import OrderedDict
from typing import Awaitable, Callable, Optional

from .metrics import ServerMetrics


class RequestIdReused(ValueError):
    """The id was used before for a request with a different body."""


class _Entry:
    __slots__ = ("fingerprint", "task", "reply")

    def __init__(self, fingerprint: bytes, task: Optional[asyncio.Task],
                 reply: Optional[bytes]) -> None:
        self.fingerprint, self.task, self.reply = fingerprint, task, reply


class ReplyCache:
    """Replies of recent request ids, bounded in entries and bytes."""

    def __init__(self, max_entries: int, max_bytes: int, metrics: ServerMetrics,
                 path: str | None = None) -> None:
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self.metrics = metrics
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self.bytes = 0
        self._db: sqlite3.Connection | None = None
        self._db_lock = threading.Lock()
        if path is not None:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, "
                             "fingerprint BLOB, reply BLOB, stored REAL)")
            self._db.execute("CREATE INDEX IF NOT EXISTS replies_by_time ON replies (stored)")
            self._db_rows, self._db_bytes = self._db.execute(
                "SELECT COUNT(*), COALESCE(SUM(LENGTH(reply)), 0) FROM replies").fetchone()
            self._trim_db()
        self._publish()

    # -- lookup and store -------------------------------------------------------------------------
    async def once(self, key: str, fingerprint: bytes,
                   compute: Callable[[], Awaitable[bytes]]) -> bytes:
        """``compute()``'s reply, computed once per ``key``."""
        entry = self._entries.get(key)
        if entry is None and self._db is not None:
            stored = await asyncio.to_thread(self._load, key)
            entry = self._entries.get(key) or stored  # another attempt may have begun meanwhile
        if entry is not None:
            if entry.fingerprint != fingerprint:
                raise RequestIdReused(key)
            self.metrics.idempotent_hits.inc()
            if entry.reply is not None:
                return entry.reply
            assert entry.task is not None
            return await asyncio.shield(entry.task)
        task = asyncio.ensure_future(compute())
        entry = _Entry(fingerprint, task, None)
        self._entries[key] = entry
        task.add_done_callback(lambda t, k=key, e=entry: self._finished(k, e, t))
        self._evict()
        return await asyncio.shield(task)

    def _finished(self, key: str, entry: _Entry, task: asyncio.Task) -> None:
        current = self._entries.get(key) is entry
        # A refused attempt (queue full, ...) must not be replayed: the retry should try again.
        if task.cancelled() or task.exception() is not None:
            if current:
                del self._entries[key]
            self._publish()
            return
        reply = task.result()
        entry.task = None
        if len(reply) > self.max_bytes:  # alone past the bound: not kept
            if current:
                del self._entries[key]
            self._publish()
            return
        entry.reply = reply
        if current:
            self.bytes += len(reply)
            if self._db is not None:
                asyncio.get_running_loop().run_in_executor(None, self._store, key, entry)
        self._evict()

    def _evict(self) -> None:
        while self._entries and (len(self._entries) > self.max_entries
                                 or self.bytes > self.max_bytes):
            _, old = self._entries.popitem(last=False)
            if old.reply is not None:
                self.bytes -= len(old.reply)
        self._publish()

    def _publish(self) -> None:
        self.metrics.idempotency_entries.set(len(self._entries))
        self.metrics.idempotency_bytes.set(self.bytes)

    # -- the SQLite file ------------------------------------------------------------------------
    def _load(self, key: str) -> Optional[_Entry]:
        with self._db_lock:
            if self._db is None:  # closed meanwhile
                return None
            row = self._db.execute("SELECT fingerprint, reply FROM replies WHERE key = ?",
                                   (key,)).fetchone()
        return None if row is None else _Entry(bytes(row[0]), None, bytes(row[1]))

    def _store(self, key: str, entry: _Entry) -> None:
        assert entry.reply is not None
        with self._db_lock:
            db = self._db
            if db is None:  # closed meanwhile
                return
            old = db.execute("SELECT LENGTH(reply) FROM replies WHERE key = ?",
                             (key,)).fetchone()
            if old is not None:
                self._db_rows -= 1
                self._db_bytes -= old[0]
            db.execute("INSERT OR REPLACE INTO replies VALUES (?, ?, ?, ?)",
                       (key, entry.fingerprint, entry.reply, time.time()))
            self._db_rows += 1
            self._db_bytes += len(entry.reply)
        self._trim_db()

    def _trim_db(self) -> None:
        """Delete the oldest rows until the file is within both bounds (found through the
        time index: the cost is the rows deleted, not the rows kept)."""
        with self._db_lock:
            db = self._db
            if db is None:
                return
            while self._db_rows > self.max_entries or self._db_bytes > self.max_bytes:
                row = db.execute("SELECT key, LENGTH(reply) FROM replies ORDER BY stored "
                                 "LIMIT 1").fetchone()
                if row is None:
                    self._db_rows, self._db_bytes = 0, 0
                    break
                db.execute("DELETE FROM replies WHERE key = ?", (row[0],))
                self._db_rows -= 1
                self._db_bytes -= row[1]

    def close(self) -> None:
        if self._db is not None:
            with self._db_lock:
                self._db.close()
            self._db = None
