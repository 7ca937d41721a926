"""Which uids a sandbox's runs get: a block of its own, claimed machine-wide with a lock file.

Each concurrent run needs a uid no other process uses: it is what lets the sandbox kill every
process of a run in one ``kill(-1)``, what makes ``RLIMIT_NPROC`` count the run alone, and
what keeps runs from signalling or reading each other. Two sandboxes (in one process or in
several) must therefore never share uids: each claims a block of :data:`BLOCK` uids by holding
an exclusive ``flock`` on that block's lock file for its lifetime. The kernel drops the lock
when the process dies, so a crashed sandbox frees its block.

The lock files live in one machine-wide directory, never under ``TMPDIR``: sandboxes started
with different temporary directories (one per rank, per job, per container sharing the host's
uids) must still see each other's claims, since the uids and ``RLIMIT_NPROC`` are machine-wide.
:data:`LOCK_DIRS` are tried in order (``/run`` is root's, as is the uid drop that needs these
locks); ``REWARDKIT_SANDBOX_UID_DIR`` overrides them, for hosts where several containers with
their own ``/run`` share one uid space (point it at a directory they all mount).
"""
from __future__ import annotations

import fcntl
import os
import stat

#: First sandbox uid: far above any real account (and below the 32-bit "nobody" values).
UID_BASE = 2_000_000_000
#: uids per block; a sandbox with a larger pool takes several consecutive blocks.
BLOCK = 256
MAX_BLOCKS = 4096
LOCK_DIRS = ("/run/rewardkit-sandbox-uids", "/run/lock/rewardkit-sandbox-uids",
             "/var/lock/rewardkit-sandbox-uids")


def lock_dir() -> str:
    """The machine-wide directory of the uid lock files (created, owner-only, on first use).

    Refuses a directory someone else owns or may write to: whoever could delete or replace a
    lock file could make two sandboxes take the same uids."""
    override = os.environ.get("REWARDKIT_SANDBOX_UID_DIR")
    errors = []
    for path in ([override] if override else LOCK_DIRS):
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
            info = os.lstat(path)
        except OSError as exc:
            errors.append(f"{path}: {exc.strerror}")
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() \
                or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            errors.append(f"{path}: not a directory owned by uid {os.geteuid()} and writable "
                          "by it alone")
            continue
        return path
    raise RuntimeError("no usable directory for the sandbox's uid locks (" + "; ".join(errors)
                       + "); set REWARDKIT_SANDBOX_UID_DIR to a directory of your own")


class UidBlock:
    """``count`` consecutive uids reserved for this process until :meth:`release`."""

    def __init__(self, count: int) -> None:
        directory = lock_dir()
        need = -(-count // BLOCK)
        for first in range(0, MAX_BLOCKS - need + 1):
            fds = self._try(directory, first, need)
            if fds:
                self._fds = fds
                start = UID_BASE + first * BLOCK
                self.uids = list(range(start, start + count))
                return
        raise RuntimeError(f"no free block of {count} sandbox uids in {directory}")

    @staticmethod
    def _try(directory: str, first: int, need: int) -> list[int]:
        fds = []
        for block in range(first, first + need):
            fd = os.open(os.path.join(directory, f"{block}.lock"),
                         os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
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
