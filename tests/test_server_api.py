"""The reward server's contract: endpoints, schemas, errors naming fields, auth, OpenRLHF's
protocol, idempotent retries, and the RemoteScorer client. Real servers on 127.0.0.1 only."""
from __future__ import annotations

import json
import threading

import httpx
import pytest

import rewardkit
from rewardkit import Sample
from rewardkit.integrations.openrlhf import response_from_query
from rewardkit.integrations.remote import RemoteRewardError
from rewardkit.server import RewardSource, ServerSettings, settings_from_file
from rewardkit.server.testing import running_server

pytest.importorskip("fastapi")

SAMPLES = [
    {"prompt": "Capital of France?", "completion": "Paris", "reference": "paris"},
    {"prompt": "2+2?", "completion": "The answer is \\boxed{4}.", "reference": "4"},
    {"prompt": "2+2?", "completion": [{"role": "assistant", "content": "5"}], "reference": "4"},
    {"prompt": "no reference", "completion": "x"},
]


def _settings(**limits) -> ServerSettings:
    return ServerSettings({"exact_match": RewardSource("exact_match"),
                           "math": RewardSource("math")}, default="exact_match", **limits)


@pytest.fixture(scope="module")
def server():
    with running_server(_settings()) as (url, app):
        with httpx.Client(base_url=url, timeout=30) as client:
            yield client, app


