"""``/health`` tells the truth early, a hung scoring call is cut off, and SIGTERM stops the server
even while a call hangs. Real servers on 127.0.0.1, always stopped."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from rewardkit.server import RewardSource, ServerSettings
from rewardkit.server.testing import running_server

pytest.importorskip("fastapi")

ROOT = Path(__file__).resolve().parents[1]


def crash_while(prompt, completion, reference, flag=""):
    """Kills its worker process on every call while the file ``flag`` exists."""
    if os.path.exists(flag):
        os.kill(os.getpid(), signal.SIGKILL)
    return float(len(completion))


def crash_once(prompt, completion, reference, marker=""):
    """Kills its worker process the first time it is called (``marker`` records it)."""
    if not os.path.exists(marker):
        Path(marker).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return float(len(completion))


def hang_on(prompt, completion, reference, hang_s=3600.0):
    """Hangs for ``hang_s`` seconds on the completion ``hang``."""
    if completion == "hang":
        time.sleep(hang_s)
    return float(len(completion))


def _settings(fn: str, options: dict, **limits) -> ServerSettings:
    return ServerSettings({"r": RewardSource(f"{__name__}:{fn}", options)}, default="r", **limits)


def _score(url: str, *completions: str) -> list[dict]:
    r = httpx.post(url + "/v1/score", json={"samples": [{"completion": c} for c in completions]},
                   timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["scores"]


def _health(url: str) -> dict:
    return httpx.get(url + "/health", timeout=10).json()


def _wait_until(predicate, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_a_reward_whose_worker_dies_on_every_call_is_degraded_after_one_request(tmp_path):
    flag = tmp_path / "crash"
    flag.touch()
    with running_server(_settings("crash_while", {"flag": str(flag)}, workers=1)) as (url, _):
        scores = _score(url, "abcd", "ab", "a", "abc")
        assert [s["info"]["error_kind"] for s in scores] == ["worker_crashed"] * 4
        health = _health(url)
        assert health["status"] == "degraded"
        assert "scoring calls failed" in health["problems"]["r"]
        # once it scores again, it is ok again
        flag.unlink()
        assert [s["value"] for s in _score(url, "abc")] == [3.0]
        assert _health(url)["status"] == "ok"


def test_a_worker_that_crashes_once_is_retried_and_health_stays_ok(tmp_path):
    settings = _settings("crash_once", {"marker": str(tmp_path / "crashed")}, workers=1)
    with running_server(settings) as (url, _):
        assert [s["value"] for s in _score(url, "abc", "a")] == [3.0, 1.0]
        assert (tmp_path / "crashed").exists()  # it did crash, and its samples were retried
        assert _health(url)["status"] == "ok"


@pytest.mark.parametrize("workers", [1, 0], ids=["process", "thread"])
def test_a_hung_call_times_out_its_worker_is_replaced_and_health_says_so(workers):
    # concurrency 2: in threads, one stuck thread is left behind and another takes its place
    settings = _settings("hang_on", {"hang_s": 600.0 if workers else 4.0}, workers=workers,
                         batch_timeout_s=1.0, concurrency=2)
    with running_server(settings) as (url, app):
        started = time.monotonic()
        scores = _score(url, "hang")
        assert scores[0]["info"]["error_kind"] == "timeout"
        assert "batch_timeout_s" in scores[0]["info"]["error"]
        assert time.monotonic() - started < 30  # cut off by the batch deadline, not later
        health = _health(url)
        assert health["status"] == "degraded"
        assert "did not return in time" in health["problems"]["r"]
        assert [s["value"] for s in _score(url, "abc")] == [3.0]
        assert _health(url)["status"] == "ok"
        worker = app.state.rewardkit.batchers["r"].worker
        assert worker.restarts == 1
        if not workers:
            assert worker.stuck == 1
            _wait_until(lambda: worker.stuck == 0)  # the abandoned call returned at last


def test_threads_stuck_past_the_limit_fail_closed_until_one_returns():
    settings = _settings("hang_on", {"hang_s": 3.0}, workers=0, batch_timeout_s=0.5,
                         concurrency=1)
    with running_server(settings) as (url, app):
        assert _score(url, "hang")[0]["info"]["error_kind"] == "timeout"
        # its one thread is stuck: the reward refuses work instead of piling up threads
        refused = _score(url, "abc")[0]
        assert refused["info"]["error_kind"] == "worker_stuck"
        health = _health(url)
        assert health["status"] == "degraded" and "stuck" in health["problems"]["r"]
        worker = app.state.rewardkit.batchers["r"].worker
        _wait_until(lambda: worker.stuck == 0)
        assert [s["value"] for s in _score(url, "abc")] == [3.0]
        assert _health(url)["status"] == "ok"


def test_sigterm_stops_the_server_within_its_graceful_timeout_while_a_call_hangs():
    proc = subprocess.Popen(
        [sys.executable, "-m", "rewardkit", "serve", "--reward", f"{__name__}:hang_on",
         "--port", "0", "--graceful-timeout", "3"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = None
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline:
            found = re.search(r"running on (http://127\.0\.0\.1:\d+)", proc.stdout.readline())
            url = found.group(1) if found else None
        assert url, "server did not start"
        threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep the pipe drained
        replies: list[httpx.Response] = []
        client = threading.Thread(target=lambda: replies.append(httpx.post(
            url + "/v1/score", json={"samples": [{"completion": "hang"}, {"completion": "ab"}]},
            timeout=60)))
        client.start()
        _wait_until(lambda: httpx.get(url + "/health").json()["queued_samples"][
            f"{__name__}:hang_on"] == 1)  # "ab" is scored, "hang" hangs
        stopped = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) in (0, -signal.SIGTERM)
        assert time.monotonic() - stopped < 15  # the graceful timeout (3 s) and exit, not more
        client.join(30)
        assert replies and replies[0].status_code == 200
        hung, other = replies[0].json()["scores"]
        assert hung["info"]["error_kind"] == "shutdown"
        assert other["value"] == 2.0  # scored in a batch of its own (a new request's first
        # chunk of a rule-based reward is one sample)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
