"""Each test's time verdict, on the candidate's own CPU time, read from outside the candidate.

A wall-clock deadline judges an honest program by its neighbours' load: on a busy host, or
with the scorer under ``nice``, a call that needs 0.6 s of CPU under a 1 s limit can take
several seconds of wall time. So a test (one call-style case, one HumanEval ``check``, one
statement or test function of an assert-style file) is a ``timeout`` when the candidate's run
used its limit in **CPU time** during it. Where that time comes from matters: the stub that
answers the calls lives in the candidate's process, so any figure it reports (its
``time.process_time()``, ``getrusage``) is the candidate's to forge. The checker therefore
reads the kernel's own accounts of the run, which the sandbox names for it
(``RunHandle.accounts``): the run's cgroup CPU counter (every process and thread of the run,
however started; a process cannot leave its cgroup) and, for each of its processes,
``/proc/PID/schedstat``'s run-queue delay. Nothing in the sandbox can write either.

A test that does not use the CPU (it sleeps, blocks, or trickles its reply) is stopped by the
wall-clock rule the sandbox uses for whole runs: the limit, moved on by the time the candidate
waited for a CPU that others held (the longest wait of any of its processes) and by the time
this checker waited for one (a run that is ready to run when the limit comes is looked at
again shortly: the kernel counts a wait only once it has ended), up to a backstop
(``Limits.wall_backstop_s`` of an I/O-style case of the same limit). A candidate cannot
stretch it without using CPU: waiting for a CPU means being ready to run, and it only waits for
its own threads by running them.

Fail closed: where the run's CPU time is not accounted (no CPU cgroup, allowed only with
``allow_unenforced=("cpu",)``) or a counter cannot be read, the verdict is the wall clock's, as
strict as before (elapsed time less this checker's own waits), never a pass on a figure that
was not measured. Standard library only (the checker does not load the sandbox layer).
"""
from __future__ import annotations

import os
import time
from typing import Any

#: Shortest gap between two checks of a running test (seconds): each reads a few kernel files.
MIN_CHECK_S = 0.02