def _metric(client: httpx.Client, line_start: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_score_equals_offline_scoring_for_each_named_reward(server):
    client, _ = server
    for reward in ("exact_match", "math"):
        r = client.post("/v1/score", json={"samples": SAMPLES, "reward": reward})
        assert r.status_code == 200, r.text
        offline = [s.to_dict() for s in rewardkit.load(reward).score(SAMPLES)]
        assert r.json()["scores"] == json.loads(json.dumps(offline))
        assert r.json()["reward"] == reward
    default = client.post("/v1/score", json={"samples": SAMPLES[:1]}).json()
    assert default["reward"] == "exact_match"


def test_empty_request_gets_empty_scores(server):
    client, _ = server
    r = client.post("/v1/score", json={"samples": []})
    assert r.status_code == 200 and r.json()["scores"] == []


def test_unscorable_sample_is_an_error_score_not_a_failed_request(server):
    client, _ = server
    scores = client.post("/v1/score", json={"samples": SAMPLES}).json()["scores"]
    assert scores[3]["info"]["error_kind"] == "bad_input"
    assert scores[0]["value"] == 1.0


@pytest.mark.parametrize("body, field", [
    ({"samples": [{"completion": 3}]}, "samples.0.completion"),
    ({"samples": [{"completion": "a", "metadata": "m"}]}, "samples.0.metadata"),
    ({"samples": [{"completion": "a", "answer": "b"}]}, "samples.0.answer"),
    ({"samples": "abc"}, "samples"),
    ({"sample": []}, "samples"),
    ({"samples": [], "reward": "nope"}, "reward"),
])
def test_wrong_types_get_422_naming_the_field(server, body, field):
    client, _ = server
    r = client.post("/v1/score", json=body)
    assert r.status_code == 422
    assert field in r.json()["error"], r.json()


def test_fast_path_answers_as_the_framework_route_does(server):
    """A valid /v1/score request is answered without FastAPI's routing (ScoreFastPath); a query
    string sends the same request through the route: the replies are the same bytes, and what
    the fast path does not take (a too-long Idempotency-Key) still gets the route's 422."""
    client, _ = server
    for body in ({"samples": SAMPLES, "reward": "math"},
                 {"samples": SAMPLES[:1], "reward": "nope"},
                 {"samples": SAMPLES[:2], "request_id": "fast-path-1"}):
        fast = client.post("/v1/score", json=body)
        route = client.post("/v1/score?through=route", json=body)
        assert (fast.status_code, fast.content) == (route.status_code, route.content)
    long_key = client.post("/v1/score", json={"samples": SAMPLES[:1]},
                           headers={"Idempotency-Key": "k" * 201})
    assert long_key.status_code == 422 and "idempotency-key" in long_key.text


def test_malformed_json_gets_422_saying_where(server):
    client, _ = server
    r = client.post("/v1/score", content=b'{"samples": [{"completion": "a"',
                    headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert "not valid JSON" in r.json()["error"]
    assert client.post("/v1/score", json={"samples": SAMPLES[:1]}).status_code == 200


def test_get_reward_speaks_openrlhf_protocol(server):
    client, _ = server
    # Built as OpenRLHF's SingleTurnAgentExecutor builds it: decoded prompt + response with the
    # special tokens kept, the prompt, the label column.
    prompt = "<|im_start|>user\nCapital of France?<|im_end|>\n<|im_start|>assistant\n"
    payload = {"query": [prompt + "Paris<|im_end|>", prompt + "Lyon<|im_end|><|endoftext|>"],
               "prompts": [prompt, prompt], "labels": ["Paris", "Paris"]}
    r = client.post("/get_reward", json=payload)
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"rewards", "scores", "extra_logs"}
    assert body["rewards"] == [1.0, 0.0] and body["scores"] == [1.0, 0.0]
    assert body["extra_logs"]["reward_error"] == [0.0, 0.0]
    # OpenRLHF's older client sends the queries only; the server must still answer.
    only = client.post("/get_reward?reward=math", json={"query": ["\\boxed{4}"]})
    assert only.status_code == 200 and only.json()["extra_logs"]["reward_error"] == [1.0]


def test_health_rewards_and_metrics(server):
    client, _ = server
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["rewards"] == ["exact_match", "math"]
    listed = client.get("/v1/rewards").json()
    assert listed["default"] == "exact_match"
    assert [r["name"] for r in listed["rewards"]] == ["exact_match", "math"]
    before = _metric(client, 'rewardkit_samples_total{reward="math"}')
    client.post("/v1/score", json={"samples": SAMPLES, "reward": "math"})
    text = client.get("/metrics").text
    assert _metric(client, 'rewardkit_samples_total{reward="math"}') == before + 4
    for name in ("rewardkit_requests_total", "rewardkit_sample_errors_total",
                 "rewardkit_queue_samples", "rewardkit_batch_samples_bucket",
                 "rewardkit_request_seconds_bucket"):
        assert name in text


def test_retried_request_id_is_scored_once(server):
    client, _ = server
    before = _metric(client, 'rewardkit_samples_total{reward="exact_match"}')
    body = {"samples": SAMPLES, "request_id": "retry-me-1"}
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        client.post("/v1/score", json=body).json())) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.append(client.post("/v1/score", json=body).json())
    assert all(r == results[0] for r in results)
    assert _metric(client, 'rewardkit_samples_total{reward="exact_match"}') == before + 4
    other = client.post("/v1/score", json={"samples": SAMPLES[:1], "request_id": "retry-me-1"})
    assert other.status_code == 422 and "request_id" in other.json()["error"]


def test_token_required_except_health():
    with running_server(_settings(token="s3cret")) as (url, _):
        assert httpx.post(url + "/v1/score", json={"samples": []}).status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        assert httpx.get(url + "/metrics", headers=wrong).status_code == 401
        ok = {"Authorization": "Bearer s3cret"}
        assert httpx.post(url + "/v1/score", json={"samples": SAMPLES[:1]},
                          headers=ok).status_code == 200
        assert httpx.get(url + "/health").status_code == 200
        remote = rewardkit.load("remote", url=url, token="s3cret")
        assert remote.score([Sample("q", "a", "a")])[0].value == 1.0
        with pytest.raises(RemoteRewardError, match="HTTP 401"):
            rewardkit.load("remote", url=url, token="bad").score([Sample("q", "a", "a")])


