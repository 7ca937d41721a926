"""A fresh cgroup per run: memory, process count and CPU bounded for the run as a whole.

``RLIMIT_AS`` bounds each process, so a run of 64 processes could still hold 64 times its
memory limit; ``RLIMIT_CPU`` counts each process alone, so a run that forks 60 spinners (each
in its own session) gets 60 budgets; ``RLIMIT_NPROC`` needs a uid of its own. A cgroup per run
bounds the run as a whole: resident memory (including tmpfs and page cache it causes), its
process count, the cores it may use at once (``cpu.max`` / CFS quota), and it accounts the CPU
time of every process of the run, however it was started. It also measures the run's true peak
memory and tells an out-of-memory kill apart from other SIGKILLs.

Each run gets a new cgroup, never used before: made by the fork server for a child it forks ahead
of the next run while it waits (``warm<n>``), or just before the fork (``run<n>``); removed
after the run's processes are gone: whatever a run leaves charged to its cgroup (kernel objects that
outlive it, page cache) is never counted against the next run, and nothing can wait in it for
the next run. The server makes the sandbox's parent cgroups before its file system turns
read-only and keeps directory descriptors of them; per-run cgroups are made with ``mkdirat``
through those. cgroup v1 (separate ``memory``, ``pids``, ``cpu``, ``cpuacct`` hierarchies) and
v2 (unified, where the parent delegates the controllers) are both handled. What could not be
set up is reported controller by controller, with the reason, for the host to refuse runs whose
limits it cannot enforce. Standard library only (loaded by path).
"""
from __future__ import annotations

import os
import secrets
import signal
import time

ROOT = "/sys/fs/cgroup"
#: CFS period of the per-run CPU quota (microseconds).
PERIOD_US = 100_000
#: CPU weight of a nice value (the kernel's sched_prio_to_weight, nice -20..19), for cgroup v1's
#: ``cpu.shares``: the sandbox's parent cgroup gets the weight of the caller's niceness.
NICE_WEIGHT = (88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548,
               7620, 6100, 4904, 3906, 3121, 2501, 1991, 1586, 1277, 1024, 820, 655, 526, 423,
               335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15)
WANTED = ("memory", "pids", "cpu", "cpuacct")


def _own_paths() -> dict[str, str]:
    """Controller (or "" for v2) → this process's cgroup path, from /proc/self/cgroup."""
    paths = {}
    with open("/proc/self/cgroup") as fh:
        for line in fh:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                paths[c] = path
    return paths


class Hierarchy:
    """The sandbox's parent cgroup in one hierarchy, held by a directory descriptor."""

    def __init__(self, version: int, controllers: list[str], path: str) -> None:
        self.version = version
        self.controllers = controllers
        self.path = path
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def write(self, name: str, value: str) -> None:
        fd = os.open(name, os.O_WRONLY | os.O_CLOEXEC, dir_fd=self.fd)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)