def run_delay_s(path: str) -> float | None:
    """Seconds the task of a ``schedstat`` file spent ready to run but waiting for a CPU."""
    try:
        with open(path, "rb") as fh:
            return int(fh.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


class RunMeter:
    """The kernel's accounts of one sandboxed run, read from the host (see the module docs)."""

    def __init__(self, accounts: dict[str, Any]) -> None:
        self.cpu_field = accounts.get("cpu_field")
        self.cpu_unit_s = float(accounts["cpu_unit_s"])
        self.cpu_fd = os.open(accounts["cpu_file"], os.O_RDONLY | os.O_CLOEXEC)
        # Opened for each read: a cgroup v1 process list read again through the same open
        # file keeps showing the processes of the first read (none, before the run joined).
        self.procs_file = str(accounts["procs_file"])

    def cpu_s(self) -> float | None:
        """CPU seconds the run has used so far, all its processes together; None if unread."""
        try:
            text = os.pread(self.cpu_fd, 4096, 0).decode()
            if self.cpu_field is None:
                return int(text) * self.cpu_unit_s
            for line in text.splitlines():
                key, _, value = line.partition(" ")
                if key == self.cpu_field:
                    return int(value) * self.cpu_unit_s
        except (OSError, ValueError):
            pass
        return None

    def pids(self) -> list[int] | None:
        """The run's processes now; None if unread."""
        try:
            with open(self.procs_file, "rb") as fh:
                return [int(p) for p in fh.read(1 << 16).split()]
        except (OSError, ValueError):
            return None

    def waits(self) -> dict[int, float] | None:
        """Each process of the run: seconds it has waited for a CPU so far; None if unread."""
        pids = self.pids()
        if pids is None:
            return None
        out = {}
        for pid in pids:
            waited = run_delay_s(f"/proc/{pid}/schedstat")
            if waited is not None:
                out[pid] = waited
        return out

    def ready_now(self) -> bool:
        """Whether a process of the run is ready to run at this moment (state ``R``: on a CPU or
        waiting for one). A wait in progress is not yet in ``schedstat``'s run-queue delay:
        the kernel adds it when the wait ends, when the task reaches a CPU."""
        for pid in self.pids() or ():
            try:
                with open(f"/proc/{pid}/stat", "rb") as fh:
                    stat = fh.read()
            except OSError:
                continue
            # "PID (comm) STATE ...": comm may hold spaces and parentheses; the state follows
            # the last ")".
            if stat[stat.rfind(b")") + 2:][:1] == b"R":
                return True
        return False

    def close(self) -> None:
        os.close(self.cpu_fd)


def open_meter(accounts: Any) -> RunMeter | None:
    """A meter of the run the sandbox's ``accounts`` name; None where the run's CPU time is not
    accounted or its files are gone (the run has ended): the tests are then timed by the wall
    clock alone."""
    if not isinstance(accounts, dict):
        return None
    try:
        return RunMeter(accounts)
    except (OSError, KeyError, TypeError, ValueError):
        return None


def own_wait_s() -> float:
    """Seconds this checker's thread has waited for a CPU (0 where not accounted)."""
    return run_delay_s("/proc/thread-self/schedstat") or 0.0


class CaseClock:
    """One test's time: :meth:`start` it with its limit, :meth:`check` it while it runs (a
    timer signal does), :meth:`over_cpu` once it has finished."""

    def __init__(self, meter: RunMeter | None, stretch: float, slack_s: float) -> None:
        """A test of ``limit`` seconds may take at most ``stretch * (limit + slack_s)``
        seconds of wall-clock time, however long it waited for a CPU."""
        self.meter = meter
        self.stretch, self.slack_s = stretch, slack_s
        self.limit = self.backstop = float("inf")
        self.t0 = self.own0 = 0.0
        self.cpu0: float | None = None
        self.waits0: dict[int, float] = {}
        self.reason: str | None = None

    def start(self, limit: float) -> None:
        self.limit = limit
        self.t0 = time.monotonic()
        self.backstop = self.t0 + max(limit, self.stretch * (limit + self.slack_s))
        self.cpu0 = self.meter.cpu_s() if self.meter else None
        self.waits0 = (self.meter.waits() if self.meter else None) or {}
        self.own0 = own_wait_s()
        self.reason = None

    def cpu_used(self) -> float | None:
        """The candidate's CPU seconds since :meth:`start`; None where not measured."""
        if self.cpu0 is None:
            return None
        now = self.meter.cpu_s()
        if now is None or now < self.cpu0:  # a counter that went back is not a measure
            self.cpu0 = None
            return None
        return now - self.cpu0

    def _candidate_wait(self) -> float:
        waits = self.meter.waits() if self.meter and self.cpu0 is not None else None
        if not waits:
            return 0.0  # not measured: no credit (fail closed)
        return max(w - self.waits0.get(pid, 0.0) for pid, w in waits.items())

    def _may_be_waiting(self) -> bool:
        return bool(self.meter and self.cpu0 is not None and self.meter.ready_now())

    def first_check_in(self) -> float:
        """Seconds until the first check: the limit, when a run held to one core's worth of CPU
        per second of wall time (the code reward's ``max_cpus``) could first be over it; a run
        allowed more cores that used its limit sooner is stopped at this check."""
        return max(MIN_CHECK_S, min(self.limit, self.backstop - self.t0))

    def check(self) -> float:
        """0 when the test is over its limit (:attr:`reason` says why), else seconds until
        the next check."""
        now = time.monotonic()
        cpu = self.cpu_used()
        if self.over_cpu(cpu):
            return 0.0
        if now >= self.backstop:
            self.reason = (f"time limit of {self.limit:g} s exceeded: the wall-clock backstop of "
                           f"{self.backstop - self.t0:g} s was reached")
            return 0.0
        active = now - self.t0 - self._candidate_wait() - (own_wait_s() - self.own0)
        if active >= self.limit and self._may_be_waiting():
            # A candidate ready to run may be in a wait the kernel has not yet counted (on a
            # crowded host a low-priority run can wait a second or more for its turn): look
            # again shortly. Being ready to run is running or waiting to: a candidate cannot
            # stay so without using the CPU that the CPU rule above counts, and the backstop
            # bounds it.
            return max(MIN_CHECK_S, min(0.1, self.backstop - now))
        if active >= self.limit:
            self.reason = (f"time limit of {self.limit:g} s exceeded: {active:.2f} s of wall "
                           "time not spent waiting for a CPU (the program slept, blocked or "
                           "trickled its reply)")
            return 0.0
        left = self.limit - max(active, cpu or 0.0)
        return max(MIN_CHECK_S, min(left, self.backstop - now))

    def over_cpu(self, cpu: float | None) -> bool:
        """``cpu`` (:meth:`cpu_used`) is the limit or more: also checked once a test has
        finished, for one that used its limit between two checks."""
        if cpu is not None and cpu >= self.limit:
            self.reason = f"time limit of {self.limit:g} s exceeded: {cpu:.2f} s of CPU time"
            return True
        return False
