"""Hostile and broken clients, and a server that cannot score: every case is refused with a
status that says why, bounded in memory and time, or answered per sample; a client never gets
a made-up reward. Real servers on 127.0.0.1 (and 127.0.0.2 for a second client address)."""
from __future__ import annotations

import json
import os
import re
import resource
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
from rewardkit import Sample
from rewardkit.integrations.remote import RemoteRewardError
from rewardkit.server import RewardSource, ServerSettings
from rewardkit.server.testing import running_server
from tests.conftest import alive, descendants
from tests.test_server_faults import _metric, _settings, _wait_until  # reward "r"

pytest.importorskip("fastapi")

ROOT = Path(__file__).resolve().parents[1]
def always_fails(prompt, completion, reference):
    raise RuntimeError("the model file is gone")


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _post_raw(url: str, body: bytes) -> httpx.Response:
    return httpx.post(url + "/v1/score", content=body,
                      headers={"content-type": "application/json"}, timeout=60)


# -- resources stay bounded ---------------------------------------------------------------------
def test_reply_cache_is_bounded_in_entries_and_bytes_oldest_evicted():
    with running_server(_settings(idempotency_cache=3, idempotency_cache_bytes=400)) as (url, _):
        def send(i: int, n: int = 1) -> httpx.Response:
            return httpx.post(url + "/v1/score", json={"request_id": f"id-{i}", "samples": [
                {"completion": "x" * 50, "reference": "y"}] * n}, timeout=30)

        for i in range(5):
            assert send(i).status_code == 200
        assert _metric(url, "rewardkit_idempotency_cache_entries") == 3
        scored = _metric(url, 'rewardkit_samples_total{reward="r"}')
        send(4)  # kept: answered from the cache
        assert _metric(url, 'rewardkit_samples_total{reward="r"}') == scored
        send(0)  # evicted: scored again
        assert _metric(url, 'rewardkit_samples_total{reward="r"}') == scored + 1
        send(10, n=30)  # one big reply (~500 bytes) pushes the older ones out by bytes
        assert _metric(url, "rewardkit_idempotency_cache_bytes") <= 400
        assert _metric(url, "rewardkit_idempotency_cache_entries") < 3


def test_million_samples_refused_while_reading_not_after_parsing():
    with running_server(_settings()) as (url, app):
        body = b'{"samples": [' + b",".join([b'{"completion":"a"}'] * 1_000_000) + b"]}"
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        r = _post_raw(url, body)
        grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        assert r.status_code == 413 and "max_request_samples" in r.json()["error"]
        # Parsing first built a million sample objects (about 700 MB); the pre-scan builds none.
        assert grown_mb < 150, grown_mb
        assert _metric(url, 'rewardkit_rejected_requests_total{reason="too_many_samples"}') == 1


@pytest.mark.parametrize("body, status, says", [
    (b'{"samples": [{"completion": "\xff\xfe"}]}', 422, "not UTF-8"),
    (b'{"samples": [{"completion": "a", "reference": ' + b"[" * 100_000 + b"]" * 100_000
     + b"}]}", 422, "nests deeper"),
    (b'{"samples": [{"completion": "a"', 422, "not valid JSON"),
])
def test_unparseable_bodies_get_the_documented_status_and_an_error(body, status, says):
    with running_server(_settings()) as (url, _):
        r = _post_raw(url, body)
        assert r.status_code == status, r.text
        assert says in r.json()["error"]
        assert _post_raw(url, b'{"samples": [{"completion": "a", "reference": "a"}]}'
                         ).json()["scores"][0]["value"] == 1.0


def _slow_header_connections(port: int, n: int, source: str) -> list[socket.socket]:
    conns = []
    for _ in range(n):
        s = socket.socket()
        s.bind((source, 0))
        s.settimeout(10)
        s.connect(("127.0.0.1", port))
        s.sendall(b"POST /v1/score HTTP/1.1\r\nHost: localhost\r\nContent-Le")  # and then nothing
        conns.append(s)
    return conns


