"""Load: many concurrent clients sending requests of mixed rewards (math, code, exact_match).
Every request is answered, every answer equals offline scoring of the same samples, and the
server scored each sample exactly once (nothing lost, nothing duplicated)."""
from __future__ import annotations

import random
import threading
from collections import Counter

import httpx
import pytest

import rewardkit
from rewardkit.server import RewardSource, ServerSettings
from rewardkit.server.testing import running_server

pytest.importorskip("fastapi")

REWARDS = ("math", "code", "exact_match")


def _sample(reward: str, rng: random.Random, tag: str) -> dict:
    a, b = rng.randint(1, 99), rng.randint(1, 99)
    if reward == "math":
        answer = a + b if rng.random() < 0.6 else a + b + 1
        form = rng.choice([f"The answer is \\boxed{{{answer}}}.", f"#### {answer}",
                           f"so x = \\frac{{{2 * answer}}}{{2}}", "I don't know"])
        return {"prompt": f"{tag}: {a}+{b}?", "completion": form, "reference": str(a + b)}
    if reward == "code":
        body = "return a + b" if rng.random() < 0.7 else "return a - b"
        return {"prompt": f"{tag}: add", "completion": f"```python\ndef add(a, b):\n    {body}\n```",
                "reference": {"test": f"assert add({a}, {b}) == {a + b}"}}
    word = rng.choice(["Paris", "paris.", "Lyon", "  PARIS "])
    return {"prompt": f"{tag}: capital?", "completion": word, "reference": "Paris"}


def _comparable(score: dict) -> tuple:
    info = score.get("info", {})
    return score["value"], score.get("components", {}), info.get("error_kind"), info.get("passed")


def run_load(clients: int, requests_per_client: int, seed: int = 0) -> None:
    settings = ServerSettings({r: RewardSource(r) for r in REWARDS}, default="exact_match",
                              max_batch_samples=32)
    plan = []  # (client, reward, samples)
    rng = random.Random(seed)
    for c in range(clients):
        for j in range(requests_per_client):
            reward = rng.choice(REWARDS)
            n = rng.randint(1, 2 if reward == "code" else 6)
            plan.append((c, reward, [_sample(reward, rng, f"c{c}r{j}s{k}") for k in range(n)]))
    answers: dict[int, list] = {}
    failures: list[str] = []

    def client(c: int, url: str) -> None:
        with httpx.Client(base_url=url, timeout=120) as http:
            for i, (owner, reward, samples) in enumerate(plan):
                if owner != c:
                    continue
                r = http.post("/v1/score", json={"samples": samples, "reward": reward,
                                                 "request_id": f"req-{i}"})
                if r.status_code != 200:
                    failures.append(f"request {i}: HTTP {r.status_code} {r.text[:200]}")
                    continue
                answers[i] = r.json()["scores"]

    with running_server(settings) as (url, _):
        threads = [threading.Thread(target=client, args=(c, url)) for c in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        metrics = httpx.get(url + "/metrics").text
    assert not failures, failures[:3]
    assert sorted(answers) == list(range(len(plan)))  # every request answered, once
    sent = Counter()
    for i, (_, reward, samples) in enumerate(plan):
        assert len(answers[i]) == len(samples)
        sent[reward] += len(samples)
    for reward in REWARDS:  # the server scored exactly what was sent, no sample twice
        line = next(l for l in metrics.splitlines()
                    if l.startswith(f'rewardkit_samples_total{{reward="{reward}"}}'))
        assert float(line.rsplit(" ", 1)[1]) == sent[reward]
    for reward in REWARDS:
        scorer = rewardkit.load(reward)
        idx = [i for i, (_, r, _) in enumerate(plan) if r == reward]
        offline = scorer.score([s for i in idx for s in plan[i][2]])
        served = [s for i in idx for s in answers[i]]
        assert [_comparable(s) for s in served] == [_comparable(s.to_dict()) for s in offline]
        scorer.close()


def test_concurrent_mixed_rewards_match_offline_and_none_lost():
    run_load(clients=16, requests_per_client=6)


@pytest.mark.slow
def test_64_clients_by_50_requests_match_offline_and_none_lost():
    run_load(clients=64, requests_per_client=50, seed=1)