class RunCgroup:
    """The cgroups of one run (one per hierarchy), with their control files open."""

    def __init__(self, name: str, hierarchies: list[Hierarchy]) -> None:
        self.name = name
        self.hierarchies = []
        self.fds: dict[str, int] = {}
        self.procs: list[int] = []
        self.oom_before = 0
        try:
            for h in hierarchies:
                os.mkdir(name, 0o755, dir_fd=h.fd)
                self.hierarchies.append(h)
                d = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=h.fd)
                try:
                    self.procs.append(os.open("cgroup.procs", os.O_RDWR | os.O_CLOEXEC, dir_fd=d))
                    for f in _files(h):
                        try:
                            self.fds[f] = os.open(f, os.O_RDWR | os.O_CLOEXEC, dir_fd=d)
                        except FileNotFoundError:
                            pass  # an optional file this kernel does not have
                finally:
                    os.close(d)
        except BaseException:
            self.destroy()
            raise

    def _write(self, name: str, value: str) -> None:
        if name in self.fds:
            os.pwrite(self.fds[name], value.encode(), 0)

    def _read(self, name: str) -> str:
        return os.pread(self.fds[name], 4096, 0).decode() if name in self.fds else ""

    def limit(self, memory_bytes: int, max_processes: int, cpus: float) -> None:
        """Set the run's limits (in the server, before the fork)."""
        quota = max(1000, int(cpus * PERIOD_US))
        if "memory.limit_in_bytes" in self.fds:  # v1
            self._write("memory.limit_in_bytes", str(memory_bytes))
            try:
                self._write("memory.memsw.limit_in_bytes", str(memory_bytes))  # no swap
            except OSError:
                pass
            self._write("memory.swappiness", "0")
        self._write("memory.max", str(memory_bytes))
        self._write("memory.swap.max", "0")
        self._write("pids.max", str(max_processes))
        self._write("cpu.cfs_period_us", str(PERIOD_US))
        self._write("cpu.cfs_quota_us", str(quota))
        self._write("cpu.max", f"{quota} {PERIOD_US}")
        self.oom_before = self.oom_kills()

    def join(self) -> None:
        """Move the calling process into the run's cgroups (in the child, before anything)."""
        for fd in self.procs:
            os.write(fd, b"0")

    def oom_kills(self) -> int:
        for name in ("memory.events", "memory.oom_control"):
            for line in self._read(name).splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def cpu_seconds(self) -> float | None:
        """CPU time of every process the run had (None where not accounted)."""
        if "cpuacct.usage" in self.fds:
            return int(self._read("cpuacct.usage") or 0) / 1e9
        for line in self._read("cpu.stat").splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
        return None

    def accounts(self) -> dict | None:
        """Where the kernel accounts the run's CPU time, for a reader outside the run (the
        code reward's checker, which judges each test on the candidate's own CPU time): the
        counter file and how to read it, and the file listing the run's processes. None
        where the CPU time is not accounted."""
        for h in self.hierarchies:
            if "cpuacct" not in h.controllers:
                continue
            where = os.path.join(h.path, self.name)
            counter = ("cpuacct.usage", None, 1e-9) if h.version == 1 else \
                ("cpu.stat", "usage_usec", 1e-6)
            return {"cpu_file": os.path.join(where, counter[0]), "cpu_field": counter[1],
                    "cpu_unit_s": counter[2], "procs_file": os.path.join(where, "cgroup.procs")}
        return None

    def outcome(self) -> dict:
        """Peak memory (bytes, or None where the kernel does not keep it), whether the memory
        limit was hit, and the run's CPU time."""
        peak = None
        for name in ("memory.max_usage_in_bytes", "memory.peak"):
            if name in self.fds:
                peak = int(self._read(name).split()[0] or 0)
        return {"peak_bytes": peak, "oom": self.oom_kills() > self.oom_before,
                "cgroup_cpu_s": self.cpu_seconds()}

    def pids(self) -> list[int]:
        """The run's processes now. Read through a file opened for this read: cgroup v1
        keeps serving an open file the list of its first read for about a second, so a
        process that joined since (a child forked in its own session) would be missed."""
        out: set[int] = set()
        for h in self.hierarchies if self.procs else ():
            fd = os.open(f"{self.name}/cgroup.procs", os.O_RDONLY | os.O_CLOEXEC, dir_fd=h.fd)
            try:
                out.update(int(p) for p in os.pread(fd, 1 << 20, 0).split())
            finally:
                os.close(fd)
        return sorted(out)

    def kill(self) -> None:
        """SIGKILL every process in the run's cgroups (a process that called setsid, a
        double fork, a fork bomb: a process with SIGKILL pending cannot fork). Passes repeat
        while new processes appear; processes already dead but not yet reaped stay listed
        until the server reaps them, so this never waits for the list to empty."""
        if "cgroup.kill" in self.fds:
            self._write("cgroup.kill", "1")
        seen: set[int] = set()
        for _ in range(50):
            left = set(self.pids())
            if left <= seen:
                return
            for pid in left - seen:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            seen |= left

    def destroy(self) -> bool:
        """Kill what is left, close the control files and remove the cgroups; False while a
        cgroup still holds (dead, unreaped) processes: call again after reaping."""
        if self.procs:
            try:
                self.kill()
            except OSError:
                pass
        for fd in list(self.fds.values()) + self.procs:
            os.close(fd)
        self.fds, self.procs = {}, []
        left = []
        for h in self.hierarchies:
            try:
                os.rmdir(self.name, dir_fd=h.fd)
            except FileNotFoundError:
                pass
            except OSError:
                left.append(h)
        self.hierarchies = left
        return not left


