"""What a request and a browser can and cannot make the reward server do: secrets stay in, web
pages stay out, one request's text or key never stalls or crosses into another's. Real servers
on 127.0.0.1."""
from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import threading
import time

import httpx
import pytest

import rewardkit

from rewardkit.integrations.openrlhf import response_from_query
from rewardkit.server import RewardSource, ServerSettings
from rewardkit.server.idempotency import ReplyCache
from rewardkit.server.metrics import ServerMetrics
from rewardkit.server.testing import running_server

pytest.importorskip("fastapi")

JSON = {"content-type": "application/json"}


def _settings(**limits) -> ServerSettings:
    return ServerSettings({"em": RewardSource("exact_match"), "math": RewardSource("math")},
                          default="em", **limits)


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def server():
    with running_server(_settings(allowed_hosts=("rewards.internal",))) as (url, _):
        yield url


# -- secrets -------------------------------------------------------------------------------------
def test_the_reward_listing_publishes_no_secret():
    remote = {"reward": "remote", "options": {"url": "http://user:pa55word@127.0.0.1:9",
                                               "token": "tok-SECRET-1", "timeout": 5.0}}
    spec = {"rewards": {"far": remote, "near": {"reward": "exact_match"}},
            "name": "mixed"}
    settings = ServerSettings({"mixed": RewardSource(spec)}, default="mixed")
    with running_server(settings) as (url, _):
        listing = httpx.get(url + "/v1/rewards", timeout=30)
    assert listing.status_code == 200
    assert "tok-SECRET-1" not in listing.text and "pa55word" not in listing.text
    published = listing.json()["rewards"][0]["spec"]["rewards"]["far"]["options"]
    assert published["token"] == "<redacted>" and published["timeout"] == 5.0
    assert published["url"].endswith("@127.0.0.1:9") and "user" not in published["url"]


# -- browsers ------------------------------------------------------------------------------------
@pytest.mark.parametrize("path, body", [
    ("/v1/score", {"samples": [{"completion": "a", "reference": "a"}]}),
    ("/get_reward", {"query": ["a"], "prompts": [""], "labels": ["a"]}),
])
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          None])
def test_a_scoring_post_that_is_not_json_typed_is_refused(server, path, body, content_type):
    headers = {} if content_type is None else {"content-type": content_type}
    with httpx.Client() as client:  # no default content type
        request = client.build_request("POST", server + path, content=json.dumps(body),
                                       headers=headers)
        if content_type is None:
            request.headers.pop("content-type", None)
        r = client.send(request)
    assert r.status_code == 415, r.text
    assert "application/json" in r.json()["error"]
    typed = httpx.post(server + path, content=json.dumps(body),
                       headers={"content-type": "application/json; charset=utf-8"}, timeout=30)
    assert typed.status_code == 200, typed.text


@pytest.mark.parametrize("host", ["rebound.example:{port}", "rebound.example", "127.0.0.1:1",
                                  "192.168.1.10:{port}", ""])
def test_a_request_for_another_host_is_refused(server, host):
    host = host.format(port=_port(server))
    for method, path in (("POST", "/v1/score"), ("GET", "/v1/rewards"), ("GET", "/metrics")):
        r = httpx.request(method, server + path, headers={**JSON, "host": host}, timeout=30,
                          content=b'{"samples": []}' if method == "POST" else None)
        assert r.status_code == 421, (path, host, r.text)
        assert "allowed_hosts" in r.json()["error"]


@pytest.mark.parametrize("host", ["localhost:{port}", "127.0.0.1:{port}", "[::1]:{port}",
                                  "localhost", "rewards.internal", "rewards.internal:{port}"])
def test_the_loopback_names_and_allowed_hosts_are_served(server, host):
    r = httpx.post(server + "/v1/score", headers={**JSON, "host": host.format(
        port=_port(server))}, content=b'{"samples": [{"completion": "a", "reference": "a"}]}',
        timeout=30)
    assert r.status_code == 200, r.text


