"""Hostile programs and host probes for testing the code sandbox (:mod:`rewardkit.sandboxes`).

The sandbox's tests and its attack battery (``benchmarks/code_attacks_limits.py``) run the same
attacks; they live here once, public like the rest of :mod:`rewardkit.testing`, so that code
that runs programs in the sandbox can check its own setup against them. Each program is Python
source (``HOSTILE_C`` is C); what it prints is part of its contract, since tests pin it.

Needs nothing beyond the standard library and the sandbox; the probes read Linux's ``/proc``
and ``/sys``.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator

from ..sandboxes import Program, RunResult, Sandbox

# -- memory: a run that spreads over processes ---------------------------------------------------
SPREAD = ("import os, time\nkids = []\nfor _ in range(4):\n    pid = os.fork()\n"
          "    if pid == 0:\n        held = []\n        try:\n            for i in range(10):\n"
          "                b = bytearray(4 << 20)\n                b[::4096] = b'x' * len(b[::4096])\n"
          "                held.append(b)\n        except MemoryError:\n            pass\n"
          "        time.sleep(1.0)\n        os.write(1, f'{os.getpid()} {4 * len(held)}\\n'.encode())\n"
          "        os._exit(0)\n"
          "    kids.append(pid)\nfor k in kids:\n    os.waitpid(k, 0)\n")
"""Four processes, each growing by 4 MB steps up to 40 MB, then holding it for a second (all at
once); each survivor prints ``<pid> <MB held>``, one killed for memory prints nothing. Under a
64 MB address-space limit per process they hold about 100 MB together, where nothing bounds the
run as a whole."""


def held_mb(stdout: str) -> int:
    """What the processes of a :data:`SPREAD` run held together, in MB."""
    last: dict[str, int] = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            last[parts[0]] = int(parts[1])
    return sum(last.values())


def memory_cgroup_parent() -> str | None:
    """This process's own memory cgroup directory (v1 or v2), or None: where an earlier
    sandbox's leftover cgroups would be."""
    try:
        with open("/proc/self/cgroup") as fh:
            lines = [line.rstrip("\n").split(":", 2) for line in fh]
    except OSError:
        return None
    for _, controllers, path in lines:
        if "memory" in controllers.split(","):
            return os.path.join("/sys/fs/cgroup/memory", path.lstrip("/"))
    for _, controllers, path in lines:
        if controllers == "" and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            return os.path.join("/sys/fs/cgroup", path.lstrip("/"))
    return None


# -- between runs: what one run could see of another ---------------------------------------------
# A holder takes a lock on ``{path}`` (``.format(path=...)``) and keeps it for 2 s; a seer, started
# beside it, prints SEEN if the lock shows, ``free`` if not, or the errno when it gets no lock.
HOLD_FLOCK = ("import fcntl, time\nfh = open({path!r})\ntry:\n    fcntl.flock(fh, fcntl.LOCK_EX)\n"
              "except OSError:\n    pass\ntime.sleep(2.0)\n")
SEE_FLOCK = ("import fcntl, time\ntime.sleep(0.8)\nfh = open({path!r})\ntry:\n"
             "    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)\n    print('free')\n"
             "except BlockingIOError:\n    print('SEEN')\nexcept OSError as e:\n    print(e.errno)\n")
HOLD_FCNTL = ("import fcntl, struct, time\nfh = open({path!r})\ntry:\n"
              "    fcntl.fcntl(fh, fcntl.F_SETLK, struct.pack('hhqqi', fcntl.F_RDLCK, 0, 0, 0, 0))\n"
              "except OSError:\n    pass\ntime.sleep(2.0)\n")
SEE_FCNTL = ("import fcntl, struct, time\ntime.sleep(0.8)\nfh = open({path!r})\ntry:\n"
             "    got = fcntl.fcntl(fh, fcntl.F_GETLK, struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 0, 0))\n"
             "    print('SEEN' if struct.unpack('hhqqi', got)[0] != fcntl.F_UNLCK else 'free')\n"
             "except OSError as e:\n    print(e.errno)\n")
# An inotify watch on /etc/passwd for 2 s: SEEN if another run opened it meanwhile, ``quiet`` if
# not, ``errno N`` when the run gets no inotify instance. TOUCH opens the file after 0.8 s.
WATCH = ("import ctypes, select\nlibc = ctypes.CDLL(None, use_errno=True)\n"
         "fd = libc.inotify_init1(0o4000)\nif fd < 0:\n    print('errno', ctypes.get_errno())\n"
         "else:\n    libc.inotify_add_watch(fd, b'/etc/passwd', 0x20)\n"
         "    r, _, _ = select.select([fd], [], [], 2.0)\n    print('SEEN' if r else 'quiet')\n")
