"""The fork server forks the next runs' children ahead, each in a fresh cgroup: a run handed to
one behaves as a run forked on request, and a child that died while it waited is never handed
a run (the run is forked then instead)."""
from __future__ import annotations

import os
import signal
import time

import pytest

from rewardkit.sandboxes import Limits, Program, Sandbox

LIMITS = Limits(cpu_s=2, wall_s=5, memory_mb=256)
CGROUP = "print(open('/proc/self/cgroup').read(), end='')\n"


def warm_children(sb: Sandbox) -> list[int]:
    """Host pids of the server's children waiting in a ``warm`` cgroup."""
    server = sb._server._proc.pid
    init = [int(p) for p in open(f"/proc/{server}/task/{server}/children").read().split()]
    found = []
    for pid in [server] + init:
        for child in open(f"/proc/{pid}/task/{pid}/children").read().split():
            with open(f"/proc/{child}/cgroup") as fh:
                if "/warm" in fh.read():
                    found.append(int(child))
    return found


def dead(pid: int) -> bool:
    """Whether ``pid`` has exited: a SIGKILL is only pending until the process is next
    scheduled, and on a loaded machine a run handed over in that moment went to a process
    about to die (the residual window of a child dying while a run is handed to it)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@pytest.mark.skipif(os.geteuid() != 0, reason="reads the server's children from the host")
def test_runs_after_the_waiting_children_were_killed_still_run():
    with Sandbox(pool_size=2, limits=LIMITS) as sb:
        assert sb.run(Program("print(1)")).stdout == "1\n"
        deadline = time.monotonic() + 5
        while len(warm_children(sb)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        killed = warm_children(sb)
        assert killed, "no child was forked ahead"
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        for pid in killed:  # dead (a zombie or gone) before the runs: "died while it waited"
            while not dead(pid):
                assert time.monotonic() < deadline + 5, f"child {pid} outlived SIGKILL"
                time.sleep(0.01)
        results = sb.run_many([Program(f"print({i})") for i in range(4)])
    assert [(r.status, r.stdout) for r in results] == [("ok", f"{i}\n") for i in range(4)]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs the cgroups (root)")
def test_a_run_handed_to_a_waiting_child_is_in_a_cgroup_no_run_used_before():
    with Sandbox(pool_size=1, limits=LIMITS) as sb:
        groups = []
        for _ in range(4):
            groups.append(sb.run(Program(CGROUP)).stdout)
            time.sleep(0.1)  # the next child is forked ahead meanwhile
    assert len(set(groups)) == 4
    assert sum("/warm" in g for g in groups) >= 3
