"""Which uids a sandbox's runs get: a block of its own, claimed machine-wide with a lock file.

Each concurrent run needs a uid no other process uses: it is what lets the sandbox kill every
process of a run in one ``kill(-1)``, what makes ``RLIMIT_NPROC`` count the run alone, and
what keeps runs from signalling or reading each other. Two sandboxes (in one process or in
several) must therefore never share uids: each claims a block of :data:`BLOCK` uids by holding
an exclusive ``flock`` on that block's lock file for its lifetime. The kernel drops the lock
when the process dies, so a crashed sandbox frees its block.
"""
from __future__ import annotations

import fcntl
import os
import tempfile

#: First sandbox uid: far above any real account (and below the 32-bit "nobody" values).
UID_BASE = 2_000_000_000
#: uids per block; a sandbox with a larger pool takes several consecutive blocks.
BLOCK = 256
MAX_BLOCKS = 4096
LOCK_DIR = os.path.join(tempfile.gettempdir(), "rewardkit-sandbox-uids")


class UidBlock:
    """``count`` consecutive uids reserved for this process until :meth:`release`."""

    def __init__(self, count: int) -> None:
        os.makedirs(LOCK_DIR, mode=0o700, exist_ok=True)
        need = -(-count // BLOCK)
        for first in range(0, MAX_BLOCKS - need + 1):
            fds = self._try(first, need)
            if fds:
                self._fds = fds
                start = UID_BASE + first * BLOCK
                self.uids = list(range(start, start + count))
                return
        raise RuntimeError(f"no free block of {count} sandbox uids in {LOCK_DIR}")

    @staticmethod
    def _try(first: int, need: int) -> list[int]:
        fds = []
        for block in range(first, first + need):
            fd = os.open(os.path.join(LOCK_DIR, f"{block}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                for held in fds:
                    os.close(held)
                return []
            fds.append(fd)
        return fds

    def release(self) -> None:
        for fd in getattr(self, "_fds", []):
            os.close(fd)
        self._fds = []