def _closed_by_server(s: socket.socket) -> bool:
    try:
        return s.recv(1024) == b""
    except (ConnectionResetError, socket.timeout):
        return isinstance(sys.exc_info()[1], ConnectionResetError)


def test_hundreds_of_slow_header_clients_are_cut_and_a_legitimate_client_is_served():
    settings = _settings(header_timeout_s=1.0, max_connections_per_client=100)
    with running_server(settings) as (url, _):
        slow = _slow_header_connections(_port(url), 300, "127.0.0.2")
        try:
            with httpx.Client(base_url=url, timeout=10) as legit:  # from 127.0.0.1
                for _ in range(20):
                    r = legit.post("/v1/score", json={"samples": [
                        {"completion": "a", "reference": "a"}]})
                    assert r.json()["scores"][0]["value"] == 1.0
            # Past the per-client bound, connections were cut at once; the rest at the deadline.
            assert _metric(url, 'rewardkit_connections_refused_total{reason='
                                '"too_many_connections"}') == 200
            time.sleep(1.5)
            assert all(_closed_by_server(s) for s in slow)
            assert _metric(url, 'rewardkit_connections_refused_total{reason='
                                '"header_timeout"}') == 100
        finally:
            for s in slow:
                s.close()


def test_a_body_that_trickles_past_its_deadline_gets_408():
    with running_server(_settings(body_timeout_s=0.5)) as (url, _):
        with socket.create_connection(("127.0.0.1", _port(url)), 10) as s:
            s.sendall(b"POST /v1/score HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 100\r\n\r\n{\"samples\"")
            s.settimeout(10)
            reply = s.recv(4096).decode()
        assert reply.startswith("HTTP/1.1 408"), reply
        assert "body_timeout_s" in reply


def _refusal(s: socket.socket) -> tuple[int, dict, bytes]:
    """Status, JSON body and raw head of the one reply on a raw connection."""
    s.settimeout(10)
    reply = b""
    while b"\r\n\r\n" not in reply or not reply.endswith(b"}"):
        data = s.recv(4096)
        if not data:
            break
        reply += data
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body), head.lower()


def _one_reply(s: socket.socket) -> bytes:
    """Exactly one reply (head and its Content-Length of body) from a raw connection, however
    the kernel splits it, leaving what follows unread."""
    s.settimeout(10)
    reply = b""
    while b"\r\n\r\n" not in reply:
        data = s.recv(1)
        assert data, f"connection closed mid-reply: {reply!r}"
        reply += data
    length = int(re.search(rb"content-length: *(\d+)", reply.lower()).group(1))
    while (have := len(reply.partition(b"\r\n\r\n")[2])) < length:
        data = s.recv(length - have)
        assert data, f"connection closed mid-reply: {reply!r}"
        reply += data
    return reply


def test_oversized_headers_get_431_and_are_not_buffered():
    with running_server(_settings(max_header_bytes=8192)) as (url, _):
        with socket.create_connection(("127.0.0.1", _port(url)), 10) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 6000)
            time.sleep(0.2)
            s.sendall(b"a" * 6000)  # past 8 KiB, headers still not complete
            status, body, head = _refusal(s)
        assert status == 431 and "max_header_bytes" in body["error"], body
        assert b"connection: close" in head
        assert _metric(url, 'rewardkit_connections_refused_total{reason='
                            '"headers_too_large"}') == 1
        # A header of 128 MB is not taken in: the connection is cut within a few MB (the
        # kernel's socket buffers), where uvicorn's httptools parser kept every byte.
        sent = 0
        with socket.create_connection(("127.0.0.1", _port(url)), 10) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Big: ")
            chunk = b"a" * 65536
            with pytest.raises(OSError):
                while sent < 128 * 2**20:
                    s.sendall(chunk)
                    sent += len(chunk)
        assert sent < 32 * 2**20, sent
        # Headers under the bound are served.
        r = httpx.post(url + "/v1/score", headers={"x-fine": "b" * 6000}, timeout=10,
                       json={"samples": [{"completion": "a", "reference": "a"}]})
        assert r.json()["scores"][0]["value"] == 1.0