def _files(h: Hierarchy) -> list[str]:
    files = []
    if "memory" in h.controllers:
        files += (["memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.swappiness",
                   "memory.max_usage_in_bytes", "memory.oom_control"] if h.version == 1 else
                  ["memory.max", "memory.swap.max", "memory.events", "memory.peak"])
    if "pids" in h.controllers:
        files.append("pids.max")
    if "cpu" in h.controllers:
        files += ["cpu.cfs_period_us", "cpu.cfs_quota_us"] if h.version == 1 else ["cpu.max"]
    if "cpuacct" in h.controllers:
        files.append("cpuacct.usage")
    if h.version == 2:
        files += ["cpu.stat", "cgroup.kill"]
    return files


class Cgroups:
    """The sandbox's cgroup hierarchies; :meth:`new_run` makes one run's cgroups."""

    def __init__(self, hierarchies: list[Hierarchy]) -> None:
        self.hierarchies = hierarchies
        self.serial = 0

    @property
    def controllers(self) -> list[str]:
        return sorted({c for h in self.hierarchies for c in h.controllers})

    def new_run(self, prefix: str = "run") -> RunCgroup:
        """A fresh cgroup in every hierarchy, ``<prefix><serial>``: ``run`` for a run's own,
        ``warm`` for one made ahead for the next run (see ``_zygote.Server.make_warm``)."""
        self.serial += 1
        return RunCgroup(f"{prefix}{self.serial}", self.hierarchies)


