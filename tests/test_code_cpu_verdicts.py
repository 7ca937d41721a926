"""Call- and test-style time verdicts come from the candidate's own CPU time, read by the checker
from the kernel's accounts of the run: an honest call near its limit passes on a loaded host at a
low priority, a spinning call is a timeout on its CPU time, a sleeping call is still stopped at
its limit, and a candidate cannot forge or reset the figures it is judged on."""
from __future__ import annotations

import json
import time

import pytest

from rewardkit.sandboxes import Limits, Program, Sandbox
from rewardkit.testing.sandbox_attacks import scored_beside_cpu_hogs
from rewardkit.types import Sample
from rewardkit.verifiers.code import CodeVerifier
from rewardkit.verifiers.code.timing import CaseClock, RunMeter

# 0.6 s of CPU per call under a 1 s limit: at nice 10 beside one CPU hog per core it gets about
# a tenth of a core, so it takes several seconds of wall time (a wall-clock deadline of 1 s
# would have cut it off). Two hogs per core and the suite's other worker left it a few percent,
# close to the 30 s backstop.
NEAR_LIMIT = ("```python\nimport time\ndef work(x):\n    t = time.process_time()\n"
              "    while time.process_time() - t < 0.6:\n        pass\n    return x\n```")
CALL = {"fn_name": "work", "inputs": [[7]], "outputs": [7], "timeout": 1.0}
HUMANEVAL = {"test": "def check(candidate):\n    assert candidate(7) == 7\n", "entry_point": "work",
             "timeout": 1.0}
SCORE_NICE = """
import json, sys
from rewardkit.types import Sample
from rewardkit.verifiers.code import CodeVerifier
code, refs = sys.argv[1], json.loads(sys.argv[2])
quick = "```python\\ndef work(x):\\n    return x\\n```"
with CodeVerifier(pool_size=2) as verifier:
    verifier.score([Sample("", quick, r) for r in refs])  # sandbox and checkers started first
    print("ready", flush=True)
    sys.stdin.readline()
    scores = verifier.score([Sample("", code, r) for r in refs])
print(json.dumps([{"value": s.value, "tests": s.info.get("tests"), "error": s.info.get("error"),
                   "reason": s.info.get("reason")} for s in scores]))
"""


def test_an_honest_call_near_its_limit_passes_at_nice_10_beside_cpu_hogs():
    line = scored_beside_cpu_hogs(SCORE_NICE, NEAR_LIMIT, json.dumps([CALL, HUMANEVAL]),
                                  timeout=240, hogs_per_core=1)
    for score in json.loads(line):
        assert score["value"] == 1.0, score
        test = score["tests"][0]
        assert 0.5 <= test["cpu_s"] < 1.0, score
        # It did wait for a CPU: past the 1 s a wall-clock deadline would have given it.
        assert test["time_s"] > 1.0, score


@pytest.fixture(scope="module")
def verifier():
    with CodeVerifier(pool_size=2, timeout=0.5, partial_credit=True) as v:
        yield v


def _tests(verifier, code, reference):
    return verifier.score([Sample("", f"```python\n{code}```", reference)])[0].info["tests"]


SPIN = "def work(x):\n    while True:\n        pass\n"
SLEEP = "import time\ndef work(x):\n    time.sleep(60)\n"
# Every clock the candidate's own process could read says no time has passed.
FORGED_CLOCKS = ("import os, resource, time\n"
                 "time.process_time = time.thread_time = lambda: 0.0\n"
                 "time.process_time_ns = time.thread_time_ns = lambda: 0\n"
                 "_zero = resource.getrusage(resource.RUSAGE_SELF)\n"
                 "resource.getrusage = lambda who: _zero\n"
                 "os.times = lambda: os.times_result((0.0,) * 5)\n") + SPIN
# The run's cgroup counters reset (cgroup v1 takes a write of 0 to cpuacct.usage), wherever the
# candidate can find them; then it spins.
RESET_COUNTERS = ("import glob\n"
                  "def _reset():\n"
                  "    for path in glob.glob('/sys/fs/cgroup/**/cpuacct.usage', recursive=True):\n"
                  "        try:\n            open(path, 'w').write('0')\n"
                  "        except OSError:\n            pass\n"
                  "def work(x):\n    while True:\n        _reset()\n")


@pytest.mark.parametrize("code", [SPIN, FORGED_CLOCKS, RESET_COUNTERS],
                         ids=["spins", "forges_its_clocks", "resets_its_counters"])