TOUCH = "import time\ntime.sleep(0.8)\nopen('/etc/passwd').read()\n"

# The page cache, shared by every run: SEND_PAGES drops ``{path}``'s cached pages, then reads the
# pages whose bit of ``{secret}`` (16 bits) is set; READ_PAGES, 0.8 s later, prints as a hex
# number which of those pages are cached (a non-blocking read succeeds only on a cached page):
# the secret itself where the channel works, ``errno N`` where a call is refused.
SEND_PAGES = ("import os, time\nfd = os.open({path!r}, os.O_RDONLY)\nsecret = {secret}\n"
              "try:\n    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)\n"
              "    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)\n"
              "    for i in range(16):\n        if secret >> i & 1:\n"
              "            os.pread(fd, 1, (2 * i + 1) * 8192)\n"
              "    print('sent')\nexcept OSError as e:\n    print('errno', e.errno)\n"
              "time.sleep(2.0)\n")
READ_PAGES = ("import os, time\ntime.sleep(0.8)\nfd = os.open({path!r}, os.O_RDONLY)\n"
              "os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)\nbuf = bytearray(1)\nbits = 0\n"
              "try:\n    for i in range(16):\n        try:\n"
              "            os.preadv(fd, [buf], (2 * i + 1) * 8192, os.RWF_NOWAIT)\n"
              "            bits |= 1 << i\n        except BlockingIOError:\n            pass\n"
              "    print(hex(bits))\nexcept OSError as e:\n    print('errno', e.errno)\n")
# Each call that drops or reports the cached pages of a shared file ``{path}``, tried once:
# prints ``name=ok`` (accepted; EAGAIN from a non-blocking read of an uncached page counts as
# accepted) or ``name=<errno>``, space-separated.
PAGE_CACHE_CALLS = (
    "import ctypes, errno, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.mmap.restype = ctypes.c_void_p\nlibc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t,"
    " ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]\n"
    "libc.syscall.argtypes = [ctypes.c_long] + [ctypes.c_void_p] * 4\n"
    "fd = os.open({path!r}, os.O_RDONLY)\nout = []\n"
    "def tryit(name, fn):\n    try:\n        fn()\n        out.append(name + '=ok')\n"
    "    except BlockingIOError:\n        out.append(name + '=ok')\n"
    "    except OSError as e:\n        out.append(f'{{name}}={{e.errno}}')\n"
    "def call(*args):\n    ctypes.set_errno(0)\n    if libc.syscall(*args) < 0:\n"
    "        raise OSError(ctypes.get_errno(), 'refused')\n"
    "page = libc.mmap(None, 1 << 16, 1, 1, fd, 0)\nvec = ctypes.create_string_buffer(16)\n"
    "tryit('fadvise_dontneed', lambda: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED))\n"
    "tryit('preadv2_nowait', lambda: os.preadv(fd, [bytearray(1)], 0, os.RWF_NOWAIT))\n"
    "tryit('pwritev2_nowait', lambda: os.pwritev(os.open('/dev/null', os.O_WRONLY), [b'x'], 0,"
    " os.RWF_NOWAIT))\n"
    "tryit('madvise_cold', lambda: call(28, page, 1 << 16, 20, None))\n"
    "tryit('madvise_pageout', lambda: call(28, page, 1 << 16, 21, None))\n"
    "tryit('mincore', lambda: call(27, page, 1 << 16, vec, None))\n"
    "tryit('cachestat', lambda: call(451, fd, ctypes.byref((ctypes.c_uint64 * 2)(0, 1 << 16)),"
    " ctypes.byref((ctypes.c_uint64 * 5)()), None))\n"
    "print(' '.join(out))\n")