def test_cli_refuses_public_bind_without_token(capsys, monkeypatch):
    from rewardkit.cli import main

    monkeypatch.delenv("REWARDKIT_TOKEN", raising=False)
    assert main(["serve", "--reward", "exact_match", "--host", "0.0.0.0"]) == 2
    assert "token" in capsys.readouterr().err


def test_config_file_serves_default_and_named_rewards(tmp_path):
    config = tmp_path / "reward.yaml"
    config.write_text(
        "reward:\n  rewards:\n    correct: {reward: math}\n"
        "    boxed: {reward: regex, weight: 0.5, options: {pattern: 'boxed'}}\n"
        "serve:\n  rewards:\n    em: {reward: exact_match, options: {case_sensitive: true}}\n"
        "  max_batch_samples: 8\n")
    settings = settings_from_file(config)
    assert set(settings.rewards) == {"default", "em"} and settings.max_batch_samples == 8
    with running_server(settings) as (url, _):
        r = httpx.post(url + "/v1/score", json={"samples": SAMPLES[1:2]}).json()
        assert r["scores"][0]["value"] == 1.5
        assert r["scores"][0]["components"] == {"correct": 1.0, "boxed": 1.0}
        em = httpx.post(url + "/v1/score", json={"samples": SAMPLES[:1], "reward": "em"}).json()
        assert em["scores"][0]["value"] == 0.0  # case-sensitive: Paris != paris


def test_group_normalised_reward_keeps_requests_apart(tmp_path):
    config = {"rewards": {"em": {"reward": "exact_match"}}, "normalize": "group"}
    settings = ServerSettings({"g": RewardSource(config)}, default="g", max_batch_samples=64)
    req = [{"prompt": "p", "completion": c, "reference": "a"} for c in ("a", "b")]
    offline = [s.value for s in rewardkit.load(config).score(req)]
    with running_server(settings) as (url, _):
        results = []
        threads = [threading.Thread(target=lambda: results.append(httpx.post(
            url + "/v1/score", json={"samples": req}).json())) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert all([s["value"] for s in r["scores"]] == offline for r in results)


# -- OpenRLHF module -------------------------------------------------------------------------------
@pytest.mark.parametrize("query, prompt, expected", [
    ("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\nParis<|im_end|>",
     "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n", "Paris"),
    ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nq<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nParis<|eot_id|>", "decoded differently",
     "Paris"),
    ("<s>[INST] q [/INST] Paris</s>", None, " Paris"),
    ("Question: q\nAnswer: Paris<|endoftext|><|pad|><|pad|>", "Question: q\nAnswer:", " Paris"),
])
def test_response_from_query_strips_prompt_and_special_tokens(query, prompt, expected):
    assert response_from_query(query, prompt) == expected