def test_with_a_token_any_host_is_served_unless_allowed_hosts_is_set():
    auth = {**JSON, "authorization": "Bearer t", "host": "rm.example"}
    with running_server(_settings(token="t")) as (url, _):
        assert httpx.post(url + "/v1/score", headers=auth, content=b'{"samples": []}',
                          timeout=30).status_code == 200
    with running_server(_settings(token="t", allowed_hosts=("rm.example",))) as (url, _):
        assert httpx.post(url + "/v1/score", headers=auth, content=b'{"samples": []}',
                          timeout=30).status_code == 200
        r = httpx.post(url + "/v1/score", headers={**auth, "host": "other.example"},
                       content=b'{"samples": []}', timeout=30)
        assert r.status_code == 421


# -- one request never stalls the others ----------------------------------------------------------
@pytest.mark.parametrize("tail", ["", "<|im_end|>", "<|im_end|>   \n", "x"])
def test_a_megabyte_of_whitespace_is_cut_in_linear_time(tail):
    query = "<|im_start|>assistant\nThe answer" + " " * 1_000_000 + tail
    response = response_from_query(query)
    assert response == ("The answer" + " " * 1_000_000 + tail if tail in ("", "x")
                        else "The answer")


def test_the_server_answers_a_whitespace_rollout(server):
    query = "Q" + "\t " * 100_000 + "4<|im_end|>"
    r = httpx.post(server + "/get_reward", json={"query": [query], "prompts": ["Q"],
                                                 "labels": ["4"]}, timeout=60)
    assert r.status_code == 200 and r.json()["rewards"] == [1.0]  # whitespace normalised
    assert httpx.get(server + "/health", timeout=30).status_code == 200


