"""One run, inside the child the fork server (:mod:`_zygote`) forks for it: join the slot's
cgroup and network namespace, take the host's descriptors, enter a private mount/IPC (and, in
the rootless mode, PID) namespace with a tmpfs working directory, drop privileges, set limits
and the seccomp filter, then run Python source in this fresh fork or exec the language's command.

Kept apart from the server loop so each file reads as one stage. Standard library only.
"""
import json
import math
import os
import resource
import signal
import socket
import stat
import sys

import _libc as libc
import _seccomp

MB = 1 << 20
ERR_FD = 1000  # where a child keeps its setup-error pipe while it rearranges descriptors


def wait_for_run(ctl, cgroup):
    """A warm child: forked and moved into its fresh cgroup ahead of the request (joining a
    cgroup takes the kernel's cgroup lock, whose writers wait for an RCU grace period: slow on
    a busy host), it says ``ready`` on ``ctl`` and waits there for its run: the request, then
    the run's descriptors with its setup-error pipe last. Returns them, or exits when the server
    hangs up."""
    try:
        if cgroup is not None:
            cgroup.join()
        ctl.send(b"ready")
        data, fds, _flags, _addr = socket.recv_fds(ctl, 1 << 20, 8)
    except BaseException:
        os._exit(127)  # before any run: the server forks another
    if not data or not fds:
        os._exit(0)
    err_w = fds[-1]
    try:
        msg = json.loads(data)
        ctl.close()
    except BaseException as exc:  # the run's own setup error, never a verdict on its program
        os.write(err_w, f"{type(exc).__name__}: {exc}".encode()[:4000])
        os._exit(127)
    return msg, fds[:-1], err_w


def child(msg, fds, err_w, cgroup, netns, own_pid_ns=False, drop_caps=False, joined=False):
    try:
        if cgroup is not None and not joined:
            cgroup.join()
        if netns is not None and msg["private_ns"]:
            # Each slot has a network namespace made at start (creating one costs ~1 ms); runs
            # of a slot follow each other, never overlap, and hold no socket past their end.
            libc.setns(netns, libc.CLONE_NEWNET)
        os.setsid()
        inherit_niceness()
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.dup2(err_w, ERR_FD, inheritable=False)
        high = [os.dup(fd) for fd in fds]  # dup first: a received fd may sit on a target number
        for target, fd in enumerate(high):
            os.dup2(fd, target)
        os.closerange(len(high), ERR_FD)
        os.closerange(ERR_FD + 1, 1 << 16)
        lim = msg["limits"]
        staged = None
        if msg["private_ns"]:
            # Its own mount and IPC namespaces (and its slot's network namespace, above):
            # concurrent runs cannot meet through abstract unix sockets or SysV IPC, and its
            # tmpfs vanishes with its last process.
            libc.unshare(libc.CLONE_NEWNS | libc.CLONE_NEWIPC)
            if drop_caps:
                hide_other_runs(msg["dir"])
            if msg["private_tmpfs"]:
                staged = mount_private_tmpfs(msg["dir"], lim["max_file_mb"], msg.get("uid"),
                                             msg.get("gid"))
        shared_uid_procs = 0
        if msg.get("uid") is None and os.geteuid() != 0:
            # Counted here, while this process still sees every process of the sandbox.
            shared_uid_procs = len(live_pids_of(os.getuid()))
        if own_pid_ns:
            enter_run_pid_namespace()  # returns in the run's first process, PID 2 there
        if msg.get("uid") is not None:
            os.setgroups([])
            os.setresgid(msg["gid"], msg["gid"], msg["gid"])
            os.setresuid(msg["uid"], msg["uid"], msg["uid"])
        if drop_caps:
            # In a user namespace the server holds every capability *inside* it (enough to
            # undo the mounts); the run keeps none, and with a non-zero uid and no_new_privs
            # an execve cannot give any back.
            libc.drop_capabilities()
        out_dir = None
        if staged is not None:
            if msg.get("collect"):
                out_dir = os.dup(staged)  # where a compile step's output is copied back to
            copy_tree(staged, msg["dir"])  # as the run's own user: nothing it could not read
        os.chdir(msg["dir"])
        cpu = max(1, math.ceil(lim["cpu_s"]))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        if msg["limit_address_space"]:
            resource.setrlimit(resource.RLIMIT_AS, (lim["memory_mb"] * MB,) * 2)
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim["max_file_mb"] * MB,) * 2)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lim["max_open_files"],) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if msg.get("uid") is not None:
            # NPROC counts per real uid: exact once the run has a uid of its own.
            resource.setrlimit(resource.RLIMIT_NPROC, (lim["max_processes"],) * 2)
        elif os.geteuid() != 0:
            # Sharing the caller's uid, the best bound is what that uid already runs plus the
            # run's allowance (root ignores NPROC; there the pids cgroup bounds the run).
            resource.setrlimit(resource.RLIMIT_NPROC,
                               (shared_uid_procs + lim["max_processes"],) * 2)
        libc.prctl(libc.PR_SET_NO_NEW_PRIVS, 1)
        if msg["seccomp"]:
            _seccomp.install()
        os.environ.clear()
        os.environ.update(msg["env"])
        if msg["mode"] == "exec":
            for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL)
            os.execve(msg["argv"][0], msg["argv"], msg["env"])
        os.close(ERR_FD)
        if msg["mode"] == "compile":
            compile_and_collect(msg["argv"], msg["env"], out_dir, msg["collect"],
                                lim["max_file_mb"] * MB)
    except BaseException as exc:  # report to the server, never run the program half set up
        try:
            os.write(ERR_FD, f"{type(exc).__name__}: {exc}".encode()[:4000])
        finally:
            os._exit(127)
    run_python(msg["script"], msg["args"])


