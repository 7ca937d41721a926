"""The fork server: a pre-started Python inside the sandbox's namespaces that forks one fresh,
locked-down child per run.

Started by :mod:`rewardkit.sandboxes.forkserver` as ``python -I _zygote.py FD`` with a clean
environment; FD is a ``SOCK_SEQPACKET`` control socket to the host. It

1. enters new mount/network/PID/IPC/UTS namespaces (each tried alone; the outcome is reported),
   first a user namespace when it is not root (the rootless mode: runs then share the caller's
   uid, drop the namespace's capabilities, and each gets a PID namespace of its own);
2. becomes PID 1 of the new PID namespace (so every process a run leaves behind is reparented
   to it, reaped, and killed when it exits), with a read-only file system except the base dir;
3. imports commonly used modules once, then ``gc.freeze()``s them so forks share their pages;
4. per ``run`` message, hands the run to a child (:mod:`_run_child`) forked ahead while the
   server waited, already in a fresh cgroup of its own (or forks one then, into a fresh
   cgroup), that joins its slot's network namespace, takes the stdin/stdout/stderr (and
   channel) descriptors sent by the host, enters its own mount and IPC namespaces with a
   private tmpfs working directory, drops to its slot's uid, sets rlimits, ``no_new_privs``
   and a seccomp filter, clears the environment, and then either runs Python source in that
   fresh fork (a new ``__main__``; nothing persists between runs because every run is a new
   fork of the same clean parent) or execs the language's command;
5. enforces the CPU-time limit and the wall-time limit (which stretches by the time the run
   waited for a CPU), and when a run ends kills every process of its uid.

The server never reads program sources, stdin or tests: it only sees paths and limits, so no
run's data can linger in its memory for a later fork to find. Standard library only.
"""
import gc
import json
import os
import selectors
import signal
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import _cgroup  # noqa: E402
import _jail  # noqa: E402
import _libc as libc  # noqa: E402
import _seccomp  # noqa: E402
from _run_child import MB, live_pids_of, child, wait_for_run  # noqa: E402

CPU_POLL_S = 0.05  # how often the runs' cgroup CPU time is checked against their limits

sys.path.remove(HERE)

def send(sock, obj):
    sock.send(json.dumps(obj).encode())


def recv(sock):
    data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 8)
    if not data:
        return None, fds
    return json.loads(data), fds


# -- setup ----------------------------------------------------------------------------------------
NAMESPACES = (("mount", libc.CLONE_NEWNS), ("net", libc.CLONE_NEWNET), ("pid", libc.CLONE_NEWPID),
              ("ipc", libc.CLONE_NEWIPC), ("uts", libc.CLONE_NEWUTS))


def enter_user_namespace(caps):
    """Without root: a new user namespace in which this process holds the capabilities that
    the other namespaces and the mounts need. The caller's uid and gid are mapped to themselves
    (one id each; no other id exists inside), so runs keep the caller's uid: they drop the
    namespace's capabilities before running (see :func:`child`), and a file they could reach
    is one the caller could. ``setgroups`` is denied, as the kernel requires for an unprivileged
    gid map."""
    uid, gid = os.getuid(), os.getgid()
    try:
        libc.unshare(libc.CLONE_NEWUSER)
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                           ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
    except OSError as exc:
        caps["errors"].append(f"user namespace: {exc}")
        return False
    # Changing user namespace clears the parent-death signal: ask for it again.
    libc.prctl(libc.PR_SET_PDEATHSIG, signal.SIGKILL)
    caps["user_namespace"] = {"uid_map": f"{uid} {uid} 1", "gid_map": f"{gid} {gid} 1"}
    return True


def enter_namespaces(config, caps):
    """unshare each namespace on its own, so the report says exactly which ones took."""
    for name, flag in NAMESPACES:
        try:
            libc.unshare(flag)
            caps["namespaces"][name] = True
        except OSError as exc:
            caps["namespaces"][name] = False
            caps["errors"].append(f"{name} namespace: {exc}")


def become_init(caps):
    """After unshare(CLONE_NEWPID) only children land in the new namespace: fork once, the
    child is PID 1 there and serves; this process waits and exits with it."""
    pid = os.fork()
    if pid:
        signal.signal(signal.SIGTERM, lambda *_: os.kill(pid, signal.SIGKILL))
        _, status = os.waitpid(pid, 0)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    libc.prctl(libc.PR_SET_PDEATHSIG, signal.SIGKILL)
    caps["pid1"] = os.getpid() == 1


