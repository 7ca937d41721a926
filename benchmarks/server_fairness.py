"""``bench_server.py --fairness-runs N`` (part 4): a newcomer's one-sample request behind
another client's slow samples, for ``math`` and ``code``; its latency against the limit of two
slow samples plus a second, and the count of samples its first sample waited behind, from the
server's ``rewardkit_samples_ahead`` histogram (docs/server.md, Fairness)."""
from __future__ import annotations

import itertools
import statistics
import sys
import threading
import time
from typing import Any

from served_process import _start, _stop

FAIRNESS_CASES = {
    "math": ({"completion": r"\boxed{\int_0^{N} e^{x^3}\sin(x^5)\,dx}",
              "reference": "0.2"},  # runs to math's 1 s timeout; N: distinct samples
             {"completion": r"\boxed{2}", "reference": "2"}, 16),
    "code": ({"completion": "```python\ndef add(a, b):\n    while True:\n        pass\n```",
              "reference": {"fn_name": "add", "inputs": [[1, 2]], "outputs": [3],
                            "timeout": 1.0}},  # spins to its 1 s limit
             {"completion": "```python\ndef add(a, b):\n    return a + b\n```",
              "reference": {"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]}}, 6),
}


def _ahead(http: Any) -> dict[float, float]:
    """The server's ``rewardkit_samples_ahead`` histogram: cumulative count by bucket bound."""
    out = {}
    for line in http.get("/metrics").text.splitlines():
        if line.startswith("rewardkit_samples_ahead_bucket"):
            out[float(line.split('le="')[1].split('"')[0])] = float(line.rsplit(" ", 1)[1])
    return out


def _observed(before: dict[float, float], after: dict[float, float]) -> list[str]:
    """The values observed between two reads of that histogram (a range where a bucket spans
    several)."""
    values, low, below = [], 0.0, 0.0
    for bound in sorted(after):
        cumulative = after[bound] - before.get(bound, 0.0)
        shown = f"{bound:g}" if bound == low else (f"{low:g}-{bound:g}" if bound != float("inf")
                                                   else f">{low - 1:g}")
        values += [shown] * round(cumulative - below)
        below, low = cumulative, bound + 1
    return values


def bench_fairness(runs: int) -> None:
    """4: one client sends two requests of slow samples (math: 16 each, spinning to the 1 s
    timeout; code: 6 each, spinning to their 1 s limit), after the server has seen large
    batches of fast samples (4 requests of 64); another client then sends one fast sample.
    Prints the newcomer's latency against the limit of two slow samples plus a second (a slow
    sample's cost measured alone, in the same server), and the count that does not depend on
    the machine's load: the samples that the first sample of each of the three requests waited
    behind (being scored when it arrived, handed out before it, or in its batch), from the
    server's ``rewardkit_samples_ahead`` histogram."""
    import httpx

    print("\n4. fairness: a newcomer's one-sample request behind another client's slow samples")
    for reward, (slow, fast, per_request) in FAIRNESS_CASES.items():
        proc, url = _start([sys.executable, "-m", "rewardkit", "serve", "--reward", reward,
                            "--port", "0"])
        try:
            distinct = itertools.count(2)  # identical samples would be decided once
            with httpx.Client(base_url=url, timeout=600) as http:
                def post(samples: list[dict]) -> float:
                    samples = [{**x, "completion": x["completion"].replace(
                        "{N}", f"{{{next(distinct)}}}")} for x in samples]
                    t = time.perf_counter()
                    r = http.post("/v1/score", json={"samples": samples})
                    assert r.status_code == 200, r.text
                    return time.perf_counter() - t

                post([slow])  # the pools started
                alone = statistics.median(post([slow]) for _ in range(3))
                limit = 2 * alone + 1.0
                print(f"{reward}: one slow sample alone {alone:.2f} s; limit (two slow samples "
                      f"plus a second) {limit:.2f} s")
                for run in range(runs):
                    for _ in range(4):  # history: large batches of fast samples
                        post([fast] * 64)
                    before = _ahead(http)
                    slow_times: list[float] = []
                    clients = [threading.Thread(target=lambda: slow_times.append(
                        post([slow] * per_request))) for _ in range(2)]
                    for c in clients:
                        c.start()
                    time.sleep(0.3)  # the slow requests are queued and their batches out
                    newcomer = post([fast])
                    for c in clients:
                        c.join()
                    print(f"  run {run + 1}: newcomer {newcomer:.2f} s "
                          f"({'within' if newcomer <= limit else 'PAST'} the limit); the two "
                          f"requests of {per_request} slow samples "
                          f"{' and '.join(f'{t:.1f}' for t in sorted(slow_times))} s; the "
                          "first samples of the three requests waited behind "
                          f"{', '.join(_observed(before, _ahead(http)))} samples")
        finally:
            _stop(proc)
