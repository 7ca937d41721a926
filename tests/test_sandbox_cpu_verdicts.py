"""Time verdicts come from a run's own CPU time: an honest program near its CPU limit passes on a
loaded host at a low priority (its wall time stretched by the time it waited for a CPU), while a
program that sleeps is still stopped at its wall limit."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

from rewardkit.sandboxes import Limits, Program, Sandbox, _cgroup
from rewardkit.testing.sandbox_attacks import scored_beside_cpu_hogs

# About 0.3 s of CPU, under a 0.5 s limit: the I/O-style code reward gives it 0.5 + 2 s of wall
# time, which a fair share of a loaded host at nice 10 does not leave.
NEAR_LIMIT = ("import time\nwhile time.process_time() < 0.3:\n    pass\nprint(input())\n")
SCORE_NICE = """
import json, sys
from rewardkit.verifiers.code import CodeVerifier
ref = {"inputs": ["7\\n"], "outputs": ["7\\n"], "timeout": 0.5}
sample = {"prompt": "", "completion": sys.argv[1], "reference": ref}
with CodeVerifier(pool_size=1) as verifier:
    verifier.score([dict(sample, completion="print(input())")])  # started before the load
    print("ready", flush=True)
    sys.stdin.readline()
    score = verifier.score([sample])[0]
print(json.dumps({"value": score.value, "tests": score.info.get("tests")}))
"""


def test_an_honest_program_near_its_cpu_limit_passes_at_nice_10_beside_cpu_hogs():
    score = json.loads(scored_beside_cpu_hogs(SCORE_NICE, NEAR_LIMIT, hogs_per_core=1))
    assert score["value"] == 1.0, score
    # It did wait for a CPU: its wall time ran past its 0.5 s CPU limit. (How far depends on
    # how the host's scheduler groups the run against the hogs: from under 2 s to past the
    # 0.5 + 2 s a wall-clock kill would have given it, where the old rule scored it 0.)
    assert score["tests"][0]["time_s"] > 0.5, score


def test_a_program_that_sleeps_is_still_stopped_at_its_wall_limit():
    with Sandbox(pool_size=1) as sb:
        result = sb.run(Program("import time\ntime.sleep(60)\n"), Limits(cpu_s=1, wall_s=1))
    assert result.status == "timeout"
    assert result.wall_s < Limits(cpu_s=1, wall_s=1).wall_backstop_s


def test_a_program_past_its_cpu_limit_is_a_timeout_however_long_its_wall_limit():
    with Sandbox(pool_size=1) as sb:
        result = sb.run(Program("while True:\n    pass\n"), Limits(cpu_s=0.5, wall_s=30))
    assert result.status == "timeout"
    assert 0.5 <= result.cpu_s < 2.0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make cgroups")
def test_a_runs_process_list_shows_a_process_that_joined_after_the_last_read():
    # The wall limit's stretch (each process's wait for a CPU) and the kill sweep read it.
    cgroups, report = _cgroup.create(_cgroup.unique_name("rk-test-pids"))
    if cgroups is None:
        pytest.skip(f"no cgroups here: {report['error']}")
    run = cgroups.new_run()
    child = None
    try:
        assert run.pids() == []
        child = os.fork()
        if child == 0:
            try:
                run.join()
                time.sleep(30)
            finally:
                os._exit(0)
        deadline = time.monotonic() + 0.8  # well within the kernel's one-second reuse
        while child not in run.pids() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert child in run.pids()
    finally:
        if child:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
        run.destroy()
        _cgroup.remove(report["dirs"])