@pytest.mark.parametrize("reference", [
    {"fn_name": "work", "inputs": [[1], [2]], "outputs": [1, 2]},
    {"test": "def check(candidate):\n    assert candidate(1) == 1\n", "entry_point": "work"},
], ids=["call", "humaneval"])
def test_a_spinning_call_is_a_timeout_on_its_own_cpu_time(verifier, code, reference):
    test = _tests(verifier, code, reference)[0]
    assert test["verdict"] == "timeout", test
    # Its limit of CPU time, as the kernel counted it (the count lags a scheduler tick).
    assert test["cpu_s"] >= 0.45, test


@pytest.mark.parametrize("reference", [
    {"fn_name": "work", "inputs": [[1]], "outputs": [1]},
    {"test": "assert work(1) == 1\n"},
], ids=["call", "assert"])
def test_a_sleeping_call_is_still_stopped_at_its_limit(verifier, reference):
    test = _tests(verifier, SLEEP, reference)[0]
    assert test["verdict"] == "timeout", test
    assert "not spent waiting for a CPU" in test["message"], test
    assert test["cpu_s"] < 0.5, test
    # Sleeping earns no stretch: stopped long before the backstop (10 x (0.5 + 2) s).
    assert test["time_s"] < Limits(wall_s=0.5 + 2).wall_backstop_s, test


def test_the_runs_accounts_are_the_kernels_and_count_every_process():
    # A call that hides its work in a child of its own session is still charged for it.
    source = ("import os, time\nos.read(3, 1)\nif os.fork() == 0:\n    os.setsid()\n"
              "    while time.process_time() < 0.4:\n        pass\n"
              "    os._exit(0)\nos.wait()\nos.write(3, b'd')\nos.read(3, 1)\n")
    with Sandbox(pool_size=1) as sb:
        with sb.start(Program(source, channel=True), Limits(cpu_s=5, wall_s=5)) as proc:
            meter = RunMeter(proc.accounts(timeout=10))
            before = meter.cpu_s()
            proc.channel.send(b"x")
            assert proc.channel.recv(1) == b"d"
            used = meter.cpu_s() - before
            meter.close()
            proc.channel.send(b"x")
            result = proc.result(timeout=60)
    assert result.status == "ok", result
    assert used >= 0.3, used


def test_without_the_runs_accounts_the_wall_clock_decides():
    clock = CaseClock(None, stretch=10.0, slack_s=2.0)
    clock.start(0.2)
    time.sleep(0.25)
    assert clock.check() == 0.0
    assert clock.cpu_used() is None
    assert "not spent waiting for a CPU" in clock.reason


class _Meter:
    """A run's accounts as the kernel shows them during a long wait for a CPU: no CPU time
    used, no wait counted yet (``schedstat`` adds a wait when it ends), the process ready."""

    def __init__(self) -> None:
        self.ready = True

    def cpu_s(self) -> float:
        return 3.0

    def waits(self) -> dict[int, float]:
        return {4242: 0.5}

    def ready_now(self) -> bool:
        return self.ready


def test_a_run_ready_to_run_is_not_timed_out_on_a_wait_the_kernel_has_not_counted_yet():
    meter = _Meter()
    clock = CaseClock(meter, stretch=10.0, slack_s=2.0)
    clock.start(0.1)
    time.sleep(0.15)
    assert clock.check() > 0.0, clock.reason  # still waiting for its turn: looked at again
    meter.ready = False  # it sleeps: the wall-clock rule holds as before
    assert clock.check() == 0.0
    assert "not spent waiting for a CPU" in clock.reason


def test_the_meter_sees_a_spinning_run_ready_and_a_sleeping_one_not():
    spin = "import os\nos.read(3, 1)\nwhile True:\n    pass\n"
    sleep = "import os, time\nos.read(3, 1)\ntime.sleep(30)\n"
    seen = {}
    with Sandbox(pool_size=1) as sb:
        for name, source in (("spin", spin), ("sleep", sleep)):
            with sb.start(Program(source, channel=True), Limits(cpu_s=5, wall_s=5)) as proc:
                meter = RunMeter(proc.accounts(timeout=10))
                proc.channel.send(b"x")
                time.sleep(0.3)
                seen[name] = meter.ready_now()
                meter.close()
                proc.kill()
    assert seen == {"spin": True, "sleep": False}