def compile_and_collect(argv, env, out_dir, name, max_bytes):
    """A compile step: run the compiler in the run's private tmpfs (everything it writes, its
    temporary files included, stays in that size-limited, memory-charged tmpfs), then copy the
    one file the next step needs (``name``, a regular file of at most ``max_bytes``) back to the
    host directory held by ``out_dir``, and end the way the compiler ended."""
    pid = os.fork()
    if pid == 0:
        try:
            for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and out_dir is not None:
        try:
            _copy_out(name, out_dir, max_bytes)
        except OSError as exc:
            os.write(2, f"\nthe compiled program could not be kept: {exc}\n".encode())
            os._exit(1)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status))


def _copy_out(name, out_dir, max_bytes):
    src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    info = os.fstat(src)
    if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
        raise OSError(f"{name} is not a regular file of at most {max_bytes} bytes")
    dst = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o700,
                  dir_fd=out_dir)
    while os.sendfile(dst, src, None, 1 << 20):
        pass
    os.close(dst)
    os.close(src)


def inherit_niceness():
    """Keep the caller's niceness in force after ``setsid``. With autogroup scheduling (most
    desktop and many server kernels) a new session is a new scheduling group whose weight is
    that of nice 0, whatever the nice value of its processes: without this, ``nice rewardkit
    ...`` would not lower the runs' priority. (Runs in a CPU cgroup are weighted by that
    cgroup instead, which the server sets from the same niceness.)"""
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    if nice == 0:
        return
    try:
        with open("/proc/self/autogroup", "w") as fh:
            fh.write(str(nice))
    except OSError:
        pass  # no autogroup scheduling: the process's own nice value applies


def hide_other_runs(path):
    """Leave only this run's directory visible in the base directory (in the run's own mount
    namespace). As root, each run's uid keeps the others out of its directory and out of the
    server's log; where all runs share the caller's uid, an empty read-only tmpfs over the base
    directory, with only this run's directory bound back, does that instead."""
    path = os.path.realpath(path)
    base = os.path.dirname(path)
    handle = os.open(path, os.O_PATH | os.O_CLOEXEC)
    libc.mount("tmpfs", base, "tmpfs", libc.MS_NOSUID | libc.MS_NODEV,
               "size=16k,nr_inodes=16,mode=0755")
    os.mkdir(path, 0o700)
    libc.mount(f"/proc/self/fd/{handle}", path, None, libc.MS_BIND)
    os.close(handle)
    libc.mount(None, base, None,
               libc.MS_REMOUNT | libc.MS_BIND | libc.MS_RDONLY | libc.MS_NOSUID | libc.MS_NODEV)


def enter_run_pid_namespace():
    """Give the run a PID namespace of its own (used where all runs share one uid).

    This process (the one the server waits for) forks the namespace's init, which forks the
    run's first process and returns in it. The init reaps orphans and, once the run's first
    process has ended, passes its wait status up and exits: the kernel then kills everything
    left in the namespace, daemons and fork bombs included. This process exits the way the
    run's first process did (same code, or same signal), so the server sees the run's own
    status, and its rusage includes the run's. Killing this process group (the server's
    timeout and kill) kills the init, and with it the namespace.
    """
    libc.unshare(libc.CLONE_NEWPID)
    status_r, status_w = os.pipe2(os.O_CLOEXEC)
    init = os.fork()
    if init:
        _relay_status(init, status_r, status_w)
    os.close(status_r)
    libc.prctl(libc.PR_SET_PDEATHSIG, signal.SIGKILL)
    program = os.fork()
    if program == 0:
        os.close(status_w)
        # A /proc of this namespace only: the run sees its own processes and nothing else.
        libc.mount("proc", "/proc", "proc", libc.MS_NOSUID | libc.MS_NODEV | libc.MS_NOEXEC)
        return
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.closerange(0, status_w)  # no copy of the run's pipes or error pipe stays open here
    os.closerange(status_w + 1, 1 << 16)
    status = None
    while status is None:
        pid, wstatus = os.waitpid(-1, 0)
        if pid == program:
            status = wstatus
    os.write(status_w, str(status).encode())
    os._exit(0)