def slot_network_namespaces(count):
    """One fresh network namespace per slot (no interface up), held open by descriptor."""
    home = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    held = []
    for _ in range(count):
        libc.unshare(libc.CLONE_NEWNET)
        held.append(os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC))
    libc.setns(home, libc.CLONE_NEWNET)
    os.close(home)
    return held


def probe_seccomp(config, caps):
    """Install the filter in a throw-away child and check the kernel applied it (the
    ``Seccomp`` field of /proc/self/status; as root also that ``unshare`` is refused; with the
    allow-list, that an AF_INET socket is refused too)."""
    bpf = bytes.fromhex(config["seccomp_bpf"]) if config.get("seccomp_bpf") else None
    if not _seccomp.supported() and bpf is None:
        return
    kind = _seccomp.prepare(bpf)
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            libc.prctl(libc.PR_SET_NO_NEW_PRIVS, 1)
            _seccomp.install()
            with open("/proc/self/status") as fh:
                mode = [line.split()[1] for line in fh if line.startswith("Seccomp:")]
            code = 0 if mode == ["2"] else 1
            if code == 0 and os.geteuid() == 0:
                try:
                    libc.unshare(libc.CLONE_NEWUTS)
                    code = 2
                except OSError as exc:
                    code = 0 if exc.errno == 1 else 2
            if code == 0 and kind == "allow-list" and "inet" not in config["allow_sockets"]:
                try:
                    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
                    code = 4
                except OSError:
                    pass
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    caps["seccomp"] = os.waitstatus_to_exitcode(status) == 0
    caps["seccomp_filter"] = kind if caps["seccomp"] else None
    caps["socket_families"] = list(config["allow_sockets"]) if kind == "allow-list" else None