def test_a_pipelined_requests_body_is_not_counted_as_header_time_or_bytes():
    """A second request pipelined behind a first (its headers in before the first's reply)
    whose body streams in afterwards: the header deadline and byte bound wait for the request
    after it, not for this one."""
    with running_server(_settings(max_header_bytes=8192, header_timeout_s=0.5)) as (url, _):
        small = json.dumps({"samples": [{"completion": "a", "reference": "a"}]}).encode()
        big = json.dumps({"samples": [{"completion": "a", "reference": "a",
                                       "metadata": {"pad": "x" * 70_000}}]}).encode()

        def head(body: bytes) -> bytes:
            return (b"POST /v1/score HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(body))

        with socket.create_connection(("127.0.0.1", _port(url)), 10) as s:
            s.sendall(head(small) + small + head(big) + big[:100])
            s.settimeout(10)
            assert _one_reply(s).startswith(b"HTTP/1.1 200")  # all of it: none left for below
            for i in range(100, len(big), 10_000):  # 70 kB over about 0.6 s
                time.sleep(0.08)
                s.sendall(big[i:i + 10_000])
            status, body, _ = _refusal(s)
        assert status == 200 and body["scores"][0]["value"] == 1.0


def _holding_a_body(port: int, declared: int) -> socket.socket:
    """A connection that declared ``declared`` body bytes and sent some of them."""
    s = socket.create_connection(("127.0.0.1", port), 10)
    s.sendall(b"POST /v1/score HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n{\"samples\": [" % declared)
    return s


def test_bodies_held_at_once_are_bounded_over_all_connections():
    settings = _settings(max_body_bytes=100_000, max_inflight_body_bytes=250_000)
    with running_server(settings) as (url, _):
        held = [_holding_a_body(_port(url), 100_000) for _ in range(2)]
        try:
            _wait_until(lambda: _metric(url, "rewardkit_inflight_body_bytes") == 200_000)
            # A third body of 100 kB would pass 250 kB: refused from its Content-Length.
            with _holding_a_body(_port(url), 100_000) as third:
                status, body, head = _refusal(third)
            assert status == 503 and "max_inflight_body_bytes" in body["error"], body
            assert b"retry-after: 1" in head
            # One sent without a length (chunked) is refused once it passes the budget (80 kB:
            # under max_body_bytes, so the refusal is the budget's however the chunks arrive).
            def chunks():
                for _ in range(10):
                    yield b" " * 8_000
                yield b'{"samples": []}'
            r = httpx.post(url + "/v1/score", content=chunks(), timeout=30,
                           headers={"content-type": "application/json"})
            assert r.status_code == 503, r.text
            # A small request still fits.
            r = httpx.post(url + "/v1/score", json={"samples": [
                {"completion": "a", "reference": "a"}]}, timeout=30)
            assert r.json()["scores"][0]["value"] == 1.0
        finally:
            for s in held:
                s.close()
        # Bodies given up by their clients are released; a large request is served again.
        _wait_until(lambda: _metric(url, "rewardkit_inflight_body_bytes") == 0)
        big = {"samples": [{"completion": "a" * 80_000, "reference": "a"}]}
        assert httpx.post(url + "/v1/score", json=big, timeout=30).status_code == 200
        assert _metric(url, 'rewardkit_rejected_requests_total{reason="bodies_in_flight"}') == 2


def test_the_body_budget_holds_at_least_one_body_of_the_largest_size():
    with pytest.raises(rewardkit.ConfigError, match="max_inflight_body_bytes"):
        _settings(max_body_bytes=1000, max_inflight_body_bytes=999)
    assert _settings().inflight_body_budget == 256 * 2**20
    # `--max-body-mb 300` alone: the unset budget follows it instead of refusing to start.
    assert _settings(max_body_bytes=300 * 2**20).inflight_body_budget == 300 * 2**20


def test_sigkill_of_the_server_takes_its_helper_processes_with_it(tmp_path):
    config = tmp_path / "serve.yaml"
    config.write_text("serve:\n  rewards:\n    em: exact_match\n    ln: tests.plugin_rewards:"
                      "plugin_len\n  default: em\n  workers: 2\n")
    proc = subprocess.Popen([sys.executable, "-m", "rewardkit", "serve", "--config", str(config),
                             "--port", "0"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    helpers: list[int] = []
    try:
        url = None
        while url is None:
            line = proc.stdout.readline()
            assert line, "server exited"
            found = re.search(r"running on (http://127\.0\.0\.1:\d+)", line)
            url = found.group(1) if found else None
        for reward in ("em", "ln"):
            assert httpx.post(url + "/v1/score", json={"reward": reward, "samples": [
                {"completion": "a", "reference": "a"}]}, timeout=60).status_code == 200
        helpers = descendants(proc.pid)
        assert len(helpers) >= 5  # fork server, resource tracker, 2 x 2 pool processes
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 20
        while any(alive(p) for p in helpers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [p for p in helpers if alive(p)] == []
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in helpers:
            if alive(p):
                os.kill(p, signal.SIGKILL)


# -- no silent wrong reward ---------------------------------------------------------------------
def returns_infinity(prompt, completion, reference):
    return float("inf") if completion == "inf" else 1.0


class NaNInInfo(rewardkit.Scorer):
    def score_batch(self, samples):
        import numpy as np

        return [rewardkit.Score(1.0, info={"logprob": float("-inf"), "p": np.float32("nan"),
                                           "steps": np.array([0.5, np.inf])})
                for _ in samples]


def _strict_json(text: str):
    def refuse(token):
        raise ValueError(f"{token} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_replies_are_strict_json_and_a_non_finite_reward_is_an_error_score():
    settings = ServerSettings({"inf": RewardSource(f"{__name__}:returns_infinity"),
                               "info": RewardSource(f"{__name__}:NaNInInfo")}, default="inf")
    with running_server(settings) as (url, _):
        r = httpx.post(url + "/v1/score", timeout=30, json={"samples": [
            {"completion": "inf"}, {"completion": "ok"}]})
        bad, good = _strict_json(r.text)["scores"]
        assert bad["info"]["error_kind"] == "non_finite" and bad["value"] == 0.0
        assert good["value"] == 1.0
        r = httpx.post(url + "/get_reward", params={"reward": "inf"}, timeout=30,
                       json={"query": ["inf", "ok"], "prompts": ["", ""], "labels": ["", ""]})
        assert _strict_json(r.text)["rewards"] == [0.0, 1.0]
        r = httpx.post(url + "/v1/score", timeout=30, json={"reward": "info", "samples": [
            {"completion": "a"}]})
        assert _strict_json(r.text)["scores"][0] == {"value": 1.0, "info": {
            "logprob": None, "p": None, "steps": [0.5, None]}}


def test_lone_surrogate_and_null_completion_are_their_samples_errors_the_batch_is_answered():
    with running_server(_settings()) as (url, _):
        body = ('{"samples": [{"completion": "\\ud800 x", "reference": "a"}, '
                '{"completion": null, "reference": "a"}, '
                '{"completion": "a", "reference": "a"}]}').encode()
        r = _post_raw(url, body)
        assert r.status_code == 200, r.text
        first, second, third = r.json()["scores"]
        assert first["info"]["error_kind"] == "bad_sample" and "surrogate" in first["info"]["error"]
        assert second["info"]["error_kind"] == "bad_sample"
        # as Python scores a None completion
        assert second["info"]["error"] == rewardkit.load("exact_match").score(
            [{"completion": None, "reference": "a"}])[0].info["error"]
        assert third["value"] == 1.0
        openrlhf = httpx.post(url + "/get_reward", content=b'{"query": ["Q \\udfff"], '
                              b'"prompts": ["Q"], "labels": ["a"]}', timeout=30,
                              headers={"content-type": "application/json"})
        assert openrlhf.status_code == 200 and openrlhf.json()["extra_logs"]["reward_error"] == [
            1.0]


@pytest.mark.parametrize("reward", ["", "nope"])
def test_empty_or_unknown_reward_is_422_listing_the_rewards(reward):
    with running_server(_settings()) as (url, _):
        r = httpx.post(url + "/v1/score", json={"reward": reward, "samples": [
            {"completion": "a", "reference": "a"}]}, timeout=30)
        assert r.status_code == 422
        assert "served: ['r']" in r.json()["error"]


def test_health_is_degraded_with_the_reason_when_every_score_is_an_error():
    with running_server(_settings(f"{__name__}:always_fails")) as (url, _):
        assert httpx.get(url + "/health").json()["status"] == "ok"
        httpx.post(url + "/v1/score", json={"samples": [{"completion": "a"}] * 32}, timeout=30)
        r = httpx.get(url + "/health")
        assert r.status_code == 503 and r.json()["status"] == "degraded"
        assert "last 32 samples were all errors" in r.json()["problems"]["r"]


def test_health_is_degraded_when_the_worker_processes_are_gone():
    with running_server(_settings("exact_match", workers=1)) as (url, app):
        worker = app.state.rewardkit.batchers["r"].worker
        for pid in worker.pids():
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while httpx.get(url + "/health").status_code == 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        r = httpx.get(url + "/health")
        assert r.status_code == 503 and "worker process" in r.json()["problems"]["r"]


def test_remote_paths_raise_instead_of_training_on_zeros(monkeypatch, tmp_path):
    import importlib.util

    import rewardkit.integrations.openrlhf as openrlhf
    from rewardkit.integrations import verl

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(RemoteRewardError, match="retry_for"):
        rewardkit.load("remote", url=dead, retry_for=0.3, backoff=0.05).score([Sample("q", "a")])
    spec = importlib.util.spec_from_file_location("reward_func_dead", openrlhf.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("REWARDKIT_OPENRLHF_URL", dead)
    monkeypatch.setenv("REWARDKIT_OPENRLHF_RETRY_FOR", "0.3")
    with pytest.raises(RemoteRewardError):
        module.reward_func(["Q: A: 4"], ["Q: A:"], ["4"])
    config = tmp_path / "remote.yaml"
    config.write_text(f"reward:\n  reward: remote\n  options: {{url: '{dead}', retry_for: 0.3}}\n")
    with pytest.raises(RemoteRewardError):
        verl.compute_score("gsm8k", "4", "4", reward_config=str(config))


def test_replies_survive_a_restart_with_idempotency_db(tmp_path):
    settings = _settings(idempotency_db=str(tmp_path / "replies.sqlite"))
    body = {"request_id": "before-restart", "samples": [{"completion": "a", "reference": "a"}]}
    with running_server(settings) as (url, _):
        first = httpx.post(url + "/v1/score", json=body, timeout=30).json()
    with running_server(settings) as (url, _):
        again = httpx.post(url + "/v1/score", json=body, timeout=30)
        assert again.json() == first and first["request_id"] == "before-restart"
        assert _metric(url, 'rewardkit_samples_total{reward="r"}') == 0  # not scored again
        assert _metric(url, "rewardkit_idempotent_replays_total") == 1


def test_remote_scorer_refuses_a_reply_for_another_request_id():
    from fastapi import FastAPI
    import uvicorn

    app = FastAPI()

    @app.post("/v1/score")
    async def wrong(body: dict):
        return {"scores": [{"value": 1.0}], "request_id": "someone-else"}

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        with pytest.raises(RemoteRewardError, match="someone-else"):
            rewardkit.load("remote", url=f"http://127.0.0.1:{port}").score([Sample("q", "a")])
    finally:
        server.should_exit = True
        thread.join(10)


def test_remote_scorer_splits_a_request_over_the_servers_limits_instead_of_stopping():
    with running_server(_settings(max_body_bytes=20_000, max_request_samples=16)) as (url, _):
        remote = rewardkit.load("remote", url=url, chunk_size=1024)
        samples = [Sample("q", f"{i}" + "x" * 1000, f"{i}" + "x" * 1000) for i in range(40)]
        samples.insert(7, Sample("q", "y" * 30_000, "y"))  # too large even alone
        scores = remote.score(samples)
        assert len(scores) == 41
        assert not scores[7].ok and scores[7].info["error_kind"] == "too_large"
        assert "max_body_bytes" in scores[7].error
        assert all(s.ok and s.value == 1.0 for i, s in enumerate(scores) if i != 7)
        # Each sample was scored once, in requests the server accepted.
        assert _metric(url, 'rewardkit_samples_total{reward="r"}') == 40


# -- the documented status codes ----------------------------------------------------------------
def test_every_documented_status_code():
    docs = (ROOT / "docs" / "server.md").read_text()
    table = docs.split("## Status codes", 1)[1].split("\n## ", 1)[0]
    documented = {int(m) for m in re.findall(r"^\| (\d{3}) \|", table, flags=re.M)}
    settings = ServerSettings({"r": RewardSource("exact_match"),
                               "bad": RewardSource(f"{__name__}:always_fails")}, default="r",
                              token="t", body_timeout_s=0.5, max_body_bytes=100_000,
                              max_request_samples=10, allowed_hosts=("rewards.internal",))
    auth = {"authorization": "Bearer t", "content-type": "application/json"}
    with running_server(settings) as (url, _):
        def post(body: bytes, headers=auth) -> httpx.Response:
            return httpx.post(url + "/v1/score", content=body, headers=headers, timeout=30)

        def trickle() -> tuple[int, dict]:
            with socket.create_connection(("127.0.0.1", _port(url)), 10) as s:
                s.sendall(b"POST /v1/score HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer t\r\n"
                          b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
                s.settimeout(10)
                head, _, body = s.recv(4096).partition(b"\r\n\r\n")
            return int(head.split()[1]), json.loads(body)

        def degraded() -> httpx.Response:
            httpx.post(url + "/v1/score", headers=auth, timeout=30,
                       json={"reward": "bad", "samples": [{"completion": "a"}] * 10})
            httpx.post(url + "/v1/score", headers=auth, timeout=30,
                       json={"reward": "bad", "samples": [{"completion": "a"}] * 10})
            httpx.post(url + "/v1/score", headers=auth, timeout=30,
                       json={"reward": "bad", "samples": [{"completion": "a"}] * 10})
            httpx.post(url + "/v1/score", headers=auth, timeout=30,
                       json={"reward": "bad", "samples": [{"completion": "a"}] * 2})
            return httpx.get(url + "/health")

        ok = post(b'{"samples": [{"completion": null}, {"completion": "a", "reference": "a"}]}')
        assert ok.status_code == 200 and ok.json()["scores"][1]["value"] == 1.0
        seen = {200}
        for r in (post(b'{"samples": []}', {"content-type": "application/json"}),
                  post(b'{"samples": [' + b'{"completion": "a"},' * 10 + b'{"completion": "a"}]}'),
                  post(b'{"samples": [{"completion": "' + b"a" * 200_000 + b'"}]}'),
                  post(b'\xff{"samples": []}'),
                  post(b'{"samples": []}', {**auth, "content-type": "text/plain"}),
                  post(b'{"samples": []}', {**auth, "host": "rebound.example"}),
                  post(b'{"samples": [], "reward": ""}')):
            assert r.json()["error"], r.text
            seen.add(r.status_code)
        status, body = trickle()
        assert body["error"]
        seen.add(status)
        with socket.create_connection(("127.0.0.1", _port(url)), 10) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nX: " + b"a" * 70_000)  # past 64 KiB
            status, body, _ = _refusal(s)
        assert body["error"]
        seen.add(status)
        health = degraded()
        assert health.json()["problems"]["bad"]
        seen.add(health.status_code)
    assert seen == documented
