"""Part 3 of benchmarks/bench_server.py (``--load-minutes M``): 64 concurrent clients sending
mixed math/code/RM requests for M minutes; requests lost or answered twice, samples sent vs
scored per reward, and the server's RSS over time."""
from __future__ import annotations

import asyncio
import json
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from served_process import _start, _stop, process_tree, rm_device

def _load_sample(reward: str, rng: Any, tag: str) -> dict[str, Any]:
    a, b = rng.randint(1, 99), rng.randint(1, 99)
    if reward == "math":
        answer = a + b if rng.random() < 0.6 else a + b + 1
        return {"prompt": f"{tag}: {a}+{b}?", "completion": rng.choice(
            [f"The answer is \\boxed{{{answer}}}.", f"#### {answer}",
             f"so x = \\frac{{{2 * answer}}}{{2}}", "I don't know"]), "reference": str(a + b)}
    if reward == "code":
        body = "return a + b" if rng.random() < 0.7 else "return a - b"
        return {"prompt": f"{tag}: add", "completion": f"```python\ndef add(a, b):\n    {body}\n```",
                "reference": {"test": f"assert add({a}, {b}) == {a + b}"}}
    return {"prompt": f"{tag}: 2 + 3?", "completion": f"{a} and {b}, so 5."}


async def _load_clients(url: str, clients: int, seconds: float, sent: dict[str, int],
                        answers: dict[str, int], failures: list[str]) -> None:
    import random

    import aiohttp

    rewards = ("math", "code", "rm")
    stop = time.monotonic() + seconds

    async def client(c: int, http: aiohttp.ClientSession) -> None:
        rng = random.Random(c)
        j = 0
        while time.monotonic() < stop:
            reward = rng.choice(rewards)
            samples = [_load_sample(reward, rng, f"c{c}r{j}s{k}")
                       for k in range(rng.randint(1, 4))]
            rid = f"c{c}-r{j}"
            j += 1
            sent[reward] += len(samples)
            body = json.dumps({"samples": samples, "reward": reward, "request_id": rid})
            for attempt in range(5):  # a retry keeps its id: answered once, counted once
                try:
                    async with http.post(url + "/v1/score", data=body, headers={
                            "content-type": "application/json"}) as r:
                        if r.status == 200:
                            data = await r.json()
                            if data["request_id"] != rid or len(data["scores"]) != len(samples):
                                failures.append(f"{rid}: wrong reply")
                            answers[rid] = answers.get(rid, 0) + 1
                            break
                        failures.append(f"{rid}: HTTP {r.status}")
                except aiohttp.ClientError as exc:
                    failures.append(f"{rid}: {exc}")
                await asyncio.sleep(0.5 * 2 ** attempt)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients, keepalive_timeout=2),
                                     timeout=aiohttp.ClientTimeout(total=600)) as http:
        await asyncio.gather(*(client(c, http) for c in range(clients)))


def _rss_by_process(pid: int) -> dict[str, float]:
    """Resident memory in MB of a process and of all its descendants, by ``name[pid]``."""
    import psutil  # the bench extra

    out = {}
    for p in process_tree(pid):
        try:
            proc = psutil.Process(p)
            out[f"{proc.name()}[{proc.pid}]"] = proc.memory_info().rss / 2 ** 20
        except psutil.NoSuchProcess:
            pass
    return out


def bench_load(minutes: float, clients: int, hidden: int, layers: int,
               model: str | None = None, every_s: float = 30.0) -> None:
    from rewardkit.testing import make_tiny_reward_model

    with tempfile.TemporaryDirectory() as tmp:
        if model is None:
            model = str(make_tiny_reward_model(Path(tmp) / "rm", hidden_size=hidden,
                                               num_layers=layers))
        config = Path(tmp) / "serve.yaml"
        config.write_text("serve:\n  rewards:\n    math: math\n    code: code\n    rm: {reward: "
                          f"reward_model, options: {{model: '{model}', device: {rm_device()}}}}}\n"
                          "  default: math\n")
        proc, url = _start([sys.executable, "-m", "rewardkit", "serve", "--config", str(config),
                            "--port", "0"], {"OMP_NUM_THREADS": "1"})
        sent = {"math": 0, "code": 0, "rm": 0}
        answers: dict[str, int] = {}
        failures: list[str] = []
        curve: list[tuple[float, dict[str, float]]] = []
        print(f"\n3. load: {clients} concurrent clients, mixed math/code/RM ({model}) requests of "
              f"1-4 samples, {minutes:g} min; RSS of the server and its helpers every "
              f"{every_s:g} s")
        started = time.monotonic()
        done = threading.Event()

        def sample_rss() -> None:
            while proc.poll() is None:
                curve.append((time.monotonic() - started, _rss_by_process(proc.pid)))
                if done.wait(every_s):
                    return

        sampler = threading.Thread(target=sample_rss, daemon=True)
        sampler.start()
        try:
            asyncio.run(_load_clients(url, clients, minutes * 60, sent, answers, failures))
            curve.append((time.monotonic() - started, _rss_by_process(proc.pid)))
            import urllib.request

            metrics = urllib.request.urlopen(url + "/metrics").read().decode()
        finally:
            done.set()
            sampler.join(10)
            _stop(proc)
    counted = {r: float(re.search(rf'rewardkit_samples_total{{reward="{r}"}} (\S+)',
                                  metrics).group(1)) for r in sent}
    requests = sum(answers.values())
    print(f"requests answered: {len(answers)} ({requests / (minutes * 60):.1f}/s); answered "
          f"twice: {sum(1 for n in answers.values() if n > 1)}; failed attempts: "
          f"{len(failures)} {failures[:3]}")
    for r in sent:
        print(f"  {r}: samples sent {sent[r]}, scored by the server {counted[r]:.0f} "
              f"(lost or counted twice: {counted[r] - sent[r]:+.0f})")
    server = f"[{proc.pid}]"
    print("RSS, MB: time | server and helpers | server process | helpers (processes)")
    for t, rss in curve:
        own = sum(v for k, v in rss.items() if k.endswith(server))
        total = sum(rss.values())
        print(f"  {t:5.0f} s | {total:7.0f} | {own:7.0f} | {total - own:7.0f} ({len(rss) - 1})")
    last = curve[-1][1]
    print("  at the end: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(last.items())))
