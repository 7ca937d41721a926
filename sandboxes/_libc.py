"""Thin ctypes wrappers for the Linux calls the sandbox needs and Python 3.11 lacks.

``os.unshare`` and ``os.setns`` only arrive in Python 3.12 and the stdlib has no ``mount`` or
``prctl`` at all. Calling libc directly (rather than the ``unshare`` binary from util-linux) lets
the fork server try each namespace on its own, record exactly which ones took effect, and keep
working where util-linux is absent. Standard library only: the fork server loads this by path.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                        ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                        ctypes.c_ulong]
_libc.capset.argtypes = [ctypes.c_void_p, ctypes.c_void_p]

_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _b(value: str | None) -> bytes | None:
    return None if value is None else os.fsencode(value)


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), f"unshare({flags:#x})")


def setns(fd: int, nstype: int) -> None:
    _check(_libc.setns(fd, nstype), f"setns({nstype:#x})")


def mount(source: str | None, target: str, fstype: str | None, flags: int = 0,
          data: str | None = None) -> None:
    _check(_libc.mount(_b(source), _b(target), _b(fstype), flags, _b(data)),
           f"mount {source} on {target}")


def umount(target: str, flags: int = MNT_DETACH) -> None:
    _check(_libc.umount2(_b(target), flags), f"umount {target}")


def prctl(option: int, arg: int = 0, arg3: int = 0) -> None:
    _check(_libc.prctl(option, arg, arg3, 0, 0), f"prctl({option})")


def drop_capabilities() -> None:
    """Empty the effective, permitted and inheritable capability sets of the calling thread
    (``capset(2)``; the structures are the kernel's v3 header and two data words)."""
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(_libc.capset(ctypes.addressof(header), ctypes.addressof(data)), "capset")
