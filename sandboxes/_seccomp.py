"""Installing a run's seccomp filter, and the fallback filter.

The filter a run gets is normally the allow-list of :mod:`rewardkit.sandboxes.syscalls`,
compiled by libseccomp on the host; :func:`prepare` takes its bytes once, and :func:`install`
loads them with one ``prctl`` per run. Only where libseccomp is unavailable does the hand-written
deny-list below apply (the capabilities report says which one is active).

The fallback deny-list:

The filter narrows the kernel surface an unprivileged program can reach (the usual road out of a
namespace sandbox is a kernel bug behind a rarely used call). Refused with EPERM: ptrace and
cross-process memory access, new namespaces (``unshare``, ``setns``, ``clone`` with namespace
flags), mounting and the new mount API, ``chroot``/``pivot_root``, module and kexec loading,
``bpf``, ``perf_event_open``, ``userfaultfd``, kernel keyrings, handle-based opens, swap, reboot,
accounting, quotas and fanotify. ``clone3`` and ``io_uring_*`` get ENOSYS, which makes glibc fall
back to ``clone`` (whose flags a filter can inspect; clone3's are in memory) and libuv to its
thread pool. As in the allow-list, file locks, inotify and the page-cache calls that drop or
probe shared cached pages (fadvise DONTNEED, madvise COLD/PAGEOUT, RWF_NOWAIT, mincore,
cachestat) are refused: channels between concurrent runs. Everything else is allowed: this is
a deny list for hardening, not a whitelist.

Only x86-64 is covered (other ABIs on it, x32 and i386, are refused); on other architectures no
filter is installed and the capabilities report says so. It is written by hand (classic BPF,
a few dozen instructions) only so that the sandbox still has a filter where ``pyseccomp`` or
libseccomp is missing; this module is loaded by the fork server, standard library only.
"""
from __future__ import annotations

import ctypes
import errno
import platform

import _libc as libc

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET

SYS_CLONE = 56
DENY_EPERM = (
    101, 310, 311,            # ptrace, process_vm_readv, process_vm_writev
    272, 308,                 # unshare, setns
    165, 166, 155, 161,       # mount, umount2, pivot_root, chroot
    428, 429, 430, 431, 432, 433, 442,  # open_tree, move_mount, fsopen, fsconfig, fsmount, fspick, mount_setattr
    175, 176, 313, 246, 320,  # init/delete/finit_module, kexec_load, kexec_file_load
    321, 298, 323,            # bpf, perf_event_open, userfaultfd
    248, 249, 250,            # add_key, request_key, keyctl
    303, 304,                 # name_to_handle_at, open_by_handle_at
    167, 168, 169, 163, 179, 300, 212,  # swapon, swapoff, reboot, acct, quotactl, fanotify_init, lookup_dcookie
    170, 171,                 # sethostname, setdomainname
)
DENY_ENOSYS = (435, 425, 426, 427,  # clone3, io_uring_setup/enter/register
               253, 294,            # inotify_init, inotify_init1 (a channel between runs)
               27, 451)             # mincore, cachestat (page-cache residency)
#: File locks and change notices on files every run can open (/etc/passwd, the stdlib) would be
#: a channel between concurrent runs: flock, and fcntl's lock, lease and notify commands.
SYS_FLOCK, SYS_FCNTL = 73, 72
FCNTL_REFUSED = (5, 6, 7, 36, 37, 38, 1024, 1025, 1026)
#: The shared page cache (see syscalls.py): dropping a file's cached pages (fadvise DONTNEED,
#: madvise COLD/PAGEOUT) and RWF_NOWAIT reads and writes, which tell cached pages apart.
SYS_MADVISE, SYS_FADVISE64, SYS_PREADV2, SYS_PWRITEV2 = 28, 221, 327, 328
RWF_NOWAIT = 0x8

_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW, _RET_ERRNO, _RET_KILL = 0x7FFF0000, 0x00050000, 0x80000000
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2


class _Insn(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Insn))]