def probe_network(caps):
    """Check the claim: with no interface up, even loopback must be unreachable."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(0.5)
    try:
        err = s.connect_ex(("127.0.0.1", 9))
    finally:
        s.close()
    caps["network_blocked"] = err in (101, 99)  # ENETUNREACH / EADDRNOTAVAIL


def setup(config):
    caps = {"namespaces": {n: False for n, _ in NAMESPACES}, "errors": [], "pid1": False,
            "user_namespace": None, "run_pid_namespace": False,
            "filesystem": None, "uid_drop": False, "network_blocked": False, "cgroups": None,
            "seccomp": False}
    is_root = os.geteuid() == 0
    if config["isolation"] != "none":
        if is_root or enter_user_namespace(caps):
            enter_namespaces(config, caps)
        else:
            caps["errors"].append("not root and no user namespace: the other namespaces need "
                                  "CAP_SYS_ADMIN")
    if caps["namespaces"]["pid"]:
        become_init(caps)
    else:
        libc.prctl(libc.PR_SET_CHILD_SUBREAPER, 1)
    # Limits, not isolation: used in every mode. Before the file system turns read-only the
    # sandbox's parent cgroups are made and held open; each run gets fresh ones under them.
    cgroups, caps["cgroups"] = _cgroup.create(config["cgroup_name"], config["cgroup_root"],
                                              nice=os.getpriority(os.PRIO_PROCESS, 0),
                                              slots=config["slots"])
    if caps["cgroups"]["error"]:
        caps["errors"].append(caps["cgroups"]["error"])
    if caps["namespaces"]["mount"]:
        caps["filesystem"] = {}
        try:
            _jail.build_filesystem(config["base"], config["hide"], config["expose"],
                                   caps["namespaces"]["pid"], caps["filesystem"])
        except OSError as exc:
            caps["errors"].append(f"filesystem: {exc}")
    if caps["namespaces"]["uts"]:
        socket.sethostname("sandbox")
    if caps["namespaces"]["net"]:
        probe_network(caps)
    caps["uid_drop"] = is_root and bool(config["uids"])
    # Sharing one uid, runs could signal each other; a PID namespace per run prevents that and
    # lets the run's end kill all it started (its init's exit empties the namespace).
    # Each run mounts its own /proc; where the server could not mount one (a /proc partly
    # covered, as in some containers), runs could not either.
    fs_proc = (caps["filesystem"] or {}).get("proc", "host")
    caps["run_pid_namespace"] = bool(caps["user_namespace"] and caps["pid1"] and fs_proc != "host")
    if config["isolation"] != "none":
        probe_seccomp(config, caps)
    return caps, cgroups


# -- the server loop ------------------------------------------------------------------------------
class Run:
    __slots__ = ("id", "pid", "uid", "start", "wall_s", "backstop", "deadline", "reason", "err_r",
                 "cgroup", "cpu_s", "unenforced")

    def __init__(self, run_id, pid, uid, wall_s, backstop_s, err_r):
        self.id, self.pid, self.uid, self.err_r = run_id, pid, uid, err_r
        self.start = time.monotonic()
        self.wall_s = wall_s
        self.backstop = self.start + max(wall_s, backstop_s)
        self.deadline = self.start + wall_s
        self.reason = None
        self.cgroup = None
        self.cpu_s = None
        self.unenforced = []

    def stretch(self, now):
        """At the wall limit: move it on by the time the run waited for a CPU that other
        processes held (a loaded host, a lower niceness), up to the backstop. True while the
        run may go on. A run's time verdict is its own CPU time (the cgroup's, checked every
        ``CPU_POLL_S``); the wall limit stops a run that sleeps or blocks, never one that only
        waited for its turn."""
        self.deadline = min(self.backstop, self.start + self.wall_s + cpu_wait_s(self))
        return self.deadline > now


def cpu_wait_s(run):
    """Seconds the run's processes spent ready to run but waiting for a CPU: the longest wait
    of any one of them (``/proc/PID/schedstat``, the kernel's run-queue delay). Processes of
    a run share its CPU quota, so their waits overlap; the longest one is what the run as a
    whole lost. 0 where the kernel keeps no such count."""
    pids = [run.pid]
    if run.cgroup is not None:
        try:
            pids += run.cgroup.pids()
        except OSError:
            pass
    waited = 0
    for pid in set(pids):
        try:
            with open(f"/proc/{pid}/schedstat", "rb") as fh:
                waited = max(waited, int(fh.read().split()[1]))
        except (OSError, ValueError, IndexError):
            pass
    return waited / 1e9


def kill_run(run):
    """Kill every process of the run. With a uid of its own, a helper that takes that uid sends
    kill(-1, SIGKILL): the kernel signals all processes of the uid in one pass, which a fork bomb
    cannot outrun (a process with SIGKILL pending cannot fork). Without one, its process group.
    With a cgroup, also everything in it (a process that called setsid included)."""
    if run.cgroup is not None:
        try:
            os.kill(run.pid, signal.SIGKILL)
        except OSError:
            pass
        run.cgroup.kill()
    if run.uid is None:
        try:
            os.killpg(run.pid, signal.SIGKILL)
        except OSError:
            pass
        return
    for _ in range(100):
        if not live_pids_of(run.uid):
            return
        helper = os.fork()
        if helper == 0:
            try:
                os.setresuid(run.uid, run.uid, run.uid)
                for _ in range(50):
                    os.kill(-1, signal.SIGKILL)
            except BaseException:
                pass
            os._exit(0)
        os.waitpid(helper, 0)
        time.sleep(0.0005)


class Warm:
    """A child forked ahead of its run, already in a fresh cgroup (see
    :func:`_run_child.wait_for_run`); ``ready`` once it said so."""

    __slots__ = ("pid", "cgroup", "ctl", "ready")

    def __init__(self, pid, cgroup, ctl):
        self.pid, self.cgroup, self.ctl, self.ready = pid, cgroup, ctl, False

    def is_ready(self):
        if not self.ready:
            try:
                self.ready = self.ctl.recv(16, socket.MSG_DONTWAIT) == b"ready"
            except OSError:
                pass
        return self.ready

    def discard(self):
        """Kill it (it ran nothing) and close its end; its cgroup goes when it is reaped."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass
        self.ctl.close()


class Server:
    def __init__(self, sock, caps, cgroups, netns, slots):
        self.sock = sock
        self.caps = caps
        self.cgroups = cgroups
        self.netns = netns
        self.slots = slots
        self.warm = []  # children forked ahead of their runs, one per free slot at most
        self.cold = {}  # pid -> cgroup of a discarded warm child, until it is reaped
        self.runs = {}
        self.by_id = {}
        self.graveyard = []  # run cgroups to remove once their dead processes are reaped
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.sel.register(sock, selectors.EVENT_READ)
        self.sel.register(self.wake_r, selectors.EVENT_READ)

    def serve(self):
        while True:
            now = time.monotonic()
            pending = [r.deadline for r in self.runs.values() if r.reason is None]
            if any(r.cpu_s for r in self.runs.values() if r.reason is None):
                pending.append(now + CPU_POLL_S)  # the runs' CPU time is read from cgroups
            timeout = min(pending, default=now + 60) - now
            for key, _ in self.sel.select(max(0.0, timeout)):
                if key.fileobj is self.sock:
                    msg, fds = recv(self.sock)
                    if msg is None:
                        return
                    self.handle(msg, fds)
                else:
                    try:
                        while os.read(self.wake_r, 4096):
                            pass
                    except BlockingIOError:
                        pass
            self.reap()
            self.graveyard = [c for c in self.graveyard if not c.destroy()]
            self.make_warm()
            now = time.monotonic()
            for run in list(self.runs.values()):
                if run.reason is None and ((run.deadline <= now and not run.stretch(now))
                                           or self.over_cpu(run)):
                    run.reason = "timeout"
                    kill_run(run)

    def make_warm(self):
        """While no message waits, fork the next runs' children ahead, each in a fresh cgroup
        of its own (``warm<n>``, never one a run used): forking and joining the cgroups are
        then off a run's path. The child holds nothing of any run; a run it serves gets the
        cgroup's limits before its request reaches it. Where one cannot be made, runs fork as
        before."""
        while len(self.warm) + len(self.runs) < self.slots:
            if self.sel.select(0):
                return  # a message or a signal is waiting: serve it first
            cgroup = None
            try:
                if self.cgroups is not None:
                    cgroup = self.cgroups.new_run("warm")
                ctl, ctl_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            except OSError:
                if cgroup is not None and not cgroup.destroy():
                    self.graveyard.append(cgroup)
                return
            pid = os.fork()
            if pid == 0:
                try:  # never back into the server's loop, whatever happens
                    # The server's ends of its sockets (the host's, the other warm
                    # children's) closed here, so each hang-up reaches the one it is meant for.
                    for end in [ctl, self.sock] + [w.ctl for w in self.warm]:
                        end.close()
                    msg, fds, err_w = wait_for_run(ctl_child, cgroup)
                    self.child(msg, fds, err_w, cgroup, joined=True)
                finally:
                    os._exit(127)
            ctl_child.close()
            self.warm.append(Warm(pid, cgroup, ctl))

    def take_warm(self, lim):
        """A ready warm child with its cgroup limited for the run, or None."""
        for warm in [w for w in self.warm if w.is_ready()][:1]:
            self.warm.remove(warm)
            try:
                if warm.cgroup is not None:
                    warm.cgroup.limit(lim["memory_mb"] * MB, lim["max_processes"],
                                      lim["max_cpus"])
            except OSError:
                self.cold[warm.pid] = warm.cgroup
                warm.discard()
                return None  # the cold path makes a cgroup again, and reports its failure
            return warm
        return None

    def child(self, msg, fds, err_w, cgroup, joined=False):
        """In a child of the server: become the run."""
        own_pid_ns = (self.caps["run_pid_namespace"] and msg["private_ns"]
                      and msg.get("uid") is None)
        child(msg, fds, err_w, cgroup, self.netns[msg["slot"]] if self.netns else None,
              own_pid_ns=own_pid_ns, drop_caps=bool(self.caps["user_namespace"]),
              joined=joined)

    @staticmethod
    def over_cpu(run):
        """The run's CPU time, all its processes together (however started), past its limit."""
        if not run.cpu_s:
            return False
        try:
            used = run.cgroup.cpu_seconds()
        except OSError:
            return False
        return used is not None and used >= run.cpu_s

    def handle(self, msg, fds):
        if msg["op"] == "run":
            self.start(msg, fds)
        elif msg["op"] == "kill":
            run = self.by_id.get(msg["id"])
            if run is not None:
                run.reason = run.reason or msg.get("reason", "killed")
                kill_run(run)
        for fd in fds:
            os.close(fd)

    def start(self, msg, fds):
        lim = msg["limits"]
        cgroup, unenforced = None, []
        warm = self.take_warm(lim)
        if warm is not None:
            err_r, err_w = os.pipe2(os.O_CLOEXEC)
            try:
                socket.send_fds(warm.ctl, [json.dumps(msg).encode()], list(fds) + [err_w])
            except OSError:
                os.close(err_r)
                self.cold[warm.pid] = warm.cgroup
                warm.discard()
                warm = None
            else:
                warm.ctl.close()
                self.register(msg, warm.pid, warm.cgroup, [], err_r)
            finally:
                os.close(err_w)
        if warm is not None:
            return
        if self.cgroups is not None:
            try:
                cgroup = self.cgroups.new_run()
                cgroup.limit(lim["memory_mb"] * MB, lim["max_processes"], lim["max_cpus"])
            except OSError as exc:
                if cgroup is not None:
                    cgroup.destroy()
                cgroup = None
                # Fail closed: a limit that needs the cgroup is refused unless opted out.
                needed = [n for n in ("memory", "cpu", "pids") if n in msg["cgroup_limits"]]
                refused = [n for n in needed if n not in msg["allow_unenforced"]]
                if refused:
                    send(self.sock, {"op": "done", "id": msg["id"], "refused": True,
                                     "setup_error": f"{', '.join(refused)} cannot be enforced: "
                                     f"creating the run's cgroup failed: {exc}"})
                    return
                unenforced = needed
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:
            self.sock.close()
            self.child(msg, fds, err_w, cgroup)
        os.close(err_w)
        self.register(msg, pid, cgroup, unenforced, err_r)

    def register(self, msg, pid, cgroup, unenforced, err_r):
        """Track the run now in process ``pid``."""
        lim = msg["limits"]
        run = Run(msg["id"], pid, msg.get("uid"), lim["wall_s"], msg["wall_backstop_s"], err_r)
        run.cgroup = cgroup
        run.unenforced = unenforced
        if cgroup is not None and "cpuacct" in self.cgroups.controllers:
            run.cpu_s = lim["cpu_s"]
        self.runs[pid] = run
        self.by_id[run.id] = run
        if msg.get("report_start"):
            send(self.sock, {"op": "started", "id": run.id,
                             "accounts": cgroup.accounts() if run.cpu_s else None})

    def reap(self):
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            run = self.runs.pop(pid, None)
            if run is not None:
                self.finish(run, status, usage)
                continue
            for warm in [w for w in self.warm if w.pid == pid]:  # died before its run
                self.warm.remove(warm)
                warm.ctl.close()
                self.cold[pid] = warm.cgroup
            cgroup = self.cold.pop(pid, None)
            if cgroup is not None and not cgroup.destroy():
                self.graveyard.append(cgroup)

    def finish(self, run, status, usage):
        wall = time.monotonic() - run.start
        kill_run(run)  # daemons and stragglers die with the run
        self.by_id.pop(run.id, None)
        setup_error = os.read(run.err_r, 4096).decode("utf-8", "replace") or None
        os.close(run.err_r)
        code = os.waitstatus_to_exitcode(status)
        memory = {"peak_bytes": None, "oom": False, "cgroup_cpu_s": None}
        try:
            if run.cgroup is not None:
                memory = run.cgroup.outcome()
            send(self.sock, {**memory, "unenforced": run.unenforced,
                "op": "done", "id": run.id, "exit_code": code if code >= 0 else None,
                "signal": -code if code < 0 else None, "wall_s": wall,
                "cpu_s": usage.ru_utime + usage.ru_stime, "maxrss_kb": usage.ru_maxrss,
                "reason": run.reason, "setup_error": setup_error})
        finally:
            # Once the verdict is on its way (off the run's path): the next run gets a new
            # cgroup, it never meets anything this one left. Dead processes of this run not
            # reaped yet keep the cgroup until they are.
            if run.cgroup is not None and not run.cgroup.destroy():
                self.graveyard.append(run.cgroup)


def main():
    sock = socket.socket(fileno=int(sys.argv[1]))
    # Dies with the host thread that started it: the host starts it from a thread that lives
    # exactly as long as this server (see forkserver.py), never from a caller's thread.
    libc.prctl(libc.PR_SET_PDEATHSIG, signal.SIGKILL)
    config, _ = recv(sock)
    if config is None or os.getppid() != config["host_pid"]:
        os._exit(1)
    caps, cgroups = setup(config)
    for name in config["preload"]:
        try:
            __import__(name)
        except Exception:
            pass
    gc.collect()
    gc.freeze()  # forks then share the preloaded objects instead of copying them on first GC
    # The host decides from the report whether this server is good enough for its mode (and
    # says why not); the server never exits silently on its own.
    send(sock, {"op": "ready", "caps": caps, "pid": os.getpid()})
    netns = slot_network_namespaces(config["slots"]) if caps["namespaces"]["net"] else []
    Server(sock, caps, cgroups, netns, config["slots"]).serve()


if __name__ == "__main__":
    main()
