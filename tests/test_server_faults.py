"""Faults the reward server must survive without dying, answering wrongly, or losing samples:
huge bodies, too many samples, slow clients, disconnects, timeouts, a full queue, killed
worker processes, SIGTERM under load. Real servers on 127.0.0.1, always stopped."""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

import rewardkit
from rewardkit.server import RewardSource, ServerSettings
from rewardkit.server.testing import running_server

pytest.importorskip("fastapi")

ROOT = Path(__file__).resolve().parents[1]
SLOW = "tests.plugin_rewards:slow_len"


def kill_on_poison(prompt, completion, reference):
    """A reward whose worker process dies on one particular completion."""
    if completion == "poison":
        os.kill(os.getpid(), signal.SIGKILL)
    return float(len(completion))


def _settings(spec: str = "exact_match", options: dict | None = None, **limits) -> ServerSettings:
    return ServerSettings({"r": RewardSource(spec, options or {})}, default="r", **limits)


def _metric(url: str, line_start: str) -> float:
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _wait_until(predicate, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def _healthy_and_correct(url: str) -> None:
    r = httpx.post(url + "/v1/score", json={"samples": [
        {"completion": "abc", "reference": "abc"}, {"completion": "x", "reference": "y"}]},
        timeout=30)
    assert r.status_code == 200
    values = [s["value"] for s in r.json()["scores"]]
    assert values in ([1.0, 0.0], [3.0, 1.0])  # exact_match, or the length rewards


def test_50mb_body_is_refused_with_413_and_server_stays_up():
    with running_server(_settings()) as (url, _):
        body = b'{"samples": [' + b" " * (50 * 1024 * 1024) + b"]}"
        with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), 10) as sock:
            sock.sendall(b"POST /v1/score HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json"
                         b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n")
            sock.sendall(body[:65536])  # the server answers from the headers alone
            reply = b""
            while b"max_body_bytes" not in reply and len(reply) < 65536:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                reply += chunk
            reply = reply.decode()
        assert reply.startswith("HTTP/1.1 413"), reply[:200]
        assert "max_body_bytes" in reply
        _healthy_and_correct(url)


def test_chunked_body_past_the_limit_is_refused_with_413():
    with running_server(_settings(max_body_bytes=1024 * 1024)) as (url, _):
        def chunks():
            yield b'{"samples": ['
            for _ in range(40):
                yield b" " * 65536
            yield b"]}"

        r = httpx.post(url + "/v1/score", content=chunks(), timeout=30,
                       headers={"content-type": "application/json"})
        assert r.status_code == 413
        _healthy_and_correct(url)


def test_100k_samples_in_one_request_get_413_naming_the_limit():
    with running_server(_settings()) as (url, _):
        samples = [{"completion": "a", "reference": "a"}] * 100_000
        r = httpx.post(url + "/v1/score", json={"samples": samples}, timeout=60)
        assert r.status_code == 413
        assert "more than 8192 samples" in r.json()["error"]
        assert "max_request_samples" in r.json()["error"]
        _healthy_and_correct(url)


def test_slow_clients_do_not_block_others():
    with running_server(_settings()) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        slow = []
        for partial in (b"POST /v1/score HTTP/1.1\r\nHost: localhost\r\nContent-Le",  # headers stall
                        b"POST /v1/score HTTP/1.1\r\nHost: localhost\r\nContent-Length: 500\r\n\r\n{\"sa"):
            s = socket.create_connection(("127.0.0.1", port), 10)
            s.sendall(partial)
            slow.append(s)
        try:
            for _ in range(5):
                _healthy_and_correct(url)
        finally:
            for s in slow:
                s.close()
        _healthy_and_correct(url)


def test_client_disconnect_mid_request_frees_the_queue():
    with running_server(_settings(SLOW, {"delay": 0.2})) as (url, app):
        port = int(url.rsplit(":", 1)[1])
        body = b'{"samples": [{"completion": "abcd"}, {"completion": "ab"}]}'
        with socket.create_connection(("127.0.0.1", port), 10) as s:
            s.sendall(b"POST /v1/score HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                      b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            time.sleep(0.05)
        batcher = app.state.rewardkit.batchers["r"]
        _wait_until(lambda: batcher.pending == 0)
        _healthy_and_correct(url)
        assert httpx.get(url + "/health").json()["status"] == "ok"


def test_request_timeout_gives_timeout_error_scores():
    with running_server(_settings(SLOW, {"delay": 0.6}, request_timeout_s=0.2)) as (url, _):
        r = httpx.post(url + "/v1/score", json={"samples": [{"completion": "ab"}] * 2}, timeout=30)
        assert r.status_code == 200
        assert [s["info"]["error_kind"] for s in r.json()["scores"]] == ["timeout", "timeout"]
        assert _metric(url, 'rewardkit_sample_errors_total{kind="timeout",reward="r"}') == 2


def test_full_queue_answers_503_with_retry_after():
    settings = _settings(SLOW, {"delay": 0.3}, max_queue_samples=2, concurrency=1)
    with running_server(settings) as (url, app):
        first = []
        t = threading.Thread(target=lambda: first.append(httpx.post(
            url + "/v1/score", json={"samples": [{"completion": "ab"}] * 2}, timeout=30)))
        t.start()
        batcher = app.state.rewardkit.batchers["r"]
        _wait_until(lambda: batcher.pending == 2)
        r = httpx.post(url + "/v1/score", json={"samples": [{"completion": "a"}]}, timeout=30)
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        t.join(30)
        assert [s["value"] for s in first[0].json()["scores"]] == [2.0, 2.0]
        # The client's retry honours Retry-After and gets through once the queue drains.
        remote = rewardkit.load("remote", url=url, backoff=0.05)
        assert remote.score([rewardkit.Sample("", "abc")])[0].value == 3.0


def test_killed_worker_process_is_replaced_and_its_samples_retried():
    settings = _settings(SLOW, {"delay": 0.4}, workers=1, max_batch_samples=8)
    with running_server(settings) as (url, app):
        worker = app.state.rewardkit.batchers["r"].worker
        replies = []
        t = threading.Thread(target=lambda: replies.append(httpx.post(url + "/v1/score", json={
            "samples": [{"completion": "abc"}, {"completion": "a"}]}, timeout=60)))
        t.start()
        batcher = app.state.rewardkit.batchers["r"]
        _wait_until(lambda: batcher.pending == 2)
        time.sleep(0.1)  # the batch is inside the worker process now
        for pid in worker.pids():
            os.kill(pid, signal.SIGKILL)
        t.join(60)
        assert [s["value"] for s in replies[0].json()["scores"]] == [3.0, 1.0]
        assert _metric(url, 'rewardkit_worker_restarts_total{reward="r"}') == 1
        _healthy_and_correct(url)


def test_a_worker_process_killed_between_batches_is_replaced_and_counted():
    """Replaced before the next batch is sent, so no batch sees a crash: the restart metric
    still counts it."""
    with running_server(_settings(SLOW, {"delay": 0.0}, workers=1)) as (url, app):
        worker = app.state.rewardkit.batchers["r"].worker
        (pid,) = worker.pids()
        os.kill(pid, signal.SIGKILL)
        _wait_until(lambda: not worker.pids())
        r = httpx.post(url + "/v1/score", json={"samples": [{"completion": "abc"}]}, timeout=60)
        assert [s["value"] for s in r.json()["scores"]] == [3.0]
        assert worker.pids() and worker.pids() != [pid]
        assert _metric(url, 'rewardkit_worker_restarts_total{reward="r"}') == 1


def test_sample_that_kills_its_worker_twice_is_an_error_others_are_scored():
    spec = f"{__name__}:kill_on_poison"
    with running_server(_settings(spec, workers=1)) as (url, _):
        r = httpx.post(url + "/v1/score", json={"samples": [
            {"completion": "abc"}, {"completion": "poison"}, {"completion": "ab"}]}, timeout=60)
        scores = r.json()["scores"]
        assert [scores[0]["value"], scores[2]["value"]] == [3.0, 2.0]
        assert scores[1]["info"]["error_kind"] == "worker_crashed"
        assert _metric(url, 'rewardkit_samples_total{reward="r"}') == 3
        _healthy_and_correct(url)


def test_sigterm_under_load_drains_in_flight_requests():
    proc = subprocess.Popen(
        [sys.executable, "-m", "rewardkit", "serve", "--reward", SLOW, "-O", "delay=0.03",
         "--port", "0", "--max-batch-samples", "4", "--concurrency", "1"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = None
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            found = re.search(r"running on (http://127\.0\.0\.1:\d+)", line)
            url = found.group(1) if found else None
        assert url, "server did not start"
        threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep the pipe drained
        results: dict[int, httpx.Response] = {}

        def client(i: int) -> None:
            samples = [{"completion": "x" * (i + k)} for k in range(4)]
            results[i] = httpx.post(url + "/v1/score", json={"samples": samples}, timeout=60)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        def all_in_flight() -> bool:  # every request accepted: queued, scoring or answered
            queued = httpx.get(url + "/health").json()["queued_samples"][SLOW]
            return queued + 4 * len(results) == 64 and len(results) >= 1

        _wait_until(all_in_flight, 30)
        proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(60)
        # uvicorn re-raises the signal once drained: the exit is SIGTERM's, after the drain.
        assert proc.wait(60) in (0, -signal.SIGTERM)
        assert len(results) == 16
        for i, r in results.items():
            assert r.status_code == 200
            assert [s["value"] for s in r.json()["scores"]] == [float(i + k) for k in range(4)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