# What honest programs do with the same calls: read-ahead hints, flag-free vectored reads,
# freeing anonymous memory. Prints ``name=ok`` or ``name=<errno>`` like PAGE_CACHE_CALLS.
PAGE_CACHE_HONEST = (
    "import ctypes, mmap, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.syscall.argtypes = [ctypes.c_long] + [ctypes.c_long] * 6\n"
    "fd = os.open({path!r}, os.O_RDONLY)\nout = []\nbuf = ctypes.create_string_buffer(16)\n"
    "iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 16)\n"
    "def tryit(name, fn):\n    try:\n        fn()\n        out.append(name + '=ok')\n"
    "    except OSError as e:\n        out.append(f'{{name}}={{e.errno}}')\n"
    "def call(*args):\n    ctypes.set_errno(0)\n    if libc.syscall(*args) < 0:\n"
    "        raise OSError(ctypes.get_errno(), 'refused')\n"
    "tryit('fadvise_sequential', lambda: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL))\n"
    "tryit('fadvise_willneed', lambda: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED))\n"
    "tryit('readahead', lambda: call(187, fd, 0, 4096, 0, 0, 0))\n"
    "tryit('preadv2', lambda: call(327, fd, ctypes.addressof(iov), 1, 0, 0, 0))\n"
    "m = mmap.mmap(-1, 1 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)\n"
    "m[:] = b'x' * (1 << 20)\n"
    "tryit('madvise_dontneed', lambda: m.madvise(mmap.MADV_DONTNEED))\n"
    "tryit('madvise_free', lambda: m.madvise(mmap.MADV_FREE))\n"
    "print(' '.join(out))\n")

LEAK = ("import os, socket, fcntl\na, b = socket.socketpair()\n"
        "a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)\n"
        "for i in range(120):\n    r, w = os.pipe()\n    try:\n"
        "        fcntl.fcntl(w, 1031, 1 << 20)\n    except OSError:\n        pass\n"
        "    os.set_blocking(w, False)\n    try:\n        while True:\n"
        "            os.write(w, b'x' * 65536)\n    except BlockingIOError:\n        pass\n"
        "    socket.send_fds(a, [b'x'], [r, w])\n    os.close(r)\n    os.close(w)\n"
        "socket.send_fds(a, [b'x'], [b.fileno()])\na.close()\nb.close()\nprint('leaked')\n")
"""Pipes full of data passed over SCM_RIGHTS into a socket's own queue, with the socket itself:
a cycle of in-flight descriptors that outlives the run, its pages charged where it ran. Prints
``leaked``."""
ALLOC = "b = bytearray(150 << 20)\nb[::4096] = b'y' * len(b[::4096])\nprint('allocated')\n"
"""150 MB touched page by page; prints ``allocated``."""


def run_together(sandbox: Sandbox, first: str, second: str) -> tuple[RunResult, RunResult]:
    """Run ``second`` while ``first`` runs (a sandbox of two slots or more); their results."""
    with sandbox.start(Program(first)) as a:
        b = sandbox.run(Program(second))
        ra = a.result(10)
    return ra, b


# -- disk: a compile that writes far past its limit ----------------------------------------------
def hostile_compile(path: str) -> str:
    """C source whose compile includes ``path`` seven times (``.incbin``): an object and a
    binary of seven times its size each."""
    return ('asm(".section .data\\n.rept 7\\n.incbin \\"' + path + '\\"\\n.endr\\n.text");\n'
            "int main(){return 0;}\n")


def large_gcc_file(min_bytes: int = 20 << 20) -> str | None:
    """A file over ``min_bytes`` every host with gcc has (one of gcc's own programs), or None."""
    for root, _dirs, files in os.walk("/usr/lib/gcc"):
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p) and os.path.getsize(p) > min_bytes:
                return p
    return None


def disk_usage(path: str) -> int:
    """Bytes of disk the files under ``path`` take (their blocks, as ``du`` counts)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_blocks * 512
            except OSError:
                pass
    return total


class DiskPeak:
    """The most disk the files under a folder took while it was watched (``.bytes``)."""

    def __init__(self) -> None:
        self.bytes = 0


@contextmanager
def peak_disk_usage(path: str, every_s: float = 0.02) -> Iterator[DiskPeak]:
    """Within the block, :func:`disk_usage` of ``path`` is sampled every ``every_s``; the
    yielded :class:`DiskPeak` holds the highest."""
    peak, stop = DiskPeak(), threading.Event()

    def watch() -> None:
        while not stop.is_set():
            peak.bytes = max(peak.bytes, disk_usage(path))
            time.sleep(every_s)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        stop.set()
        thread.join()


# -- scheduling ----------------------------------------------------------------------------------
NICE_PROBE = """
import json, os, sys
os.nice(max(0, 10 - os.nice(0)))  # nice 10 (or the caller's, if higher)
from rewardkit.sandboxes import Program, Sandbox
probe = "print(open('/proc/self/cgroup').read()); print(open('/proc/self/autogroup').read())"
def weight(stdout):
    # The weight the run is scheduled with: its parent cgroup's (v1 cpu.shares, v2
    # cpu.weight) where the run has a CPU cgroup, else its autogroup's nice value.
    for line in stdout.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and "rewardkit-" in parts[2] and (
                "cpu" in parts[1].split(",") or parts[1] == ""):
            base = "/sys/fs/cgroup/cpu" if parts[1] else "/sys/fs/cgroup"
            parent = os.path.join(base, os.path.dirname(parts[2].lstrip("/")))
            for name in ("cpu.shares", "cpu.weight"):
                try:
                    return name + "=" + open(os.path.join(parent, name)).read().strip()
                except OSError:
                    pass
    for line in stdout.splitlines():
        if line.startswith("/autogroup-"):
            return "autogroup " + line.split(" ", 1)[1].strip()
    return "unknown"
