"""The system calls a run may make: an allow-list, compiled once per sandbox by libseccomp.

Everything not listed is refused, so a kernel feature added tomorrow (or one merely forgotten
today: ``modify_ldt``, ``personality``, ``pidfd_getfd``, ``memfd_secret``, ``move_pages``,
``io_setup``, ``mq_open``, ``process_madvise``, ``listmount``, ``open_tree_attr``...) is out of
reach of a run by default. The list is what the supported runtimes use (CPython, gcc/g++ and
the programs they build, Node.js with V8 and libuv, bash and the coreutils it runs): file I/O
on descriptors and paths, memory mapping, threads and futexes, processes (``clone`` without
namespace flags, ``execve``, ``wait4``), signals, timers, polling, and sockets only on
descriptors the sandbox handed over (the channel).

- Refused with ``EPERM`` (as a permission failure): the calls that escape or widen a sandbox
  (``ptrace``, ``process_vm_*``, ``unshare``, ``setns``, mounting, ``chroot``, ``bpf``,
  ``perf_event_open``, keyrings, module loading...).
- ``clone3`` and ``io_uring_*`` get ``ENOSYS``: glibc then uses ``clone`` (whose flags the
  filter can read; clone3's are in memory) and libuv its thread pool.
- File locks (``flock``, fcntl's lock commands) get ``ENOLCK`` and ``inotify`` ``ENOSYS``:
  every run can open the same read-only host files, so a lock or a watch on one is a channel
  between concurrent runs (a program that needs a lock on its own files cannot have one).
- The page cache is shared: the calls that drop a file's cached pages (``posix_fadvise`` with
  ``DONTNEED``, ``madvise`` with ``COLD``/``PAGEOUT``) get ``EPERM``, ``RWF_NOWAIT`` reads and
  writes ``EOPNOTSUPP``, ``mincore`` and ``cachestat`` ``ENOSYS``: one run could otherwise set
  and clear pages of a stdlib file that another run reads back (a channel), or evict the host's
  cached files.
- Everything else not allowed gets ``ENOSYS``, so libraries that probe a newer call fall back.
- ``socket``: no address family by default (the network namespace is empty anyway; this also
  closes AF_UNIX with its abstract names, AF_NETLINK, AF_VSOCK, AF_INET6...);
  ``allow_sockets=("unix",)`` opens AF_UNIX. ``socketpair`` is allowed for AF_UNIX only: a
  connected pair reaches no one else (it is a two-way pipe; libuv builds a child process's
  stdio with it, asyncio its wake-up channel).

libseccomp (through ``pyseccomp``) builds the BPF here, on the host, and its bytes travel to the
fork server, which installs them with one ``prctl`` per run (no per-run compile: the fork
server's speed is kept). Where ``pyseccomp`` or libseccomp is missing, the fork server falls back
to its small hand-written deny-list filter and the capabilities report says so.
"""
from __future__ import annotations

import errno
import tempfile

#: Calls every supported runtime may make.
ALLOWED = (
    # file descriptors and paths
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "open",
    "openat", "openat2", "creat", "close", "close_range", "lseek", "stat",
    "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat",
    "faccessat2", "readlink", "readlinkat", "getdents", "getdents64", "getcwd", "chdir",
    "fchdir", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat",
    "renameat2", "link", "linkat", "symlink", "symlinkat", "chmod", "fchmod", "fchmodat",
    "fchmodat2", "umask", "truncate", "ftruncate", "fallocate", "fsync", "fdatasync",
    "sync_file_range", "dup", "dup2", "dup3", "pipe", "pipe2", "utime",
    "utimes", "utimensat", "futimesat", "sendfile", "copy_file_range", "splice", "tee",
    "readahead", "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr",
    "flistxattr", "memfd_create", "ioctl",
    # memory
    "brk", "mmap", "munmap", "mremap", "mprotect", "msync", "mlock",
    "mlock2", "munlock", "membarrier", "pkey_alloc", "pkey_free", "pkey_mprotect",
    "get_mempolicy",
    # processes and threads
    "fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid", "kill",
    "tkill", "tgkill", "getpid", "getppid", "gettid", "getuid", "geteuid", "getgid",
    "getegid", "getresuid", "getresgid", "getgroups", "getpgrp", "getpgid", "setpgid",
    "getsid", "setsid", "prctl", "arch_prctl", "set_tid_address", "set_robust_list",
    "get_robust_list", "rseq", "futex", "sched_yield", "sched_getaffinity",
    "sched_setaffinity", "sched_getparam", "sched_getscheduler", "sched_get_priority_max",
    "sched_get_priority_min", "getpriority", "setpriority", "getcpu", "capget",
    # time, signals, polling
    "nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres", "gettimeofday", "time",
    "times", "getrusage", "getrlimit", "setrlimit", "prlimit64", "uname", "sysinfo",
    "getrandom", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend",
    "rt_sigpending", "rt_sigtimedwait", "sigaltstack", "pause", "alarm", "setitimer",
    "getitimer", "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun",
    "timer_delete", "timerfd_create", "timerfd_settime", "timerfd_gettime", "eventfd",
    "eventfd2", "signalfd", "signalfd4", "epoll_create", "epoll_create1", "epoll_ctl",
    "epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select", "pselect6",
    "restart_syscall",
    # sockets already open (the channel): no new ones unless a family is allowed
    "getsockopt", "setsockopt", "getsockname", "getpeername", "sendto", "recvfrom", "sendmsg",
    "recvmsg", "sendmmsg", "recvmmsg", "shutdown", "connect", "bind", "listen", "accept",
    "accept4",
)