def create(name: str, root: str = ROOT, nice: int = 0,
           slots: int = 1) -> tuple[Cgroups | None, dict]:
    """Make the sandbox's parent cgroup ``name`` next to this process's own, in every hierarchy
    that has a wanted controller. Returns (cgroups or None, report); the report lists the
    controllers in use and, for each wanted one that is not, why (``missing``)."""
    report = {"version": None, "controllers": [], "dirs": [], "error": None, "missing": {},
              "root": root}
    hierarchies: list[Hierarchy] = []
    try:
        own = _own_paths()
        v1 = [c for c in WANTED if c in own and os.path.isdir(os.path.join(root, c))]
        if v1:
            report["version"] = 1
            by_dir: dict[str, list[str]] = {}
            for c in v1:
                by_dir.setdefault(os.path.realpath(os.path.join(root, c)), []).append(c)
            for hdir, controllers in by_dir.items():
                parent = os.path.join(hdir, own[controllers[0]].lstrip("/"), name)
                try:
                    os.makedirs(parent)
                    report["dirs"].append(parent)
                    hierarchies.append(Hierarchy(1, controllers, parent))
                except OSError as exc:
                    for c in controllers:
                        report["missing"][c] = f"cannot create {parent}: {exc}"
        elif os.path.exists(os.path.join(root, "cgroup.controllers")) and "" in own:
            report["version"] = 2
            parent = os.path.join(root, own[""].lstrip("/"), name)
            try:
                os.makedirs(parent)
                report["dirs"].append(parent)
                with open(os.path.join(parent, "cgroup.controllers")) as fh:
                    available = fh.read().split()
                wanted = [c for c in ("memory", "pids", "cpu") if c in available]
                if wanted:
                    with open(os.path.join(parent, "cgroup.subtree_control"), "w") as fh:
                        fh.write(" ".join(f"+{c}" for c in wanted))
                # cpu.stat (usage_usec) exists in every v2 cgroup: CPU time is always accounted.
                hierarchies.append(Hierarchy(2, wanted + ["cpuacct"], parent))
                for c in ("memory", "pids", "cpu"):
                    if c not in wanted:
                        report["missing"][c] = (f"the {c} controller is not delegated to "
                                                f"{parent} (cgroup.controllers: "
                                                f"{' '.join(available) or 'none'})")
            except OSError as exc:
                report["error"] = f"no writable cgroup v2 delegation at {parent}: {exc}"
        else:
            report["error"] = f"no cgroup hierarchy with memory/pids/cpu controllers at {root}"
    except OSError as exc:
        report["error"] = f"cgroups unavailable: {exc}"
    cgroups = Cgroups(hierarchies) if hierarchies else None
    if cgroups is not None:
        report["controllers"] = cgroups.controllers
        _set_weight(hierarchies, nice, slots, report)
        try:  # a run cgroup can be made here: checked now rather than at the first run
            if not cgroups.new_run().destroy():
                raise OSError("a new, empty run cgroup could not be removed")
        except OSError as exc:
            report["error"] = f"cannot create a run cgroup under {report['dirs']}: {exc}"
            cgroups = None
            report["controllers"] = []
    for c in ("memory", "pids", "cpu", "cpuacct"):
        if c not in report["controllers"] and c not in report["missing"]:
            report["missing"][c] = report["error"] or f"no {c} controller at {root}"
    return cgroups, report


def _set_weight(hierarchies: list[Hierarchy], nice: int, slots: int, report: dict) -> None:
    """Give the sandbox's parent cgroup the CPU weight of ``slots`` processes of the caller's
    niceness. Processes in a cgroup are scheduled by the cgroup's weight, not by their nice
    value: without this, ``nice rewardkit ...`` would not lower the runs' priority, and all
    runs together would weigh as much as one process of the host (starved on a busy
    machine). Inside, every run's cgroup has the same weight: a run that forks 60 processes
    weighs what a run of one process does."""
    nice = max(-20, min(19, nice))
    weight = NICE_WEIGHT[nice + 20] * max(1, slots)
    report["nice"] = nice
    for h in hierarchies:
        if "cpu" not in h.controllers:
            continue
        try:
            if h.version == 1:
                h.write("cpu.shares", str(min(262144, weight)))
            else:  # v2 weights: 100 is a nice-0 task's 1024
                h.write("cpu.weight", str(max(1, min(10000, round(weight * 100 / 1024)))))
        except OSError as exc:
            report["missing"]["nice"] = f"cannot set the CPU weight of {h.path}: {exc}"


def unique_name(prefix: str) -> str:
    """A cgroup name no earlier sandbox can have left behind (pids are reused, e.g. in
    containers that always start at the same pid)."""
    return f"{prefix}-{secrets.token_hex(4)}"


def remove(dirs: list[str]) -> None:
    """Remove the sandbox's cgroups (run cgroups first); called by the host once the server
    has exited."""
    for parent in dirs:
        if not os.path.isdir(parent):
            continue
        for entry in sorted(os.listdir(parent)):
            path = os.path.join(parent, entry)
            if entry.startswith(("run", "warm")) and os.path.isdir(path):
                _kill_and_rmdir(path)
        _rmdir_retry(parent)


def _kill_and_rmdir(path: str) -> None:
    try:
        with open(os.path.join(path, "cgroup.procs")) as fh:
            for pid in fh.read().split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
    except OSError:
        pass
    _rmdir_retry(path)


def _rmdir_retry(path: str) -> None:
    for _ in range(50):  # processes of a killed namespace may take a moment to leave
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)