try:
    sb = Sandbox(pool_size=1, allow_unenforced=sys.argv[1:])
except TypeError:  # a version without the option: judged by the weight it gives
    sb = Sandbox(pool_size=1)
with sb:  # the weight is read while the sandbox, and so its cgroup, is there
    r = sb.run(Program(probe))
    w = weight(r.stdout)
print(json.dumps({"status": r.status, "error": r.error, "stdout": r.stdout, "weight": w,
                  "nice": os.nice(0)}))
"""
"""A script (``python -c NICE_PROBE [limit ...]``, the limits it allows unenforced) that runs
at nice 10, or the caller's niceness if higher, starts a one-slot sandbox and prints one JSON
line: the run's ``status``, ``error`` and ``stdout`` (its /proc cgroup and autogroup), the
``weight`` it is scheduled with (``cpu.shares=N``, ``cpu.weight=N``, ``autogroup nice N`` or
``unknown``) and the script's own ``nice``."""


def cgroup_weights(nice: int) -> tuple[str, str]:
    """The weight a one-slot sandbox's cgroup has when its caller runs at ``nice``, as
    :data:`NICE_PROBE` reports it: one process at that nice value (v1 ``cpu.shares`` of 1024,
    v2 ``cpu.weight`` of 100)."""
    w = NICE_WEIGHT[nice + 20]
    return f"cpu.shares={w}", f"cpu.weight={round(w * 100 / 1024)}"


NICE_WEIGHT = (88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548,
               7620, 6100, 4904, 3906, 3121, 2501, 1991, 1586, 1277, 1024, 820, 655, 526, 423,
               335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15)
"""The kernel's CPU weight of each nice value, -20..19 (``sched_prio_to_weight``)."""


__all__ = ["SPREAD", "held_mb", "memory_cgroup_parent", "HOLD_FLOCK", "SEE_FLOCK", "HOLD_FCNTL",
           "SEE_FCNTL", "WATCH", "TOUCH", "LEAK", "ALLOC", "run_together", "hostile_compile",
           "large_gcc_file", "disk_usage", "peak_disk_usage", "DiskPeak", "NICE_PROBE",
           "cgroup_weights", "NICE_WEIGHT"]


# -- a loaded host: time verdicts must not depend on it -----------------------------------------
def scored_beside_cpu_hogs(script: str, *args: str, nice: int = 10, timeout: float = 120,
                           hogs_per_core: int = 2) -> str:
    """The last line a Python ``script`` prints when run at ``nice`` beside ``hogs_per_core``
    CPU hogs per core: the script prints ``ready`` once set up (sandbox and checkers started),
    then does its timed work when a line arrives on its stdin, after the hogs have started.
    Raises AssertionError (with the script's stderr) where it fails.

    At nice 10 a process weighs about a tenth of one at nice 0, so beside one hog per core it
    gets about a tenth of a core and beside two about a twentieth, less whatever else the host
    runs: a test suite running beside it should take one per core, which already stretches a
    second of CPU to about ten of wall time, and leaves room below a verdict's backstop."""
    scorer = subprocess.Popen(["nice", "-n", str(nice), sys.executable, "-c", script, *args],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    hogs: list[subprocess.Popen] = []
    try:
        assert scorer.stdout.readline().strip() == "ready", scorer.stderr.read()[-2000:]
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(hogs_per_core * (os.cpu_count() or 1))]
        out, err = scorer.communicate("go\n", timeout=timeout)
    finally:
        for process in hogs + [scorer]:
            process.kill()
            process.wait()
    assert scorer.returncode == 0, err[-2000:]
    return out.splitlines()[-1]