#: Refused with EPERM: the ways out of a sandbox, named so a refusal reads as one.
DENIED_EPERM = (
    "ptrace", "process_vm_readv", "process_vm_writev", "unshare", "setns", "mount", "umount2",
    "pivot_root", "chroot", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount",
    "fspick", "mount_setattr", "init_module", "finit_module", "delete_module", "kexec_load",
    "kexec_file_load", "bpf", "perf_event_open", "userfaultfd", "add_key", "request_key",
    "keyctl", "name_to_handle_at", "open_by_handle_at", "swapon", "swapoff", "reboot", "acct",
    "quotactl", "fanotify_init", "lookup_dcookie", "sethostname", "setdomainname",
)

#: Refused with ENOSYS so that callers fall back to a call the filter can inspect or allows.
#: inotify: a watch on a file every run can open (/etc/passwd, the stdlib) would see other
#: runs open it, and an instance kept alive past its run counts against the next run's uid.
DENIED_ENOSYS = ("clone3", "io_uring_setup", "io_uring_enter", "io_uring_register",
                 "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch")

#: fcntl commands a run may use (descriptor flags, status flags, duplication, owner and
#: signal, pipe size, seals, hints). The lock commands (F_GETLK/SETLK/SETLKW, the OFD ones) get
#: ENOLCK like flock: a lock on a file every run can open (/etc/passwd, a stdlib module) is
#: visible to every other run, a channel between concurrent runs; leases and F_NOTIFY likewise.
FCNTL_ALLOWED = (0, 1, 2, 3, 4, 8, 9, 10, 11, 15, 16, 17, 1027, 1028, 1030, 1031, 1032, 1033,
                 1034, 1035, 1036, 1037, 1038)
FCNTL_REFUSED = (5, 6, 7, 36, 37, 38, 1024, 1025, 1026)

#: The page cache is shared by every run (and the host): a page of a stdlib file that one run
#: reads or drops, another can see cached or not, a channel between concurrent runs (one bit per
#: page), and dropping pages evicts the host's cached files too. Refused, with EPERM: the calls
#: that drop cached pages of a file (``posix_fadvise(POSIX_FADV_DONTNEED)``,
#: ``madvise(MADV_COLD / MADV_PAGEOUT)``); with EOPNOTSUPP (what a file without non-blocking reads
#: answers): ``preadv2``/``pwritev2`` with ``RWF_NOWAIT``, which tells a cached page from one that
#: is not; with ENOSYS (not listed): ``mincore`` and ``cachestat``, which report residency.
#: ``readahead`` and ``MADV_WILLNEED`` only load pages, as any read does.
FADVISE_ALLOWED = (0, 1, 2, 3, 5)  # NORMAL, RANDOM, SEQUENTIAL, WILLNEED, NOREUSE (a no-op)
FADVISE_REFUSED = (4,)  # DONTNEED
#: madvise advice a run may give: what allocators, runtimes and the JIT use (NORMAL..DONTNEED,
#: FREE, REMOVE, (DONT|DO)FORK, (UN)MERGEABLE, (NO)HUGEPAGE, DONTDUMP/DODUMP, WIPEONFORK,
#: KEEPONFORK, POPULATE_READ/WRITE, DONTNEED_LOCKED, COLLAPSE, GUARD_INSTALL/REMOVE).
MADVISE_ALLOWED = (0, 1, 2, 3, 4, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 22, 23, 24,
                   25, 102, 103)
