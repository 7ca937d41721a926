"""Keep freed heap memory for the next batch instead of handing it back to the kernel.

A forward pass on CPU allocates and frees tensors of the same sizes batch after batch. glibc's
``malloc`` gives every block above its mmap threshold (128 KiB at start) its own mapping and
unmaps it on ``free``, and shrinks a heap whose free top passes its trim threshold; a thread
other than the main one works in its own arena, whose heap is shrunk the same way. Each batch
then page-faults its activations back in, zero-filled by the kernel. Measured with the shipped
reward model on batches of 256 on one core: a scoring thread (where ``rewardkit serve`` runs a
model) took 4–5× the minor page faults of the main thread and scored 10–25% fewer samples per
second; with the thresholds raised, both threads stop faulting and score about a third faster
(``benchmarks/bench_server.py``, docs/server.md).

:func:`retain_freed_memory` raises both thresholds with ``mallopt``. The cost is memory: up
to ``trim_threshold`` of freed heap stays with the process, which a server or a training run
reuses at its next step anyway. ``LD_PRELOAD`` of jemalloc or tcmalloc has the same effect but
must be set before the process starts; this needs nothing installed, which is why it is written
here. On a C library other than glibc it does nothing and says why.

Set ``REWARDKIT_RETAIN_FREED_MEMORY=0`` to leave the allocator as it is.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

# mallopt parameter numbers from glibc's <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 32 << 20   # glibc's largest accepted value on 64-bit hosts
TRIM_THRESHOLD = 256 << 20

_applied: str | None = None   # the outcome of the first call, kept: the setting is per process


def retain_freed_memory(mmap_threshold: int = MMAP_THRESHOLD,
                        trim_threshold: int = TRIM_THRESHOLD) -> str:
    """Raise glibc's mmap and trim thresholds for this process, once. Returns what was done:
    ``"applied"``, or why not (``"disabled by REWARDKIT_RETAIN_FREED_MEMORY=0"``, ``"not glibc
    (...)"``, ``"mallopt refused ..."``). Later calls return the first call's outcome."""
    global _applied
    if _applied is not None:
        return _applied
    if os.environ.get("REWARDKIT_RETAIN_FREED_MEMORY", "1").strip() in ("0", "false", "no"):
        _applied = "disabled by REWARDKIT_RETAIN_FREED_MEMORY=0"
        return _applied
    libc_name, _ = platform.libc_ver()
    if libc_name != "glibc":
        _applied = f"not glibc ({libc_name or 'unknown C library'}): allocator left as it is"
        return _applied
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        ok_mmap = libc.mallopt(_M_MMAP_THRESHOLD, int(mmap_threshold))
        ok_trim = libc.mallopt(_M_TRIM_THRESHOLD, int(trim_threshold))
    except (OSError, AttributeError) as exc:
        _applied = f"mallopt unavailable: {exc}"
        return _applied
    _applied = ("applied" if ok_mmap and ok_trim else
                f"mallopt refused (mmap threshold {'ok' if ok_mmap else 'refused'}, "
                f"trim threshold {'ok' if ok_trim else 'refused'})")
    return _applied
