"""Reward server, side by side in one run.

1. Overhead per request, ``exact_match``, one sample per request, one client after the other:
   p50/p99 latency of ``Scorer.score`` called in process vs. ``POST /v1/score`` to ``rewardkit
   serve`` (a separate process, keep-alive connection). Goal: ≤ 2 ms p50 added.
2. A learned reward model on CPU, 32 concurrent clients each sending one sample per request (as
   OpenRLHF's rollout workers do): throughput of ``rewardkit serve`` (dynamic batching) vs. a
   server that scores each request as its own batch inside its handler, the way OpenRLHF's
   ``serve_rm`` does. Both run the same Scorer on the same model. Goal: ≥ 3×.

The pairs alternate order (peer first, then ours first) and every pair is printed.

    python benchmarks/bench_server.py [--pairs 3] [--requests 1000] [--rm-requests 256]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SAMPLE = {"prompt": "What is the capital of France?", "completion": "Paris", "reference": "Paris"}
RM_SAMPLE = {"prompt": "What is 2 + 3? Think step by step.",
             "completion": "Two plus three: we add 2 and 3 and get 5, so the answer is 5."}


def _percentiles(values: list[float]) -> tuple[float, float]:
    values = sorted(values)
    return (statistics.median(values) * 1e3,
            values[min(len(values) - 1, int(0.99 * len(values)))] * 1e3)


def _start(cmd: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, **(env or {})})
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            raise RuntimeError(f"server exited: {cmd}")
        found = re.search(r"running on (http://127\.0\.0\.1:\d+)", line)
        if found:
            import threading

            threading.Thread(target=proc.stdout.read, daemon=True).start()
            return proc, found.group(1)
    proc.kill()
    raise RuntimeError(f"server did not start: {cmd}")


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


# -- 1. overhead -----------------------------------------------------------------------------------
def in_process_latencies(n: int) -> list[float]:
    import rewardkit

    scorer = rewardkit.load("exact_match")
    sample = rewardkit.Sample(**SAMPLE)
    out = []
    for _ in range(n):
        t = time.perf_counter()
        scorer.score([sample])
        out.append(time.perf_counter() - t)
    return out


def server_latencies(url: str, n: int) -> list[float]:
    import httpx

    body = {"samples": [SAMPLE]}
    out = []
    with httpx.Client(base_url=url) as client:
        for _ in range(50):  # warm the connection and the server
            client.post("/v1/score", json=body)
        for _ in range(n):
            t = time.perf_counter()
            r = client.post("/v1/score", json=body)
            out.append(time.perf_counter() - t)
            assert r.status_code == 200 and r.json()["scores"][0]["value"] == 1.0
    return out


def bench_overhead(pairs: int, n: int) -> None:
    proc, url = _start([sys.executable, "-m", "rewardkit", "serve", "--reward", "exact_match",
                        "--port", "0"])
    print(f"\n1. overhead per request, exact_match, {n} sequential requests of one sample")
    print(f"{'pair':<6}{'in process p50/p99 (ms)':>26}{'server p50/p99 (ms)':>24}"
          f"{'added p50 (ms)':>16}")
    added = []
    try:
        for pair in range(pairs):
            runs = {}
            order = ("local", "server") if pair % 2 == 0 else ("server", "local")
            for side in order:
                runs[side] = (in_process_latencies(n) if side == "local"
                              else server_latencies(url, n))
            lp50, lp99 = _percentiles(runs["local"])
            sp50, sp99 = _percentiles(runs["server"])
            added.append(sp50 - lp50)
            print(f"{pair + 1:<6}{lp50:>14.3f} / {lp99:<9.3f}{sp50:>12.3f} / {sp99:<9.3f}"
                  f"{sp50 - lp50:>14.3f}   (order: {' then '.join(order)})")
    finally:
        _stop(proc)
    print(f"median added p50 over {pairs} pairs: {statistics.median(added):.3f} ms "
          f"(goal <= 2 ms)")


# -- 2. learned RM: dynamic batching vs one request one batch -----------------------------------
def serve_peer(model: str) -> None:
    """One request, one batch, scored inside the request handler, as OpenRLHF's serve_rm does
    (its handler calls the model synchronously on the request's queries)."""
    import uvicorn

    import rewardkit

    scorer = rewardkit.load("reward_model", model=model, device="cpu")
    app = FastAPI()

    @app.post("/v1/score")
    async def score(request: Request) -> JSONResponse:
        data = await request.json()
        scores = scorer.score(data["samples"])
        return JSONResponse({"scores": [s.to_dict() for s in scores]})

    uvicorn.run(app, host="127.0.0.1", port=0, log_level="info", access_log=False)


async def _throughput(url: str, clients: int, total: int) -> tuple[float, list[float]]:
    import httpx

    body = {"samples": [RM_SAMPLE]}
    values: list[float] = []
    counter = iter(range(clients))  # warm-up: one request per client

    async def client(http: httpx.AsyncClient) -> None:
        for _ in counter:
            r = await http.post("/v1/score", json=body)
            assert r.status_code == 200, r.text
            values.append(r.json()["scores"][0]["value"])

    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as http:
        await asyncio.gather(*(client(http) for _ in range(clients)))
        values.clear()
        counter = iter(range(total))
        t = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        elapsed = time.perf_counter() - t
    return total / elapsed, values


def bench_rm(pairs: int, total: int, hidden: int, layers: int, threads: int | None,
             clients: int = 32) -> None:
    from rewardkit.testing import make_tiny_reward_model

    env = {"OMP_NUM_THREADS": str(threads)} if threads else {}
    with tempfile.TemporaryDirectory() as tmp:
        model = str(make_tiny_reward_model(Path(tmp) / "rm", hidden_size=hidden,
                                           num_layers=layers))
        peer_cmd = [sys.executable, __file__, "--serve-peer", model]
        ours_cmd = [sys.executable, "-m", "rewardkit", "serve", "--reward", "reward_model",
                    "-O", f"model={model}", "-O", "device=cpu", "--port", "0",
                    "--max-batch-samples", "64"]
        print(f"\n2. learned RM on CPU (random Qwen2 classifier, hidden {hidden}, {layers} "
              f"layers, torch threads: {threads or 'default'}), {clients} concurrent clients, "
              f"{total} requests of one sample")
        print(f"{'pair':<6}{'one request one batch (samples/s)':>36}"
              f"{'dynamic batching (samples/s)':>31}{'ratio':>8}")
        ratios = []
        for pair in range(pairs):
            rates = {}
            order = ("peer", "ours") if pair % 2 == 0 else ("ours", "peer")
            for side in order:
                proc, url = _start(peer_cmd if side == "peer" else ours_cmd, env)
                try:
                    rates[side], values = asyncio.run(_throughput(url, clients, total))
                finally:
                    _stop(proc)
                rates[side + "_values"] = values
            assert max(abs(a - b) for a, b in zip(sorted(rates["peer_values"]),
                                                   sorted(rates["ours_values"]))) < 1e-3
            ratio = rates["ours"] / rates["peer"]
            ratios.append(ratio)
            print(f"{pair + 1:<6}{rates['peer']:>30.1f}{rates['ours']:>31.1f}{ratio:>13.2f}x"
                  f"   (order: {' then '.join(order)})")
        print(f"median ratio over {pairs} pairs: {statistics.median(ratios):.2f}x (goal >= 3x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=1000, help="overhead: requests per run")
    parser.add_argument("--rm-requests", type=int, default=256, help="RM: requests per run")
    parser.add_argument("--hidden", type=int, default=512, help="RM width")
    parser.add_argument("--layers", type=int, default=4, help="RM depth")
    parser.add_argument("--torch-threads", type=int, default=None,
                        help="OMP_NUM_THREADS of both servers (default: torch's own choice)")
    parser.add_argument("--skip-rm", action="store_true")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--serve-peer", metavar="MODEL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_peer:
        serve_peer(args.serve_peer)
        return
    print(f"cpu cores: {os.cpu_count()}")
    if not args.skip_overhead:
        bench_overhead(args.pairs, args.requests)
    if not args.skip_rm:
        bench_rm(args.pairs, args.rm_requests, args.hidden, args.layers, args.torch_threads)


if __name__ == "__main__":
    main()