def test_a_label_of_deeply_nested_json_is_that_samples_error(server):
    deep = '{"tests": ' + "[" * 100_000 + "]" * 100_000 + "}"
    r = httpx.post(server + "/get_reward", json={"query": ["Q a", "Q b"], "prompts": ["Q", "Q"],
                                                 "labels": [deep, " b"]}, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["extra_logs"]["reward_error"] == [1.0, 0.0]
    assert r.json()["rewards"] == [0.0, 1.0]


def test_an_idempotency_key_replays_only_the_reward_it_was_used_for(server):
    body = {"query": ["Q The answer is \\boxed{4}."], "prompts": ["Q"], "labels": ["4"]}
    key = {"idempotency-key": "rollout-17"}
    first = httpx.post(server + "/get_reward?reward=em", json=body, headers=key, timeout=30)
    assert first.status_code == 200 and first.json()["rewards"] == [0.0]
    again = httpx.post(server + "/get_reward?reward=math", json=body, headers=key, timeout=30)
    assert again.status_code == 422, again.text
    assert again.json()["detail"][0]["type"] == "request_id_reused"
    replay = httpx.post(server + "/get_reward?reward=em", json=body, headers=key, timeout=30)
    assert replay.json() == first.json()
    fresh = httpx.post(server + "/get_reward?reward=math", json=body,
                       headers={"idempotency-key": "rollout-18"}, timeout=30)
    assert fresh.json()["rewards"] == [1.0]


class BigReply(rewardkit.Scorer):
    """A reward whose every reply is megabytes: a client that does not read it stalls the
    server's write."""

    name = "big_reply"

    def score_batch(self, samples):
        return [rewardkit.Score(1.0, info={"pad": "x" * 4_000_000}) for _ in samples]


def test_a_client_that_never_reads_its_replies_holds_no_body_budget():
    body = b'{"samples": [{"prompt": "' + b"p" * 30_000 + b'", "completion": "a"}]}'
    settings = ServerSettings({"r": RewardSource(f"{__name__}:BigReply")}, default="r",
                              max_body_bytes=100_000, max_inflight_body_bytes=100_000,
                              body_timeout_s=5.0)
    request = (b"POST /v1/score HTTP/1.1\r\nHost: localhost\r\n"
               b"Content-Type: application/json\r\nContent-Length: "
               + str(len(body)).encode() + b"\r\n\r\n" + body)
    with running_server(settings) as (url, _):
        stuck = []
        for _ in range(3):  # three clients that pipeline two requests and never read a reply
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", _port(url)))
            s.sendall(request + request)  # the second reply waits on the unread first
            stuck.append(s)
        try:
            held = _inflight(url)
            deadline = time.monotonic() + 20
            while held and time.monotonic() < deadline:  # until the server waits on them
                time.sleep(0.05)
                held = _inflight(url)
            assert held == 0
            r = httpx.post(url + "/v1/score", timeout=30, json={"samples": [
                {"prompt": "q" * 20_000, "completion": "a"}]})
            assert r.status_code == 200, r.text
        finally:
            for s in stuck:
                s.close()


def _inflight(url: str) -> float:
    for line in httpx.get(url + "/metrics", timeout=30).text.splitlines():
        if line.startswith("rewardkit_inflight_body_bytes "):
            return float(line.split()[1])
    raise AssertionError("no rewardkit_inflight_body_bytes metric")


# -- the idempotency file ------------------------------------------------------------------------
class _Recording:
    """An SQLite connection that notes the thread and the query plan of each statement."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db, self.threads, self.plans = db, set(), []

    def execute(self, sql: str, params=()):
        self.threads.add(threading.get_ident())
        if sql.lstrip().upper().startswith(("SELECT", "DELETE")):
            plan = self.db.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()
            self.plans.append((sql, [row[-1] for row in plan]))
        return self.db.execute(sql, params)

    def close(self) -> None:
        self.db.close()


def test_the_idempotency_file_is_used_off_the_event_loop_without_a_table_scan(tmp_path):
    cache = ReplyCache(3, 10_000, ServerMetrics(), str(tmp_path / "replies.sqlite"))
    recording = _Recording(cache._db)
    cache._db = recording

    async def traffic() -> int:
        loop_thread = threading.get_ident()
        for i in range(12):
            async def compute(i=i) -> bytes:
                return b"reply %d" % i
            assert await cache.once(f"k{i}", b"f", compute) == b"reply %d" % i
            await asyncio.sleep(0.05)  # let the store in the thread finish
        assert await cache.once("k11", b"f", compute) == b"reply 11"
        return loop_thread

    loop_thread = asyncio.run(traffic())
    time.sleep(0.2)
    cache.close()
    assert recording.plans, "the file was never read"
    assert loop_thread not in recording.threads
    scans = [(sql, p) for sql, plan in recording.plans for p in plan
             if p.startswith("SCAN") and "USING" not in p]
    assert not scans, scans
    again = sqlite3.connect(tmp_path / "replies.sqlite")
    assert again.execute("SELECT COUNT(*) FROM replies").fetchone()[0] == 3


# -- memory of parsed bodies ---------------------------------------------------------------------
def _nested(values: bytes, n: int) -> bytes:
    return b'{"samples": [{"completion": "a", "reference": [' + b",".join([values] * n) + b"]}]}"


SHAPES = {
    "empty lists": _nested(b"[]", 100_000),
    "empty objects": _nested(b"{}", 100_000),
    "nested lists": _nested(b"[[[]]]", 50_000),
    "floats": _nested(b"0.5", 100_000),
    "short strings": _nested(b'"ab"', 100_000),
    "an object of many keys": b'{"samples": [{"completion": "a", "reference": {'
    + b",".join(b'"k%d": 1' % i for i in range(100_000)) + b"}}]}",
    "many small samples": b'{"samples": [' + b",".join(
        [b'{"completion": "a", "metadata": {"x": [1, 2]}}'] * 8000) + b"]}",
    "one long string": b'{"samples": [{"completion": "' + b"a" * 1_000_000 + b'"}]}',
    "openrlhf queries": b'{"query": [' + b",".join([b'"q"'] * 8000) + b"]}",
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_budget_counts_what_a_body_parses_to(shape):
    import tracemalloc

    from rewardkit.server.app import sample_or_error
    from rewardkit.server.prescan import prescan
    from rewardkit.server.schemas import OpenRLHFRequest, ScoreRequest

    body = SHAPES[shape]
    scan = prescan(body, 10_000, 64)
    charged = scan.parsed_bytes(len(body))
    model = OpenRLHFRequest if body.startswith(b'{"query"') else ScoreRequest
    tracemalloc.start()
    try:
        parsed = model.model_validate(json.loads(body))
        if model is ScoreRequest:
            kept = [sample_or_error({"prompt": s.prompt, "completion": s.completion,
                                     "reference": s.reference, "metadata": s.metadata}, 0.0)
                    for s in parsed.samples]
            assert len(kept) == len(parsed.samples)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert charged >= peak + len(body), (charged, peak, len(body))


def test_a_small_body_that_parses_past_the_budget_gets_413():
    settings = ServerSettings({"r": RewardSource("exact_match")}, default="r",
                              max_body_bytes=100_000, max_inflight_body_bytes=1_000_000)
    body = _nested(b"[]", 30_000)
    assert len(body) < 100_000
    with running_server(settings) as (url, _):
        r = httpx.post(url + "/v1/score", content=body, headers=JSON, timeout=30)
        assert r.status_code == 413, r.text
        assert "max_inflight_body_bytes" in r.json()["error"]
        ok = httpx.post(url + "/v1/score", headers=JSON, timeout=30,
                        content=b'{"samples": [{"completion": "a", "reference": "a"}]}')
        assert ok.status_code == 200


# -- the remote client's deadline ----------------------------------------------------------------
def test_a_trickling_server_does_not_hold_the_remote_client():
    from rewardkit.integrations.remote import RemoteRewardError, RemoteScorer

    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def trickle(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")
            while not stop.is_set():  # a header byte well within every read timeout
                try:
                    conn.sendall(b"x")
                except OSError:
                    return
                time.sleep(0.1)

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=trickle, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    scorer = RemoteScorer(url, timeout=1.0, retry_for=2.0, backoff=0.1, max_backoff=0.2)
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            scorer.score([{"completion": "a"}])
        except BaseException as exc:  # noqa: BLE001 - the test reads what was raised
            outcome.append(exc)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    caller.join(timeout=60)  # liveness, not speed: the call must end at all
    stop.set()
    listener.close()
    scorer.close()
    assert not caller.is_alive(), "score() was still blocked on a server that trickles"
    assert len(outcome) == 1 and isinstance(outcome[0], RemoteRewardError), outcome
    assert "timeout=1" in str(outcome[0])


# -- a reward bounds its own work ----------------------------------------------------------------
def test_rouge_l_reads_at_most_max_lcs_tokens_of_each_text():
    import rewardkit as rk

    pytest.importorskip("rouge_score")
    reference = " ".join(f"w{i}" for i in range(50))
    long = reference + " tail" * 5_000
    capped = rk.load("rouge", max_lcs_tokens=50).score([
        {"completion": long, "reference": reference}])[0]
    assert capped.value == 1.0 and capped.info["truncated"] is True
    default = rk.load("rouge").score([{"completion": long, "reference": long}])[0]
    assert default.value == 1.0 and default.info["truncated"] is True
    short = rk.load("rouge").score([{"completion": reference, "reference": reference}])[0]
    assert short.value == 1.0 and "truncated" not in short.info
    unigrams = rk.load("rouge", rouge_type="rouge1", use_stemmer=False).score([
        {"completion": long, "reference": reference}])[0]
    assert unigrams.value < 0.05 and "truncated" not in unigrams.info  # n-grams read it all
