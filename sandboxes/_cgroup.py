"""Per-slot memory and pids cgroups: limits on the whole run, not per process.

``RLIMIT_AS`` bounds each process, so a run of 64 processes could still hold 64 times its
memory limit; ``RLIMIT_NPROC`` needs a uid of its own. A cgroup per concurrent slot bounds the
run as a whole (resident memory including tmpfs and page cache it causes, and its process count),
measures its true peak, and tells an out-of-memory kill apart from other SIGKILLs.

The fork server creates the slot cgroups before its file system turns read-only and keeps their
control files open; a child joins its slot by writing ``0`` (itself) to the open
``cgroup.procs``. cgroup v1 (separate ``memory`` and ``pids`` hierarchies) and v2 (unified,
where the parent delegates ``memory`` and ``pids``) are both handled; where neither works the
report says cgroups are off and rlimits alone apply. Standard library only (loaded by path).
"""
from __future__ import annotations

import os

ROOT = "/sys/fs/cgroup"


def _own_paths() -> dict[str, str]:
    """Controller (or "" for v2) → this process's cgroup path, from /proc/self/cgroup."""
    paths = {}
    with open("/proc/self/cgroup") as fh:
        for line in fh:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                paths[c] = path
    return paths


class SlotCgroups:
    """Open control files of one slot's cgroups (memory and pids)."""

    def __init__(self, version: int, dirs: list[str]) -> None:
        self.version = version
        self.dirs = dirs
        self.fds: dict[str, int] = {}

    def open(self, name: str, directory: str, flags: int = os.O_RDWR) -> None:
        self.fds[name] = os.open(os.path.join(directory, name), flags | os.O_CLOEXEC)

    def _write(self, name: str, value: str) -> None:
        if name in self.fds:
            os.pwrite(self.fds[name], value.encode(), 0)

    def _read(self, name: str) -> str:
        return os.pread(self.fds[name], 4096, 0).decode() if name in self.fds else ""

    oom_before = 0

    def prepare(self, memory_bytes: int, max_processes: int) -> None:
        """Set this run's limits and reset the counters (in the server, before the fork)."""
        if self.version == 1:
            self._write("memory.max_usage_in_bytes", "0")
            self._write("memory.failcnt", "0")
            self._write("memory.limit_in_bytes", str(memory_bytes))
        else:
            self._write("memory.max", str(memory_bytes))
            self._write("memory.swap.max", "0")
        self._write("pids.max", str(max_processes))
        self.oom_before = self.oom_kills()

    def join(self) -> None:
        """Move the calling process into the slot (in the child, before anything else)."""
        for name, fd in self.fds.items():
            if name.endswith("cgroup.procs"):
                os.write(fd, b"0")

    def oom_kills(self) -> int:
        text = self._read("memory.oom_control" if self.version == 1 else "memory.events")
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def outcome(self) -> dict:
        """Peak memory (bytes, or None where the kernel does not keep it) and whether the
        memory limit was hit during the run."""
        peak = None
        if self.version == 1 and "memory.max_usage_in_bytes" in self.fds:
            peak = int(self._read("memory.max_usage_in_bytes") or 0)
        return {"peak_bytes": peak, "oom": self.oom_kills() > self.oom_before}


def create(name: str, slots: int) -> tuple[list[SlotCgroups], dict]:
    """Create ``slots`` slot cgroups under a new ``name`` cgroup next to this process's own."""
    report = {"version": None, "controllers": [], "dirs": [], "error": None}
    try:
        own = _own_paths()
        if os.path.isdir(os.path.join(ROOT, "memory")) and "memory" in own:
            return _create_v1(name, slots, own, report), report
        if os.path.exists(os.path.join(ROOT, "cgroup.controllers")) and "" in own:
            return _create_v2(name, slots, own[""], report), report
        report["error"] = "no usable memory cgroup hierarchy"
    except OSError as exc:
        report["error"] = f"cgroups unavailable: {exc}"
    return [], report


def _create_v1(name, slots, own, report):
    parents = {}
    for controller in ("memory", "pids"):
        if controller in own and os.path.isdir(os.path.join(ROOT, controller)):
            parent = os.path.join(ROOT, controller, own[controller].lstrip("/"), name)
            os.makedirs(parent)
            parents[controller] = parent
            report["dirs"].append(parent)
    report["version"], report["controllers"] = 1, sorted(parents)
    result = []
    for i in range(slots):
        slot = SlotCgroups(1, [])
        for controller, parent in parents.items():
            d = os.path.join(parent, f"slot{i}")
            os.mkdir(d)
            slot.dirs.append(d)
            slot.open("cgroup.procs", d, os.O_WRONLY)
            slot.fds[f"{controller}/cgroup.procs"] = slot.fds.pop("cgroup.procs")
            if controller == "memory":
                for f in ("memory.limit_in_bytes", "memory.max_usage_in_bytes",
                          "memory.failcnt", "memory.oom_control"):
                    slot.open(f, d)
                if os.path.exists(os.path.join(d, "memory.swappiness")):
                    with open(os.path.join(d, "memory.swappiness"), "w") as fh:
                        fh.write("0")
            else:
                slot.open("pids.max", d)
        result.append(slot)
    return result


def _create_v2(name, slots, own, report):
    parent = os.path.join(ROOT, own.lstrip("/"), name)
    os.makedirs(parent)
    report["dirs"].append(parent)
    with open(os.path.join(parent, "cgroup.controllers")) as fh:
        available = fh.read().split()
    wanted = [c for c in ("memory", "pids") if c in available]
    if "memory" not in wanted:
        raise OSError(f"memory controller not delegated to {parent}")
    with open(os.path.join(parent, "cgroup.subtree_control"), "w") as fh:
        fh.write(" ".join(f"+{c}" for c in wanted))
    report["version"], report["controllers"] = 2, wanted
    result = []
    for i in range(slots):
        d = os.path.join(parent, f"slot{i}")
        os.mkdir(d)
        slot = SlotCgroups(2, [d])
        slot.open("cgroup.procs", d, os.O_WRONLY)
        for f in ("memory.max", "memory.events") + (("pids.max",) if "pids" in wanted else ()):
            slot.open(f, d)
        if os.path.exists(os.path.join(d, "memory.swap.max")):
            slot.open("memory.swap.max", d)
        result.append(slot)
    return result


def remove(dirs: list[str]) -> None:
    """Remove the cgroups (children first); called by the host once the server has exited."""
    for parent in dirs:
        if not os.path.isdir(parent):
            continue
        for entry in sorted(os.listdir(parent)):
            path = os.path.join(parent, entry)
            if entry.startswith("slot") and os.path.isdir(path):
                _rmdir_retry(path)
        _rmdir_retry(parent)


def _rmdir_retry(path: str) -> None:
    import time

    for _ in range(50):  # processes of a killed namespace may take a moment to leave
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)