def supported() -> bool:
    return platform.machine() in ("x86_64", "AMD64")


def program() -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions; jumps count from the next instruction."""
    ins = [
        (_LD_W_ABS, 0, 0, _OFF_ARCH),
        (_JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        (_RET_K, 0, 0, _RET_KILL),                      # another ABI (i386): refuse it all
        (_LD_W_ABS, 0, 0, _OFF_NR),
        (_JGE_K, 0, 1, X32_SYSCALL_BIT),
        (_RET_K, 0, 0, _RET_ERRNO | errno.EPERM),       # the x32 ABI
        (_JEQ_K, 0, 4, SYS_CLONE),
        (_LD_W_ABS, 0, 0, _OFF_ARG0),                   # clone's flags (low 32 bits)
        (_JSET_K, 0, 1, NAMESPACE_FLAGS),
        (_RET_K, 0, 0, _RET_ERRNO | errno.EPERM),
        (_RET_K, 0, 0, _RET_ALLOW),
    ]
    for nr in DENY_EPERM:
        ins += [(_JEQ_K, 0, 1, nr), (_RET_K, 0, 0, _RET_ERRNO | errno.EPERM)]
    for nr in DENY_ENOSYS:
        ins += [(_JEQ_K, 0, 1, nr), (_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    ins += [(_JEQ_K, 0, 1, SYS_FLOCK), (_RET_K, 0, 0, _RET_ERRNO | errno.ENOLCK)]
    ins += _arg_block(SYS_FCNTL, 1, _JEQ_K, FCNTL_REFUSED, errno.ENOLCK)
    ins += _arg_block(SYS_FADVISE64, 3, _JEQ_K, (4,), errno.EPERM)  # DONTNEED
    ins += _arg_block(SYS_MADVISE, 2, _JEQ_K, (20, 21), errno.EPERM)  # COLD, PAGEOUT
    ins += _arg_block(SYS_PREADV2, 5, _JSET_K, (RWF_NOWAIT,), errno.EOPNOTSUPP)
    ins += _arg_block(SYS_PWRITEV2, 5, _JSET_K, (RWF_NOWAIT,), errno.EOPNOTSUPP)
    ins.append((_RET_K, 0, 0, _RET_ALLOW))
    return ins


def _arg_block(nr: int, arg: int, test: int, values: tuple, refusal: int) -> list:
    """Instructions that refuse call ``nr`` with ``refusal`` when its argument ``arg`` (low 32
    bits) matches one of ``values`` (``test``: equal, or any of the bits set) and allow it
    otherwise; any other call jumps past them."""
    ins = [(_JEQ_K, 0, 2 * len(values) + 2, nr), (_LD_W_ABS, 0, 0, _OFF_ARG0 + 8 * arg)]
    for value in values:
        ins += [(test, 0, 1, value), (_RET_K, 0, 0, _RET_ERRNO | refusal)]
    ins.append((_RET_K, 0, 0, _RET_ALLOW))
    return ins


_PREPARED = []  # [array, prog, kind]: built once in the fork server, shared by its forks


def prepare(bpf: bytes | None) -> str:
    """Build the filter every later :func:`install` loads: ``bpf`` (libseccomp's compiled
    allow-list) or, when None, the deny-list above. Returns which one ("allow-list" or
    "deny-list")."""
    if bpf:
        count = len(bpf) // ctypes.sizeof(_Insn)
        array = (_Insn * count).from_buffer_copy(bpf[:count * ctypes.sizeof(_Insn)])
        kind = "allow-list"
    else:
        ins = program()
        count = len(ins)
        array = (_Insn * count)(*[_Insn(*i) for i in ins])
        kind = "deny-list"
    prog = _Prog(count, ctypes.cast(array, ctypes.POINTER(_Insn)))
    _PREPARED[:] = [array, prog, kind]
    return kind


def install() -> None:
    """Install the prepared filter on the calling (single-threaded) process; needs
    no_new_privs set."""
    if not _PREPARED:
        prepare(None)
    libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(_PREPARED[1]))
