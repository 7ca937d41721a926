"""Every limit of a run is enforced, or the run is refused with an error that names the limit,
the reason and the fix; opting out is explicit and recorded in every result. CPU time is the
whole run's, and the caller's niceness reaches the runs.

A host without usable cgroups is simulated by pointing the sandbox at a cgroup root that does
not exist (``REWARDKIT_SANDBOX_CGROUP_ROOT``, read only for that), and a host where an earlier
sandbox left its cgroups behind by making them.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rewardkit.sandboxes import Limits, Program, Sandbox
from rewardkit.testing.sandbox_attacks import (NICE_PROBE, SPREAD, cgroup_weights, held_mb,
                                               memory_cgroup_parent)
from rewardkit.types import Sample
from rewardkit.verifiers.code import CodeVerifier

NO_CGROUP = "/nonexistent/cgroup-root"
SPREAD_LIMITS = Limits(memory_mb=64, cpu_s=5, wall_s=10)  # SPREAD holds ~100 MB over 4 processes


needs_cgroups = pytest.mark.skipif(
    os.geteuid() != 0 or not (memory_cgroup_parent()
                              and os.access(memory_cgroup_parent(), os.W_OK)),
    reason="needs root and a writable memory cgroup")


@pytest.fixture
def no_cgroup(monkeypatch):
    monkeypatch.setenv("REWARDKIT_SANDBOX_CGROUP_ROOT", NO_CGROUP)


def test_without_a_usable_cgroup_the_run_is_refused_naming_limit_reason_and_fix(no_cgroup):
    with Sandbox(pool_size=1) as sb:
        r = sb.run(Program(SPREAD), SPREAD_LIMITS)
    assert r.status == "sandbox_error"
    assert "memory_mb=64 cannot be enforced" in r.error
    assert NO_CGROUP in r.error  # the reason
    assert "allow_unenforced=['memory']" in r.error and "root" in r.error  # the fix
    assert "cpu_s=5" in r.error  # CPU time of the whole run needs the cgroup too


def test_opting_out_is_explicit_and_recorded_in_every_result(no_cgroup):
    with pytest.raises(ValueError, match="unknown limit"):
        Sandbox(allow_unenforced=["memroy"])
    with Sandbox(pool_size=1, allow_unenforced=["memory", "cpu"]) as sb:
        results = [sb.run(Program("print(1)")) for _ in range(2)]
    for r in results:
        assert r.status == "ok" and r.unenforced == ("memory", "cpu")
        # Without a cgroup the figures are per process, and say so.
        assert r.peak_memory_scope == "process" and r.cpu_scope == "process"
        assert r.to_dict()["unenforced"] == ["memory", "cpu"]


@needs_cgroups
def test_enforced_limits_are_the_whole_runs():
    with Sandbox(pool_size=1) as sb:
        r = sb.run(Program(SPREAD), SPREAD_LIMITS)
    assert r.unenforced == () and r.peak_memory_scope == "run" and r.cpu_scope == "run"
    assert held_mb(r.stdout) <= SPREAD_LIMITS.memory_mb


@needs_cgroups
@pytest.mark.parametrize("isolation", ["auto", "namespaces"])
def test_cgroups_left_by_an_earlier_sandbox_do_not_drop_the_memory_limit(isolation):
    # What a sandbox of an earlier process with the same pid leaves (a container restarted).
    parent = memory_cgroup_parent()
    made = []
    for serial in range(40):
        path = os.path.join(parent, f"rewardkit-{os.getpid()}-{serial}")
        if not os.path.exists(path):
            os.mkdir(path)
            made.append(path)
    try:
        with Sandbox(pool_size=1, isolation=isolation) as sb:
            r = sb.run(Program(SPREAD), SPREAD_LIMITS)
    finally:
        for path in made:
            os.rmdir(path)
    # Not a silent fallback to per-process limits, and not an opaque server exit either.
    assert r.status != "sandbox_error", r.error
    assert held_mb(r.stdout) <= SPREAD_LIMITS.memory_mb, r.stdout


def test_a_sandbox_failure_in_the_code_reward_carries_its_cause(no_cgroup):
    with CodeVerifier(pool_size=1, timeout=2.0) as v:
        io, call = v.score([
            Sample("", "```python\nprint(3)\n```", {"inputs": [""], "outputs": ["3"]}),
            Sample("", "```python\ndef f():\n    return 3\n```",
                   {"fn_name": "f", "inputs": [[]], "outputs": [3]})])
    for score in (io, call):
        assert score.value == 0.0 and score.info["error_kind"] == "sandbox_error"
        assert "memory_mb=1024 cannot be enforced" in score.info["error"]
    with CodeVerifier(pool_size=1, timeout=2.0, allow_unenforced=("memory", "cpu")) as v:
        score = v.score([Sample("", "```python\nprint(3)\n```",
                                {"inputs": [""], "outputs": ["3"]})])[0]
    assert score.value == 1.0 and score.info["unenforced"] == ["memory", "cpu"]


# Four spinners, each in a session of its own and reparented away from the run's first
# process (whose rusage would not count them); the first process just waits.
SPINNERS = ("import os, time\nfor _ in range(4):\n    if os.fork() == 0:\n        os.setsid()\n"
            "        if os.fork() == 0:\n            while True:\n                pass\n"
            "        os._exit(0)\ntime.sleep(100)\n")


@needs_cgroups
def test_cpu_time_is_the_whole_runs_however_its_processes_were_started():
    with Sandbox(pool_size=1) as sb:
        r = sb.run(Program(SPINNERS), Limits(cpu_s=1.0, wall_s=30.0))
    # Stopped by its CPU time (all processes together), not by the wall clock at 30 s.
    assert r.status == "timeout" and r.cpu_scope == "run"
    assert r.cpu_s >= 0.95 and r.wall_s < 29


@needs_cgroups
def test_a_run_uses_at_most_max_cpus_cores_at_once():
    spin = ("import threading, time\ndef f():\n    end = time.time() + 1.5\n"
            "    while time.time() < end:\n        pass\n"
            "ts = [threading.Thread(target=f) for _ in range(4)]\n"
            "[t.start() for t in ts]\n[t.join() for t in ts]\n")
    with Sandbox(pool_size=1) as sb:
        r = sb.run(Program(spin), Limits(cpu_s=20, wall_s=20, max_cpus=0.5))
    assert r.status == "ok"
    assert r.cpu_s <= 0.5 * r.wall_s + 0.2, (r.cpu_s, r.wall_s)


def run_at_nice_10(env: dict, opt_out: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-c", NICE_PROBE, *opt_out], capture_output=True,
                         text=True, env={**os.environ, **env}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@needs_cgroups
def test_the_callers_niceness_weighs_on_runs_in_cgroups():
    res = run_at_nice_10({}, [])
    # One slot at nice 10 weighs what one nice-10 process does (v1: 110 of 1024; v2: 11 of 100).
    assert res["weight"] in cgroup_weights(res["nice"]), res


@pytest.mark.skipif(not os.path.exists("/proc/self/autogroup"), reason="no autogroup scheduling")
def test_the_callers_niceness_survives_setsid_without_cgroups():
    res = run_at_nice_10({"REWARDKIT_SANDBOX_CGROUP_ROOT": NO_CGROUP}, ["memory", "cpu", "pids"])
    autogroup = [line for line in res["stdout"].splitlines() if line.startswith("/autogroup-")]
    assert autogroup and autogroup[0].endswith(f"nice {res['nice']}"), res["stdout"]
    assert res["nice"] >= 10


def test_doctor_says_which_limits_this_host_cannot_enforce_and_why(no_cgroup, capsys):
    from rewardkit.sandboxes import doctor

    data = doctor.report()
    assert set(data["checks"]) >= {"memory", "cpu", "pids", "disk", "namespaces", "network",
                                   "filesystem", "seccomp", "run_identity"}
    for name in ("memory", "cpu"):
        check = data["checks"][name]
        assert check["enforced"] is False and NO_CGROUP in check["why_not"] and check["fix"]
    assert doctor.main([]) == 1  # a limit cannot be enforced here: a script can tell
    out = capsys.readouterr().out
    assert "[NO ] memory" in out and "fix:" in out and "runs refused" in out


@needs_cgroups
def test_doctor_on_a_host_that_enforces_every_limit(capsys):
    from rewardkit.sandboxes import doctor

    data = doctor.report()
    assert all(data["checks"][n]["enforced"] for n in ("memory", "cpu", "pids", "disk"))