def _relay_status(init, status_r, status_w):
    """In the process the server waits for: end exactly as the run's first process ended."""
    os.close(status_w)
    os.closerange(0, status_r)
    os.closerange(status_r + 1, 1 << 16)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.waitpid(init, 0)
    data = os.read(status_r, 64)
    status = int(data) if data else None
    if status is not None and os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    sig = os.WTERMSIG(status) if status is not None else signal.SIGKILL
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if sig not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
    os.kill(os.getpid(), sig)
    os.kill(os.getpid(), signal.SIGKILL)


def mount_private_tmpfs(path, max_file_mb, uid, gid):
    """Cover the run's directory with a size-limited tmpfs; return a descriptor of the covered
    (staged) directory, whose files :func:`copy_tree` then copies in. What the program writes
    stays in memory charged to the run, is bounded, and never reaches the disk."""
    src = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    staged = 0
    for _, _, files, rootfd in os.fwalk(".", dir_fd=src):
        staged += sum(os.stat(f, dir_fd=rootfd, follow_symlinks=False).st_size for f in files)
    size_kb = staged // 1024 + 2 * max_file_mb * 1024 + 1024
    owner = f",uid={uid},gid={gid}" if uid is not None else ""
    libc.mount("tmpfs", path, "tmpfs", libc.MS_NOSUID | libc.MS_NODEV,
               f"size={size_kb}k,nr_inodes=4096,mode=0700{owner}")
    shm = "/dev/shm"  # POSIX shared memory and semaphores (multiprocessing)
    if os.path.isdir(shm) and not os.path.realpath(path).startswith(shm + "/"):
        libc.mount("tmpfs", shm, "tmpfs", libc.MS_NOSUID | libc.MS_NODEV,
                   f"size={max_file_mb}m,nr_inodes=1024,mode=1777")
    return src


def copy_tree(src, path):
    """Copy the regular files and directories under descriptor ``src`` into ``path``; links and
    special files are skipped, never followed."""
    for dirpath, dirs, files, rootfd in os.fwalk(".", dir_fd=src):
        target = os.path.join(path, dirpath)
        for d in dirs:
            os.mkdir(os.path.join(target, d), 0o700)
        for f in files:
            try:
                fd_in = os.open(f, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=rootfd)
            except OSError:
                continue  # a symbolic link
            info = os.fstat(fd_in)
            if stat.S_ISREG(info.st_mode):
                fd_out = os.open(os.path.join(target, f), os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                                 info.st_mode & 0o777)
                while os.sendfile(fd_out, fd_in, None, 1 << 20):
                    pass
                os.close(fd_out)
            os.close(fd_in)
    os.close(src)


def run_python(path, args):
    """Run ``path`` as ``__main__`` the way ``python path`` would, then exit like it would."""
    import atexit
    import builtins
    import io
    import types

    sys.stdin = sys.__stdin__ = io.TextIOWrapper(
        io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8")
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding="utf-8",
        errors="backslashreplace", line_buffering=True)
    main = types.ModuleType("__main__")
    main.__file__ = os.path.abspath(path)
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    sys.argv = [path, *args]
    sys.path.insert(0, os.getcwd())
    code = 0
    try:
        with open(path, "rb") as fh:
            source = fh.read()
        exec(compile(source, main.__file__, "exec"), main.__dict__)
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException as exc:  # an uncaught error: print it like the interpreter does
        tb = exc.__traceback__.tb_next if exc.__traceback__ else None  # hide this frame
        try:
            sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        except BaseException:
            pass
        code = 1
    if "threading" in sys.modules:
        try:
            sys.modules["threading"]._shutdown()
        except BaseException:
            pass
    try:
        atexit._run_exitfuncs()
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            code = code or 120
    os._exit(code)


def _exit_code(exc):
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    try:
        print(exc.code, file=sys.stderr)
    except BaseException:
        pass
    return 1


def live_pids_of(uid):
    """Pids of live (not zombie) processes whose real uid is ``uid``. Read from
    /proc/PID/status: the owner of /proc/PID itself turns to root when a process is not dumpable
    (as after a uid change), so it cannot be trusted to find a run's processes."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as fh:
                status = fh.read()
        except OSError:
            continue
        fields = dict(line.split(b":", 1) for line in status.splitlines() if b":" in line)
        if int(fields.get(b"Uid", b"-1 ").split()[0]) != uid:
            continue
        if fields.get(b"State", b"").split()[:1] not in ([b"Z"], [b"X"]):
            pids.append(int(name))
    return pids