MADVISE_REFUSED = (20, 21)  # COLD, PAGEOUT
RWF_NOWAIT = 0x8

#: clone flags that make new namespaces (CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET).
NAMESPACE_FLAGS = 0x7E020000

#: Families ``allow_sockets`` may open (inet/inet6 only reach the run's empty network
#: namespace; they exist so that the namespace itself can be checked).
SOCKET_FAMILIES = {"unix": 1, "inet": 2, "inet6": 10}


def compile_filter(allow_sockets: tuple[str, ...] = ()) -> bytes | None:
    """The run filter as classic-BPF bytes (``struct sock_filter`` records), or None where
    libseccomp is not available (the caller then falls back and reports it)."""
    unknown = sorted(set(allow_sockets) - set(SOCKET_FAMILIES))
    if unknown:
        raise ValueError(f"unknown socket families {unknown}; known: {sorted(SOCKET_FAMILIES)}")
    try:
        import pyseccomp as sc
    except (ImportError, OSError):
        return None
    try:
        f = sc.SyscallFilter(sc.ERRNO(errno.ENOSYS))
        # DENIED_ENOSYS need no rule: ENOSYS is the default action (libseccomp refuses a rule
        # that repeats the default).
        for name, action in ([(n, sc.ALLOW) for n in ALLOWED]
                             + [(n, sc.ERRNO(errno.EPERM)) for n in DENIED_EPERM]):
            if _known(sc, name):
                f.add_rule(action, name)
        f.add_rule(sc.ALLOW, "clone", sc.Arg(0, sc.MASKED_EQ, NAMESPACE_FLAGS, 0))
        f.add_rule(sc.ERRNO(errno.ENOLCK), "flock")
        for cmd in FCNTL_ALLOWED:
            f.add_rule(sc.ALLOW, "fcntl", sc.Arg(1, sc.EQ, cmd))
        for cmd in FCNTL_REFUSED:
            f.add_rule(sc.ERRNO(errno.ENOLCK), "fcntl", sc.Arg(1, sc.EQ, cmd))
        for advice in FADVISE_ALLOWED:
            f.add_rule(sc.ALLOW, "fadvise64", sc.Arg(3, sc.EQ, advice))
        for advice in FADVISE_REFUSED:
            f.add_rule(sc.ERRNO(errno.EPERM), "fadvise64", sc.Arg(3, sc.EQ, advice))
        for advice in MADVISE_ALLOWED:
            f.add_rule(sc.ALLOW, "madvise", sc.Arg(2, sc.EQ, advice))
        for advice in MADVISE_REFUSED:
            f.add_rule(sc.ERRNO(errno.EPERM), "madvise", sc.Arg(2, sc.EQ, advice))
        for name in ("preadv2", "pwritev2"):
            f.add_rule(sc.ALLOW, name, sc.Arg(5, sc.MASKED_EQ, RWF_NOWAIT, 0))
            f.add_rule(sc.ERRNO(errno.EOPNOTSUPP), name,
                       sc.Arg(5, sc.MASKED_EQ, RWF_NOWAIT, RWF_NOWAIT))
        # A connected AF_UNIX pair reaches no one else (a pipe that goes both ways); libuv
        # makes a child process's stdio with it, asyncio its wake-up channel.
        f.add_rule(sc.ALLOW, "socketpair", sc.Arg(0, sc.EQ, SOCKET_FAMILIES["unix"]))
        for family in allow_sockets:
            f.add_rule(sc.ALLOW, "socket", sc.Arg(0, sc.EQ, SOCKET_FAMILIES[family]))
        with tempfile.TemporaryFile() as fh:
            f.export_bpf(fh)
            fh.seek(0)
            return fh.read()
    except (OSError, RuntimeError, ValueError):
        return None


def _known(sc, name: str) -> bool:
    """Whether this libseccomp knows the call on this architecture (newer calls may not be)."""
    try:
        return sc.resolve_syscall(sc.system_arch(), name) >= 0
    except (OSError, ValueError, RuntimeError):
        return False