def test_openrlhf_reward_func_in_process(monkeypatch):
    import importlib.util

    import rewardkit.integrations.openrlhf as mod

    # Loaded by path as OpenRLHF loads it, configured by the environment.
    spec = importlib.util.spec_from_file_location("reward_func", mod.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("REWARDKIT_OPENRLHF_REWARD", "exact_match")
    monkeypatch.delenv("REWARDKIT_OPENRLHF_URL", raising=False)
    prompt = "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n"
    out = module.reward_func([prompt + "Paris<|im_end|>"], [prompt], ["Paris"])
    assert out["rewards"].tolist() == [1.0] and out["scores"].tolist() == [1.0]
    assert out["extra_logs"]["reward_error"].tolist() == [0.0]


def test_openrlhf_reward_func_forwards_to_server(server, monkeypatch):
    import importlib.util

    import rewardkit.integrations.openrlhf as mod

    client, _ = server
    spec = importlib.util.spec_from_file_location("reward_func_remote", mod.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("REWARDKIT_OPENRLHF_URL", str(client.base_url))
    monkeypatch.setenv("REWARDKIT_OPENRLHF_REWARD", "math")
    before = _metric(client, 'rewardkit_samples_total{reward="math"}')
    out = module.reward_func(["Q: 2+2? A: \\boxed{4}<|endoftext|>"], ["Q: 2+2? A:"], ["4"])
    assert out["rewards"].tolist() == [1.0]
    assert _metric(client, 'rewardkit_samples_total{reward="math"}') == before + 1


# -- RemoteScorer ----------------------------------------------------------------------------------
def test_remote_scorer_equals_local_scorer(server):
    client, _ = server
    remote = rewardkit.load("remote", url=str(client.base_url), reward="math", chunk_size=3)
    samples = [Sample.coerce(s) for s in SAMPLES] * 3
    assert [s.to_dict() for s in remote.score(samples)] == json.loads(json.dumps(
        [s.to_dict() for s in rewardkit.load("math").score(samples)]))
    remote.close()


def test_remote_scorer_retries_503_with_the_same_request_id():
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    seen: list[str] = []
    app = FastAPI()

    @app.post("/v1/score")
    async def flaky(body: dict):
        seen.append(body["request_id"])
        if len(seen) < 3:
            return JSONResponse({"detail": "busy"}, 503, headers={"Retry-After": "0"})
        return {"scores": [{"value": 0.5} for _ in body["samples"]]}

    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(500):
            if server.started:
                break
            threading.Event().wait(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        remote = rewardkit.load("remote", url=f"http://127.0.0.1:{port}", backoff=0.01)
        assert [s.value for s in remote.score([Sample("q", "a", "a")] * 2)] == [0.5, 0.5]
        assert len(seen) == 3 and len(set(seen)) == 1
    finally:
        server.should_exit = True
        thread.join(10)


def test_remote_scorer_unreachable_server_raises_after_retries():
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    remote = rewardkit.load("remote", url=f"http://127.0.0.1:{port}", retries=2, backoff=0.01)
    with pytest.raises(RemoteRewardError, match="after 3 attempt"):
        remote.score([Sample("q", "a", "a")])


def test_verl_adapter_forwards_to_server_through_a_remote_config(server, tmp_path):
    from rewardkit.integrations import verl

    client, _ = server
    config = tmp_path / "verl_reward.yaml"
    config.write_text(f"reward:\n  reward: remote\n  options: {{url: '{client.base_url}', "
                      "reward: math}\n")
    before = _metric(client, 'rewardkit_samples_total{reward="math"}')
    verl.clear_cache()
    try:
        out = verl.compute_score("my_source", "so \\boxed{4}", "4", {"question": "2+2?"},
                                 reward_config=str(config))
    finally:
        verl.clear_cache()
    assert out["score"] == 1.0 and out["error"] == ""
    assert _metric(client, 'rewardkit_samples_total{reward="math"}') == before + 1


def test_response_from_query_on_a_query_built_the_way_openrlhf_builds_it(tmp_path):
    """OpenRLHF tokenizes the chat-templated prompt, appends the generated token ids (ending
    with the end-of-turn token) and decodes the whole with skip_special_tokens=False."""
    pytest.importorskip("transformers")
    from rewardkit.testing import _train_tokenizer, default_corpus

    tok = _train_tokenizer(default_corpus(), 512, "llama")  # ChatML template, <|im_end|> EOS
    prompt = tok.apply_chat_template([{"role": "user", "content": "Capital of France?"}],
                                     tokenize=False, add_generation_prompt=True)
    for response in ("Paris", "The answer is \\boxed{42}.", "def f(x):\n    return x + 1"):
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        ids += tok(response, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        query = tok.decode(ids, skip_special_tokens=False)
        assert query.endswith("<|im_end|>")
        assert response_from_query(query, prompt) == response
        scored = rewardkit.load("exact_match").score(
            [Sample(prompt, response_from_query(query, prompt), response)])
        assert scored[0].value == 1.0


def test_remote_scorer_lives_in_integrations():
    from rewardkit.integrations.remote import RemoteScorer

    assert type(rewardkit.load("remote", url="http://127.0.0.1:1")) is RemoteScorer
